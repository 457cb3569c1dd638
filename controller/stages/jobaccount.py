"""Reading a terminal Job's account through the API: the shell around
``runner.harvest``'s pure decisions.

A terminal Job is not an outcome. The account comes from

1. the Job's result record (``PtahResultRecord``, named after the Job), which a Pod of
   the Job created under its own token, read directly; once every Pod of the Job has
   stopped, its account may be read even when the writing Pod is gone
   (``select_evidence``);
2. without a record: exactly one Pod owned by the Job, accepted by the claim's
   persisted admission envelope, whose runner container actually terminated
   (``select_pod``), and for a migration Apply its termination summary when it names
   this attempt (``account_for``);
3. ``judge``: a record still missing is read again for a bounded time; an account
   about another database is uncertain, never failed.

The Job's exit code and conditions take no part: ``finished`` only says when to look.
No Pod log is read: the manager holds no ``pods/log``, and no log carries a result.

Harvested Jobs get the cleanup TTL (``set_cleanup_ttl``) before the outcome patch: a
stop in between leaves a TTL under a live claim, and the next pass re-reads the same
terminal Job and reaches the same verdict, because the TTL outlives the manager
outages the chart allows (docs/architecture.md, "The cleanup TTL and a late harvest").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.context.passcontext import PassContext
from controller.pieces.approvals import witness_apply_job
from controller.pieces.harvested import Harvest
from jobclaim import CLEANUP_TTL_SECONDS, manager_record_of, stored_claim
from jobclaim.api import ManagerRecord, PtahResultRecord
from jobclaim.apiserver import JOBS, PODS, PTAHRESULTRECORDS, NotFound, Object
from jobclaim.errors import InvalidInput
from runner import MalformedRecord, RecordError, SummaryRefused, account_for
from runner.harvest import (
    NoEvidence,
    judge,
    select_evidence,
    terminal_since,
)
from runner.summary import Account


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def pods_of(ctx: PassContext, job_uid: str) -> list[Object]:
    """Every Pod that names the Job with ``job_uid`` as an owner (read uncached)."""
    pods = ctx.api.list(PODS, ctx.namespace)
    return [
        pod
        for pod in pods
        if any(
            _map(ref).get("uid") == job_uid
            for ref in _map(pod.get("metadata")).get("ownerReferences") or []
        )
    ]


def set_cleanup_ttl(ctx: PassContext, job: Object) -> None:
    """Give a harvested Job the cleanup TTL (the one change the webhook admits after
    the create, and only on a Job its record names).

    An Apply's approval names the Job first (``witness_apply_job``): once the TTL has
    removed the Job, the approval is what says it already ran, and the webhook admits
    the TTL only after that is written. A stop in between leaves the witness, which the
    next pass finds and keeps."""
    spec = _map(job.get("spec"))
    if spec.get("ttlSecondsAfterFinished") == CLEANUP_TTL_SECONDS:
        return
    meta = _map(job.get("metadata"))
    name = meta.get("name")
    witness_apply_job(ctx.api, ctx.subject, str(name), str(meta.get("uid") or ""))
    ctx.api.patch_spec(
        JOBS,
        ctx.namespace,
        str(name),
        {"ttlSecondsAfterFinished": CLEANUP_TTL_SECONDS},
        resource_version=_map(job.get("metadata")).get("resourceVersion"),
    )


def _read_record(ctx: PassContext, job: Object) -> PtahResultRecord | MalformedRecord | None:
    """The Job's result record, None when there is none. Raises ApiError for a read
    that failed: a failed read is not a missing record."""
    name = str(_map(job.get("metadata")).get("name") or "")
    try:
        raw = ctx.api.get(PTAHRESULTRECORDS, ctx.namespace, name)
    except NotFound:
        return None
    try:
        return PtahResultRecord.model_validate(raw)
    except ValueError as error:
        return MalformedRecord(f"the record {name} does not decode: {error}")


def harvest(ctx: PassContext, job: Object) -> Harvest:
    """Read the claim's terminal Job. Raises ApiError when the Pods or the record
    cannot be read."""
    operation = ctx.operation
    claim = stored_claim(ctx.subject, built=None, binding=ctx.binding)
    pods = ctx.api.list(PODS, ctx.namespace)
    record = _read_record(ctx, job)
    found = record if isinstance(record, PtahResultRecord) else None
    chosen = select_evidence(job, pods, claim, found)
    if isinstance(chosen, NoEvidence):
        return Harvest(None, chosen, chosen.pod_uids, chosen.may_still_write, _dispatcher(job))
    read: Account | RecordError | SummaryRefused
    if isinstance(record, MalformedRecord):
        read = record
    else:
        try:
            read = account_for(
                found,
                chosen.termination_message,
                ctx.info.runner_operation,
                operation.id,
                job_uid=str(_map(job.get("metadata")).get("uid") or ""),
            )
        except (RecordError, SummaryRefused) as error:
            read = error
    judgement = judge(
        claim,
        read,
        terminal_at=terminal_since(job),
        now=ctx.now(),
        coordination_digest=operation.coordination_digest,
        target_identity_digest=getattr(operation, "target_identity_digest", None),
    )
    return Harvest(judgement, None, (chosen.uid,), False, _dispatcher(job))


def _dispatcher(job: Object) -> ManagerRecord | None:
    """The manager record the Job carries. A Job harvested has passed its claim's
    match, which reads the same record, so None only for a Job no match accepted."""
    try:
        return manager_record_of(job)
    except InvalidInput:
        return None
