"""Supervising a claim whose Job may exist: rebind, renew, hold it to its claim.

Every pass over a claim that may have dispatched, or that finds a Job under its
reserved name, does the same three things in this order:

1. rebind by UID: the Job under the reserved name must be the one the claim recorded;
2. renew the realm's Lease under the claim's epoch (a loss is latched, never retried,
   and a latched loss settles the claim without reading its result);
3. hold the Job to its claim with ``jobclaim.match``: against a full rebuild while
   the claim's inputs still hold, against what the claim fixes once they moved.

A Job that passes and has no recorded UID is adopted (the create's answer was lost).
One that fails is drift: an unknown outcome for a mutating claim, which never gets a
second executor, and a new attempt for a read-only one, whose old Job is left to its
own deadline. Suspension changes none of this: a dispatched mutating claim is
supervised, and its Lease renewed, until its run is accounted for.

An unknown outcome becomes the family's record (``record_unaccounted``): a schema's
pending observation, a migration's unresolved run, each swapped for the claim in one
status patch. A terminal Job is harvested (``await_harvest``): its account is read
from its one Pod, the Job gets its cleanup TTL, and the family's outcome records what
the account says. A claim whose inputs moved is not harvested: a mutating run is
recorded unknown and a read-only one is discarded, without reading either result.
"""

from __future__ import annotations

from typing import Final

from controller.context.passcontext import PassContext
from controller.mutationlifecycle import Stop
from controller.pieces.operationidentity import input_fingerprint
from controller.pieces.targetlock import MalformedLease
from controller.stages.claimwrites import (
    AGAIN,
    epoch_update,
    retire_undispatched,
    write_retry,
)
from controller.stages.jobaccount import harvest, set_cleanup_ttl
from controller.stages.readings import record_reading
from jobclaim import (
    Verdict,
    active_job_inputs,
    build_job,
    finished,
    manager_record_of,
    match,
    stored_claim,
)
from jobclaim.apiserver import JOBS, ApiError, NotFound, Object
from jobclaim.errors import InvalidInput
from runner.harvest import Outcome


def _renew_interval(ctx: PassContext) -> float:
    return ctx.env.config.renew_interval_seconds


def record_unaccounted(ctx: PassContext, reason: str) -> Stop:
    """Record a mutating claim's unknown outcome as its family's record.

    The claim goes in the same status patch that writes the record, so no later pass
    can create a Job for it, and the record carries what the claim's run still owes.
    """
    ctx.crossed("OutcomeUnknown", reason, warning=True)
    stop = ctx.family.record_unknown(ctx, reason)
    return Stop(f"the outcome is unknown: {reason}", requeue_after=AGAIN, error=stop.error)


def settle_drift(ctx: PassContext, reason: str) -> Stop:
    """A Job that is not its claim's, or a claim that cannot find its Job."""
    if ctx.info.read_only:
        return write_retry(ctx, reason)
    return record_unaccounted(ctx, reason)


LEASE_CHANGED_HANDS: Final = "the realm's Lease changed hands under the run; its result is not read"


def settle_continuity_loss(ctx: PassContext, job: Object) -> Stop:
    """A dispatched claim whose realm changed hands under it: its run is unreadable.

    Whatever the Job did or still does, its result is never read, because another
    claimant may have written to the database beside it. A mutating run becomes its
    family's unknown-outcome record; a proof's reading restarts the proof as an unknown
    outcome; any other read-only claim runs again under a new attempt. A terminal Job
    gets its cleanup TTL first, as a harvested one does (its result will never be
    wanted); a running one is left to its deadline, and the record waits for it.
    """
    if finished(job) is not None:
        set_cleanup_ttl(ctx, job)
    if ctx.info.serves_proof and ctx.proof_outstanding:
        return ctx.family.restart_proof(ctx, LEASE_CHANGED_HANDS)
    return settle_drift(ctx, LEASE_CHANGED_HANDS)


def renew(ctx: PassContext) -> Stop | None:
    """Renew the realm's Lease under the claim's tenure; latch a loss after dispatch."""
    operation = ctx.operation
    if not (ctx.info.holds_lock(ctx.proof_outstanding) and operation.lease_epoch):
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


def retire_moved(ctx: PassContext, suspended: str | None) -> Stop | None:
    """Retire a claim before dispatch when its resource is suspended (``suspended``
    says why, in the family's words) or its inputs moved; None while neither holds.
    Every family's authorize begins here."""
    if suspended is not None:
        return retire_undispatched(ctx, suspended)
    if not inputs_hold(ctx):
        apply = ctx.operation.type == "Apply"
        return retire_undispatched(ctx, "the claim's inputs moved", drop_plan=apply)
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
        return match(job, stored_claim(ctx.subject, built=None, binding=ctx.binding))
    try:
        inputs = active_job_inputs(
            ctx.subject,
            binding=ctx.binding,
            manager=manager_record_of(job),
            expected_sequence=ctx.family.sequence(ctx),
        )
        built = build_job(inputs._replace(snapshot_digest=snapshot.digest if snapshot else None))
    except InvalidInput as error:
        return Verdict(False, f"the claim cannot rebuild its Job: {error}")
    return match(job, stored_claim(ctx.subject, built=built, binding=ctx.binding))


def supervise(ctx: PassContext, *, dispatched: bool) -> Stop | None:
    """One supervision pass. None means no Job stands under the reserved name and the
    claim has not dispatched: the caller may take it through the dispatch sequence.
    ``dispatched``: whether the claim may have dispatched (``may_have_dispatched``),
    which the pass decided once from the claim it read."""
    operation = ctx.operation
    info = ctx.info
    try:
        job: Object | None = ctx.api.get(JOBS, ctx.namespace, operation.job_name)
    except NotFound:
        job = None
    except ApiError as error:
        return Stop("the claim's Job cannot be read", error=error)
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
    if ctx.operation.lease_continuity_lost:
        # Latched by this pass's renewal or an earlier one, and durable before this:
        # a stop here leaves the latch, and the next pass settles the same way.
        return settle_continuity_loss(ctx, job)
    if finished(job) is not None:
        return await_harvest(ctx, job)
    return Stop("the Job is running", requeue_after=_renew_interval(ctx))


HARVEST_PENDING: Final = "the Job has finished; its result record may still be arriving"


def await_harvest(ctx: PassContext, job: Object) -> Stop:
    """Account for a terminal Job that passed its match."""
    if not inputs_hold(ctx):
        # The claim cannot rebuild its Job: its result is not read, whatever it says.
        set_cleanup_ttl(ctx, job)
        if ctx.info.mutating:
            return record_unaccounted(ctx, "the claim's inputs moved while its Job ran")
        return ctx.family.retire_unread(ctx, "the claim's inputs moved; its reading is discarded")
    harvested = harvest(ctx, job)
    retry = harvested.retry_after(ctx.now())
    if retry is not None:
        return Stop(HARVEST_PENDING, requeue_after=min(retry, _renew_interval(ctx)))
    # The TTL before the outcome patch: a stop between them leaves a TTL under a live
    # claim, and the next pass re-reads the same terminal Job to the same verdict.
    set_cleanup_ttl(ctx, job)
    if ctx.info.mutating and harvested.outcome is not Outcome.ACCOUNTED:
        ctx.crossed("OutcomeUnknown", harvested.reason, warning=True)
    recorded = record_reading(ctx, harvested, job)
    if recorded is not None:
        return recorded
    return ctx.family.outcome(ctx, harvested)
