"""The phase machine: what a resource with no claim and no record claims next. Pure.

A pass that finds no claim, no pending observation and no release owed asks this
module what comes next. The answer is decided from records only (``Facts``: the
spec's generation against ``status.observedGeneration``, the readings recorded in
status, the plan that stands, the approval found, a failed reading's retry time),
never from the stored phase or a condition: a later refusal that rewrites a reason
or a phase must not change what is claimed. The phase is an output, for people and
tools; the claim is the only output that acts.

Both families walk the same ladder, each rung a reading with its own claim, Job,
record and harvest:

    Resolve -> Verify -> (schema) Observe -> Plan      -> approval -> Apply
                         (migration) History -> plan -> approval -> Apply

and fall back to the lowest rung whose record is missing: a spec change discards
everything resolved from the old spec (and the plan made from it, whose approvals
are then marked stale), so the resource resolves again. An in-sync resource is read
again every ``spec.interval``, and so is a waiting plan's database and a tag's
digest (``controller.pieces.freshness``): a refresh is claimed before anything above it,
so an approval is never consumed against a reading older than an interval, and a
refresh that failed stays due until it succeeds. A failed reading is not a rung: it is retried, with
backoff, at the time its record names, and nothing above it is claimed meanwhile.

``ROWS`` is the machine as a table (``docs/architecture.md``, "The phase machine",
is rendered from it by ``render_table``); a test walks every row through ``decide``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Final, Literal

FamilyName = Literal["schema", "migration"]


class Wait(Enum):
    """When the next pass is due if nothing wakes the resource earlier."""

    NONE = "now"  # a claim was made (or a write asks for the next pass at once)
    RETRY = "the failed reading's retry time"
    INTERVAL = "spec.interval after the last reading"
    PERSON = "a person (an approval, a policy or a spec change)"


class Event(Enum):
    """What the records say, in the order ``decide`` asks. The first that holds wins."""

    SUSPENDED = "spec.suspend is set"
    SPEC_CHANGED = "metadata.generation is not status.observedGeneration"
    RETRY_NOT_DUE = "a reading failed and its retry time has not come"
    NOT_RESOLVED = "no resolved artifact is recorded"
    NOT_VERIFIED = "the resolved artifact is not verified"
    RUN_UNRESOLVED = "an Apply's run is unresolved, and an interval passed since it (or a reading)"
    RUN_UNRESOLVED_READ = "an Apply's run is unresolved; the next History is not due"
    SOURCE_DUE = "the reference is a tag, and spec.interval has passed since it was resolved"
    REFRESH_DUE = "a plan stands, and spec.interval has passed since the database was read"
    APPLY_NEVER = "a plan stands; spec.policy.apply is Never"
    AWAITING_APPROVAL = "a plan stands and needs an approval none gives"
    APPROVED = "a plan stands and an approval authorizes it"
    NEEDS_NO_APPROVAL = "a plan stands; policy Always, nothing destructive, no privilege change"
    NOT_READ = "no reading since the artifact was verified (or since the last Apply)"
    READING_REFUSES = "the History reading refuses planning (dirty, modified, out of order)"
    CHANGES_FOUND = "the last reading found changes to make and no plan stands"
    READING_DUE = "in sync, and spec.interval has passed since the last reading"
    IN_SYNC = "in sync, and the next reading is not due"


@dataclass(frozen=True, slots=True)
class Facts:
    """What a pass read, reduced to what the machine decides from."""

    family: FamilyName
    suspended: bool = False
    spec_changed: bool = False
    retry_not_due: bool = False
    resolved: bool = False
    verified: bool = False
    # Migration only: status.unresolvedRun (its interval runs from the record too).
    run_unresolved: bool = False
    # A plan stands under the execution binding in force.
    plan: bool = False
    apply_never: bool = False
    needs_approval: bool = True
    approval_found: bool = False
    # The reading of the rung above Verify: a drift Observe, or a History.
    read: bool = False
    changes: bool = False  # drift found / migrations pending
    refuses: bool = False  # migration: the History refuses planning
    reading_due: bool = False
    # A reference not pinned by digest, not resolved within the last interval.
    source_due: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    event: Event
    phase: str
    claim: str | None
    wait: Wait
    # The standing plan is discarded (and its approvals marked stale) in the write
    # that publishes this decision.
    discard_plan: bool = False


def _reading(family: FamilyName) -> str:
    return "Observe" if family == "schema" else "History"


def _reading_phase(family: FamilyName) -> str:
    return "Observing" if family == "schema" else "Reading"


def decide(facts: Facts) -> Decision:
    """The next phase and the claim to make, from the records alone."""
    family = facts.family
    if facts.suspended:
        return Decision(Event.SUSPENDED, "Suspended", None, Wait.PERSON)
    if facts.spec_changed:
        # Everything resolved from the old spec is spent, and a plan made from it
        # would authorize work nobody reviewed against the new one.
        return Decision(Event.SPEC_CHANGED, "Resolving", "Resolve", Wait.NONE, facts.plan)
    if facts.retry_not_due:
        return Decision(Event.RETRY_NOT_DUE, "Failed", None, Wait.RETRY)
    if not facts.resolved:
        return Decision(Event.NOT_RESOLVED, "Resolving", "Resolve", Wait.NONE)
    if not facts.verified:
        return Decision(Event.NOT_VERIFIED, "Verifying", "Verify", Wait.NONE)
    if family == "migration" and facts.run_unresolved:
        # Only a reading (or a person's acknowledgment) settles a run nobody
        # accounted for; no plan is made meanwhile. The reading waits an interval
        # from the record (or the last reading), so an executor that may still be
        # stopping is not read half-way, and a run that stays unsettled costs one
        # reading per interval.
        if facts.reading_due:
            return Decision(Event.RUN_UNRESOLVED, "Reading", "History", Wait.NONE)
        return Decision(Event.RUN_UNRESOLVED_READ, "Blocked", None, Wait.INTERVAL)
    if facts.source_due:
        # A tag may name new bytes: nothing is planned or applied from the old ones
        # until the reference is read again.
        return Decision(Event.SOURCE_DUE, "Resolving", "Resolve", Wait.NONE)
    if facts.plan:
        if facts.reading_due:
            # The database may have moved under the plan: read it before an approval
            # is consumed, and on every interval while the plan waits.
            return Decision(Event.REFRESH_DUE, _reading_phase(family), _reading(family), Wait.NONE)
        if facts.apply_never:
            return Decision(Event.APPLY_NEVER, "AwaitingApproval", None, Wait.INTERVAL)
        if not facts.needs_approval:
            return Decision(Event.NEEDS_NO_APPROVAL, "Applying", "Apply", Wait.NONE)
        if facts.approval_found:
            return Decision(Event.APPROVED, "Applying", "Apply", Wait.NONE)
        # A person wakes it (an approval is watched), and the refresh an interval does.
        return Decision(Event.AWAITING_APPROVAL, "AwaitingApproval", None, Wait.INTERVAL)
    if not facts.read:
        return Decision(Event.NOT_READ, _reading_phase(family), _reading(family), Wait.NONE)
    if facts.refuses:
        if facts.reading_due:
            return Decision(Event.READING_DUE, "Reading", "History", Wait.NONE)
        return Decision(Event.READING_REFUSES, "Blocked", None, Wait.INTERVAL)
    if facts.changes:
        # A schema plans under the Lease; a migration's plan is published from the
        # History reading itself, so changes with no plan mean that reading is gone.
        claim = "Plan" if family == "schema" else "History"
        phase = "Planning" if family == "schema" else "Reading"
        return Decision(Event.CHANGES_FOUND, phase, claim, Wait.NONE)
    if facts.reading_due:
        return Decision(Event.READING_DUE, _reading_phase(family), _reading(family), Wait.NONE)
    return Decision(Event.IN_SYNC, "InSync", None, Wait.INTERVAL)


# -- the machine as a table -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One transition: the phase a resource typically shows before (documentation
    only: no decision reads it), the facts, and what ``decide`` must answer."""

    before: str
    facts: Facts
    event: Event
    after: str
    claim: str | None
    discard_plan: bool = False


_S: Final = Facts("schema")
_M: Final = Facts("migration")
_SV: Final = replace(_S, resolved=True, verified=True)
_MV: Final = replace(_M, resolved=True, verified=True)


def _rows() -> tuple[Row, ...]:
    s_plan = replace(_SV, read=True, changes=True, plan=True)
    m_plan = replace(_MV, read=True, changes=True, plan=True)
    return (
        # PtahSchema
        Row("Pending", _S, Event.NOT_RESOLVED, "Resolving", "Resolve"),
        Row("Resolving", replace(_S, resolved=True), Event.NOT_VERIFIED, "Verifying", "Verify"),
        Row("Verifying", _SV, Event.NOT_READ, "Observing", "Observe"),
        Row("Observing", replace(_SV, read=True), Event.IN_SYNC, "InSync", None),
        Row(
            "Observing",
            replace(_SV, read=True, changes=True),
            Event.CHANGES_FOUND,
            "Planning",
            "Plan",
        ),
        Row("Planning", s_plan, Event.AWAITING_APPROVAL, "AwaitingApproval", None),
        Row(
            "AwaitingApproval",
            replace(s_plan, approval_found=True),
            Event.APPROVED,
            "Applying",
            "Apply",
        ),
        Row(
            "ReadyToApply",
            replace(s_plan, needs_approval=False),
            Event.NEEDS_NO_APPROVAL,
            "Applying",
            "Apply",
        ),
        Row(
            "Planning",
            replace(s_plan, apply_never=True),
            Event.APPLY_NEVER,
            "AwaitingApproval",
            None,
        ),
        Row(
            "InSync",
            replace(_SV, read=True, reading_due=True),
            Event.READING_DUE,
            "Observing",
            "Observe",
        ),
        Row(
            "InSync",
            replace(_SV, read=True, spec_changed=True),
            Event.SPEC_CHANGED,
            "Resolving",
            "Resolve",
        ),
        Row(
            "AwaitingApproval",
            replace(s_plan, spec_changed=True),
            Event.SPEC_CHANGED,
            "Resolving",
            "Resolve",
            discard_plan=True,
        ),
        Row(
            "Failed",
            replace(_S, resolved=True, retry_not_due=True),
            Event.RETRY_NOT_DUE,
            "Failed",
            None,
        ),
        Row("Failed", replace(_S, resolved=True), Event.NOT_VERIFIED, "Verifying", "Verify"),
        Row(
            "Failed",
            replace(s_plan, retry_not_due=True, approval_found=True),
            Event.RETRY_NOT_DUE,
            "Failed",
            None,
        ),
        Row("InSync", replace(_SV, read=True, suspended=True), Event.SUSPENDED, "Suspended", None),
        Row(
            "InSync",
            replace(_SV, read=True, source_due=True),
            Event.SOURCE_DUE,
            "Resolving",
            "Resolve",
        ),
        Row(
            "AwaitingApproval",
            replace(s_plan, source_due=True, approval_found=True),
            Event.SOURCE_DUE,
            "Resolving",
            "Resolve",
        ),
        Row(
            "AwaitingApproval",
            replace(s_plan, reading_due=True),
            Event.REFRESH_DUE,
            "Observing",
            "Observe",
        ),
        Row(
            "AwaitingApproval",
            replace(s_plan, reading_due=True, approval_found=True),
            Event.REFRESH_DUE,
            "Observing",
            "Observe",
        ),
        Row(
            "Failed",
            replace(s_plan, source_due=True, retry_not_due=True, approval_found=True),
            Event.RETRY_NOT_DUE,
            "Failed",
            None,
        ),
        # PtahMigration
        Row("Pending", _M, Event.NOT_RESOLVED, "Resolving", "Resolve"),
        Row("Resolving", replace(_M, resolved=True), Event.NOT_VERIFIED, "Verifying", "Verify"),
        Row("Verifying", _MV, Event.NOT_READ, "Reading", "History"),
        Row("VerifyingHistory", _MV, Event.NOT_READ, "Reading", "History"),
        Row("Reading", replace(_MV, read=True), Event.IN_SYNC, "InSync", None),
        Row(
            "Reading",
            replace(_MV, read=True, changes=True),
            Event.CHANGES_FOUND,
            "Reading",
            "History",
        ),
        Row("AwaitingApproval", m_plan, Event.AWAITING_APPROVAL, "AwaitingApproval", None),
        Row(
            "AwaitingApproval",
            replace(m_plan, approval_found=True),
            Event.APPROVED,
            "Applying",
            "Apply",
        ),
        Row(
            "AwaitingApproval",
            replace(m_plan, needs_approval=False),
            Event.NEEDS_NO_APPROVAL,
            "Applying",
            "Apply",
        ),
        Row(
            "AwaitingApproval",
            replace(m_plan, apply_never=True),
            Event.APPLY_NEVER,
            "AwaitingApproval",
            None,
        ),
        Row(
            "Reading", replace(_MV, read=True, refuses=True), Event.READING_REFUSES, "Blocked", None
        ),
        Row(
            "Blocked",
            replace(_MV, read=True, refuses=True, reading_due=True),
            Event.READING_DUE,
            "Reading",
            "History",
        ),
        Row(
            "Blocked", replace(_MV, run_unresolved=True), Event.RUN_UNRESOLVED_READ, "Blocked", None
        ),
        Row(
            "Blocked",
            replace(_MV, run_unresolved=True, reading_due=True),
            Event.RUN_UNRESOLVED,
            "Reading",
            "History",
        ),
        Row(
            "InSync",
            replace(_MV, read=True, reading_due=True),
            Event.READING_DUE,
            "Reading",
            "History",
        ),
        Row(
            "AwaitingApproval",
            replace(m_plan, spec_changed=True),
            Event.SPEC_CHANGED,
            "Resolving",
            "Resolve",
            discard_plan=True,
        ),
        Row("Failed", replace(_MV, retry_not_due=True), Event.RETRY_NOT_DUE, "Failed", None),
        Row("InSync", replace(_MV, read=True, suspended=True), Event.SUSPENDED, "Suspended", None),
        Row(
            "AwaitingApproval",
            replace(m_plan, source_due=True),
            Event.SOURCE_DUE,
            "Resolving",
            "Resolve",
        ),
        Row(
            "AwaitingApproval",
            replace(m_plan, reading_due=True, approval_found=True),
            Event.REFRESH_DUE,
            "Reading",
            "History",
        ),
        Row(
            "Blocked",
            replace(_MV, run_unresolved=True, source_due=True),
            Event.RUN_UNRESOLVED_READ,
            "Blocked",
            None,
        ),
    )


ROWS: Final = _rows()

TABLE_BEGIN: Final = (
    "<!-- phase-machine table: generated by controller.pieces.phasemachine.render_table -->"
)
TABLE_END: Final = "<!-- end of the phase-machine table -->"


def render_table(rows: tuple[Row, ...] = ROWS) -> str:
    """The table ``docs/architecture.md`` carries, one line per row."""
    lines = [
        TABLE_BEGIN,
        "| family | phase before | event (what the records say) | phase after | claim made |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        claim = row.claim or "none"
        if row.discard_plan:
            claim += " (the plan is discarded, its approvals marked Stale)"
        family = "PtahSchema" if row.facts.family == "schema" else "PtahMigration"
        lines.append(f"| {family} | {row.before} | {row.event.value} | {row.after} | {claim} |")
    lines.append(TABLE_END)
    return "\n".join(lines) + "\n"
