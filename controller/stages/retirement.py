"""Retiring a claim that ran: one function per family, and the release it owes.

Each family retires a dispatched claim through one function here, which writes one
status patch that

1. clears the claim,
2. keeps (or writes) the record the claim leaves behind, and
3. stages ``status.pendingLockRelease`` when ``mutationlifecycle.Retirement`` says a
   release is owed,

and only then performs the release (``claimwrites.complete_pending_release``). A process
that stops between the two leaves the staged record, which the top of the next pass
performs before anything else; the other order would hand the database back under a
claim that still reads as live.

A schema's record (``pendingObservation``) holds the realm, so an Apply retires
releasing nothing and the proof keeps the Lease. A migration's record does not: its
Apply releases once nothing it dispatched can still write, which
``dispatched_apply_may_still_write`` answers from the Job and its Pods, counting every
read that could not say as "may still write". On that answer no release is staged and
the Lease is left to expire: ``ManagerConfig.lease_duration`` gives a migration Apply
its window plus the Job's deadline grace plus a Lease grace, and the runner stops the
executor at the end of the window, so the executor stops before the Lease can lapse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.context.passcontext import (
    PassContext,
    Status,
    migration_status_of,
    schema_status_of,
)
from controller.mutationlifecycle import (
    Disposition,
    Retirement,
    Stop,
    owed_release,
)
from controller.stages.claimwrites import complete_pending_release
from controller.stages.jobaccount import pods_of
from jobclaim import finished, pod_stopped
from jobclaim.api import PendingObservationStatus
from jobclaim.apiserver import JOBS, ApiError, NotFound, Object


def dispatched_apply_may_still_write(ctx: PassContext) -> bool:
    """Whether anything the claim dispatched may still write.

    Yes for a Job that is not terminal, a Pod of it that has not stopped, and a read
    that could not say. A missing Job with no recorded UID was never stored: nothing
    stands that could write. Asked before the outcome patch, never after.
    """
    operation = ctx.operation
    try:
        try:
            job: Object | None = ctx.api.get(JOBS, ctx.namespace, operation.job_name)
        except NotFound:
            job = None
        uid = operation.job_uid
        if job is not None:
            found_uid = (job.get("metadata") or {}).get("uid")
            if uid and found_uid != uid:
                job = None  # another Job under the name says nothing about ours
            else:
                uid = found_uid
        if job is not None and finished(job) is None:
            return True
        if not uid:
            return False
        return any(not pod_stopped(pod) for pod in pods_of(ctx, uid))
    except ApiError:
        return True


def _write(
    ctx: PassContext, retirement: Retirement, retired: Status, release_of: Any, reason: str
) -> Stop:
    if retirement.releases():
        retired = retired.model_copy(
            update={
                "pending_lock_release": owed_release(
                    coordination_digest=release_of.coordination_digest,
                    operation_id=getattr(release_of, "apply_operation_id", None)
                    or getattr(release_of, "id", None),
                    lease_duration_seconds=release_of.lease_duration_seconds,
                    lease_epoch=release_of.lease_epoch,
                )
            }
        )
    ctx.write_status(retired)
    ctx.crossed("ClaimRetired", reason)
    if ctx.status is None or ctx.status.pending_lock_release is None:
        return Stop(reason, requeue_after=0.0)
    stop = complete_pending_release(ctx)
    return Stop(reason, requeue_after=0.0, error=stop.error)


def retire_schema_claim(
    ctx: PassContext,
    reason: str,
    *,
    disposition: Disposition,
    record: PendingObservationStatus | None,
    ends_proof: bool = False,
    update: Mapping[str, Any] | None = None,
) -> Stop:
    """Retire a schema's claim: the claim cleared, ``record`` as the pending observation
    (None removes it, which only the proof's settlement does, with ``ends_proof``),
    and the release owed staged, in one status patch; then the release."""
    status = schema_status_of(ctx)
    operation = ctx.operation
    pending = status.pending_observation
    retirement = ctx.retirement(disposition, record_holds_realm=True, ends_proof=ends_proof)
    changes: dict[str, Any] = {"active_operation": None, "pending_observation": record}
    changes.update(update or {})
    retired = status.model_copy(update=changes)
    # The proof's release is the Apply's tenure; the claim's own is the claim's.
    release_of = pending if ends_proof and pending is not None else operation
    return _write(ctx, retirement, retired, release_of, reason)


def retire_migration_claim(
    ctx: PassContext,
    reason: str,
    *,
    disposition: Disposition,
    may_still_write: bool,
    update: Mapping[str, Any] | None = None,
) -> Stop:
    """Retire a migration's claim with whatever ``update`` records (its last run, an
    unresolved record), staging the release only when nothing can still write."""
    status = migration_status_of(ctx)
    operation = ctx.operation
    info = ctx.info
    retirement = ctx.retirement(disposition, may_still_write=may_still_write)
    changes: dict[str, Any] = {"active_operation": None}
    changes.update(update or {})
    if not retirement.releases() and info.mutating and may_still_write:
        ctx.crossed(
            "LeaseLeftToExpire",
            "the run may still write; its Lease expires after the executor has stopped",
            warning=True,
        )
    return _write(ctx, retirement, status.model_copy(update=changes), operation, reason)
