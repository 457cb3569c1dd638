"""What a reading found, recorded: the harvest of Resolve, Verify, Observe, Plan and
History claims that neither prove an Apply nor settle an unresolved run.

Each reading is a claim with its own Job, record and harvest; this module only turns
the account ``jobaccount.harvest`` read into status, in the patch that retires the
claim (``retirement``), so a stop on either side leaves a live claim whose terminal
Job is read again, or the record, never neither:

- Resolve: ``status.source`` (schema) or ``status.artifact`` (migration) and
  ``status.observedGeneration``; every reading made from the old artifact goes.
- Verify: ``status.verification``, after holding the runner's policy digest to the
  ConfigMap the spec names (read now, by UID and digest, as an Apply re-reads it).
- Observe: ``status.observation``; drift below ``spec.policy.driftSeverity`` is none.
- Plan: the plan is published (``publishing``) from the record, then ``status.plan``
  is written with the claim's retirement; a plan of no changes is an observation
  of no drift.
- History: ``status.history`` is written first (the claim kept), then the plan is
  published from it and the record's pending list, then the claim retires with
  ``status.plan``.

A reading that failed (the executor's error, no readable account, a Job that did not
complete, a result that cannot be recorded) retires its claim with
``status.readingFailure``: the executor's own sentence, redacted, and a retry time
``spec.execution.failureRetryInterval`` away, doubled for each repeat of the same
operation and capped at an hour. Nothing is claimed before that time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

from controller.context.passcontext import PassContext, migration_of, migration_status_of, schema_of
from controller.mutationlifecycle import Disposition, Stop
from controller.pieces.freshness import history_refusal, observation_moved
from controller.pieces.harvested import Harvest, history_of
from controller.pieces.planpolicy import approval_required, policy_digest
from controller.stages.approvalstaleness import mark_plan_approvals_stale
from controller.stages.publishing import PublishRefused, publish_migration_plan, publish_schema_plan
from controller.stages.standing import standing_update
from jobclaim import finished
from jobclaim.api import (
    ArtifactVerificationStatus,
    DriftObservationStatus,
    OCIArtifactAccessBinding,
    PtahSchemaStatus,
    ReadingFailureStatus,
)
from jobclaim.apiserver import CONFIGMAPS, NotFound, Object
from jobclaim.errors import PtahError
from jobclaim.times import parse_duration, timestamp
from runner.harvest import Outcome
from runner.result import RunnerResult

MAX_BACKOFF_SECONDS: Final = 3600.0
# A URL's password and key=value secrets: an executor's sentence may quote the DSN
# it failed to open, and status is readable by anyone who can read the resource.
_URL_PASSWORD: Final = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@/\s]*@")
_SECRET_PAIR: Final = re.compile(
    r"(?i)\b(password|passwd|pwd|secret|token|sslpassword|sslkey)\s*=\s*('[^']*'|\"[^\"]*\"|\S+)"
)


class ReadingUnrecordable(PtahError):
    """A reading's account cannot be recorded (it says what the claim cannot use)."""


def redact(text: str) -> str:
    """The sentence with passwords in URLs and secret-looking pairs replaced. Pure."""
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    return _SECRET_PAIR.sub(lambda m: f"{m.group(1)}=***", text)


def backoff_seconds(interval: float, failures: int) -> float:
    """The wait before retry ``failures`` (1 = the first failure). Pure."""
    delay = interval * float(2 ** (failures - 1))
    return min(delay, max(interval, MAX_BACKOFF_SECONDS))


def fail(ctx: PassContext, code: str | None, message: str) -> Stop:
    """Retire the reading's claim with the failure and its retry time."""
    status = ctx.status
    assert status is not None
    operation = ctx.operation.type
    previous = status.reading_failure
    failures = previous.failures + 1 if previous and previous.operation == operation else 1
    try:
        interval = parse_duration(ctx.subject.spec.execution.failure_retry_interval)
    except ValueError:
        interval = 30.0
    now = ctx.now()
    retry_at = now + timedelta(seconds=backoff_seconds(interval, failures))
    sentence = redact(message)[:1024] or "the reading failed without a message"
    record = ReadingFailureStatus(
        operation=operation,
        code=code,
        message=sentence,
        failures=failures,
        failed_at=timestamp(now),
        retry_not_before=timestamp(retry_at),
    )
    ctx.crossed(
        "ReadingFailed", f"{operation} failed ({failures} in a row): {sentence}", warning=True
    )
    return _retire(
        ctx,
        f"{operation} failed; it is tried again at {record.retry_not_before}",
        Disposition.DISCARD,
        {
            "reading_failure": record,
            "phase": "Failed",
            "next_reconciliation_time": record.retry_not_before,
        },
    )


def _retire(
    ctx: PassContext, reason: str, disposition: Disposition, update: dict[str, Any]
) -> Stop:
    # The retiring patch also publishes what the resource then stands at (phase,
    # conditions, next reconciliation time) when the next pass would claim nothing:
    # a quiet reading ends in this one write. A stop right after it leaves the
    # reading recorded, the claim gone and the publication already current, so the
    # next pass decides the same and writes nothing; a stop before it leaves the live
    # claim, whose terminal Job is read again.
    assert ctx.status is not None
    retired = ctx.status.model_copy(update={"active_operation": None, **update})
    update = {**update, **standing_update(ctx, retired)}
    return ctx.family.retire_reading(ctx, reason, disposition, update)


def _accounted(ctx: PassContext, reason: str, update: dict[str, Any]) -> Stop:
    ctx.crossed("ReadingRecorded", reason)
    return _retire(ctx, reason, Disposition.ACCOUNTED, {"reading_failure": None, **update})


# -- each reading ----------------------------------------------------------------------


def _retire_plan(ctx: PassContext, why: str) -> dict[str, Any]:
    """Discard the standing plan that was not applied, its approvals marked Stale
    first: a stop in between leaves stale approvals beside a plan the next pass (the
    same terminal Job, read again) discards again, never a live approval of a plan
    made from a source or a database that moved."""
    status = ctx.status
    assert status is not None
    plan = status.plan
    if plan is None:
        return {}
    marked = mark_plan_approvals_stale(ctx, plan.uid, reason="PlanInputsMoved", message=why)
    ctx.crossed("PlanDiscarded", f"plan {plan.name} was discarded ({marked} stale): {why}")
    return {"plan": None}


def _resolved(ctx: PassContext, result: RunnerResult, _job: Object) -> Stop:
    section = result.resolve
    assert section is not None
    source = OCIArtifactAccessBinding(
        reference=section.resolved_reference,
        digest=section.resolved_digest,
        media_type=section.resolved_media_type,
        size=section.resolved_size,
    )
    status = ctx.status
    assert status is not None
    checked = {"source_checked_at": timestamp(ctx.now())}
    same_spec = ctx.subject.metadata.generation == status.observed_generation
    recorded = ctx.family.artifact(status)
    # The digest names the bytes (the media type and size are facts of it).
    same_bytes = recorded is not None and (recorded.reference, recorded.digest) == (
        source.reference,
        source.digest,
    )
    if same_spec and same_bytes:
        # A tag read again that still names the same bytes: every reading made from
        # them stands, and so does a plan made from them.
        return _accounted(ctx, f"the reference still resolves to {source.digest}", checked)
    # Everything read from the old artifact goes with it, and a plan made from it.
    update: dict[str, Any] = {
        "observed_generation": ctx.subject.metadata.generation,
        "verification": None,
        **checked,
        **ctx.family.resolved(source),
    }
    if same_spec:
        update.update(_retire_plan(ctx, f"the reference moved to {source.digest}"))
    return _accounted(ctx, f"the artifact resolved to {source.digest}", update)


def _artifact_digest(ctx: PassContext) -> str | None:
    status = ctx.status
    assert status is not None
    artifact = ctx.family.artifact(status)
    return artifact.digest if artifact else None


def _verified(ctx: PassContext, result: RunnerResult, _job: Object) -> Stop:
    section = result.verify
    assert section is not None
    digest = _artifact_digest(ctx)
    if digest is None:
        raise ReadingUnrecordable("a Verify reading with no resolved artifact verifies nothing")
    selector = ctx.family.policy_selector(ctx)
    policy_uid = None
    if selector is not None:
        try:
            obj = ctx.api.get(CONFIGMAPS, ctx.namespace, selector.name)
        except NotFound as error:
            raise ReadingUnrecordable(f"verification policy {selector.name} is gone") from error
        data = (obj.get("data") or {}).get(selector.key)
        if not isinstance(data, str):
            raise ReadingUnrecordable(f"verification policy {selector.name} has no {selector.key}")
        if policy_digest(data) != section.verification_policy_digest:
            raise ReadingUnrecordable(
                f"the artifact was verified under another policy than {selector.name} holds now"
            )
        policy_uid = obj["metadata"].get("uid")
    verification = ArtifactVerificationStatus(
        artifact_digest=digest,
        policy_uid=policy_uid,
        policy_digest=section.verification_policy_digest if selector else None,
        requirements=list(section.verification_requirements),
        verified_at=timestamp(ctx.now()),
    )
    return _accounted(ctx, f"artifact {digest} is verified", {"verification": verification})


def _observation(ctx: PassContext, result: RunnerResult, *, drift: bool) -> DriftObservationStatus:
    digest = _artifact_digest(ctx)
    if digest is None:
        raise ReadingUnrecordable("a reading with no resolved artifact observes nothing")
    section = result.observe
    return DriftObservationStatus(
        observed_at=timestamp(ctx.now()),
        artifact_digest=digest,
        drift=drift,
        highest_severity=section.highest_drift_severity if section else None,
        finding_count=section.drift_finding_count if section else 0,
        report_digest=section.drift_report_digest if section else None,
        target_identity_digest=result.target_identity_digest,
    )


def settled_observation(ctx: PassContext, result: RunnerResult) -> dict[str, Any]:
    """The observation a settled proof leaves: no drift, read now; nothing when no
    artifact is recorded to have read it against."""
    if _artifact_digest(ctx) is None:
        return {}
    return {"observation": _observation(ctx, result, drift=False)}


def _observed(ctx: PassContext, result: RunnerResult, _job: Object) -> Stop:
    section = result.observe
    assert section is not None
    drift = section.observed_drift
    if schema_of(ctx).spec.policy.drift_severity == "destructive":
        drift = section.highest_drift_severity == "destructive"
    observation = _observation(ctx, result, drift=drift)
    update: dict[str, Any] = {"observation": observation}
    status = schema_of(ctx).status
    if status is not None and status.plan is not None:
        # A refresh under a waiting plan: an unchanged reading keeps it; one that shows
        # the database moved retires it, and the machine plans again from this one.
        if not observation_moved(status.observation, observation):
            return _accounted(ctx, "the database is as the plan read it", update)
        update.update(_retire_plan(ctx, "the database moved after the plan was made"))
    if not drift:
        update.update(phase="InSync", last_successful_reconciliation=timestamp(ctx.now()))
    return _accounted(ctx, "the database was observed" + (" to drift" if drift else ""), update)


def _planned(ctx: PassContext, result: RunnerResult, job: Object) -> Stop:
    section = result.plan
    schema = schema_of(ctx)
    assert section is not None
    if section.plan_outcome == "NoChanges":
        # The plan is the closer reading: nothing to change is no drift to act on.
        return _accounted(
            ctx,
            "the Plan found nothing to change",
            {
                "observation": _observation(ctx, result, drift=False),
                "phase": "InSync",
                "last_successful_reconciliation": timestamp(ctx.now()),
            },
        )
    plan = publish_schema_plan(ctx, section, job)
    planned = schema.model_copy(
        update={"status": (schema.status or PtahSchemaStatus()).model_copy(update={"plan": plan})}
    )
    phase = "AwaitingApproval" if approval_required(planned) else "ReadyToApply"
    return _accounted(ctx, f"plan {plan.name} is published", {"plan": plan, "phase": phase})


def _read_history(ctx: PassContext, result: RunnerResult, _job: Object) -> Stop:
    section = result.migration_history
    migration = migration_of(ctx)
    status = migration_status_of(ctx)
    assert section is not None
    history = history_of(result, timestamp(ctx.now()))
    # The reading first, with the claim kept: the plan is rebuilt (by the webhook
    # too) from what status records, and a stop before the plan leaves the claim to
    # be read again.
    ctx.write_status(status.model_copy(update={"history": history}))
    refusal = history_refusal(history)
    standing = status.plan
    if history.pending_count == 0 or refusal is not None:
        phase = "Blocked" if refusal else "InSync"
        moved = _retire_plan(ctx, f"the history moved ({refusal or 'nothing pending'})")
        return _accounted(ctx, "the history was read", {"plan": None, "phase": phase, **moved})
    ref = publish_migration_plan(ctx, section)
    update: dict[str, Any] = {"plan": ref}
    if standing is not None and standing.uid != ref.uid:
        # The plan is derived from the history: another plan means the history moved.
        update.update(_retire_plan(ctx, f"the history moved; plan {ref.name} replaces it"))
        update["plan"] = ref
    phase = "Planning" if migration.spec.policy.apply == "Always" else "AwaitingApproval"
    return _accounted(ctx, f"plan {ref.name} is published", {**update, "phase": phase})


_RECORDERS: Final[dict[tuple[str, str], Callable[[PassContext, RunnerResult, Object], Stop]]] = {
    ("schema", "Resolve"): _resolved,
    ("schema", "Verify"): _verified,
    ("schema", "Observe"): _observed,
    ("schema", "Plan"): _planned,
    ("migration", "Resolve"): _resolved,
    ("migration", "Verify"): _verified,
    ("migration", "History"): _read_history,
}


def record_reading(ctx: PassContext, harvested: Harvest, job: Object) -> Stop | None:
    """Record a harvested reading; None for a claim whose account is kept elsewhere
    (an Apply, a proof's reading, a History that may settle an unresolved run)."""
    info = ctx.info
    operation = ctx.operation.type
    if info.mutating or (ctx.proof_outstanding and info.serves_proof):
        return None
    if ctx.family.keeps_reading(ctx, harvested):
        return None
    recorder = _RECORDERS.get((ctx.family.name, operation))
    if recorder is None:
        return None
    account = harvested.account
    if harvested.outcome is not Outcome.ACCOUNTED or account is None or account.recorded is None:
        return fail(ctx, None, harvested.reason or "the reading gave no account")
    result = account.recorded.result
    if result.error is not None:
        return fail(ctx, result.error.code, result.error.message)
    if finished(job) != "Complete":
        return fail(ctx, None, "the reading's Job did not complete")
    try:
        return recorder(ctx, result, job)
    except (ReadingUnrecordable, PublishRefused) as error:
        return fail(ctx, None, str(error))


__all__ = [
    "ReadingUnrecordable",
    "backoff_seconds",
    "fail",
    "record_reading",
    "redact",
]
