"""The conditions a status write must carry, derived from the status itself. Pure.

Every condition that describes the phase (Ready, Reconciling, Progressing, Stalled,
Blocked, InSync, ApprovalRequired) or a record (a failed reading, the source's
freshness, the database's reachability) is derived from the status being written,
and ``PassContext.write_status`` passes every status write through ``aligned``: no
write can store a phase beside conditions that describe another (a retirement that
sets VerifyingConvergence once left Ready=False(Applying) behind). The phase
machine's publication (``controller.stages.conditions.conditions_for``) builds on
``derived`` and ``stamped`` and adds only its decision's words.

A condition's ``lastTransitionTime`` moves only when its status does, so a pass that
decides what the last one decided computes the same list and writes nothing. Typed on
the resource and status models, not on a pass: ``controller.context`` calls it.
"""

from __future__ import annotations

from typing import Final

from controller.pieces.freshness import (
    DATABASE_READINGS,
    SOURCE_READING,
    history_refusal,
)
from jobclaim.api import (
    Condition,
    PtahMigration,
    PtahMigrationStatus,
    PtahSchema,
    PtahSchemaStatus,
)

__all__ = ["FAMILY_OWNED", "OWNED", "aligned", "condition", "derived", "stamped"]

# The same unions as ``controller.context.passcontext``'s, which this room cannot import.
Subject = PtahSchema | PtahMigration
Status = PtahSchemaStatus | PtahMigrationStatus

_WORKING: Final = frozenset(
    {
        "Pending",
        "Resolving",
        "Verifying",
        "Observing",
        "Planning",
        "Reading",
        "ReadyToApply",
        "Applying",
        "VerifyingConvergence",
        "VerifyingHistory",
    }
)


def condition(kind: str, true: bool, reason: str, message: str) -> Condition:
    """A True/False condition without its generation or transition time."""
    return Condition(type=kind, status="True" if true else "False", reason=reason, message=message)


# The readings whose failure is a refresh of what the resource stands on.
_REFRESHES: Final = frozenset({SOURCE_READING, "Observe", "History"})


def _read_database(status: Status) -> bool:
    if isinstance(status, PtahSchemaStatus):
        return status.observation is not None
    return status.history is not None


def _blocked_reason(status: Status) -> str:
    if isinstance(status, PtahMigrationStatus):
        if status.unresolved_run is not None:
            return "RunUnresolved"
        refusal = history_refusal(status.history)
        if refusal is not None:
            return refusal
    return "Blocked"


def derived(
    subject: Subject, status: Status, message: str | None, *, pinned: bool
) -> list[Condition]:
    """The conditions the status itself says, in their order. ``message`` is the
    phase machine's word for the phase-tied ones; without it, the phase's. ``pinned``
    (the reference names its bytes by digest, ``freshness.digest_pinned``) is read by
    the writer with the clock, so the derivation reaches for nothing."""
    phase = status.phase or "Pending"
    failure = status.reading_failure
    said = message or f"phase {phase}"
    in_sync = phase == "InSync"
    working = phase in _WORKING
    blocked = phase == "Blocked"
    operation = failure.operation if failure else None
    sentence = failure.message if failure else said
    resolved = (
        status.source if isinstance(status, PtahSchemaStatus) else status.artifact
    ) is not None
    refresh = failure is not None and resolved and operation in _REFRESHES
    engine = subject.spec.target.engine
    unsupported = failure is not None and failure.code == "dialect_mismatch"
    database_failed = failure is not None and operation in DATABASE_READINGS
    return [
        condition("Ready", in_sync, phase, said),
        condition("Reconciling", working, phase, said),
        condition("Progressing", working, phase, said),
        condition(
            "Stalled",
            phase in ("Failed", "Blocked"),
            "ReadingFailed" if phase == "Failed" and failure else phase,
            sentence if phase == "Failed" else said,
        ),
        condition(
            "Blocked",
            blocked,
            _blocked_reason(status) if blocked else "NotBlocked",
            said,
        ),
        condition(
            "ReconciliationFailed",
            failure is not None,
            failure.operation + "Failed" if failure else "NoFailure",
            failure.message if failure else "the last reading succeeded",
        ),
        condition(
            "SourceFreshnessUnknown",
            operation == SOURCE_READING,
            "ResolveFailed"
            if operation == SOURCE_READING
            else ("DigestPinned" if pinned else "SourceFresh"),
            sentence
            if operation == SOURCE_READING
            else (
                "the reference is pinned by digest"
                if pinned
                else f"the reference was last resolved at {status.source_checked_at or '-'}"
            ),
        ),
        condition(
            "RefreshFailed",
            refresh,
            f"{operation}Failed" if refresh else "RefreshSucceeded",
            sentence if refresh else "the last refresh succeeded",
        ),
        Condition(
            type="DatabaseReachable",
            status="False"
            if database_failed
            else ("True" if _read_database(status) else "Unknown"),
            reason=f"{operation}Failed"
            if database_failed
            else ("Reachable" if _read_database(status) else "NotRead"),
            message=sentence if database_failed else "the last reading of the database",
        ),
        condition(
            "EngineSupported",
            not unsupported,
            "DialectMismatch" if unsupported else "Supported",
            sentence if unsupported else engine,
        ),
        condition(
            "ApprovalRequired",
            phase == "AwaitingApproval",
            "AwaitingApproval" if phase == "AwaitingApproval" else phase,
            said,
        ),
        condition("InSync", in_sync, "InSync" if in_sync else phase, said),
    ]


def stamped(
    found: list[Condition],
    old: list[Condition],
    generation: int | None,
    now: str,
    *,
    keep_others: bool,
) -> list[Condition]:
    """``found`` with observedGeneration, and lastTransitionTime kept unless the
    status moved; with ``keep_others``, a condition ``found`` does not name (the realm
    gate's) is kept."""
    before = {c.type: c for c in old}
    named = {c.type for c in found}
    out: list[Condition] = []
    for one in found:
        was = before.get(one.type)
        moved = was is None or was.status != one.status
        out.append(
            one.model_copy(
                update={
                    "observed_generation": generation,
                    "last_transition_time": now
                    if moved or was is None
                    else was.last_transition_time,
                }
            )
        )
    if not keep_others:
        return out
    return out + [c for c in old if c.type not in named and c.type not in OWNED]


def aligned(subject: Subject, status: Status, *, now: str, pinned: bool) -> list[Condition]:
    """The conditions ``status`` must carry when it is written: every derived one made
    to describe it, the words of one that already does kept (they are the phase
    machine's). Pure; what ``PassContext.write_status`` writes."""
    old = {c.type: c for c in status.conditions}
    found: list[Condition] = []
    for one in derived(subject, status, None, pinned=pinned):
        was = old.get(one.type)
        if was is not None and (was.status, was.reason) == (one.status, one.reason):
            one = one.model_copy(update={"message": was.message})  # noqa: PLW2901
        found.append(one)
    own = [c for c in status.conditions if c.type in FAMILY_OWNED]
    generation = subject.metadata.generation
    # The realm gate's refusal is written through here too: it is kept.
    return stamped(found + own, status.conditions, generation, now, keep_others=True)


# The conditions ``aligned`` leaves as the last publication wrote them (they describe
# records, not the phase: the artifact, the plan, the drift, the spec).
FAMILY_OWNED: Final = frozenset(
    {"DriftDetected", "ArtifactResolved", "ArtifactVerified", "PlanReady", "Suspended"}
)
# Every condition this module or a publication writes; another's (the realm gate's) is carried over.
OWNED: Final = frozenset(
    {
        "Ready",
        "Reconciling",
        "Progressing",
        "Stalled",
        "Blocked",
        "ReconciliationFailed",
        "SourceFreshnessUnknown",
        "RefreshFailed",
        "DatabaseReachable",
        "EngineSupported",
        "ApprovalRequired",
        "InSync",
    }
    | FAMILY_OWNED
)
