"""Supervising a claim whose Job may exist: rebind, renew, hold it to its claim.

Every pass over a claim that may have dispatched, or that finds a Job under its
reserved name, does the same three things in this order:

1. rebind by UID: the Job under the reserved name must be the one the claim recorded;
2. renew the realm's Lease under the claim's epoch (a loss is latched, never retried);
3. hold the Job to its claim with ``jobclaim.match``: against a full rebuild while
   the claim's inputs still hold, against what the claim fixes once they moved.

A Job that passes and has no recorded UID is adopted (the create's answer was lost).
One that fails is drift: an unknown outcome for a mutating claim, which never gets a
second executor, and a new attempt for a read-only one, whose old Job is left to its
own deadline. Suspension changes none of this: a dispatched mutating claim is
supervised, and its Lease renewed, until its run is accounted for.

What becomes of an unknown outcome is issue 5's records (a schema's pending
observation, a migration's unresolved run). Until those exist, ``record_unaccounted``
is the one hand-off point: it makes sure the claim can never dispatch again and
writes nothing else.
"""

from __future__ import annotations

from typing import Final

from controller.claiming import input_fingerprint
from controller.claims import AGAIN, epoch_update, write_retry
from controller.mutationlifecycle import Stop, may_have_dispatched
from controller.passcontext import PassContext
from controller.targetlock import MalformedLease
from jobclaim import Verdict, finished, manager_record_of, match
from jobclaim.apiserver import JOBS, ApiError, NotFound, Object
from jobclaim.errors import InvalidInput


def _renew_interval(ctx: PassContext) -> float:
    return ctx.env.config.renew_interval_seconds


def record_unaccounted(ctx: PassContext, reason: str) -> Stop:
    """Hand a mutating claim's unknown outcome to the outcome records (issue 5).

    For now it writes only what stops dispatch: ``dispatchStarted`` on a claim not yet
    marked, so ``may_have_dispatched`` holds from here on and no later pass can create
    a Job for this claim, whatever it then finds. The claim itself stays, so every
    pass keeps renewing its Lease while its Job may still write.
    """
    operation = ctx.operation
    if not operation.dispatch_started:
        ctx.write_operation(dispatch_started=True)
    ctx.crossed("OutcomeUnknown", reason, warning=True)
    return Stop(f"the outcome is unknown: {reason}", requeue_after=_renew_interval(ctx))


def settle_drift(ctx: PassContext, reason: str) -> Stop:
    """A Job that is not its claim's, or a claim that cannot find its Job."""
    if ctx.info.read_only:
        return write_retry(ctx, reason)
    return record_unaccounted(ctx, reason)


def renew(ctx: PassContext) -> Stop | None:
    """Renew the realm's Lease under the claim's tenure; latch a loss after dispatch."""
    operation = ctx.operation
    if not (ctx.info.holds_lock(False) and operation.lease_epoch):
        return None
    if operation.coordination_digest is None or operation.lease_duration_seconds is None:
        return None
    try:
        state = ctx.env.lock.renew(
            operation.coordination_digest,
            ctx.holder,
            operation.lease_duration_seconds,
            operation.lease_epoch,
        )
    except MalformedLease as error:
        # A Lease nobody can read is not the tenure this run began under.
        lost = not operation.lease_continuity_lost
        state_update: dict[str, object] | None = {"lease_continuity_lost": True} if lost else None
        ctx.crossed("LeaseMalformed", str(error), warning=True)
    else:
        state_update = epoch_update(operation, state, dispatched=True)
    if state_update:
        ctx.write_operation(**state_update)
        ctx.crossed(
            "LeaseContinuityLost",
            "the realm's Lease is no longer the tenure this run began under",
            warning=True,
        )
    return None


def inputs_hold(ctx: PassContext) -> bool:
    """Whether the claim's inputs are still the ones it was decided from."""
    operation = ctx.operation
    binding = ctx.binding
    if binding is None or binding.epoch != operation.execution_binding_id:
        return False
    inputs = ctx.family.inputs(ctx, operation.type)
    return inputs is not None and input_fingerprint(inputs) == operation.input_fingerprint


def hold(ctx: PassContext, job: Object) -> Verdict:
    """``jobclaim.match`` in the mode the claim can afford.

    While the inputs hold, the Job is rebuilt with the manager record it carries
    (a later manager of the same binding adopts its predecessor's Jobs) and held to
    the rebuild; a claim that can no longer rebuild is drift. Once the inputs moved,
    the Job is held to the envelope the claim fixes.
    """
    operation = ctx.operation
    snapshot = operation.admission_snapshot
    if not inputs_hold(ctx):
        return match(job, ctx.family.claim(ctx, None))
    try:
        manager = manager_record_of(job)
        built = ctx.family.build(
            ctx, snapshot_digest=snapshot.digest if snapshot else None, manager=manager
        )
    except InvalidInput as error:
        return Verdict(False, f"the claim cannot rebuild its Job: {error}")
    return match(job, ctx.family.claim(ctx, built))


def supervise(ctx: PassContext) -> Stop | None:
    """One supervision pass. None means no Job stands under the reserved name and the
    claim has not dispatched: the caller may take it through the dispatch sequence."""
    operation = ctx.operation
    info = ctx.info
    try:
        job: Object | None = ctx.api.get(JOBS, ctx.namespace, operation.job_name)
    except NotFound:
        job = None
    except ApiError as error:
        return Stop("the claim's Job cannot be read", error=error)
    dispatched = may_have_dispatched(
        dispatch_started=operation.dispatch_started, job_uid=operation.job_uid
    )
    if job is None:
        if info.mutating and dispatched:
            return record_unaccounted(ctx, "the Job a marked claim may have created is missing")
        if info.read_only and operation.job_uid:
            return write_retry(ctx, "the recorded Job is gone")
        return None
    try:
        return _supervise_job(ctx, job)
    except ApiError as error:
        return Stop("supervision could not finish", error=error)


def _supervise_job(ctx: PassContext, job: Object) -> Stop:
    operation = ctx.operation
    uid = job.get("metadata", {}).get("uid")
    if operation.job_uid and uid != operation.job_uid:
        return settle_drift(ctx, "the Job under the reserved name is not the one recorded")
    renew(ctx)
    verdict = hold(ctx, job)
    if not verdict:
        return settle_drift(ctx, f"the Job is not its claim's: {verdict.reason}")
    if not ctx.operation.job_uid:
        # The create's answer was lost, or the process stopped before the UID write:
        # the Job matched, so it is this claim's own.
        update: dict[str, object] = {"job_uid": uid}
        if ctx.info.mutating:
            update["dispatch_started"] = True
        ctx.write_operation(**update)
        ctx.crossed("JobAdopted", f"Job {operation.job_name} ({uid}) was adopted")
        return Stop("the Job under the reserved name was adopted", requeue_after=AGAIN)
    if finished(job) is not None:
        return await_harvest(ctx, job)
    return Stop("the Job is running", requeue_after=_renew_interval(ctx))


HARVEST_PENDING: Final = "the Job has finished; its result is read by the harvest (issue 5)"


def await_harvest(ctx: PassContext, job: Object) -> Stop:
    """A finished Job's account is issue 5's. Until then the claim stays and is renewed."""
    del job
    return Stop(HARVEST_PENDING, requeue_after=_renew_interval(ctx))
