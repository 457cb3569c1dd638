"""What the durable status says a person may have to act on, as metric values. Pure.

Functions and the facts they read, nothing that does I/O:

- ``facts_of`` reads one PtahSchema's or PtahMigration's stored status into the few
  facts the metrics need (``Facts``).
- ``gauges`` turns the facts of every resource the controller knows into gauge values.
  The facts are the status each pass last read or wrote, so a restarted manager (or a
  new leader) reports the same numbers as soon as its first passes have run: nothing
  is counted from memory of what happened before.
- ``transitions`` compares a resource's facts before and after one pass, with the
  pass's Event reasons, and says which outcome counters move. This is the one place
  an outcome is counted; controller modules only write status and name their Events.
- ``approvals_seen`` says whether a pass reserved an approval not counted before, from
  the few approval UIDs remembered for the resource's current plan (``SeenApprovals``).

Labels are bounded: a kind, a phase, an operation type, an outcome. A resource's name
is never a label (the per-resource view is ``kubectl ptah status``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

import orjson

from controller import FAMILIES, Subject
from jobclaim import operation_info
from jobclaim.api import PtahMigration, PtahSchema
from jobclaim.apiserver import Object
from jobclaim.times import parse_time

SCHEMA: Final = "PtahSchema"
MIGRATION: Final = "PtahMigration"
KINDS: Final = (SCHEMA, MIGRATION)
# A claim is stuck once its Job's deadline (or its dispatch window) passed this long
# ago: the harvest or the retirement should have ended it by then.
CLAIM_GRACE: Final = timedelta(minutes=5)
# A resource is overdue once its next reconciliation passed this long ago.
OVERDUE_GRACE: Final = timedelta(minutes=5)
# Event reasons counted as they are, by the counter they move.
READING_FAILED: Final = "ReadingFailed"
APPROVAL_SPENT: Final = "ApprovalConsumed"
# The reason of the pass that wrote a new claim (an Apply's holds the approval it found).
CLAIMED: Final = "Claimed"
SETTLED_REASONS: Final = {
    "ProofSettled": "settled_by_person",
    "RunAcknowledged": "acknowledged",
    "ConvergedAfterUnknownOutcome": "converged",
}
RELEASED: Final = "RealmReleased"


@dataclass(frozen=True, slots=True)
class ClaimFacts:
    id: str
    type: str
    job_name: str
    started_at: datetime | None
    dispatched: bool
    # Whether the operation table calls the type mutating (an Apply) or a reading.
    mutating: bool
    # The moment past which the claim should have ended (dispatch window when not
    # dispatched, the Job's execution deadline once it may have).
    deadline: datetime | None


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A record of an attempt whose outcome nobody knows yet."""

    operation_id: str
    outcome: str  # "Unknown" or "Partial"
    since: datetime | None


@dataclass(frozen=True, slots=True)
class Facts:
    kind: str
    phase: str
    claim: ClaimFacts | None = None
    # A schema's pending observation (a proof owed): the Apply it proves and its outcome.
    proof: tuple[str, str] | None = None
    unresolved: Unresolved | None = None
    release_owed: bool = False
    next_reconciliation: datetime | None = None
    reading_failure: str | None = None
    # A migration's last run: (job name, outcome), to tell a new run from the last.
    last_run: tuple[str, str] | None = None
    suspended: bool = False
    # The stored plan the resource stands on (its UID), to count plans made.
    plan: str | None = None
    # The UID of the approval the status reserves for that plan: a schema's
    # status.plan.approval (kept after its claim ends), a migration's Apply claim's
    # approvalRef (gone with the claim).
    approval: str | None = None


def facts_of(subject: Subject) -> Facts:
    """The facts of one resource's stored status."""
    status = subject.status
    kind = subject.kind
    if status is None:
        return Facts(kind=kind, phase="Pending", suspended=subject.spec.suspend)
    claim = None
    operation = status.active_operation
    if operation is not None:
        dispatched = operation.dispatch_started or operation.job_uid is not None
        window = operation.execution_not_after if dispatched else operation.dispatch_not_after
        claim = ClaimFacts(
            id=operation.id,
            type=operation.type,
            job_name=operation.job_name,
            started_at=parse_time(operation.started_at),
            dispatched=dispatched,
            mutating=operation_info(FAMILIES[kind].name, operation.type).mutating,
            deadline=parse_time(window),
        )
    proof = None
    unresolved = None
    last_run = None
    approval = None
    if isinstance(subject, PtahSchema):
        reserved = subject.status.plan.approval if subject.status and subject.status.plan else None
        approval = reserved.uid if reserved is not None else None
        pending = subject.status.pending_observation if subject.status else None
        if pending is not None:
            proof = (pending.apply_operation_id, pending.outcome)
            if pending.outcome == "OutcomeUnknown":
                # The record carries no time of its own; the Apply's deadline (which the
                # proof waits for) is the closest durable moment.
                unresolved = Unresolved(
                    pending.apply_operation_id, "Unknown", parse_time(pending.observe_after)
                )
    elif isinstance(subject, PtahMigration) and subject.status is not None:
        held = subject.status.active_operation
        if held is not None and held.approval_ref is not None:
            approval = held.approval_ref.uid
        run = subject.status.unresolved_run
        if run is not None:
            unresolved = Unresolved(run.operation_id, run.outcome, parse_time(run.recorded_at))
        if subject.status.last_run is not None:
            last = subject.status.last_run
            last_run = (last.job_uid or last.job_name or "", last.outcome)
    failure = status.reading_failure
    return Facts(
        kind=kind,
        phase=status.phase or "Pending",
        claim=claim,
        proof=proof,
        unresolved=unresolved,
        release_owed=status.pending_lock_release is not None,
        next_reconciliation=parse_time(status.next_reconciliation_time),
        reading_failure=failure.operation if failure is not None else None,
        last_run=last_run,
        suspended=subject.spec.suspend,
        plan=status.plan.uid if status.plan is not None else None,
        approval=approval,
    )


# -- gauges ----------------------------------------------------------------------------

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Gauges:
    """Every gauge value, by metric suffix and label set."""

    values: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def get(self, name: str, **labels: str) -> float:
        return self.values.get(name, {}).get(tuple(sorted(labels.items())), 0.0)


def _put(values: dict[str, dict[Labels, float]], name: str, value: float, **labels: str) -> None:
    values.setdefault(name, {})[tuple(sorted(labels.items()))] = value


def _oldest(moments: Iterable[datetime | None]) -> float | None:
    known = [m.timestamp() for m in moments if m is not None]
    return min(known) if known else None


def gauges(all_facts: Iterable[Facts], now: datetime) -> Gauges:
    """The gauges of the resources' facts at ``now``. Every kind's series is present
    (at zero when nothing holds), so an alert on it never reads "no data" as "fine"."""
    facts = list(all_facts)
    values: dict[str, dict[Labels, float]] = {}
    phases = Counter((f.kind, f.phase) for f in facts)
    for (kind, phase), count in sorted(phases.items()):
        _put(values, "resources", count, kind=kind, phase=phase)
    for kind in KINDS:
        mine = [f for f in facts if f.kind == kind]
        for outcome in ("Unknown", "Partial"):
            _put(
                values,
                "unresolved_attempts",
                sum(1 for f in mine if f.unresolved and f.unresolved.outcome == outcome),
                kind=kind,
                outcome=outcome,
            )
        oldest = _oldest(f.unresolved.since for f in mine if f.unresolved is not None)
        if oldest is not None:
            _put(values, "unresolved_attempt_oldest_timestamp_seconds", oldest, kind=kind)
        _put(values, "lock_releases_owed", sum(1 for f in mine if f.release_owed), kind=kind)
        claims = [f.claim for f in mine if f.claim is not None]
        _put(values, "claims", len(claims), kind=kind)
        _put(
            values,
            "claims_overdue",
            sum(1 for c in claims if c.deadline is not None and now > c.deadline + CLAIM_GRACE),
            kind=kind,
        )
        _put(
            values,
            "resources_overdue",
            sum(
                1
                for f in mine
                if not f.suspended
                and f.claim is None
                and f.next_reconciliation is not None
                and now > f.next_reconciliation + OVERDUE_GRACE
            ),
            kind=kind,
        )
        _put(
            values,
            "reading_failures",
            sum(1 for f in mine if f.reading_failure is not None),
            kind=kind,
        )
        _put(
            values,
            "plans_awaiting_approval",
            sum(1 for f in mine if f.phase == "AwaitingApproval"),
            kind=kind,
        )
    schemas = [f for f in facts if f.kind == SCHEMA]
    for outcome in ("ApplySucceeded", "OutcomeUnknown"):
        _put(
            values,
            "pending_proofs",
            sum(1 for f in schemas if f.proof is not None and f.proof[1] == outcome),
            outcome=outcome,
        )
    # A proof whose last reading failed: the reading that would finish it does not.
    _put(
        values,
        "pending_proofs_failing",
        sum(1 for f in schemas if f.proof is not None and f.reading_failure is not None),
    )
    return Gauges(values)


# -- counters from transitions ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Moves:
    """What one pass moved: counter increments and one duration per ended claim."""

    readings: tuple[tuple[str, str, str], ...] = ()  # (kind, operation, result)
    approvals_spent: int = 0
    applies: tuple[str, ...] = ()  # outcomes
    settlements: tuple[str, ...] = ()
    releases: int = 0
    plans: int = 0
    durations: tuple[tuple[str, float], ...] = ()  # (operation type, seconds)


def _apply_outcome(claim: ClaimFacts, after: Facts, reasons: Sequence[str]) -> str:
    """How an ended Apply claim ended, from the record its retirement left."""
    if after.proof is not None and after.proof[0] == claim.id:
        return "succeeded" if after.proof[1] == "ApplySucceeded" else "unknown"
    if after.unresolved is not None and after.unresolved.operation_id == claim.id:
        return after.unresolved.outcome.lower()
    if after.last_run is not None and after.kind == MIGRATION and "RunUnresolved" not in reasons:
        outcome = after.last_run[1]
        return {"Applied": "succeeded", "UpToDate": "succeeded"}.get(outcome, outcome.lower())
    if not claim.dispatched:
        return "retired"
    return "failed"


def transitions(
    before: Facts | None, after: Facts | None, reasons: Sequence[str], now: datetime
) -> Moves:
    """What a pass moved, from the facts before it (None: not seen since this manager
    started) and after it (None: the resource is gone), and its Event reasons.

    Event reasons are counted as they are (each was crossed once, by this pass).
    An ended claim is only known against facts seen before: a claim that ends in the
    first pass after a restart is not timed, and is counted only by the Events its pass
    crossed (an unknown outcome, a failed reading).
    """
    seen = after or before
    kind = seen.kind if seen is not None else ""
    readings: list[tuple[str, str, str]] = []
    applies: list[str] = []
    durations: list[tuple[str, float]] = []
    ended = before.claim if before is not None else None
    if ended is not None and (after is None or after.claim is None or after.claim.id != ended.id):
        if ended.started_at is not None:
            durations.append((ended.type, max(0.0, (now - ended.started_at).total_seconds())))
        if ended.mutating and after is not None:
            applies.append(_apply_outcome(ended, after, reasons))
        elif not ended.mutating:
            result = "recorded" if ended.dispatched else "retired"
            if READING_FAILED in reasons:
                result = "failed"
            readings.append((kind, ended.type, result))
    elif before is None and after is not None:
        # First sight (a restarted manager): only what the pass itself says it crossed.
        if "OutcomeUnknown" in reasons:
            applies.append("unknown")
        if READING_FAILED in reasons and after.reading_failure is not None:
            readings.append((kind, after.reading_failure, "failed"))
    return Moves(
        readings=tuple(readings),
        approvals_spent=sum(1 for r in reasons if r == APPROVAL_SPENT),
        applies=tuple(applies),
        settlements=tuple(SETTLED_REASONS[r] for r in reasons if r in SETTLED_REASONS),
        releases=sum(1 for r in reasons if r == RELEASED),
        plans=int(
            before is not None
            and after is not None
            and after.plan is not None
            and after.plan != before.plan
        ),
        durations=tuple(durations),
    )


# -- approvals seen ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeenApprovals:
    """The approval UIDs already counted seen (or found already reserved) for one
    resource's plan. An approval names one plan, so another plan forgets the last
    one's: what is remembered stays as small as the approvals of one plan."""

    plan: str | None
    uids: frozenset[str] = frozenset()


def approvals_seen(
    remembered: SeenApprovals | None, after: Facts | None, reasons: Sequence[str]
) -> tuple[int, SeenApprovals | None]:
    """Whether this pass saw an approval for the first time (0 or 1), and what to
    remember for the resource next (None: it is gone). Pure.

    An approval is seen when a pass finds it authorizing the resource's current plan
    and reserves it on a new Apply claim (the pass crossed ``Claimed``, and the status
    it wrote holds the approval). Spent (``ApprovalConsumed``) comes later, at
    dispatch; seen and not spent is a claim still on its way to its dispatch, or
    retired before it.

    Counted once per approval UID: a claim retired before dispatch leaves its approval
    unspent, and the next claim reserves the same one again, which is not counted
    again. A reservation met without ``Claimed`` (the first pass of a restarted
    manager or of a new leader, finding a claim its predecessor made) is remembered,
    not counted: its predecessor counted it. What is remembered lives as long as the
    process leads, so an approval reserved, retired unspent, and reserved again after
    a restart or a change of leader is seen by each manager that reserved it.
    """
    if after is None:
        return 0, None
    kept = remembered
    if kept is not None and after.plan is not None and after.plan != kept.plan:
        # Only another plan forgets: a plan dropped and adopted again keeps its UID,
        # and the approvals that name it.
        kept = None
    uid = after.approval
    if uid is None:
        return 0, kept
    known = kept.uids if kept is not None else frozenset()
    plan = after.plan if after.plan is not None or kept is None else kept.plan
    reserved_now = CLAIMED in reasons and after.claim is not None and after.claim.mutating
    return int(reserved_now and uid not in known), SeenApprovals(plan, known | {uid})


# -- stored plans ------------------------------------------------------------------------


def _size(obj: Object) -> int:
    return len(orjson.dumps(obj))


def stored_plans(schema_plans: Iterable[Object], migration_plans: Iterable[Object]) -> Gauges:
    """How many plans are stored, and their bytes, by kind. Pure.

    A schema plan's bytes are its object's and its chunks' (their sizes, as the plan's
    spec declares them, without reading the chunks); a migration plan is its object
    alone (it names migrations by digest and holds no SQL)."""
    values: dict[str, dict[Labels, float]] = {}
    for kind, plans in (
        ("PtahSchemaPlan", list(schema_plans)),
        ("PtahMigrationPlan", list(migration_plans)),
    ):
        total = 0
        for plan in plans:
            total += _size(plan)
            for chunk in (plan.get("spec") or {}).get("chunks") or []:
                size = chunk.get("size") if isinstance(chunk, dict) else None
                total += size if isinstance(size, int) else 0
        _put(values, "stored_plans", len(plans), kind=kind)
        _put(values, "stored_plan_bytes", total, kind=kind)
    return Gauges(values)
