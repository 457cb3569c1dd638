"""The conditions a person and a tool read: kstatus's Ready, Reconciling and Stalled,
beside the domain conditions. Pure, and derived from records only.

kstatus (the convention ``kubectl wait``, Flux and Argo CD read) asks three things:
is the resource where its spec wants it (``Ready``), is the controller still working
toward that (``Reconciling``, abnormal-true), and has it stopped being able to
(``Stalled``, abnormal-true). ``observedGeneration`` on each condition says which
spec it describes. The domain conditions say which rung of the ladder holds.

A condition's ``lastTransitionTime`` moves only when its status does, so a pass that
decides what the last one decided computes the same list and writes nothing.

The conditions that describe the phase and the records are derived in
``controller.pieces.statusconditions`` (which every status write passes through); a
publication adds the phase machine's words and the family's own conditions.
"""

from __future__ import annotations

from controller.context.passcontext import Family, Status, Subject
from controller.pieces.freshness import digest_pinned
from controller.pieces.phasemachine import Decision, Event
from controller.pieces.statusconditions import condition, derived, stamped
from controller.pieces.vocabulary import event_reason
from jobclaim import requested_reference, verification_policy, verified_as_asked
from jobclaim.api import Condition, PtahSchemaStatus


def drift_condition(status: PtahSchemaStatus) -> Condition:
    """A schema's ``DriftDetected``: what its last Observe found."""
    observation = status.observation
    return condition(
        "DriftDetected",
        bool(observation and observation.drift),
        "Drift" if observation and observation.drift else "NoDrift",
        f"{observation.finding_count} findings" if observation else "not observed yet",
    )


def conditions_for(
    family: Family, subject: Subject, status: Status, decision: Decision, *, now: str
) -> list[Condition]:
    """The conditions ``status`` (as this decision leaves it) publishes."""
    found = derived(
        subject, status, decision.event.value, pinned=digest_pinned(requested_reference(subject))
    )
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
        condition(
            "ArtifactResolved",
            source is not None,
            "Resolved" if source else "NotResolved",
            source.digest if source else "not resolved yet",
        ),
        condition(
            "ArtifactVerified",
            verified,
            "Verified" if verified else "NotVerified",
            verification.artifact_digest if verified and verification else "not verified yet",
        ),
        condition(
            "PlanReady",
            status.plan is not None,
            "PlanPublished" if status.plan else "NoPlan",
            status.plan.name if status.plan else "no plan stands",
        ),
        condition("Suspended", subject.spec.suspend, "Suspended", "spec.suspend"),
    ]
    # A publication is a pass past the realm gate: its refusal, if any, is over.
    return stamped(found, status.conditions, subject.metadata.generation, now, keep_others=False)
