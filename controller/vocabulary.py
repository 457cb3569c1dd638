"""The vocabulary a platform team automates on: every condition type and reason, and
every Event reason, the controller can publish, with what it means, the object it lands
on and what a person does about it. Pure data.

A reason absent from here is a reason nobody can write an alert or a runbook against,
so the code is held to it: ``PassContext.crossed`` takes an ``EventReason`` only (mypy
refuses any other literal), and tests walk ``conditions_for`` over every phase, event
and failure and scan every ``crossed(...)`` call. ``docs/reference/conditions.md`` and
``docs/reference/events.md`` are rendered from these tables
(``python -m controller.vocabulary conditions|events``) and a test keeps the committed
files equal to the render.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from controller.phasemachine import Event

SCHEMA: Final = "PtahSchema"
MIGRATION: Final = "PtahMigration"
BOTH: Final = (SCHEMA, MIGRATION)

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


@dataclass(frozen=True, slots=True)
class EventDoc:
    type: EventType
    kinds: tuple[str, ...]
    meaning: str
    action: str = _NOTHING


@dataclass(frozen=True, slots=True)
class ReasonDoc:
    meaning: str
    action: str = _NOTHING


@dataclass(frozen=True, slots=True)
class ConditionDoc:
    kinds: tuple[str, ...]
    meaning: str
    reasons: Mapping[str, ReasonDoc]


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


# -- Conditions --------------------------------------------------------------------------

# Every phase either family publishes; several conditions take the phase as reason.
PHASES: Final[Mapping[str, ReasonDoc]] = {
    "Pending": ReasonDoc("Nothing is claimed yet for the current spec."),
    "Resolving": ReasonDoc("The OCI reference is being resolved to a digest."),
    "Verifying": ReasonDoc("The resolved artifact is being verified against policy."),
    "Observing": ReasonDoc("The database is being read and compared with the schema."),
    "Reading": ReasonDoc("The migration history is being read from the database."),
    "Planning": ReasonDoc("A plan for the changes found is being made."),
    "ReadyToApply": ReasonDoc("A plan stands and may be applied."),
    "AwaitingApproval": ReasonDoc(
        "A plan stands and waits for an approval.",
        "Review the plan (`kubectl ptah plan`) and approve it (`kubectl ptah approve`).",
    ),
    "Blocked": ReasonDoc(
        "Policy refuses the plan or the reading (destructive changes, apply Never, a "
        "dirty or out-of-order history).",
        "Read the condition's message; change the spec, the policy or the database.",
    ),
    "Applying": ReasonDoc("An Apply runs."),
    "VerifyingConvergence": ReasonDoc("The database is read again to prove the Apply."),
    "VerifyingHistory": ReasonDoc("The history is read again after an Apply."),
    "InSync": ReasonDoc("The database matches the artifact."),
    "Suspended": ReasonDoc("spec.suspend is set; nothing is claimed.", "Unset spec.suspend."),
    "Failed": ReasonDoc(
        "The resource cannot go on without a person.",
        "Read `status.readingFailure` and the Warning Events; fix and change the spec.",
    ),
}

# The reading operations whose failure names ReconciliationFailed's reason.
READINGS: Final = ("Resolve", "Verify", "Observe", "Plan", "History")

_EVENT_ACTIONS: Final[Mapping[Event, str]] = {
    Event.AWAITING_APPROVAL: "Review the plan and approve it.",
    Event.APPLY_NEVER: "Apply it by hand, or change spec.policy.apply.",
    Event.RETRY_NOT_DUE: "Read status.readingFailure; fix what it names.",
    Event.READING_REFUSES: "Repair the database's history; the next reading plans again.",
    Event.RUN_UNRESOLVED: "Acknowledge the unresolved run once the database is checked.",
    Event.RUN_UNRESOLVED_READ: "Acknowledge the unresolved run once the database is checked.",
    Event.SUSPENDED: "Unset spec.suspend to resume.",
    Event.SOURCE_DUE: "Nothing; a moved tag retires the plan and its approvals.",
    Event.REFRESH_DUE: "Nothing; a moved database retires the plan and its approvals.",
}

_REFRESH_ACTION: Final = (
    "Nothing is applied and no approval is consumed until the reading succeeds: fix the "
    "registry, credentials or database the message names."
)


def event_reason(event: Event) -> str:
    """``AWAITING_APPROVAL`` -> ``AwaitingApproval``: a decision's event as a reason."""
    return event.name.title().replace("_", "")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _phases(*extra: tuple[str, ReasonDoc]) -> dict[str, ReasonDoc]:
    return {**PHASES, **dict(extra)}


CONDITIONS: Final[Mapping[str, ConditionDoc]] = {
    "Ready": ConditionDoc(
        BOTH,
        "kstatus: True when the database matches the artifact (phase InSync). The "
        "reason is the phase.",
        _phases(),
    ),
    "Reconciling": ConditionDoc(
        BOTH,
        "kstatus (abnormal-true): True while the controller is working toward the spec. "
        "The reason is the phase.",
        _phases(),
    ),
    "Stalled": ConditionDoc(
        BOTH,
        "kstatus (abnormal-true): True when the controller cannot progress without a "
        "change (a failed reading waiting for its retry, or Blocked). The reason is the "
        "phase, or ReadingFailed.",
        _phases(
            (
                "ReadingFailed",
                ReasonDoc(
                    "A reading failed and its retry is not due.",
                    "Read the message and status.readingFailure; fix what it names.",
                ),
            )
        ),
    ),
    "Progressing": ConditionDoc(
        BOTH,
        "True while the controller is working toward the spec (the same phases as "
        "Reconciling, for tools that read Progressing). The reason is the phase.",
        _phases(),
    ),
    "Blocked": ConditionDoc(
        BOTH,
        "True when the resource cannot go on until something outside it changes (phase "
        "Blocked); the reason says what.",
        {
            "NotBlocked": ReasonDoc("Nothing blocks the resource."),
            "Blocked": ReasonDoc(
                "Policy refuses the plan.", "Read the message; change the spec or the policy."
            ),
            "RunUnresolved": ReasonDoc(
                "A migration run's outcome is unknown.",
                "Check the database, then `kubectl ptah acknowledge` the run.",
            ),
            "HistoryDirty": ReasonDoc(
                "A migration is recorded as started and not finished.",
                "Repair the database's migration history.",
            ),
            "HistoryModified": ReasonDoc(
                "An applied migration's file changed in the artifact.",
                "Restore the file in the artifact, or repair the history.",
            ),
            "HistoryOutOfOrder": ReasonDoc(
                "The artifact holds a version below the current one that was never applied.",
                "Renumber the migration, or apply it by hand and record it.",
            ),
            "HistoryAhead": ReasonDoc(
                "The database is at a version the artifact does not hold (its history is "
                "ahead of the artifact); nothing is planned from it.",
                "Point the spec at the artifact that holds the database's version, or "
                "find who migrated the database past it.",
            ),
        },
    ),
    "ReconciliationFailed": ConditionDoc(
        BOTH,
        "True when the last reading failed; the reason names it.",
        {
            "NoFailure": ReasonDoc("The last reading succeeded."),
            **{
                f"{op}Failed": ReasonDoc(
                    f"The last {op} failed; the message is the executor's sentence.",
                    "Fix the registry, credentials or database it names; the retry follows.",
                )
                for op in READINGS
            },
        },
    ),
    "SourceFreshnessUnknown": ConditionDoc(
        BOTH,
        "Abnormal-true: True when the last Resolve failed, so whether the reference still "
        "names the bytes the plan was made from is unknown. A tag is resolved again every "
        "interval; a digest needs no Resolve.",
        {
            "ResolveFailed": ReasonDoc("The registry could not be read.", _REFRESH_ACTION),
            "SourceFresh": ReasonDoc("The reference was resolved within the last interval."),
            "DigestPinned": ReasonDoc("The reference is a digest: it cannot move."),
        },
    ),
    "RefreshFailed": ConditionDoc(
        BOTH,
        "Abnormal-true: True when a refresh failed (a Resolve of a resolved reference, or "
        "a reading of the database); the resource fails closed until the next succeeds.",
        {
            "RefreshSucceeded": ReasonDoc("The last refresh succeeded."),
            **{
                f"{op}Failed": ReasonDoc(f"The {op} refresh failed.", _REFRESH_ACTION)
                for op in ("Resolve", "Observe", "History")
            },
        },
    ),
    "DatabaseReachable": ConditionDoc(
        BOTH,
        "True when the last reading of the database succeeded, False when it failed, "
        "Unknown before the first.",
        {
            "Reachable": ReasonDoc("The last reading of the database succeeded."),
            "NotRead": ReasonDoc("The database has not been read yet."),
            **{
                f"{op}Failed": ReasonDoc(
                    f"The last {op} could not read the database; the message is the "
                    "executor's sentence.",
                    "Check the database, its URL Secret and the network; the retry follows.",
                )
                for op in ("Observe", "Plan", "History")
            },
        },
    ),
    "EngineSupported": ConditionDoc(
        BOTH,
        "False when the executor refused the target's engine (the database is not the "
        "engine spec.target.engine names); the message is the engine or the refusal.",
        {
            "Supported": ReasonDoc("The executor supports the target's engine."),
            "DialectMismatch": ReasonDoc(
                "The executor refused the engine, or the database is another engine.",
                "Fix spec.target.engine or the database URL.",
            ),
        },
    ),
    "DriftDetected": ConditionDoc(
        (SCHEMA,),
        "True when the last Observe found the database differs from the schema.",
        {
            "Drift": ReasonDoc(
                "The database differs from the schema; the message counts findings.",
                "Review the plan that follows, or the change made by hand.",
            ),
            "NoDrift": ReasonDoc("The database matches the schema, or nothing was observed."),
        },
    ),
    "RealmAdmitted": ConditionDoc(
        BOTH,
        "False while the PtahRealm the spec names refuses this resource its Lease; absent "
        "when the resource names no realm or the realm admits it.",
        {
            "RealmNotFound": ReasonDoc(
                "The realm does not exist, or is being deleted.",
                "Create the PtahRealm, or name another.",
            ),
            "RealmEngineMismatch": ReasonDoc(
                "The realm is for another engine than the target's.",
                "Name a realm of the target's engine.",
            ),
            "NamespaceNotAdmitted": ReasonDoc(
                "The realm admits neither the namespace's name nor its labels.",
                "Ask the realm's administrator to admit the namespace.",
            ),
            "RealmConflict": ReasonDoc(
                "More than one resource names the realm, and not every one shares it "
                "(sharedRealm) in a Shared realm.",
                "Remove the other claimant, or make the realm Shared and set sharedRealm "
                "on every claimant.",
            ),
            "RealmUnreadable": ReasonDoc(
                "The realm could not be read; nothing is claimed until it can.",
                "Check the API server and the manager's RBAC on ptahrealms.",
            ),
        },
    ),
    "ArtifactResolved": ConditionDoc(
        BOTH,
        "True when the OCI reference is resolved; the message is the digest.",
        {
            "Resolved": ReasonDoc("The reference is resolved to a digest."),
            "NotResolved": ReasonDoc("No resolved artifact is recorded yet."),
        },
    ),
    "ArtifactVerified": ConditionDoc(
        BOTH,
        "True when the resolved artifact passed verification.",
        {
            "Verified": ReasonDoc("The artifact is verified."),
            "NotVerified": ReasonDoc("The artifact is not verified yet."),
        },
    ),
    "PlanReady": ConditionDoc(
        BOTH,
        "True when a plan stands; the message names it.",
        {
            "PlanPublished": ReasonDoc("A plan is published."),
            "NoPlan": ReasonDoc("No plan stands."),
        },
    ),
    "ApprovalRequired": ConditionDoc(
        BOTH,
        "True when a standing plan needs a person (an approval, or apply Never). The "
        "reason is the phase machine's last decision, or the phase a write left.",
        {
            **_phases(),
            **{
                event_reason(e): ReasonDoc(_sentence(e.value), _EVENT_ACTIONS.get(e, _NOTHING))
                for e in (Event.AWAITING_APPROVAL, Event.APPLY_NEVER)
            },
        },
    ),
    "InSync": ConditionDoc(
        BOTH,
        "True when the database matches the artifact; otherwise the reason is the phase.",
        _phases(),
    ),
    "Suspended": ConditionDoc(
        BOTH,
        "True when spec.suspend is set.",
        {"Suspended": ReasonDoc("The reason is always Suspended; the status says which.")},
    ),
}


# -- rendering ---------------------------------------------------------------------------

_EVENTS_HEAD: Final = """\
# Events

<!-- Generated by `python -m controller.vocabulary events`; do not edit. -->

Every Event the controller sends, from `controller/vocabulary.py`. Events are
`events.k8s.io/v1`, reported by `operator.ptah.run/ptah-operator`, and regard the
resource named in "Lands on". A repeat of the same reason and message about the same
object is one Event whose `series.count` grows, not a new Event. Events are telemetry:
the API server may expire them, and no decision reads one; `status` is the record.
"""

_CONDITIONS_HEAD: Final = """\
# Conditions

<!-- Generated by `python -m controller.vocabulary conditions`; do not edit. -->

Every condition type and reason the controller writes to `status.conditions`, from
`controller/vocabulary.py`. Each condition carries `observedGeneration`; its
`lastTransitionTime` moves only when its status does.
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
        sys.stderr.write("usage: python -m controller.vocabulary conditions|events\n")
        return 2
    sys.stdout.write(RENDERERS[argv[0]]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
