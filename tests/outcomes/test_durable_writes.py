"""The spec's table of durable writes: "the process stopped, what does the next pass see".

Each row names a durable write. The test brings a resource to just before it, stops
the process right after that write (``stop_after_write``), restarts, and asserts that
the next passes give the table's third column. Rows that both families have run for
both; a row whose answer were "the next pass cannot tell" would be a defect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from jobclaim import CLEANUP_TTL_SECONDS
from jobclaim.apiserver import CONFIGMAPS, JOBS, LEASES, Resource
from kube.fake.inmemory import Request, matching
from tests.support.dispatchworld import NS, Rig, make_rig
from tests.support.outcomeworld import (
    FAMILIES,
    SCHEMA,
    FamilyCase,
    account,
    lease_holder_of,
    rotate_binding,
    status_of,
)
from tests.support.podworld import NO_CHANGES, OBSERVED, harvest_with

Predicate = Callable[[Request], bool]


def nth(predicate: Predicate, n: int) -> Predicate:
    seen = [0]

    def select(request: Request) -> bool:
        if not predicate(request):
            return False
        seen[0] += 1
        return seen[0] == n

    return select


def status_write(family: FamilyCase, n: int) -> Predicate:
    return nth(matching("patch_status", family.resource), n)


def drops_claim(resource: Resource) -> Predicate:
    return matching("patch_status", resource, body=lambda b: "activeOperation" not in b)


def nothing(rig: Rig, key: Any, family: FamilyCase) -> None:
    del rig, key, family


def dispatched(rig: Rig, key: Any, family: FamilyCase) -> None:
    rig.settle(key)


def harvested(rig: Rig, key: Any, family: FamilyCase) -> None:
    rig.settle(key)
    harvest_with(rig, key, family.apply_op, family.applied)


def proving(rig: Rig, key: Any, family: FamilyCase) -> None:
    """A schema whose proof's Plan has run and reports no changes."""
    harvested(rig, key, family)
    rig.settle(key)  # the record; the proof claims Observe and dispatches it
    harvest_with(rig, key, "observe", OBSERVED)
    rig.settle(key)  # Observe read; the scoped Plan is claimed and dispatched
    harvest_with(rig, key, "plan", NO_CHANGES)


def rotated(rig: Rig, key: Any, family: FamilyCase) -> None:
    rig.reconcile(key)  # the claim, so the plan and an undispatched claim retire together
    rotate_binding(rig)


@dataclass(frozen=True)
class Row:
    id: str
    write: Callable[[FamilyCase], Predicate]
    prepare: Callable[[Rig, Any, FamilyCase], None]
    check: Callable[[Rig, Any, FamilyCase, dict[str, Any]], None]
    families: tuple[FamilyCase, ...] = FAMILIES


def first_writes(rig: Rig) -> list[tuple[str, str]]:
    return [(c.verb, c.resource.plural) for c in rig.api.writes()]


def check_finalizer(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # A finalizer with no claim, which the next pass removes before anything else.
    assert "activeOperation" not in held
    assert first_writes(rig)[0] == ("patch_metadata", family.resource.plural)
    assert "FinalizerRemoved" in rig.sink.reasons(key.name)


def check_proceeds(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # A claim is not evidence that anything ran: the same claim goes on to one Job.
    assert rig.claim(key)["id"] == held["activeOperation"]["id"]
    assert rig.job_creates() == 1 and len(rig.jobs()) == 1


def check_epoch(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # The Lease held under an epoch the status does not name: adopted before dispatch.
    check_proceeds(rig, key, family, held)
    assert rig.claim(key)["leaseContinuityLost"] is False


def check_consume(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # An approval spent with nothing marked: the same claim dispatches under it.
    assert held["activeOperation"].get("dispatchStarted", False) is False
    check_proceeds(rig, key, family, held)
    assert not [c for c in rig.api.writes() if c.resource.plural.endswith("approvals")]


def check_mark(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # A claim that says a Job may exist: the outcome is unknown, never a create.
    assert held["activeOperation"]["dispatchStarted"] is True
    assert rig.job_creates() == 0 and rig.jobs() == []
    assert account(rig, key) == "unknown"


def check_uid(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    (job,) = rig.jobs()
    assert rig.job_creates() == 0
    assert rig.claim(key)["jobUID"] == job["metadata"]["uid"]


def check_ttl(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # A Job carrying a TTL under a live claim: the same terminal Job, the same verdict.
    assert held["activeOperation"]["jobUID"]
    job = rig.api.get(JOBS, NS, held["activeOperation"]["jobName"])
    assert job["spec"]["ttlSecondsAfterFinished"] == CLEANUP_TTL_SECONDS
    assert account(rig, key) == "succeeded"


def check_outcome(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # Either a live claim or a retained record, never both and never neither.
    assert "activeOperation" not in held
    assert ("pendingObservation" in held) is (family is SCHEMA)
    assert ("lastRun" in held) is (family is not SCHEMA)
    if family is SCHEMA:
        # The record decides: the next pass proves, under the same Lease.
        assert rig.claim(key)["type"] in ("Observe", "Plan")
        assert lease_holder_of(rig) != ""
    else:
        assert lease_holder_of(rig) == ""


def check_release(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # The realm still claimed, with a record saying so: released before anything else.
    assert "pendingLockRelease" in held
    assert first_writes(rig)[0] == ("replace", LEASES.plural)
    assert lease_holder_of(rig) == ""
    assert "pendingLockRelease" not in status_of(rig, key)


def check_rotation(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    # The new epoch with the record beside it: worked off first, then gone.
    record = held["pendingBindingRetirement"]
    assert record["plan"] and held["executionBinding"]["epoch"] == "v1-" + "f" * 32
    approval = rig.api.get(family.approvals, NS, f"{key.name}-approval")
    stale = [c for c in approval["status"]["conditions"] if c["type"] == "Stale"]
    assert stale and stale[0]["status"] == "True"
    assert "pendingBindingRetirement" not in status_of(rig, key)
    assert "Claimed" not in rig.sink.reasons(key.name)[-3:]


def check_control(rig: Rig, key: Any, family: FamilyCase, held: dict[str, Any]) -> None:
    (job,) = rig.jobs()
    assert held["activeOperation"]["jobUID"] == job["metadata"]["uid"]


ROWS: list[Row] = [
    Row("control: no stop", lambda f: lambda request: False, nothing, check_control),
    Row("finalizer", lambda f: matching("patch_metadata", f.resource), nothing, check_finalizer),
    Row("activeOperation", lambda f: status_write(f, 1), nothing, check_proceeds),
    Row("leaseEpoch", lambda f: status_write(f, 2), nothing, check_epoch),
    Row("admissionSnapshot", lambda f: status_write(f, 3), nothing, check_proceeds),
    Row("projection", lambda f: matching("create", CONFIGMAPS), nothing, check_proceeds, (SCHEMA,)),
    Row("approval", lambda f: matching("patch_status", f.approvals), nothing, check_consume),
    Row("dispatchStarted", lambda f: status_write(f, 4), nothing, check_mark),
    Row("jobUID", lambda f: status_write(f, 5), nothing, check_uid),
    Row("cleanup TTL", lambda f: matching("patch_spec", JOBS), harvested, check_ttl),
    Row("outcome patch", lambda f: drops_claim(f.resource), harvested, check_outcome),
    Row(
        "pendingLockRelease",
        lambda f: matching("patch_status", f.resource, body=lambda b: "pendingLockRelease" in b),
        harvested,
        check_release,
        tuple(f for f in FAMILIES if f is not SCHEMA),
    ),
    Row(
        "pendingLockRelease (proof settled)",
        lambda f: matching("patch_status", f.resource, body=lambda b: "pendingLockRelease" in b),
        proving,
        check_release,
        (SCHEMA,),
    ),
    Row(
        "pendingBindingRetirement",
        lambda f: matching(
            "patch_status", f.resource, body=lambda b: "pendingBindingRetirement" in b
        ),
        rotated,
        check_rotation,
        (SCHEMA,),
    ),
]  # fmt: skip

CASES = [(row, family) for row in ROWS for family in row.families]


@pytest.mark.parametrize(
    ("row", "family"), CASES, ids=[f"{row.id}-{family.name}" for row, family in CASES]
)
def test_the_process_stopped_after_a_durable_write(row: Row, family: FamilyCase) -> None:
    rig = make_rig()
    key = family.add(rig)
    row.prepare(rig, key, family)
    rig.api.stop_after_write(row.write(family))
    for _ in range(4):
        rig.settle(key)
        if rig.api.stopped:
            break
    control = row.id.startswith("control")
    assert rig.api.stopped is not control, f"the {row.id} write never happened"
    held = status_of(rig, key)
    if not control:
        rig.api.restart()
    rig.api.clear_calls()
    rig.settle(key)
    row.check(rig, key, family, held)
