"""A schema's execution-binding rotation, and the record it leaves worked off.

When a rotation is due is ``controller/stages/binding_rotation.py``'s (shared with a
migration); what a schema leaves behind is this module's: the write that installs
the new epoch names the retired plan and the retired claim's Job as
``status.pendingBindingRetirement`` (a dispatched Apply becoming an unknown-outcome
pending observation in the same write), and ``work_off`` meets one of its
obligations per pass, before anything else the pass would do.
"""

from __future__ import annotations

from typing import Any

from controller.context.passcontext import PassContext, schema_status_of
from controller.families.schema.records import pending_observation_for, renew_proof
from controller.mutationlifecycle import Stop
from controller.stages.approvalstaleness import mark_plan_approvals_stale
from controller.stages.binding_rotation import (
    discarded,
    dispatched,
    finish_rotation,
    new_binding,
)
from controller.stages.claimsupervision import renew
from controller.stages.claimwrites import AGAIN
from controller.stages.jobaccount import pods_of, set_cleanup_ttl
from jobclaim import finished, match, pending_apply_claim, pod_stopped, schema_claim
from jobclaim.api import (
    BindingRetirementStatus,
    PtahSchema,
    RetiredJobStatus,
    RetiredPlanReference,
)
from jobclaim.apiserver import JOBS, NotFound, Object
from jobclaim.times import parse_time


def rotate_schema_binding(ctx: PassContext[PtahSchema]) -> Stop:
    """Work off what the last rotation still owes, or move the schema to the binding
    now in force (``SchemaFamily.rotate_binding``)."""
    retiring = ctx.binding_retirement
    if retiring is not None:
        return work_off(ctx, retiring)
    return _rotate(ctx)


def _rotate(ctx: PassContext[PtahSchema]) -> Stop:
    """The schema moves to the new binding and records what the old one still owes."""
    status = schema_status_of(ctx)
    update: dict[str, Any] = {}
    job: RetiredJobStatus | None = None
    active = status.active_operation
    if active is not None:
        if ctx.info.mutating and dispatched(ctx):
            # The Apply's account is owed whatever the epoch: it becomes the record.
            update["pending_observation"] = pending_observation_for(
                ctx, succeeded=False, pod_uids=()
            )
            update["active_operation"] = None
            job = RetiredJobStatus(operation=active.type, name=active.job_name, uid=active.job_uid)
        elif ctx.info.read_only:
            # Kept until its Job stops, so a Plan's Lease is not handed back while its
            # Pod can still reach the database.
            job = RetiredJobStatus(operation=active.type, name=active.job_name, uid=active.job_uid)
        else:
            update = discarded(ctx, status)
    pending = status.pending_observation
    if job is None and pending is not None and pending.apply_job_uid is None:
        # An unknown Apply no pass harvested: its Job is still to be accounted for.
        job = RetiredJobStatus(operation="Apply", name=pending.apply_job_name, uid=None)
    plan = status.plan
    retired_plan = (
        RetiredPlanReference(name=plan.name, uid=plan.uid, fingerprint=plan.fingerprint)
        if plan is not None
        else None
    )
    old = ctx.binding
    assert old is not None
    new = new_binding(ctx)
    update.update({"execution_binding": new, "plan": None, "phase": "Pending"})
    if retired_plan is not None or job is not None:
        update["pending_binding_retirement"] = BindingRetirementStatus(
            retired_epoch=old.epoch, plan=retired_plan, job=job
        )
    ctx.write_status(status.model_copy(update=update))
    ctx.crossed("ExecutionBindingRotated", f"work here now runs under epoch {new.epoch}")
    return finish_rotation(ctx, "the execution binding was rotated")


# -- working off a schema's retirement ------------------------------------------------


def _write_record(
    ctx: PassContext[PtahSchema], record: BindingRetirementStatus, **extra: Any
) -> None:
    remaining = record if (record.plan is not None or record.job is not None) else None
    status = schema_status_of(ctx)
    ctx.write_status(status.model_copy(update={"pending_binding_retirement": remaining, **extra}))


def work_off(ctx: PassContext[PtahSchema], record: BindingRetirementStatus) -> Stop:
    """Meet the record's next obligation; every pass comes here first until it is gone."""
    if record.plan is not None:
        marked = mark_plan_approvals_stale(ctx, record.plan.uid)
        _write_record(ctx, record.model_copy(update={"plan": None}))
        ctx.crossed("ApprovalsStale", f"{marked} approval(s) of the retired plan marked stale")
        return Stop("the retired plan's approvals are stale", requeue_after=AGAIN)
    job = record.job
    if job is None:
        _write_record(ctx, record)
        return Stop("the binding retirement is complete", requeue_after=AGAIN)
    if job.operation == "Apply":
        return _apply_job(ctx, record, job)
    return _read_only_job(ctx, record, job)


def _get(ctx: PassContext[PtahSchema], name: str) -> Object | None:
    try:
        return ctx.api.get(JOBS, ctx.namespace, name)
    except NotFound:
        return None


def _still_running(ctx: PassContext[PtahSchema], job: Object) -> bool:
    """Whether the Job or a Pod of it may still reach the database."""
    if finished(job) is None:
        return True
    uid = job.get("metadata", {}).get("uid")
    return bool(uid) and any(not pod_stopped(pod) for pod in pods_of(ctx, str(uid)))


def _read_only_job(
    ctx: PassContext[PtahSchema], record: BindingRetirementStatus, job: RetiredJobStatus
) -> Stop:
    status = schema_status_of(ctx)
    found = _get(ctx, job.name)
    active = status.active_operation
    if found is not None and _still_running(ctx, found):
        if active is not None:
            renew(ctx)
        return Stop(
            "the retired read-only Job is still running",
            requeue_after=ctx.env.config.renew_interval_seconds,
        )
    schema = ctx.subject
    if found is not None and active is not None and active.job_name == job.name:
        claim = schema_claim(schema, built=None, stored=True, binding=None)
        if claim is not None and match(found, claim):
            set_cleanup_ttl(ctx, found)
    update: dict[str, Any] = discarded(ctx, status) if active is not None else {}
    _write_record(ctx, record.model_copy(update={"job": None}), **update)
    ctx.crossed("RetiredClaimEnded", f"the retired {job.operation} claim is gone")
    return finish_rotation(ctx, "the retired read-only claim was retired")


def _apply_job(
    ctx: PassContext[PtahSchema], record: BindingRetirementStatus, job: RetiredJobStatus
) -> Stop:
    status = schema_status_of(ctx)
    schema = ctx.subject
    pending = status.pending_observation
    interval = ctx.env.config.renew_interval_seconds
    if pending is not None:
        stop = renew_proof(ctx, pending)
        if stop is not None:
            return stop
    found = _get(ctx, job.name)
    claim = pending_apply_claim(schema, pending) if pending is not None else None
    if found is not None:
        uid = found.get("metadata", {}).get("uid")
        if job.uid is not None and uid != job.uid:
            found = None
        elif claim is not None and not match(found, claim):
            found = None  # not the Apply the record names: nothing of ours to adopt
        elif job.uid is None:
            adopted = job.model_copy(update={"uid": uid})
            extra: dict[str, Any] = {}
            if pending is not None:
                extra["pending_observation"] = pending.model_copy(update={"apply_job_uid": uid})
            _write_record(ctx, record.model_copy(update={"job": adopted}), **extra)
            ctx.crossed("RetiredJobAdopted", f"Job {job.name} ({uid}) is the retired Apply's")
            return Stop("the retired Apply's Job was adopted", requeue_after=AGAIN)
    if found is None:
        horizon = parse_time(pending.observe_after) if pending and pending.observe_after else None
        if job.uid is None and horizon is not None and ctx.now() < horizon:
            return Stop("the retired Apply may still be created", requeue_after=interval)
        _write_record(ctx, record.model_copy(update={"job": None}))
        return Stop("the retired Apply's Job is accounted for", requeue_after=AGAIN)
    if _still_running(ctx, found):
        return Stop("the retired Apply's Job is still running", requeue_after=interval)
    set_cleanup_ttl(ctx, found)
    _write_record(ctx, record.model_copy(update={"job": None}))
    return Stop("the retired Apply's Job has stopped", requeue_after=AGAIN)
