"""The conditions a person and a tool read: kstatus's Ready, Reconciling and Stalled,
beside the domain conditions. Pure, and derived from records only.

kstatus (the convention ``kubectl wait``, Flux and Argo CD read) asks three things:
is the resource where its spec wants it (``Ready``), is the controller still working
toward that (``Reconciling``, abnormal-true), and has it stopped being able to
(``Stalled``, abnormal-true). ``observedGeneration`` on each condition says which
spec it describes. The domain conditions say which rung of the ladder holds.

A condition's ``lastTransitionTime`` moves only when its status does, so a pass that
decides what the last one decided computes the same list and writes nothing.
"""

from __future__ import annotations

from typing import Final

from controller.context.passcontext import Family, Status, Subject
from controller.pieces.phasemachine import Decision, Event, Wait
from controller.pieces.vocabulary import event_reason
from jobclaim import verification_policy, verified_as_asked
from jobclaim.api import Condition, PtahSchemaStatus

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


def conditions_for(
    family: Family, subject: Subject, status: Status, decision: Decision, *, now: str
) -> list[Condition]:
    """The conditions ``status`` (as this decision leaves it) publishes."""
    phase = status.phase or "Pending"
    failure = status.reading_failure
    generation = subject.metadata.generation
    failed = decision.event is Event.RETRY_NOT_DUE and failure is not None
    stalled = failed or phase == "Blocked"
    sentence = failure.message if failure else decision.event.value
    in_sync = phase == "InSync"
    found: list[Condition] = [
        _condition("Ready", in_sync, phase, decision.event.value),
        _condition(
            "Reconciling",
            phase in _WORKING or decision.wait is Wait.NONE,
            phase,
            decision.event.value,
        ),
        _condition("Stalled", stalled, "ReadingFailed" if failed else phase, sentence),
        _condition(
            "ReconciliationFailed",
            failure is not None,
            failure.operation + "Failed" if failure else "NoFailure",
            failure.message if failure else "the last reading succeeded",
        ),
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
        _condition(
            "ApprovalRequired",
            decision.event in (Event.AWAITING_APPROVAL, Event.APPLY_NEVER),
            event_reason(decision.event),
            decision.event.value,
        ),
        _condition("InSync", in_sync, "InSync" if in_sync else phase, decision.event.value),
        _condition("Suspended", subject.spec.suspend, "Suspended", "spec.suspend"),
    ]
    old = {c.type: c for c in status.conditions}
    out: list[Condition] = []
    for condition in found:
        before = old.get(condition.type)
        moved = before is None or before.status != condition.status
        out.append(
            condition.model_copy(
                update={
                    "observed_generation": generation,
                    "last_transition_time": now
                    if moved or before is None
                    else before.last_transition_time,
                }
            )
        )
    return out
