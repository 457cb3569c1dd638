"""The domain metrics: gauges from stored status, counters from what a pass changed.

The gauges are a pure function of the resources' facts (a table: a control row, then
one change per row); the counters and gauges are then driven through the real passes
of the in-memory world, where a migration's Apply ends Unknown, a restarted manager
reports the same gauges after one pass per resource, and a History reading settles it.
An approval is counted seen once, by the manager whose pass reserved it on a claim.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from controller.runtime.reconciler import Key
from jobclaim.apiserver import PTAHMIGRATIONPLANS, PTAHSCHEMAPLANS, Object
from manager.metrics import ManagerMetrics, PlansCollector
from manager.statusmetrics import (
    ClaimFacts,
    Facts,
    SeenApprovals,
    Unresolved,
    approvals_seen,
    gauges,
    stored_plans,
    transitions,
)
from tests.support.dispatchworld import NS, Rig, add_migration, add_schema, make_rig
from tests.support.outcomeworld import UNKNOWN_RUN, status_of
from tests.support.podworld import harvest_with, history

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CLAIM = ClaimFacts(
    id="op-1",
    type="Apply",
    job_name="job-1",
    started_at=NOW - timedelta(minutes=1),
    dispatched=True,
    mutating=True,
    deadline=NOW + timedelta(minutes=10),
)
CONTROL = Facts(kind="PtahMigration", phase="Applying", claim=CLAIM)

# (row, facts, gauge, labels, value): the control row reads 0 everywhere but claims.
GAUGE_ROWS = [
    ("control: a live claim within its deadline", CONTROL, "claims_overdue", {}, 0.0),
    ("control: the claim is counted", CONTROL, "claims", {}, 1.0),
    (
        "a claim 6 min past its deadline is overdue",
        replace(CONTROL, claim=replace(CLAIM, deadline=NOW - timedelta(minutes=6))),
        "claims_overdue",
        {},
        1.0,
    ),
    (
        "a claim 4 min past its deadline is within grace",
        replace(CONTROL, claim=replace(CLAIM, deadline=NOW - timedelta(minutes=4))),
        "claims_overdue",
        {},
        0.0,
    ),
    (
        "an unresolved Unknown run",
        replace(CONTROL, claim=None, unresolved=Unresolved("op-1", "Unknown", NOW)),
        "unresolved_attempts",
        {"outcome": "Unknown"},
        1.0,
    ),
    (
        "its age is exported as a timestamp",
        replace(CONTROL, claim=None, unresolved=Unresolved("op-1", "Partial", NOW)),
        "unresolved_attempt_oldest_timestamp_seconds",
        {},
        NOW.timestamp(),
    ),
    ("a release owed", replace(CONTROL, release_owed=True), "lock_releases_owed", {}, 1.0),
    (
        "a resource 6 min past its next reconciliation",
        replace(CONTROL, claim=None, next_reconciliation=NOW - timedelta(minutes=6)),
        "resources_overdue",
        {},
        1.0,
    ),
    (
        "a suspended resource is never overdue",
        replace(
            CONTROL, claim=None, suspended=True, next_reconciliation=NOW - timedelta(minutes=6)
        ),
        "resources_overdue",
        {},
        0.0,
    ),
    (
        "a plan awaiting approval",
        replace(CONTROL, claim=None, phase="AwaitingApproval"),
        "plans_awaiting_approval",
        {},
        1.0,
    ),
]


@pytest.mark.parametrize(
    ("row", "facts", "name", "labels", "value"), GAUGE_ROWS, ids=[r[0] for r in GAUGE_ROWS]
)
def test_each_gauge_reads_the_status_it_names(
    row: str, facts: Facts, name: str, labels: dict[str, str], value: float
) -> None:
    assert gauges([facts], NOW).get(name, kind=facts.kind, **labels) == value


def test_a_schema_proof_whose_reading_fails_is_counted_failing() -> None:
    proof = Facts(kind="PtahSchema", phase="VerifyingConvergence", proof=("op", "OutcomeUnknown"))
    assert gauges([proof], NOW).get("pending_proofs_failing") == 0.0
    assert gauges([proof], NOW).get("pending_proofs", outcome="OutcomeUnknown") == 1.0
    failing = replace(proof, reading_failure="Observe")
    assert gauges([failing], NOW).get("pending_proofs_failing") == 1.0


def test_every_kind_reports_zero_rather_than_nothing() -> None:
    values = gauges([], NOW)
    for kind in ("PtahSchema", "PtahMigration"):
        series = values.values["unresolved_attempts"]
        assert series[(("kind", kind), ("outcome", "Unknown"))] == 0.0


# (row, after, reasons, the Apply outcome counted)
ENDED = replace(CONTROL, claim=None)
APPLY_ROWS = [
    ("control: the claim still stands", CONTROL, [], ()),
    (
        "an Apply recorded unresolved is unknown",
        replace(ENDED, unresolved=Unresolved("op-1", "Unknown", NOW)),
        ["OutcomeUnknown", "RunUnresolved"],
        ("unknown",),
    ),
    (
        "a migration's run read Applied",
        replace(ENDED, last_run=("u", "Applied")),
        [],
        ("succeeded",),
    ),
    (
        "a schema's Apply whose proof is owed",
        replace(ENDED, kind="PtahSchema", proof=("op-1", "ApplySucceeded")),
        [],
        ("succeeded",),
    ),
    ("a dispatched Apply that left no record failed", ENDED, [], ("failed",)),
]


@pytest.mark.parametrize(
    ("row", "after", "reasons", "applies"), APPLY_ROWS, ids=[r[0] for r in APPLY_ROWS]
)
def test_an_ended_apply_is_counted_by_the_record_it_left(
    row: str, after: Facts, reasons: list[str], applies: tuple[str, ...]
) -> None:
    assert transitions(CONTROL, after, reasons, NOW).applies == applies


def test_an_apply_retired_before_dispatch_is_retired_not_failed() -> None:
    before = replace(CONTROL, claim=replace(CLAIM, dispatched=False))
    assert transitions(before, ENDED, ["ClaimRetired"], NOW).applies == ("retired",)


def test_an_ended_claim_is_timed_from_its_start() -> None:
    moves = transitions(CONTROL, ENDED, [], NOW)
    assert moves.durations == (("Apply", 60.0),)
    # Not seen before (a restarted manager): nothing to time it from.
    assert transitions(None, ENDED, [], NOW).durations == ()


# -- approvals seen ----------------------------------------------------------------------

RESERVED = replace(CONTROL, plan="plan-1", approval="approval-1")
REMEMBERED = SeenApprovals("plan-1", frozenset({"approval-1"}))
# (row, remembered before the pass, facts after it, its reasons, counted, UIDs then kept)
SEEN_ROWS: list[
    tuple[str, SeenApprovals | None, Facts | None, list[str], int, frozenset[str] | None]
] = [
    (
        "control: a pass claims an Apply holding an approval not seen",
        None,
        RESERVED,
        ["Claimed"],
        1,
        frozenset({"approval-1"}),
    ),
    (
        "the same approval reserved again after its claim retired unspent",
        REMEMBERED,
        RESERVED,
        ["Claimed"],
        0,
        frozenset({"approval-1"}),
    ),
    (
        "a reservation met without a claim written (a restarted manager's first pass)",
        None,
        RESERVED,
        ["DispatchMarked"],
        0,
        frozenset({"approval-1"}),
    ),
    (
        "a reading claimed beside a schema plan's kept reservation",
        None,
        replace(RESERVED, claim=replace(CLAIM, type="Observe", mutating=False)),
        ["Claimed"],
        0,
        frozenset({"approval-1"}),
    ),
    (
        "an Apply claimed with no approval (apply: Always)",
        None,
        replace(RESERVED, approval=None),
        ["Claimed"],
        0,
        None,
    ),
    (
        "another plan forgets the approvals of the last",
        SeenApprovals("plan-0", frozenset({"approval-1"})),
        RESERVED,
        ["Claimed"],
        1,
        frozenset({"approval-1"}),
    ),
    (
        "a plan dropped keeps what was remembered for it",
        REMEMBERED,
        replace(RESERVED, claim=None, plan=None, approval=None),
        ["ClaimRetired"],
        0,
        frozenset({"approval-1"}),
    ),
    ("the resource is gone", REMEMBERED, None, [], 0, None),
]


@pytest.mark.parametrize(
    ("row", "remembered", "after", "reasons", "counted", "kept"),
    SEEN_ROWS,
    ids=[r[0] for r in SEEN_ROWS],
)
def test_an_approval_is_seen_once_by_the_pass_that_reserves_it(
    row: str,
    remembered: SeenApprovals | None,
    after: Facts | None,
    reasons: list[str],
    counted: int,
    kept: frozenset[str] | None,
) -> None:
    moved, memory = approvals_seen(remembered, after, reasons)
    assert moved == counted
    assert (memory.uids if memory is not None else None) == kept


# -- through real passes ---------------------------------------------------------------


def sample(metrics: ManagerMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def domain_gauges(metrics: ManagerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in metrics.status.collect()
        for s in family.samples
    }


def observed(rig: Rig) -> ManagerMetrics:
    metrics = ManagerMetrics(process=False, now=rig.clocks.wall)
    rig.reconciler.observer = metrics
    return metrics


def passes(rig: Rig, key: Key, limit: int = 20) -> None:
    for _ in range(limit):
        if rig.reconciler.process(key).requeue_after != 0.0:
            return


def test_an_unknown_outcome_is_counted_kept_across_a_restart_and_settled() -> None:
    rig = make_rig()
    metrics = observed(rig)
    key = add_migration(rig)
    passes(rig, key)
    assert sample(metrics, "ptah_claims", kind="PtahMigration") == 1.0
    assert sample(metrics, "ptah_approvals_spent_total", kind="PtahMigration") == 1.0
    harvest_with(rig, key, "migration-apply", UNKNOWN_RUN)
    passes(rig, key)
    assert "unresolvedRun" in status_of(rig, key)
    unknown = {"kind": "PtahMigration", "outcome": "Unknown"}
    assert sample(metrics, "ptah_unresolved_attempts", **unknown) == 1.0
    assert sample(metrics, "ptah_applies_total", kind="PtahMigration", outcome="unknown") == 1.0
    assert sample(metrics, "ptah_claims", kind="PtahMigration") == 0.0
    before = domain_gauges(metrics)

    restarted = observed(rig)
    assert domain_gauges(restarted) != before  # nothing from memory
    rig.reconciler.process(key)
    assert domain_gauges(restarted) == before
    # The restart counted no second Apply.
    assert sample(restarted, "ptah_applies_total", kind="PtahMigration", outcome="unknown") == 0.0

    rig.reconciler.claim(key, "History")
    passes(rig, key)
    harvest_with(rig, key, "migration-history", history(0))
    passes(rig, key)
    assert status_of(rig, key)["resolvedRun"]["resolution"] == "HistoryRead"
    assert sample(restarted, "ptah_unresolved_attempts", **unknown) == 0.0
    reading = {"kind": "PtahMigration", "operation": "History", "result": "recorded"}
    assert sample(restarted, "ptah_readings_total", **reading) == 1.0


@pytest.mark.parametrize("family", ["PtahSchema", "PtahMigration"])
def test_an_approval_is_seen_by_its_claim_and_spent_by_its_dispatch(family: str) -> None:
    rig = make_rig()
    metrics = observed(rig)
    key = add_schema(rig) if family == "PtahSchema" else add_migration(rig)
    rig.reconciler.process(key)  # the Apply is claimed with the approval it found
    assert sample(metrics, "ptah_approvals_seen_total", kind=family) == 1.0
    assert sample(metrics, "ptah_approvals_spent_total", kind=family) == 0.0

    # A manager restarted before the dispatch meets the reservation its predecessor
    # counted: it counts the spending, not a second sighting.
    restarted = observed(rig)
    passes(rig, key)
    assert sample(restarted, "ptah_approvals_seen_total", kind=family) == 0.0
    assert sample(restarted, "ptah_approvals_spent_total", kind=family) == 1.0
    assert sample(metrics, "ptah_approvals_seen_total", kind=family) == 1.0


def test_a_deleted_resource_leaves_the_gauges_and_a_follower_reports_none() -> None:
    rig = make_rig()
    metrics = observed(rig)
    key = add_migration(rig)
    passes(rig, key)
    assert sample(metrics, "ptah_claims", kind="PtahMigration") == 1.0
    gone = Key("PtahMigration", key.namespace, "deleted-since")
    metrics.status.seen(gone, CONTROL)
    assert sample(metrics, "ptah_claims", kind="PtahMigration") == 2.0
    rig.reconciler.process(gone)  # the pass finds it gone
    assert sample(metrics, "ptah_claims", kind="PtahMigration") == 1.0
    metrics.loop_turned(False)
    assert sample(metrics, "ptah_claims", kind="PtahMigration") == 0.0


# -- stored plans ----------------------------------------------------------------------


def test_stored_plans_count_objects_and_declared_chunk_bytes() -> None:
    schema_plan = {"metadata": {"name": "p"}, "spec": {"chunks": [{"size": 100}, {"size": 20}]}}
    migration_plan = {"metadata": {"name": "m"}, "spec": {"migrations": []}}
    values = stored_plans([schema_plan], [migration_plan, migration_plan])
    assert values.get("stored_plans", kind="PtahSchemaPlan") == 1.0
    assert values.get("stored_plans", kind="PtahMigrationPlan") == 2.0
    own = len(orjson.dumps(schema_plan))
    assert values.get("stored_plan_bytes", kind="PtahSchemaPlan") == own + 120
    assert stored_plans([], []).get("stored_plan_bytes", kind="PtahSchemaPlan") == 0.0


def test_the_plans_are_listed_once_a_minute_and_absent_while_the_list_fails() -> None:
    rig = make_rig()
    key = add_migration(rig)
    passes(rig, key)
    calls: list[float] = []
    now = [0.0]
    failing = [False]

    def lister() -> tuple[list[Object], list[Object]]:
        calls.append(now[0])
        if failing[0]:
            raise ConnectionError("the API server is unreachable")
        return rig.api.list(PTAHSCHEMAPLANS, NS), rig.api.list(PTAHMIGRATIONPLANS, NS)

    metrics = ManagerMetrics(process=False)
    metrics.registry.register(PlansCollector(lister, clock=lambda: now[0]))
    stored = {"kind": "PtahMigrationPlan"}
    assert sample(metrics, "ptah_stored_plans", **stored) == 1.0
    assert sample(metrics, "ptah_stored_plan_bytes", **stored) > 0.0
    now[0] = 30.0
    sample(metrics, "ptah_stored_plans", **stored)
    assert calls == [0.0], "listed again within the minute"
    failing[0] = True
    now[0] = 61.0
    assert metrics.registry.get_sample_value("ptah_stored_plans", stored) is None


# -- names and labels ----------------------------------------------------------------------

# Every label the registry may carry: bounded sets the code enumerates (the collectors'
# own are the Python version and GC generation). A resource's name or namespace is
# never one: it would grow the series without bound.
BOUNDED_LABELS = {
    "kind",
    "phase",
    "outcome",
    "operation",
    "result",
    "how",
    "stage",
    "category",
    "endpoint",
    "rule",
    "verdict",
    "le",
    "generation",
    "implementation",
    "major",
    "minor",
    "patchlevel",
    "version",
}


def test_no_series_names_a_resource_and_every_counter_is_total() -> None:
    rig = make_rig()
    metrics = ManagerMetrics(now=rig.clocks.wall)
    rig.reconciler.observer = metrics
    keys = [add_schema(rig, "orders-x7"), add_migration(rig, "billing-x7")]
    for key in keys:
        passes(rig, key)
    harvest_with(rig, keys[1], "migration-apply", UNKNOWN_RUN)
    passes(rig, keys[1])
    rig.api.fail_read(lambda *_: True)  # a failed pass: stage and category labels too
    rig.reconciler.process(keys[0])
    samples = [(f, s) for f in metrics.registry.collect() for s in f.samples]
    # The control: the passes moved labelled series, so the checks below check them.
    assert sample(metrics, "ptah_applies_total", kind="PtahMigration", outcome="unknown") == 1.0
    assert any(s.name == "ptah_pass_failures_total" for _, s in samples)
    names = {key.name for key in keys} | {NS}
    for family, s in samples:
        assert set(s.labels) <= BOUNDED_LABELS, (s.name, s.labels)
        assert not names & set(s.labels.values()), (s.name, s.labels)
        if family.type == "counter":
            assert s.name.endswith(("_total", "_created")), s.name
