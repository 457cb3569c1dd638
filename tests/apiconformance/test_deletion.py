"""Finalizers, deletionTimestamp, UID preconditions and NotFound.

A claim's finalizer is what keeps a resource (and its record of a Job that may be
running SQL) from vanishing mid-dispatch; the controller sees a deletion only as a
deletionTimestamp. A UID precondition keeps a delete from hitting a successor created
under the same name.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobclaim.apiserver import (
    ApiClient,
    Conflict,
    Invalid,
    NotFound,
    Object,
)
from tests.support.kinds import WIDGETS, widget

HOLD = "conformance.ptah.example/hold"
OTHER = "conformance.ptah.example/other"


def rv(obj: Object) -> str:
    return str(obj["metadata"]["resourceVersion"])


def held(api: ApiClient, namespace: str, *finalizers: str) -> Object:
    return api.create(
        WIDGETS, namespace, widget(metadata={"name": "w", "finalizers": [*finalizers]})
    )


def test_an_object_without_finalizers_is_gone_at_once(api: ApiClient, namespace: str) -> None:
    api.create(WIDGETS, namespace, widget())
    api.delete(WIDGETS, namespace, "w")
    with pytest.raises(NotFound):
        api.get(WIDGETS, namespace, "w")


def test_an_object_with_finalizers_is_marked_not_removed(api: ApiClient, namespace: str) -> None:
    created = held(api, namespace, HOLD)
    api.delete(WIDGETS, namespace, "w")
    meta = api.get(WIDGETS, namespace, "w")["metadata"]
    assert meta["deletionTimestamp"]
    assert meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == [HOLD]
    assert meta["uid"] == created["metadata"]["uid"]


def test_a_second_delete_changes_nothing(api: ApiClient, namespace: str) -> None:
    held(api, namespace, HOLD)
    api.delete(WIDGETS, namespace, "w")
    marked = api.get(WIDGETS, namespace, "w")
    api.delete(WIDGETS, namespace, "w")
    assert api.get(WIDGETS, namespace, "w") == marked


def test_no_finalizer_can_be_added_once_deletion_started(api: ApiClient, namespace: str) -> None:
    held(api, namespace, HOLD)
    api.delete(WIDGETS, namespace, "w")
    with pytest.raises(Invalid):
        api.patch_metadata(WIDGETS, namespace, "w", {"finalizers": [HOLD, OTHER]})
    assert api.get(WIDGETS, namespace, "w")["metadata"]["finalizers"] == [HOLD]


@pytest.mark.parametrize(
    ("remaining", "still_there"),
    [([HOLD], True), ([], False)],
    ids=["one-of-two-removed", "last-removed"],
)
def test_removing_the_last_finalizer_deletes(
    api: ApiClient, namespace: str, remaining: list[str], still_there: bool
) -> None:
    held(api, namespace, HOLD, OTHER)
    api.delete(WIDGETS, namespace, "w")
    written = api.patch_metadata(WIDGETS, namespace, "w", {"finalizers": remaining or None})
    assert written["metadata"].get("finalizers", []) == remaining
    if still_there:
        assert api.get(WIDGETS, namespace, "w")["metadata"]["finalizers"] == remaining
    else:
        with pytest.raises(NotFound):
            api.get(WIDGETS, namespace, "w")


def test_a_delete_with_the_current_uid_deletes(api: ApiClient, namespace: str) -> None:
    created = api.create(WIDGETS, namespace, widget())
    api.delete(WIDGETS, namespace, "w", uid=created["metadata"]["uid"])
    with pytest.raises(NotFound):
        api.get(WIDGETS, namespace, "w")


def test_a_delete_with_a_predecessors_uid_spares_the_successor(
    api: ApiClient, namespace: str
) -> None:
    first = api.create(WIDGETS, namespace, widget())
    api.delete(WIDGETS, namespace, "w")
    successor = api.create(WIDGETS, namespace, widget())
    assert successor["metadata"]["uid"] != first["metadata"]["uid"]
    with pytest.raises(Conflict):
        api.delete(WIDGETS, namespace, "w", uid=first["metadata"]["uid"])
    assert api.get(WIDGETS, namespace, "w") == successor


MISSING: list[tuple[str, Callable[[ApiClient, str], object]]] = [
    # Control row: an uncached read of something that was never there.
    ("get", lambda api, ns: api.get(WIDGETS, ns, "nothing")),
    ("delete", lambda api, ns: api.delete(WIDGETS, ns, "nothing")),
    ("patch_metadata", lambda api, ns: api.patch_metadata(WIDGETS, ns, "nothing", {"labels": {}})),
    ("patch_spec", lambda api, ns: api.patch_spec(WIDGETS, ns, "nothing", {"n": 1})),
    (
        "patch_status",
        lambda api, ns: api.patch_status(WIDGETS, ns, "nothing", {}, resource_version="1"),
    ),
    (
        "replace",
        lambda api, ns: api.replace(
            WIDGETS, ns, widget("nothing", metadata={"name": "nothing", "resourceVersion": "1"})
        ),
    ),
]


@pytest.mark.parametrize("call", [c for _, c in MISSING], ids=[i for i, _ in MISSING])
def test_every_verb_on_a_missing_object_is_not_found(
    api: ApiClient, namespace: str, call: Callable[[ApiClient, str], object]
) -> None:
    with pytest.raises(NotFound):
        call(api, namespace)
