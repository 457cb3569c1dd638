"""The vocabulary a platform team automates on: every condition type and reason, and
every Event reason, the controller can publish, with what it means, the object it lands
on and what a person does about it. Pure data.

A reason absent from here is a reason nobody can write an alert or a runbook against,
so the code is held to it: ``PassContext.crossed`` takes an ``EventReason`` only (mypy
refuses any other literal), and tests walk ``conditions_for`` over every phase, event
and failure and scan every ``crossed(...)`` call. ``docs/reference/conditions.md`` and
``docs/reference/events.md`` are rendered from these tables
(``python -m controller.pieces.vocabulary conditions|events``) and a test keeps the committed
files equal to the render. The condition table is ``controller.pieces.conditionreasons``
(re-exported here): the Event half and the condition half are each one module.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from controller.pieces.conditionreasons import (
    BOTH,
    CONDITIONS,
    MIGRATION,
    PHASES,
    READINGS,
    SCHEMA,
    event_reason,
)

EventReason = Literal[
    "AcknowledgmentUnstamped",
    "AdmissionResolved",
    "AdmissionUnresolvable",
    "ApprovalConsumed",
    "ApprovalUnstamped",
    "ApprovalsStale",
    "AttemptRetried",
    "ClaimRetired",
    "Claimed",
    "ConvergedAfterUnknownOutcome",
    "CreateUncertain",
    "DispatchMarked",
    "DispatchWithdrawn",
    "ExecutionBindingInstalled",
    "ExecutionBindingRotated",
    "FinalizerRemoved",
    "JobAdopted",
    "JobCreated",
    "LeaseContinuityLost",
    "LeaseLeftToExpire",
    "LeaseMalformed",
    "OperationStarted",
    "OutcomeUnknown",
    "PlanDiscarded",
    "PlanProjected",
    "ProofAbandoned",
    "ProofRestarted",
    "ProofSettled",
    "ReadingFailed",
    "ReadingRecorded",
    "RealmBusy",
    "RealmLocked",
    "RealmRefused",
    "RealmReleased",
    "RetiredClaimEnded",
    "RetiredJobAdopted",
    "RunAcknowledged",
    "RunUnresolved",
    "SettlementUnstamped",
    "UnresolvedRunCopyUnreadable",
    "UnresolvedRunDeleted",
    "UnresolvedRunRestored",
]

EventType = Literal["Normal", "Warning"]

_NOTHING: Final = "Nothing; it is a record of progress."
# The condition registry lives in controller.pieces.conditionreasons; its names are this
# module's too, so the vocabulary is asked in one place.
__all__ = [
    "CONDITIONS",
    "EVENTS",
    "PHASES",
    "READINGS",
    "EventDoc",
    "EventReason",
    "event_reason",
    "main",
    "render_conditions",
    "render_events",
]


@dataclass(frozen=True, slots=True)
class EventDoc:
    type: EventType
    kinds: tuple[str, ...]
    meaning: str
    action: str = _NOTHING


# -- Events ------------------------------------------------------------------------------

EVENTS: Final[Mapping[EventReason, EventDoc]] = {
    "AcknowledgmentUnstamped": EventDoc(
        "Warning",
        (MIGRATION,),
        "An acknowledgment of an unresolved run was skipped: it does not carry the "
        "admission webhook's stamp (it bypassed admission, or was copied).",
        "Delete it and create it again through the API server with the webhook serving.",
    ),
    "AdmissionResolved": EventDoc(
        "Normal", BOTH, "The admission snapshot a mutating claim runs under is durable."
    ),
    "AdmissionUnresolvable": EventDoc(
        "Warning",
        BOTH,
        "The admission snapshot for an Apply could not be resolved; nothing is dispatched.",
        "Read the note; check the admission policy objects it names and the webhook.",
    ),
    "ApprovalConsumed": EventDoc(
        "Normal", BOTH, "An approval was spent on the Apply now claimed; it authorizes no other."
    ),
    "ApprovalUnstamped": EventDoc(
        "Warning",
        BOTH,
        "An approval matching the plan was skipped: it does not carry the admission "
        "webhook's stamp.",
        "Create the approval again through admission (`kubectl ptah approve`).",
    ),
    "ApprovalsStale": EventDoc(
        "Normal",
        BOTH,
        "Approvals of a plan retired by an execution-binding rotation were marked stale.",
        "Review the new plan and approve it if it is still wanted.",
    ),
    "AttemptRetried": EventDoc(
        "Normal", BOTH, "A claim's Job was lost before it ran; a new attempt was claimed."
    ),
    "ClaimRetired": EventDoc(
        "Normal", BOTH, "A claim ended without (or after) its Job; the note says why."
    ),
    "Claimed": EventDoc("Normal", BOTH, "An operation (Resolve, Plan, Apply, ...) was claimed."),
    "ConvergedAfterUnknownOutcome": EventDoc(
        "Normal",
        (SCHEMA,),
        "An Apply whose outcome was unknown was proven: the database matches its plan.",
    ),
    "CreateUncertain": EventDoc(
        "Warning",
        BOTH,
        "The Job create's outcome is unknown (a timeout or a lost answer); the next pass "
        "finds the Job or withdraws the dispatch.",
        "Nothing unless it repeats; then check the API server's health.",
    ),
    "DispatchMarked": EventDoc("Normal", BOTH, "The claim is marked dispatched: a Job may exist."),
    "DispatchWithdrawn": EventDoc(
        "Warning",
        BOTH,
        "The API server refused the Job create; the dispatch is withdrawn.",
        "Read the refusal in the note (quota, policy, RBAC) and fix it.",
    ),
    "ExecutionBindingInstalled": EventDoc(
        "Normal", BOTH, "The resource runs its work under an execution binding epoch."
    ),
    "ExecutionBindingRotated": EventDoc(
        "Normal", BOTH, "The resource's work now runs under a new execution binding epoch."
    ),
    "FinalizerRemoved": EventDoc(
        "Normal", BOTH, "Nothing holds the deleted resource any longer; its finalizer is gone."
    ),
    "JobAdopted": EventDoc("Normal", BOTH, "A Job created earlier was found and adopted."),
    "JobCreated": EventDoc("Normal", BOTH, "The claim's Job was created."),
    "LeaseContinuityLost": EventDoc(
        "Warning",
        BOTH,
        "The database realm's Lease is no longer the tenure the running Job began under.",
        "Check for another writer to the database realm; the run's outcome is proven "
        "before anything else is claimed.",
    ),
    "LeaseLeftToExpire": EventDoc(
        "Warning",
        BOTH,
        "A retired Apply may still write, so its realm Lease is left to expire rather "
        "than released.",
        "Wait for the Lease to expire; check the Job's Pod if it does not stop.",
    ),
    "LeaseMalformed": EventDoc(
        "Warning",
        BOTH,
        "The database realm's Lease cannot be read as a ptah Lease; nothing is claimed.",
        "Inspect the Lease the note names; delete it if nothing holds the realm.",
    ),
    "OperationStarted": EventDoc(
        "Normal", BOTH, "The claim's Job is recorded by UID: the operation has started."
    ),
    "OutcomeUnknown": EventDoc(
        "Warning",
        BOTH,
        "A Job's outcome cannot be known (its result is lost or unreadable).",
        "For an Apply, the resource proves its state next; follow the runbook for "
        "unknown outcomes.",
    ),
    "PlanDiscarded": EventDoc(
        "Normal",
        BOTH,
        "The standing plan was discarded and its approvals marked Stale: the spec changed, "
        "the reference moved to new bytes, or a refresh read a database (or a history) "
        "other than the one the plan was made from. The note says which.",
        "Review the plan made next and approve it if it is still wanted.",
    ),
    "PlanProjected": EventDoc(
        "Normal", (SCHEMA,), "The approved plan is projected for the Apply Pod to read."
    ),
    "ProofAbandoned": EventDoc(
        "Warning",
        (SCHEMA,),
        "The schema is deleted while the proof of an Apply is still owed.",
        "Check the database by hand: no one will prove what the last Apply did.",
    ),
    "ProofRestarted": EventDoc(
        "Warning",
        (SCHEMA,),
        "The proof of an Apply restarts (its reading was lost, or the Lease changed hands).",
        "Nothing unless it repeats; then check the Observe Jobs and the realm Lease.",
    ),
    "ProofSettled": EventDoc(
        "Warning",
        (SCHEMA,),
        "A person settled an owed proof with a settlement; no Apply outcome is attributed.",
        "Nothing; the settlement's author answers for the database's state.",
    ),
    "ReadingFailed": EventDoc(
        "Warning",
        BOTH,
        "A reading (Resolve, Verify, Observe, Plan, History) failed; it is retried with backoff.",
        "Read the executor's sentence in the note and `status.readingFailure`; fix the "
        "registry, credentials or database it names.",
    ),
    "ReadingRecorded": EventDoc("Normal", BOTH, "A reading's result was recorded in status."),
    "RealmBusy": EventDoc(
        "Normal",
        BOTH,
        "Another claim holds the database realm; this one waits its turn.",
        "Nothing unless the wait is long; then see which resource holds the realm Lease.",
    ),
    "RealmLocked": EventDoc("Normal", BOTH, "The database realm's Lease is held for this claim."),
    "RealmRefused": EventDoc(
        "Warning",
        BOTH,
        "The PtahRealm the spec names does not let this resource take its Lease (missing, "
        "another engine, the namespace not admitted, shared uninvited, or unreadable); the "
        "note gives the reason. Said once while the refusal is unchanged.",
        "Read the RealmAdmitted condition; ask the realm's administrator to admit the "
        "namespace or share the realm, or name another realm.",
    ),
    "RealmReleased": EventDoc("Normal", BOTH, "The database realm's Lease was released."),
    "RetiredClaimEnded": EventDoc(
        "Normal", BOTH, "A claim retired by a binding rotation has ended."
    ),
    "RetiredJobAdopted": EventDoc(
        "Normal", BOTH, "The Job of a retired Apply was found and adopted so its outcome is known."
    ),
    "RunAcknowledged": EventDoc(
        "Normal", (MIGRATION,), "A person acknowledged an unresolved run; migration goes on."
    ),
    "RunUnresolved": EventDoc(
        "Warning",
        (MIGRATION,),
        "A migration run ended Failed, Partial or Unknown; nothing more is applied until "
        "it is settled.",
        "Inspect the database, then acknowledge the run (`kubectl ptah acknowledge`).",
    ),
    "SettlementUnstamped": EventDoc(
        "Warning",
        (SCHEMA,),
        "A proof settlement was skipped: it does not carry the admission webhook's stamp.",
        "Create the settlement again through admission.",
    ),
    "UnresolvedRunCopyUnreadable": EventDoc(
        "Warning",
        (MIGRATION,),
        "The annotation copy of an unresolved run cannot be read, so it cannot restore "
        "the run's record.",
        "Inspect the `operator.ptah.run/unresolved-run` annotation the note names.",
    ),
    "UnresolvedRunDeleted": EventDoc(
        "Warning",
        (MIGRATION,),
        "A migration was deleted with an unresolved run never settled.",
        "Check the database by hand: the run's outcome is not known.",
    ),
    "UnresolvedRunRestored": EventDoc(
        "Normal",
        (MIGRATION,),
        "An unresolved run's record was restored from its annotation copy.",
    ),
}


# -- rendering ---------------------------------------------------------------------------

_EVENTS_HEAD: Final = """\
# Events

<!-- Generated by `python -m controller.pieces.vocabulary events`; do not edit. -->

Every Event the controller sends, from `controller/pieces/vocabulary.py`. Events are
`events.k8s.io/v1`, reported by `operator.ptah.run/ptah-operator`, and regard the
resource named in "Lands on". A repeat of the same reason and message about the same
object is one Event whose `series.count` grows, not a new Event. Events are telemetry:
the API server may expire them, and no decision reads one; `status` is the record.
"""

_CONDITIONS_HEAD: Final = """\
# Conditions

<!-- Generated by `python -m controller.pieces.vocabulary conditions`; do not edit. -->

Every condition type and reason the controller writes to `status.conditions` (of the
PtahSchemas and PtahMigrations, of the approvals, settlements and acknowledgments people
create, and of the PtahRealms), from `controller/pieces/vocabulary.py`. Each condition
carries `lastTransitionTime`, which moves only when its status does, and
`observedGeneration` where its object has one.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_events() -> str:
    lines = [
        _EVENTS_HEAD,
        "| Reason | Type | Lands on | Meaning | What to do |",
        "| --- | --- | --- | --- | --- |",
    ]
    for reason in sorted(EVENTS):
        doc = EVENTS[reason]
        lines.append(
            f"| `{reason}` | {doc.type} | {', '.join(doc.kinds)} | {_cell(doc.meaning)} "
            f"| {_cell(doc.action)} |"
        )
    return "\n".join(lines) + "\n"


def render_conditions() -> str:
    lines = [_CONDITIONS_HEAD]
    for kind, doc in CONDITIONS.items():
        lines += [
            f"## {kind}",
            "",
            f"Lands on: {', '.join(doc.kinds)}. {doc.meaning}",
            "",
            "| Reason | Meaning | What to do |",
            "| --- | --- | --- |",
        ]
        for reason, why in doc.reasons.items():
            lines.append(f"| `{reason}` | {_cell(why.meaning)} | {_cell(why.action)} |")
        lines.append("")
    return "\n".join(lines)


RENDERERS: Final = {"conditions": render_conditions, "events": render_events}


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1 or argv[0] not in RENDERERS:
        sys.stderr.write("usage: python -m controller.pieces.vocabulary conditions|events\n")
        return 2
    sys.stdout.write(RENDERERS[argv[0]]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
