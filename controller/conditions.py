"""The conditions a person and a tool read: kstatus's Ready, Reconciling and Stalled,
beside the domain conditions. Pure, and derived from records only.

kstatus (the convention ``kubectl wait``, Flux and Argo CD read) asks three things:
is the resource where its spec wants it (``Ready``), is the controller still working
toward that (``Reconciling``, abnormal-true), and has it stopped being able to
(``Stalled``, abnormal-true). ``observedGeneration`` on each condition says which
spec it describes. The domain conditions say which rung of the ladder holds.

A condition's ``lastTransitionTime`` moves only when its status does, so a pass that
decides what the last one decided computes the same list and writes nothing.

Every condition that describes the phase (Ready, Reconciling, Progressing, Stalled,
Blocked, InSync, ApprovalRequired) or a record (a failed reading, the source's
freshness, the database's reachability) is derived from the status being written,
and ``PassContext.write_status`` passes every status write through ``aligned``: no
write can store a phase beside conditions that describe another (a retirement that
sets VerifyingConvergence once left Ready=False(Applying) behind). The phase
machine's publication (``conditions_for``) adds only its decision's words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from controller.conditionreasons import event_reason
from controller.freshness import (
    DATABASE_READINGS,
    SOURCE_READING,
    digest_pinned,
    history_refusal,
)
from controller.phasemachine import Decision, Event
from jobclaim import requested_reference, verification_policy, verified_as_asked
from jobclaim.api import Condition, PtahMigrationStatus, PtahSchemaStatus

if TYPE_CHECKING:  # passcontext writes status through ``aligned``: types only here
    from controller.passcontext import Family, Status, Subject

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


def _condition(kind: str, true: bool, reason: str, message: str) -> Condition:
    return Condition(type=kind, status="True" if true else "False", reason=reason, message=message)


def drift_condition(status: PtahSchemaStatus) -> Condition:
    """A schema's ``DriftDetected``: what its last Observe found."""
    observation = status.observation
    return _condition(
        "DriftDetected",
        bool(observation and observation.drift),
        "Drift" if observation and observation.drift else "NoDrift",
        f"{observation.finding_count} findings" if observation else "not observed yet",
    )


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


def _derived(subject: Subject, status: Status, message: str | None) -> list[Condition]:
    """The conditions the status itself says, in their order. ``message`` is the
    phase machine's word for the phase-tied ones; without it, the phase's."""
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
    pinned = digest_pinned(requested_reference(subject))
    engine = subject.spec.target.engine
    unsupported = failure is not None and failure.code == "dialect_mismatch"
    database_failed = failure is not None and operation in DATABASE_READINGS
    return [
        _condition("Ready", in_sync, phase, said),
        _condition("Reconciling", working, phase, said),
        _condition("Progressing", working, phase, said),
        _condition(
            "Stalled",
            phase in ("Failed", "Blocked"),
            "ReadingFailed" if phase == "Failed" and failure else phase,
            sentence if phase == "Failed" else said,
        ),
        _condition(
            "Blocked",
            blocked,
            _blocked_reason(status) if blocked else "NotBlocked",
            said,
        ),
        _condition(
            "ReconciliationFailed",
            failure is not None,
            failure.operation + "Failed" if failure else "NoFailure",
            failure.message if failure else "the last reading succeeded",
        ),
        _condition(
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
        _condition(
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
        _condition(
            "EngineSupported",
            not unsupported,
            "DialectMismatch" if unsupported else "Supported",
            sentence if unsupported else engine,
        ),
        _condition(
            "ApprovalRequired",
            phase == "AwaitingApproval",
            "AwaitingApproval" if phase == "AwaitingApproval" else phase,
            said,
        ),
        _condition("InSync", in_sync, "InSync" if in_sync else phase, said),
    ]


def _stamped(
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
    for condition in found:
        was = before.get(condition.type)
        moved = was is None or was.status != condition.status
        out.append(
            condition.model_copy(
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
    return out + [c for c in old if c.type not in named and c.type not in _OWNED]


def aligned(subject: Subject, status: Status, *, now: str) -> list[Condition]:
    """The conditions ``status`` must carry when it is written: every derived one made
    to describe it, the words of one that already does kept (they are the phase
    machine's). Pure; what ``PassContext.write_status`` writes."""
    old = {c.type: c for c in status.conditions}
    found: list[Condition] = []
    for derived in _derived(subject, status, None):
        was = old.get(derived.type)
        if was is not None and (was.status, was.reason) == (derived.status, derived.reason):
            derived = derived.model_copy(update={"message": was.message})  # noqa: PLW2901
        found.append(derived)
    own = [c for c in status.conditions if c.type in _FAMILY_OWNED]
    generation = subject.metadata.generation
    # The realm gate's refusal is written through here too: it is kept.
    return _stamped(found + own, status.conditions, generation, now, keep_others=True)


def conditions_for(
    family: Family, subject: Subject, status: Status, decision: Decision, *, now: str
) -> list[Condition]:
    """The conditions ``status`` (as this decision leaves it) publishes."""
    found = _derived(subject, status, decision.event.value)
    if decision.event in (Event.AWAITING_APPROVAL, Event.APPLY_NEVER):
        found = [
            c.model_copy(update={"reason": event_reason(decision.event)})
            if c.type == "ApprovalRequired"
            else c
            for c in found
        ]
    found += family.own_conditions(status)
    source, verification = family.artifact(status), status.verification
    # Verified as the spec asks (one rule with the phase machine's facts and admission):
    # a verification made under no policy where the spec names one is not.
    verified = verified_as_asked(verification_policy(subject), source, verification)
    found += [
        _condition(
            "ArtifactResolved",
            source is not None,
            "Resolved" if source else "NotResolved",
            source.digest if source else "not resolved yet",
        ),
        _condition(
            "ArtifactVerified",
            verified,
            "Verified" if verified else "NotVerified",
            verification.artifact_digest if verified and verification else "not verified yet",
        ),
        _condition(
            "PlanReady",
            status.plan is not None,
            "PlanPublished" if status.plan else "NoPlan",
            status.plan.name if status.plan else "no plan stands",
        ),
        _condition("Suspended", subject.spec.suspend, "Suspended", "spec.suspend"),
    ]
    # A publication is a pass past the realm gate: its refusal, if any, is over.
    return _stamped(found, status.conditions, subject.metadata.generation, now, keep_others=False)


# The conditions ``aligned`` leaves as the last publication wrote them (they describe
# records, not the phase: the artifact, the plan, the drift, the spec).
_FAMILY_OWNED: Final = frozenset(
    {"DriftDetected", "ArtifactResolved", "ArtifactVerified", "PlanReady", "Suspended"}
)
# Every condition this module writes; another's (the realm gate's) is carried over.
_OWNED: Final = frozenset(
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
    | _FAMILY_OWNED
)
