"""resourceVersion: the optimistic lock every read-decide-write of the operator takes.

A claim, a Lease renewal or an approval's spending is decided on one read and written
at that read's version; if anyone wrote in between, the write must fail with 409 and
store nothing. And a write that changes nothing stores nothing, so it cannot wake
watchers or move a version a concurrent writer holds.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobclaim.apiserver import CONFIGMAPS, LEASES, ApiClient, Conflict, Object
from tests.support.kinds import WIDGETS, config_map, widget

Write = Callable[[ApiClient, str, Object], Object]


def rv(obj: Object) -> str:
    return str(obj["metadata"]["resourceVersion"])


# Each write, made at the version of ``seen``; each changes the stored widget.
CHANGING: list[tuple[str, Write]] = [
    (
        "patch_metadata",
        lambda api, ns, seen: api.patch_metadata(
            WIDGETS, ns, "w", {"labels": {"x": "2"}}, resource_version=rv(seen)
        ),
    ),
    (
        "patch_spec",
        lambda api, ns, seen: api.patch_spec(WIDGETS, ns, "w", {"n": 2}, resource_version=rv(seen)),
    ),
    (
        "patch_status",
        lambda api, ns, seen: api.patch_status(
            WIDGETS, ns, "w", {"phase": "Ready"}, resource_version=rv(seen)
        ),
    ),
    ("replace", lambda api, ns, seen: api.replace(WIDGETS, ns, {**seen, "spec": {"n": 2}})),
]

# Each write sends exactly what is stored.
UNCHANGING: list[tuple[str, Write]] = [
    (
        "patch_metadata",
        lambda api, ns, seen: api.patch_metadata(
            WIDGETS, ns, "w", {"labels": seen["metadata"]["labels"]}
        ),
    ),
    ("patch_spec", lambda api, ns, seen: api.patch_spec(WIDGETS, ns, "w", seen["spec"])),
    (
        "patch_status",
        lambda api, ns, seen: api.patch_status(
            WIDGETS, ns, "w", seen.get("status", {}), resource_version=rv(seen)
        ),
    ),
    ("replace", lambda api, ns, seen: api.replace(WIDGETS, ns, seen)),
]


@pytest.mark.parametrize("write", [w for _, w in CHANGING], ids=[i for i, _ in CHANGING])
def test_a_write_at_the_current_version_moves_it(
    api: ApiClient, namespace: str, write: Write
) -> None:
    created = api.create(WIDGETS, namespace, widget())
    written = write(api, namespace, created)
    assert rv(written) != rv(created)
    assert rv(api.get(WIDGETS, namespace, "w")) == rv(written)


@pytest.mark.parametrize("write", [w for _, w in CHANGING], ids=[i for i, _ in CHANGING])
def test_a_write_at_a_stale_version_is_a_conflict_and_stores_nothing(
    api: ApiClient, namespace: str, write: Write
) -> None:
    created = api.create(WIDGETS, namespace, widget())
    # Someone else wrote after ``created`` was read.
    moved = api.patch_metadata(WIDGETS, namespace, "w", {"annotations": {"other": "writer"}})
    with pytest.raises(Conflict):
        write(api, namespace, created)
    assert api.get(WIDGETS, namespace, "w") == moved


@pytest.mark.parametrize("write", [w for _, w in UNCHANGING], ids=[i for i, _ in UNCHANGING])
def test_a_write_that_changes_nothing_keeps_the_version(
    api: ApiClient, namespace: str, write: Write
) -> None:
    api.create(WIDGETS, namespace, widget())
    # A status first, so the status write below has one to repeat.
    seen = api.patch_status(
        WIDGETS,
        namespace,
        "w",
        {"phase": "Ready"},
        resource_version=rv(api.get(WIDGETS, namespace, "w")),
    )
    again = write(api, namespace, seen)
    assert rv(again) == rv(seen)
    assert rv(api.get(WIDGETS, namespace, "w")) == rv(seen)


def test_a_lease_renewal_at_a_stale_version_is_a_conflict(api: ApiClient, namespace: str) -> None:
    # The targetlock's compare-and-swap: two holders renewing from one read.
    lease = api.create(
        LEASES, namespace, {"metadata": {"name": "db"}, "spec": {"holderIdentity": "a"}}
    )
    first = api.replace(
        LEASES, namespace, {**lease, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 30}}
    )
    assert first["spec"]["holderIdentity"] == "a"
    with pytest.raises(Conflict):
        api.replace(LEASES, namespace, {**lease, "spec": {"holderIdentity": "b"}})
    assert api.get(LEASES, namespace, "db")["spec"]["holderIdentity"] == "a"


def test_versions_grow_across_kinds_like_one_revision(api: ApiClient, namespace: str) -> None:
    # One counter for the whole store (etcd's revision): a watch resumed from any
    # version sees every later write, whatever its kind.
    first = api.create(CONFIGMAPS, namespace, config_map("a"))
    second = api.create(WIDGETS, namespace, widget())
    third = api.patch_metadata(CONFIGMAPS, namespace, "a", {"labels": {"x": "1"}})
    assert int(rv(first)) < int(rv(second)) < int(rv(third))
