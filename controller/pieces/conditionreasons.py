"""The condition half of the vocabulary (``controller.pieces.vocabulary``): every condition
type the controller writes, and every reason each can carry, with what it means and
what a person does about it. Pure data.

``controller.pieces.statusconditions`` and ``controller.stages.conditions`` write these
and nothing else (``tests/controller/test_vocabulary.py`` walks them over every phase,
decision, failure and record), and so do the writers of a decision's ``Consumed`` or
``Stale`` and of a realm's ``RealmConflict`` (the same test finds each such write in the
code and its reason here); ``docs/reference/conditions.md`` is rendered from this
table by ``python -m controller.pieces.vocabulary conditions``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from controller.pieces.phasemachine import Event

SCHEMA: Final = "PtahSchema"
MIGRATION: Final = "PtahMigration"
BOTH: Final = (SCHEMA, MIGRATION)
APPROVALS: Final = ("PtahSchemaApproval", "PtahMigrationApproval")
DECISIONS: Final = (*APPROVALS, "PtahSchemaProofSettlement", "PtahMigrationRunAcknowledgment")
REALM: Final = "PtahRealm"

_NOTHING: Final = "Nothing; it is a record of progress."


@dataclass(frozen=True, slots=True)
class ReasonDoc:
    meaning: str
    action: str = _NOTHING


@dataclass(frozen=True, slots=True)
class ConditionDoc:
    kinds: tuple[str, ...]
    meaning: str
    reasons: Mapping[str, ReasonDoc]


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
    # The conditions on a person's decisions and on a realm: written by the controller
    # too, and as much a vocabulary to automate on (an alert on Stale approvals).
    "Consumed": ConditionDoc(
        DECISIONS,
        "True once the decision was spent on what it names; it authorizes nothing else, "
        "ever (admission refuses a write that takes it back).",
        {
            "DispatchCommitted": ReasonDoc(
                "The approval authorized one Apply, claimed under the claim "
                "`status.consumedBy` names."
            ),
            "ProofSettled": ReasonDoc("The settlement ended the pending proof it names."),
            "RunAcknowledged": ReasonDoc("The acknowledgment settled the unresolved run it names."),
        },
    ),
    "Stale": ConditionDoc(
        APPROVALS,
        "True when the plan the approval names was discarded before it was applied; the "
        "approval authorizes nothing.",
        {
            "PlanInputsMoved": ReasonDoc(
                "What the plan was made from moved: the spec changed, the tag names other "
                "bytes, or the database was changed since it was read. The message says which.",
                "Review the new plan the resource makes and approve it if it is right.",
            ),
            "ExecutionBindingChanged": ReasonDoc(
                "The plan was made under an execution binding (a target, a Secret's "
                "version) that was retired.",
                "Review the plan made under the new binding and approve it.",
            ),
        },
    ),
    "RealmConflict": ConditionDoc(
        (REALM,),
        "The realm's own account of its census: True when more than one resource names "
        "it and not every one may share it (each refused resource says RealmAdmitted "
        "False too).",
        {
            "NoConflict": ReasonDoc("The resources naming the realm may share it."),
            "RealmConflict": ReasonDoc(
                "More than one resource names the realm, and it is Exclusive or not every "
                "one sets sharedRealm; the message names them.",
                "Remove the other claimants, or make the realm Shared and set sharedRealm "
                "on every claimant.",
            ),
        },
    ),
}
