"""metadata.generation: bumped by a change of what the object asks for, nothing else.

The operator gates work on the generation it observed: a claim records the generation
its inputs were read at, and a spec edit (a migration's suspension among them) must be
seen as one. A label, an annotation, a finalizer or a status write must not look like
an edit, or every claim would go stale on its own writes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobclaim.apiserver import CONFIGMAPS, JOBS, LEASES, ApiClient, Object, Resource
from tests.support.kinds import GADGETS, WIDGETS, config_map, job, widget

Write = Callable[[ApiClient, str, Object], object]


def rv(obj: Object) -> str:
    return str(obj["metadata"]["resourceVersion"])


def start_deletion(api: ApiClient, ns: str, seen: Object) -> None:
    api.patch_metadata(WIDGETS, ns, "w", {"finalizers": ["conformance.ptah.example/hold"]})
    api.delete(WIDGETS, ns, "w")


# (id, resource, the object, the write, the generation after it)
ROWS: list[tuple[str, Resource, Object, Write, int]] = [
    # Control row: a spec change is an edit.
    (
        "spec-change",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.patch_spec(WIDGETS, ns, "w", {"n": 2}),
        2,
    ),
    (
        "spec-change-by-replace",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.replace(WIDGETS, ns, {**seen, "spec": {"n": 3}}),
        2,
    ),
    (
        "spec-unchanged",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.patch_spec(WIDGETS, ns, "w", {"n": 1}),
        1,
    ),
    (
        "labels",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.patch_metadata(WIDGETS, ns, "w", {"labels": {"x": "1"}}),
        1,
    ),
    (
        "annotations-by-replace",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.replace(
            WIDGETS, ns, {**seen, "metadata": {**seen["metadata"], "annotations": {"a": "b"}}}
        ),
        1,
    ),
    (
        "finalizers",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.patch_metadata(WIDGETS, ns, "w", {"finalizers": ["x.io/f"]}),
        1,
    ),
    (
        "status",
        WIDGETS,
        widget(),
        lambda api, ns, seen: api.patch_status(
            WIDGETS, ns, "w", {"phase": "Ready"}, resource_version=rv(seen)
        ),
        1,
    ),
    # The start of deletion changes what the object's controller must do.
    ("deletion-starts", WIDGETS, widget(), start_deletion, 2),
    # Without a status subresource the status is ordinary content, and an edit.
    (
        "status-without-subresource",
        GADGETS,
        widget(),
        lambda api, ns, seen: api.replace(GADGETS, ns, {**seen, "status": {"phase": "Ready"}}),
        2,
    ),
    # A Job's cleanup TTL is the one spec field the operator writes after dispatch.
    (
        "job-ttl",
        JOBS,
        job("w"),
        lambda api, ns, seen: api.patch_spec(JOBS, ns, "w", {"ttlSecondsAfterFinished": 600}),
        2,
    ),
]


@pytest.mark.parametrize(
    ("resource", "obj", "write", "generation"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_only_an_edit_bumps_the_generation(
    api: ApiClient,
    namespace: str,
    resource: Resource,
    obj: Object,
    write: Write,
    generation: int,
) -> None:
    created = api.create(resource, namespace, obj)
    assert created["metadata"]["generation"] == 1
    write(api, namespace, created)
    assert api.get(resource, namespace, "w")["metadata"]["generation"] == generation


@pytest.mark.parametrize(
    ("resource", "obj", "change"),
    [
        (CONFIGMAPS, config_map("w"), {"data": {"k": "changed"}}),
        (LEASES, {"metadata": {"name": "w"}, "spec": {}}, {"spec": {"holderIdentity": "a"}}),
    ],
    ids=["configmap", "lease"],
)
def test_kinds_without_a_generation_never_get_one(
    api: ApiClient, namespace: str, resource: Resource, obj: Object, change: Object
) -> None:
    created = api.create(resource, namespace, obj)
    assert "generation" not in created["metadata"]
    replaced = api.replace(resource, namespace, {**created, **change})
    assert "generation" not in replaced["metadata"]
