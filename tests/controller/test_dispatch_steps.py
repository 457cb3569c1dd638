"""Each dispatch step: what it writes, where the pass returns, and what the next pass
sees when the process stops right after the write.

One row per durable write of a claim's way from approval to its recorded Job, for
both families. ``stop_after_write`` stores the write and then fails every later call
until ``restart()``: a process that crashed right after it. The row then checks what
the API server holds, restarts, runs the passes that recover, and checks what they
did. Every row, the control row included, must end with at most one Job ever stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from controller.mutationlifecycle import Driver, Step
from controller.runtime.reconciler import Key
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    LEASES,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAS,
    Resource,
    Unavailable,
)
from kube.fake.faults import Predicate, Request
from kube.fake.inmemory import matching
from tests.support.claimworld import EPOCH
from tests.support.dispatchworld import (
    NS,
    Rig,
    add_migration,
    add_schema,
    conditions,
    make_rig,
)


def nth(predicate: Predicate, n: int) -> Predicate:
    """True for the ``n``th call (from 1) that ``predicate`` selects."""
    seen = [0]

    def select(request: Request) -> bool:
        if not predicate(request):
            return False
        seen[0] += 1
        return seen[0] == n

    return select


@dataclass(frozen=True)
class Family:
    name: str
    resource: Resource
    approvals: Resource
    add: Callable[[Rig], Key]


SCHEMA = Family("schema", PTAHSCHEMAS, PTAHSCHEMAAPPROVALS, add_schema)
MIGRATION = Family("migration", PTAHMIGRATIONS, PTAHMIGRATIONAPPROVALS, add_migration)


# The durable writes in order. Status patches of the resource: 1 the claim, 2 the
# Lease epoch, 3 the admission snapshot, 4 the mark, 5 the Job's UID.
WRITES: list[tuple[str, Callable[[Family], Predicate]]] = [
    ("finalizer", lambda f: matching("patch_metadata", f.resource)),
    ("claim", lambda f: nth(matching("patch_status", f.resource), 1)),
    ("lease", lambda f: matching("create", LEASES)),
    ("lease-epoch", lambda f: nth(matching("patch_status", f.resource), 2)),
    ("projection", lambda f: matching("create", CONFIGMAPS)),
    ("snapshot", lambda f: nth(matching("patch_status", f.resource), 3)),
    ("consume", lambda f: matching("patch_status", f.approvals)),
    ("mark", lambda f: nth(matching("patch_status", f.resource), 4)),
    ("create", lambda f: matching("create", JOBS)),
    ("job-uid", lambda f: nth(matching("patch_status", f.resource), 5)),
]


def run_to_rest(rig: Rig, key: Key, *, rounds: int = 6) -> None:
    for _ in range(rounds):
        stops = rig.settle(key)
        if stops[-1].requeue_after != 0.0 and stops[-1].error is None:
            return


def test_the_happy_path_returns_where_the_spec_says() -> None:
    """Control: the claim pass and the snapshot pass end deliberately; the create pass
    ends once the UID is recorded."""
    for family in (SCHEMA, MIGRATION):
        rig = make_rig()
        key = family.add(rig)
        reasons = [stop.reason for stop in rig.settle(key)]
        assert reasons == [
            "the claim is persisted; nothing external has happened",
            "the admission snapshot is durable; the pass returns",
            "the Job's UID is recorded",
        ]
        claim = rig.claim(key)
        (job,) = rig.jobs()
        assert claim["jobUID"] == job["metadata"]["uid"]
        assert claim["dispatchStarted"] is True
        assert conditions(rig.api.get(family.approvals, NS, f"{key.name}-approval")) == {
            "Consumed": "True"
        }
        (lease,) = rig.leases()
        assert (
            lease["metadata"]["annotations"]["operator.ptah.run/lease-epoch"]
            == (claim["leaseEpoch"])
        )


def test_the_first_pass_installs_the_execution_binding_and_returns() -> None:
    rig = make_rig()
    key = add_schema(rig)
    stored = rig.resource(key)
    rig.api.patch_status(
        PTAHSCHEMAS,
        NS,
        key.name,
        {},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    stop = rig.reconcile(key)
    assert stop.reason == "the execution binding is installed"
    assert rig.resource(key)["status"]["executionBinding"]["epoch"] == EPOCH
    assert rig.job_creates() == 0


def test_the_writes_happen_in_the_spec_order() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.api.clear_calls()
    run_to_rest(rig, key)
    order = [
        (c.verb, c.resource.plural)
        for c in rig.api.writes()
        if c.resource.plural not in ("events",)
    ]
    assert order == [
        ("patch_metadata", "ptahschemas"),  # finalizer
        ("patch_status", "ptahschemas"),  # claim
        ("create", "leases"),  # lease
        ("patch_status", "ptahschemas"),  # lease epoch
        ("create", "configmaps"),  # stage
        ("patch_status", "ptahschemas"),  # snapshot; the pass returns
        ("replace", "leases"),  # the next pass renews the tenure it holds
        ("patch_status", "ptahschemaapprovals"),  # consume
        ("patch_status", "ptahschemas"),  # mark
        ("create", "jobs"),  # the one create
        ("patch_status", "ptahschemas"),  # the Job's UID
    ]


# A control row first (no stop), then every write of each family; a migration plan
# carries nothing to project, so it has no projection row.
ROWS = [
    (family, write, select)
    for family in (SCHEMA, MIGRATION)
    for write, select in [("control", WRITES[0][1]), *WRITES]
    if not (family is MIGRATION and write == "projection")
]


@pytest.mark.parametrize(
    ("family", "write", "select"), ROWS, ids=[f"{f.name}-{w}" for f, w, _ in ROWS]
)
def test_a_stop_right_after_each_write(
    family: Family, write: str, select: Callable[[Family], Predicate]
) -> None:
    rig = make_rig()
    key = family.add(rig)
    if write != "control":
        rig.api.stop_after_write(select(family))
    stops = rig.settle(key)
    if write != "control":
        assert rig.api.stopped, f"the {write} write never happened"
        assert isinstance(stops[-1].error, Unavailable)
        rig.api.restart()
    held = rig.claim(key)
    rig.api.clear_calls()
    run_to_rest(rig, key)
    after = rig.claim(key)
    jobs = rig.jobs()
    assert len(jobs) <= 1
    if write == "mark":
        # The central window: a claim that says a Job may exist, and none does. The
        # next pass declares the outcome unknown and never creates.
        assert held["dispatchStarted"] is True
        assert jobs == []
        assert rig.job_creates() == 0
        assert "OutcomeUnknown" in rig.sink.reasons(key.name)
        # The claim is swapped for its family's record of an unknown outcome.
        status = rig.resource(key)["status"]
        assert after == {} and ("pendingObservation" in status or "unresolvedRun" in status)
        return
    (job,) = jobs
    assert after["jobUID"] == job["metadata"]["uid"]
    first_writes = [(c.verb, c.resource.plural) for c in rig.api.writes()][:1]
    if write == "finalizer":
        # A finalizer with no claim is removed before anything else.
        assert first_writes == [("patch_metadata", family.resource.plural)]
        assert "FinalizerRemoved" in rig.sink.reasons(key.name)
    if write == "lease":
        # The Lease is held under an epoch the status does not name: adopted silently.
        assert held["leaseEpoch"] != after["leaseEpoch"]
        assert after["leaseContinuityLost"] is False
    if write == "consume":
        # Spent, not marked: the same claim dispatches under the approval it spent.
        assert held["dispatchStarted"] is False
        assert after["id"] == held["id"]
        assert not [c for c in rig.api.writes() if c.resource == family.approvals]
    if write == "create":
        # Lost between the create and the UID write: adopted once it matches.
        assert rig.job_creates() == 0
        assert "JobAdopted" in rig.sink.reasons(key.name)
    if write in ("snapshot", "job-uid", "lease-epoch", "claim", "projection"):
        assert after["id"] == held["id"]
    if write == "projection":
        assert [c.verb for c in rig.api.writes() if c.resource == CONFIGMAPS] == []


def test_a_migration_has_nothing_to_stage() -> None:
    rig = make_rig()
    key = add_migration(rig)
    run_to_rest(rig, key)
    assert rig.api.list(CONFIGMAPS, NS) == []
    assert len(rig.jobs()) == 1


def test_exchanging_consume_and_mark_leaves_a_mark_beside_an_unspent_approval() -> None:
    """The boundary matters: with the two steps exchanged, a stop after the mark leaves
    a claim that says a Job may exist whose approval was never spent."""
    for driver, spent in ((Driver(), "True"), (Driver.swapped(Step.CONSUME, Step.MARK), None)):
        rig = make_rig(driver)
        key = add_schema(rig)
        rig.api.stop_after_write(nth(matching("patch_status", PTAHSCHEMAS), 4))
        rig.settle(key)
        assert rig.api.stopped
        assert rig.claim(key)["dispatchStarted"] is True
        approval = rig.api.peek(PTAHSCHEMAAPPROVALS, NS, f"{key.name}-approval")
        assert approval is not None
        assert conditions(approval).get("Consumed") == spent
