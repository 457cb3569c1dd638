"""The status subresource: the only way to write a status, and a way to write nothing else.

Claims live in status. If a spec write could move the status, a person's edit could
erase a claim; if a status write could move the spec, the controller could change
what it was asked to do. Both are impossible on a real server and must be on the
double.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim.apiserver import CONFIGMAPS, JOBS, ApiClient, NotFound, Object, Resource
from tests.support.kinds import GADGETS, WIDGETS, config_map, job, widget


def rv(obj: Object) -> str:
    return str(obj["metadata"]["resourceVersion"])


def _unmanaged_job(name: str) -> Object:
    """A Job the built-in Job controller leaves alone.

    On the real server the Job controller writes a status of its own within moments of
    the create; read back after that, the row would see the controller's status rather
    than what the create stored. A Job managed by another controller is not touched.
    """
    obj = job(name)
    obj["spec"]["managedBy"] = "example.com/elsewhere"
    return obj


@pytest.mark.parametrize(
    ("resource", "obj", "stored"),
    [
        # Control row: without a status subresource, status is ordinary content.
        (GADGETS, widget(status={"phase": "Forged"}), {"phase": "Forged"}),
        (WIDGETS, widget(status={"phase": "Forged"}), None),
        (JOBS, _unmanaged_job("w") | {"status": {"active": 3}}, {}),
    ],
    ids=["without-subresource", "custom-resource", "job"],
)
def test_a_create_cannot_write_a_status(
    api: ApiClient, namespace: str, resource: Resource, obj: Object, stored: Any
) -> None:
    created = api.create(resource, namespace, obj)
    assert created.get("status") == stored
    assert api.get(resource, namespace, "w").get("status") == stored


def test_a_replace_cannot_write_the_status(api: ApiClient, namespace: str) -> None:
    api.create(WIDGETS, namespace, widget())
    seen = api.get(WIDGETS, namespace, "w")
    seen = api.patch_status(WIDGETS, namespace, "w", {"phase": "Ready"}, resource_version=rv(seen))
    replaced = api.replace(WIDGETS, namespace, {**seen, "spec": {"n": 2}, "status": {"phase": "X"}})
    assert (replaced["spec"], replaced["status"]) == ({"n": 2}, {"phase": "Ready"})


def test_a_status_write_replaces_the_status_whole(api: ApiClient, namespace: str) -> None:
    created = api.create(WIDGETS, namespace, widget())
    first = api.patch_status(
        WIDGETS, namespace, "w", {"a": 1, "b": {"c": 2}}, resource_version=rv(created)
    )
    second = api.patch_status(WIDGETS, namespace, "w", {"b": {"d": 3}}, resource_version=rv(first))
    # Nothing merged back: a field the caller dropped is gone.
    assert second["status"] == {"b": {"d": 3}}
    assert api.get(WIDGETS, namespace, "w")["status"] == {"b": {"d": 3}}


def test_a_status_write_moves_nothing_else(api: ApiClient, namespace: str) -> None:
    created = api.create(WIDGETS, namespace, widget())
    tagged = api.patch_metadata(
        WIDGETS, namespace, "w", {"labels": {"x": "1"}, "finalizers": ["x.io/f"]}
    )
    written = api.patch_status(
        WIDGETS, namespace, "w", {"phase": "Ready"}, resource_version=rv(tagged)
    )
    assert written["spec"] == created["spec"]
    for field in ("labels", "finalizers", "generation", "uid"):
        assert written["metadata"].get(field) == tagged["metadata"].get(field)


@pytest.mark.parametrize(
    ("resource", "obj"),
    [(GADGETS, widget()), (CONFIGMAPS, config_map("w"))],
    ids=["custom-resource-without-subresource", "configmap"],
)
def test_a_status_write_needs_a_status_subresource(
    api: ApiClient, namespace: str, resource: Resource, obj: Object
) -> None:
    created = api.create(resource, namespace, obj)
    with pytest.raises(NotFound):
        api.patch_status(resource, namespace, "w", {"phase": "X"}, resource_version=rv(created))
