"""Retiring a claim that never dispatched, and performing a release a write owes.

The write that retires a claim clears it and stages the Lease release it owes
(``status.pendingLockRelease``) in one status patch; the release follows that write,
never leads it. A process that stops between the two leaves the record, which the
top of the next pass performs (``complete_pending_release``). The other order would
hand the database back while a claim still reads as live.

Which release is owed is ``mutationlifecycle.Retirement``'s decision, not this
module's. Retiring a claim that may have dispatched is not done here: that claim's
run has to be accounted for first (issue 5's records), and ``retire_undispatched``
refuses it.
"""

from __future__ import annotations

from controller.mutationlifecycle import (
    Disposition,
    Retirement,
    Stop,
    may_have_dispatched,
    owed_release,
    realm_held_by,
)
from controller.passcontext import PassContext, Status
from jobclaim import lease_holder
from jobclaim.api import PtahSchemaStatus
from jobclaim.apiserver import ApiError
from jobclaim.errors import PtahError

AGAIN = 0.0


class MayHaveDispatched(PtahError):
    """Retiring as undispatched a claim that may have a Job would discard its run."""


def _proof_outstanding(status: Status) -> bool:
    return isinstance(status, PtahSchemaStatus) and status.pending_observation is not None


def retire_undispatched(ctx: PassContext, reason: str, *, drop_plan: bool = False) -> Stop:
    """Discard a claim that never dispatched, releasing the realm it may hold.

    ``drop_plan`` also drops the plan the claim was authorized by: a moved binding
    discards the plan rather than narrowing the claim.
    """
    operation = ctx.operation
    info = ctx.info
    status = ctx.status
    assert status is not None
    dispatched = may_have_dispatched(
        dispatch_started=operation.dispatch_started, job_uid=operation.job_uid
    )
    if dispatched and not info.read_only:
        raise MayHaveDispatched(
            "a claim that may have dispatched cannot be retired as if it never ran"
        )
    proof = _proof_outstanding(status)
    retirement = Retirement(
        holder=realm_held_by(
            mutating=info.mutating,
            serves_proof=info.serves_proof,
            locked=bool(operation.lease_epoch),
            proof_outstanding=proof,
        ),
        mutating=info.mutating,
        disposition=Disposition.DISCARD,
    )
    retired = ctx.family.retired(status, drop_plan=drop_plan)
    if retirement.releases():
        release = owed_release(
            coordination_digest=operation.coordination_digest,
            operation_id=operation.id,
            lease_duration_seconds=operation.lease_duration_seconds,
            lease_epoch=operation.lease_epoch,
        )
        retired = retired.model_copy(update={"pending_lock_release": release})
    ctx.write_status(retired)
    ctx.crossed("ClaimRetired", f"{operation.type} retired before dispatch: {reason}")
    stop = complete_pending_release(ctx)
    return Stop(f"the claim was retired: {reason}", requeue_after=AGAIN, error=stop.error)


def complete_pending_release(ctx: PassContext) -> Stop:
    """Release the Lease ``status.pendingLockRelease`` names, then clear the record.

    A release that fails leaves the record for the next pass: finalizers stay on and
    nothing else is claimed until it is done.
    """
    status = ctx.status
    release = status.pending_lock_release if status else None
    if status is None or release is None:
        return Stop("no release is owed", requeue_after=AGAIN)
    try:
        ctx.env.lock.release(
            release.coordination_digest,
            lease_holder(ctx.uid, release.operation_id),
            release.lease_epoch,
        )
        ctx.write_status(status.model_copy(update={"pending_lock_release": None}))
    except ApiError as error:
        return Stop("the owed release is not done yet", error=error)
    ctx.crossed("RealmReleased", f"the database realm's Lease {release.lease_epoch} was released")
    return Stop("the owed release is done", requeue_after=AGAIN)
