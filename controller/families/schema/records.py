"""A PtahSchema's account of an Apply, and the proof that settles it.

Every Apply, read or uncertain, becomes ``status.pendingObservation``: built by
``pending_observation_for`` alone and written in the same status patch that clears
the claim (``retirement.retire_schema_claim``), so a stop on either side of the patch
leaves a live claim or a retained record, never both and never neither. The record
carries the claim's Lease epoch and the Apply's Pod UIDs and count: more than one Pod
is more than one run, which forces an unknown outcome even after the Job is gone.

The record keeps the realm. ``prove`` runs first in every pass that holds no claim,
before suspension and the generation gate:

1. renew the Lease under the Apply's own holder and epoch (a tenure that changed
   hands restarts the proof as an unknown outcome: someone else may have written);
2. wait until no Apply Pod can run (Pods that have not stopped, a Job not finished,
   and for an unknown outcome the ``observeAfter`` horizon while no Job says more);
3. claim Observe, then Plan, under that same Lease (``claimwrites.realm_fields``).

Only a Plan whose target matches and reports no changes settles the record; its
write is the one that stages the release. Convergence after an unknown outcome is
recorded without attributing an Apply: the reading proves the database matches, not
what changed it. Deletion waits on the same conditions, then releases.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from controller.context.passcontext import (
    PassContext,
    schema_operation_of,
    schema_status_of,
)
from controller.mutationlifecycle import Disposition, Stop, owed_release
from controller.pieces.harvested import Harvest
from controller.pieces.managerconfig import JOB_DEADLINE_GRACE_SECONDS
from controller.pieces.settlements import consume_settlement, find_settlement
from controller.pieces.targetlock import MalformedLease
from controller.stages.approvalstaleness import mark_plan_approvals_stale
from controller.stages.claimwrites import (
    AGAIN,
    claim_operation,
    complete_pending_release,
    remove_orphan_finalizer,
    write_retry,
)
from controller.stages.jobaccount import pods_of
from controller.stages.readings import settled_observation
from controller.stages.retirement import retire_schema_claim
from jobclaim import finished, lease_holder, match, pending_apply_claim, pod_stopped
from jobclaim.api import (
    ManagerRecord,
    ObjectReference,
    PendingObservationStatus,
    PtahSchema,
    PtahSchemaProofSettlement,
    PtahSchemaStatus,
    SettledProofStatus,
    TargetLockReleaseStatus,
)
from jobclaim.apiserver import JOBS, NotFound, Object
from jobclaim.errors import InvalidInput
from jobclaim.times import parse_time, timestamp
from runner.harvest import Outcome

MAX_POD_UIDS: Final = 8


def pending_observation_for(
    ctx: PassContext[PtahSchema],
    *,
    succeeded: bool,
    pod_uids: tuple[str, ...],
    dispatched_by: ManagerRecord | None = None,
) -> PendingObservationStatus:
    """The one constructor of a schema's pending observation, from its Apply claim.

    ``dispatched_by`` is the record of the Job that was read, if one was: never the
    manager writing, which after an upgrade is not the one that dispatched."""
    operation = schema_operation_of(ctx)
    status = schema_status_of(ctx)
    if operation.lease_epoch is None or operation.coordination_digest is None:
        raise InvalidInput("an Apply claim without its realm binding cannot leave a record")
    if operation.lease_duration_seconds is None:
        raise InvalidInput("an Apply claim without its Lease duration cannot leave a record")
    known = succeeded and len(pod_uids) == 1
    observe_after = None
    if not known and operation.execution_not_after:
        deadline = parse_time(operation.execution_not_after)
        if deadline is not None:
            observe_after = timestamp(deadline + timedelta(seconds=JOB_DEADLINE_GRACE_SECONDS))
    return PendingObservationStatus(
        outcome="ApplySucceeded" if known else "OutcomeUnknown",
        apply_operation_id=operation.id,
        apply_job_name=operation.job_name,
        apply_job_uid=operation.job_uid,
        admission_snapshot=operation.admission_snapshot,
        apply_pod_uids=list(pod_uids[:MAX_POD_UIDS]),
        apply_pod_count=len(pod_uids),
        apply_generation=ctx.subject.metadata.generation,
        observe_after=observe_after,
        plan=status.plan,
        dispatched_by=dispatched_by,
        target=operation.target,
        coordination_digest=operation.coordination_digest,
        lease_duration_seconds=operation.lease_duration_seconds,
        lease_epoch=operation.lease_epoch,
    )


def record_schema_apply(
    ctx: PassContext[PtahSchema],
    reason: str,
    *,
    succeeded: bool,
    pod_uids: tuple[str, ...],
    dispatched_by: ManagerRecord | None = None,
) -> Stop:
    """Swap an Apply claim for its pending observation in one status patch."""
    record = pending_observation_for(
        ctx, succeeded=succeeded, pod_uids=pod_uids, dispatched_by=dispatched_by
    )
    return retire_schema_claim(
        ctx,
        f"the Apply is recorded {record.outcome}; the proof is owed: {reason}",
        disposition=Disposition.ACCOUNTED if succeeded else Disposition.UNACCOUNTED,
        record=record,
        # The plan is spent: it lives on in the record, and no pass may apply it again.
        update={"phase": "VerifyingConvergence", "plan": None},
    )


def schema_outcome(ctx: PassContext[PtahSchema], harvest: Harvest) -> Stop:
    """What a schema claim's terminal Job accounts for."""
    info = ctx.info
    account = harvest.account
    if info.mutating:
        summary = account.summary if account else None
        succeeded = (
            harvest.outcome is Outcome.ACCOUNTED
            and summary is not None
            and summary.error_code is None
            and not summary.uncertain
        )
        reason = harvest.reason or "its result was read"
        return record_schema_apply(
            ctx,
            reason,
            succeeded=succeeded,
            pod_uids=harvest.pod_uids,
            dispatched_by=harvest.dispatched_by,
        )
    pending = schema_status_of(ctx).pending_observation
    if harvest.outcome is not Outcome.ACCOUNTED or account is None or account.recorded is None:
        return _retry_unless_settled(ctx, pending, harvest.reason or "the reading gave no account")
    if pending is not None and info.serves_proof:
        return _proof_reading(ctx, pending, account.recorded.result)
    return retire_schema_claim(
        ctx,
        f"{ctx.operation.type} was read",
        disposition=Disposition.ACCOUNTED,
        record=pending,
    )


def _retry_unless_settled(
    ctx: PassContext[PtahSchema], pending: PendingObservationStatus | None, reason: str
) -> Stop:
    """A proof's reading that failed runs again, unless a person has settled the proof:
    then the claim is retired (its Job is terminal, the record kept), and ``prove``
    takes the settlement on the next pass. Without this a reading that can never
    finish would retry forever and the settlement would never get its turn."""
    if pending is not None and ctx.info.serves_proof and _settlement(ctx, pending) is not None:
        return retire_schema_claim(
            ctx,
            f"{reason}; a person's settlement ends the proof",
            disposition=Disposition.DISCARD,
            record=pending,
        )
    return write_retry(ctx, reason)


def restart_proof(ctx: PassContext[PtahSchema], why: str) -> Stop:
    """Retire a proof's reading unread and restart the proof as an unknown outcome under
    the tenure the claim now names: someone else may have written since the Apply."""
    pending = schema_status_of(ctx).pending_observation
    epoch = ctx.operation.lease_epoch
    if pending is None or epoch is None:
        raise InvalidInput("only a claim serving a proof under a Lease restarts that proof")
    restarted = pending.model_copy(
        update={"lease_epoch": epoch, "outcome": "OutcomeUnknown", "plan_required": False}
    )
    ctx.crossed("ProofRestarted", why, warning=True)
    return retire_schema_claim(
        ctx, f"the proof restarts: {why}", disposition=Disposition.DISCARD, record=restarted
    )


def _proof_reading(
    ctx: PassContext[PtahSchema], pending: PendingObservationStatus, result: Any
) -> Stop:
    operation = ctx.operation
    if result.error is not None:
        reason = f"the proof's {operation.type} failed: {result.error.code}"
        return _retry_unless_settled(ctx, pending, reason)
    if operation.type == "Observe":
        return retire_schema_claim(
            ctx,
            "the database was observed; the scoped Plan is next",
            disposition=Disposition.ACCOUNTED,
            record=pending.model_copy(update={"plan_required": True}),
        )
    plan = result.plan
    expected = pending.plan.target_identity_digest if pending.plan else None
    matches = expected is None or result.target_identity_digest == expected
    if plan is None or plan.plan_outcome != "NoChanges" or not matches:
        retire_schema_claim(
            ctx,
            "the database has not converged; the proof is still owed",
            disposition=Disposition.ACCOUNTED,
            record=pending.model_copy(update={"plan_required": True}),
        )
        return Stop(
            "the database has not converged; the proof is still owed",
            requeue_after=ctx.env.config.renew_interval_seconds,
        )
    update: dict[str, Any] = {"phase": "InSync"}
    if pending.outcome == "ApplySucceeded":
        update["applied"] = pending.plan
    else:
        # Converged, but nothing proves which run changed it: no Apply is attributed.
        ctx.crossed("ConvergedAfterUnknownOutcome", "the database matches its plan")
    update["last_successful_reconciliation"] = timestamp(ctx.now())
    # The proof is the newest reading: the database matches, so no drift stands.
    update.update(settled_observation(ctx, result))
    binding = ctx.binding
    if pending.plan is not None and binding and pending.plan.execution_binding_id != binding.epoch:
        # An approval admitted before the Apply claim may have committed after the
        # rotation's sweep; the proof's completion sweeps once more.
        mark_plan_approvals_stale(ctx, pending.plan.uid)
    return retire_schema_claim(
        ctx,
        "the proof is settled: the database matches its plan",
        disposition=Disposition.ACCOUNTED,
        record=None,
        ends_proof=True,
        update=update,
    )


# -- the proof, first in every pass without a claim -----------------------------------


def _apply_may_run(ctx: PassContext[PtahSchema], pending: PendingObservationStatus) -> str | None:
    """Why an Apply Pod may still run, or None. Merges Pods first seen now."""
    try:
        job: Object | None = ctx.api.get(JOBS, ctx.namespace, pending.apply_job_name)
    except NotFound:
        job = None
    uid = pending.apply_job_uid
    if job is not None and uid and job.get("metadata", {}).get("uid") != uid:
        job = None
    if job is not None and not uid:
        # A UID is adopted only for the Job the record's claim would recognize.
        claim = pending_apply_claim(ctx.subject, pending)
        if claim is None or not match(job, claim):
            job = None
    if job is not None:
        uid = job["metadata"]["uid"]
    pods = pods_of(ctx, uid) if uid else []
    seen = [p["metadata"].get("uid", "") for p in pods]
    merged = list(dict.fromkeys([*pending.apply_pod_uids, *seen]))
    if len(merged) > pending.apply_pod_count or uid != pending.apply_job_uid:
        count = max(len(merged), pending.apply_pod_count)
        updated = pending.model_copy(
            update={
                "apply_job_uid": uid,
                "apply_pod_uids": merged[:MAX_POD_UIDS],
                "apply_pod_count": count,
                "outcome": "OutcomeUnknown" if count > 1 else pending.outcome,
            }
        )
        ctx.write_status(schema_status_of(ctx).model_copy(update={"pending_observation": updated}))
    if any(not pod_stopped(p) for p in pods):
        return "an Apply Pod has not stopped"
    if job is not None:
        return None if finished(job) is not None else "the Apply Job has not finished"
    horizon = parse_time(pending.observe_after) if pending.observe_after else None
    if pending.outcome == "OutcomeUnknown" and horizon is not None and ctx.now() < horizon:
        return "an Apply of unknown outcome may still start until its horizon"
    return None


def renew_proof(ctx: PassContext[PtahSchema], pending: PendingObservationStatus) -> Stop | None:
    """Renew the realm under the Apply's own holder and tenure; a Stop when the proof
    cannot go on in this pass (the realm is elsewhere, or the tenure changed hands)."""
    status = schema_status_of(ctx)
    interval = ctx.env.config.renew_interval_seconds
    holder = lease_holder(ctx.uid, pending.apply_operation_id)
    try:
        state = ctx.env.lock.renew(
            pending.coordination_digest, holder, pending.lease_duration_seconds, pending.lease_epoch
        )
    except MalformedLease as error:
        return Stop("the realm's Lease cannot be read", error=error)
    if not state.held or state.epoch is None:
        return Stop("the realm is held by another claim; the proof waits", requeue_after=interval)
    if state.continuity_lost or state.epoch != pending.lease_epoch:
        # Someone else may have written in between: what the proof reads next cannot
        # be this Apply's doing alone.
        restarted = pending.model_copy(
            update={"lease_epoch": state.epoch, "outcome": "OutcomeUnknown", "plan_required": False}
        )
        ctx.write_status(status.model_copy(update={"pending_observation": restarted}))
        ctx.crossed("ProofRestarted", "the Lease changed hands under the proof", warning=True)
        return Stop("the proof restarts under a new tenure", requeue_after=AGAIN)
    return None


def prove(ctx: PassContext[PtahSchema]) -> Stop | None:
    """Work the pending observation toward its proof; None when there is none."""
    status = ctx.status
    if not isinstance(status, PtahSchemaStatus) or status.pending_observation is None:
        return None
    pending = status.pending_observation
    interval = ctx.env.config.renew_interval_seconds
    stop = renew_proof(ctx, pending)
    if stop is not None:
        return stop
    waiting = _apply_may_run(ctx, pending)
    if waiting is not None:
        return Stop(f"the proof waits: {waiting}", requeue_after=interval)
    pending = schema_status_of(ctx).pending_observation or pending
    if ctx.subject.metadata.deletion_timestamp:
        return _release_on_deletion(ctx, pending)
    settlement, skipped = find_settlement(ctx.api, ctx.subject, pending)
    for name, problem in skipped:
        ctx.crossed("SettlementUnstamped", f"settlement {name} is skipped: {problem}", warning=True)
    if settlement is not None:
        return _settle_by_person(ctx, pending, settlement)
    return claim_operation(ctx, "Plan" if pending.plan_required else "Observe")


def _settlement(
    ctx: PassContext[PtahSchema], pending: PendingObservationStatus
) -> PtahSchemaProofSettlement | None:
    """The settlement that ends this proof, if any; a Warning Event for each one
    naming it that is skipped for its stamp."""
    settlement, skipped = find_settlement(ctx.api, ctx.subject, pending)
    for name, problem in skipped:
        ctx.crossed("SettlementUnstamped", f"settlement {name} is skipped: {problem}", warning=True)
    return settlement


def _settle_by_person(
    ctx: PassContext[PtahSchema],
    pending: PendingObservationStatus,
    settlement: PtahSchemaProofSettlement,
) -> Stop:
    """A person ends a proof no read can finish, in the name admission stamped.

    Taken only once no Apply Pod can still run (``prove`` waited for that), so the
    release staged here hands back a database nothing of the claim can write to.
    One status patch clears the proof, records who settled it and stages the
    release: no Apply is attributed (``applied`` is left alone), and the plan goes
    too, so nothing is applied again before a fresh reading.
    """
    spec = settlement.spec
    assert spec.settled_by is not None and spec.settled_at is not None  # verified stamp
    settled = SettledProofStatus(
        apply_operation_id=pending.apply_operation_id,
        outcome=pending.outcome,
        settlement_ref=ObjectReference(
            name=settlement.metadata.name or "", uid=settlement.metadata.uid or ""
        ),
        settled_by=spec.settled_by,
        reason=spec.reason,
        settled_at=timestamp(ctx.now()),
    )
    release = _proof_release(pending)
    ctx.write_status(
        schema_status_of(ctx).model_copy(
            update={
                "pending_observation": None,
                "pending_lock_release": release,
                "settled_proof": settled,
                "plan": None,
                "phase": "Pending",
            }
        )
    )
    ctx.crossed(
        "ProofSettled",
        f"{spec.settled_by.username} settled the proof of {pending.apply_operation_id} "
        f"(settlement {settlement.metadata.name}); no Apply is attributed",
        warning=True,
    )
    consume_settlement(ctx.api, settlement, timestamp(ctx.now()))
    return complete_pending_release(ctx)


def _proof_release(pending: PendingObservationStatus) -> TargetLockReleaseStatus:
    """The release a proof ended without a reading owes: the Apply's own Lease."""
    return owed_release(
        coordination_digest=pending.coordination_digest,
        operation_id=pending.apply_operation_id,
        lease_duration_seconds=pending.lease_duration_seconds,
        lease_epoch=pending.lease_epoch,
    )


def _release_on_deletion(ctx: PassContext[PtahSchema], pending: PendingObservationStatus) -> Stop:
    """Deletion ends a proof no read will finish: the record goes, the release staged."""
    release = _proof_release(pending)
    ctx.write_status(
        schema_status_of(ctx).model_copy(
            update={"pending_observation": None, "pending_lock_release": release}
        )
    )
    ctx.crossed("ProofAbandoned", "the schema is being deleted with its proof owed", warning=True)
    stop = complete_pending_release(ctx)
    status = ctx.status
    if stop.error is None and status is not None and status.pending_lock_release is None:
        # Nothing holds the schema any longer: let it go in this pass, so no pass sees
        # it standing without the record its Apply left.
        return remove_orphan_finalizer(ctx) or stop
    return stop
