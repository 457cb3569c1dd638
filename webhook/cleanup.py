"""Job UPDATE: only the cleanup TTL, and only on the Job a record names.

After a Job's outcome is read the controller sets ``ttlSecondsAfterFinished`` to
``CLEANUP_TTL_SECONDS`` so the Job and its Pods go away. That is the one change the
manager may make to a Job, so the rule admits exactly that none-to-TTL transition with
everything else
unchanged, for a Job the owner's record names by name *and* UID: the active claim,
or the Apply a pending observation keeps while a binding retirement names it.

The Job is judged with ``jobclaim.match`` against what the claim fixes, without a
rebuild: the claim's inputs may have moved since dispatch (a spec edit, a rotated
binding), and a rebuild would refuse the cleanup of a Job the controller still has
to account for. The TTL is refused before the Job is terminal (its Pods could be
collected under a run that is still writing), except on the running current schema
Apply, whose TTL only starts counting once it finishes.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from jobclaim import (
    CLEANUP_TTL_SECONDS,
    Claim,
    apply_approval_of,
    finished,
    match,
    operation_info,
    owner_family,
    pending_apply_claim,
    witness_problem,
)
from jobclaim.api import (
    ExecutionBindingStatus,
    PtahMigration,
    PtahMigrationApproval,
    PtahSchema,
    PtahSchemaApproval,
)
from jobclaim.apiserver import PTAHMIGRATIONAPPROVALS, PTAHSCHEMAAPPROVALS
from webhook.jobs import OWNERS
from webhook.objects import Candidate, read_owner, stored
from webhook.rules import CONTROLLER_WRITE, Judgement, Object, ReadKey, Reads, Trail, read, rule

JOB_CLEANUP: Final = rule(
    "job-cleanup-ttl",
    (CONTROLLER_WRITE,),
    "Job UPDATE: only the exact cleanup TTL, on a Job a record names",
    description=f"""
    The only update the manager may make to a Job is setting
    spec.ttlSecondsAfterFinished from none to exactly {CLEANUP_TTL_SECONDS}, with every other field
    unchanged (resourceVersion, generation and managedFields aside). The Job must be
    the one its owner's record names by name and UID: the active claim, or the schema
    Apply a pending observation keeps after a binding rotation retired it (recorded
    OutcomeUnknown, named by status.pendingBindingRetirement under the retired epoch).
    A claim of a retired epoch still active is cleaned up only when it is read-only
    and the retirement record names its Job. The Job must be terminal, except the
    running current schema Apply. It is judged by jobclaim.match against what the
    claim fixes, without a rebuild, because the claim's inputs may have moved since
    dispatch; the owner may be being deleted.
    """,
    admits="the cleanup TTL on a finished Job its owner's record names",
)
NOT_PRESERVED: Final = JOB_CLEANUP.refuses(
    "the Job update does not preserve the request namespace, name and UID"
)
NOT_THE_TTL: Final = JOB_CLEANUP.refuses(
    f"the Job update is not the exact none-to-{CLEANUP_TTL_SECONDS} cleanup TTL transition"
)
OTHER_CHANGES: Final = JOB_CLEANUP.refuses(
    "the Job cleanup update changes fields outside the cleanup TTL"
)
NOT_NAMED: Final = JOB_CLEANUP.refuses(
    "the Job is not the exact instance its {kind}'s record names"
)
NO_BINDING: Final = JOB_CLEANUP.refuses("the {kind} records no execution binding in force")
RETIRED_NOT_FENCED: Final = JOB_CLEANUP.refuses(
    "the Job's claim is of a retired execution epoch and is not a read-only claim whose "
    "Job the binding retirement names"
)
PENDING_NOT_RETIRED: Final = JOB_CLEANUP.refuses(
    "the pending Apply's Job is not an unaccounted Apply a binding retirement names"
)
NOT_TERMINAL: Final = JOB_CLEANUP.refuses(
    "the Job's cleanup TTL cannot be set before the Job is terminal"
)
OUTSIDE_CLAIM: Final = JOB_CLEANUP.refuses("the Job is outside its claim: {reason}")
NOT_WITNESSED: Final = JOB_CLEANUP.refuses(
    "the Apply's approval {key} does not name this Job as the one it authorized: {reason}"
)

_IGNORED_METADATA: Final = ("resourceVersion", "generation", "managedFields")
_TTL: Final = "ttlSecondsAfterFinished"


def _without_ttl(raw: Object) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    for key in _IGNORED_METADATA:
        out.get("metadata", {}).pop(key, None)
    out.get("spec", {}).pop(_TTL, None)
    return out


def _transition_problem(new: Candidate, old: Candidate, trail: Trail) -> None:
    if (
        old.namespace != new.namespace
        or old.name != new.name
        or not old.meta.uid
        or old.meta.uid != new.meta.uid
    ):
        raise trail.deny(NOT_PRESERVED)
    ttl = new.raw["spec"].get(_TTL)
    # bool is an int in Python; a JSON true must not read as 1.
    if old.raw["spec"].get(_TTL) is not None or type(ttl) is not int or ttl != CLEANUP_TTL_SECONDS:
        raise trail.deny(NOT_THE_TTL)
    if _without_ttl(new.raw) != _without_ttl(old.raw):
        raise trail.deny(OTHER_CHANGES)
    trail.passed(f"only spec.{_TTL} changes, from none to {CLEANUP_TTL_SECONDS}")


def judge_job_cleanup(new: Candidate, old: Candidate, trail: Trail) -> Judgement:
    trail.enter(JOB_CLEANUP)
    _transition_problem(new, old, trail)
    owner = yield from read_owner(new.meta, OWNERS, what="Job", trail=trail, allow_deleting=True)
    if not isinstance(owner, PtahSchema | PtahMigration):
        raise TypeError(f"a Job owner decoded as {type(owner).__name__}")
    claim, running_apply = _naming_claim(owner, new, trail)
    if finished(old.raw) is None and not running_apply:
        raise trail.deny(NOT_TERMINAL)
    trail.passed("the Job is terminal" if not running_apply else "the running current Apply")
    yield from _hold_witness(owner, new, trail)
    verdict = match(new.raw, claim)
    if not verdict:
        raise trail.deny(OUTSIDE_CLAIM, reason=verdict.reason)
    trail.passed("jobclaim.match: the Job carries what its claim fixes (no rebuild)")
    return trail.allow()


def _hold_witness(owner: PtahSchema | PtahMigration, job: Candidate, trail: Trail) -> Reads[None]:
    """An Apply's approval names this Job before the Job may go: afterwards the approval
    is the only thing left that says it ran, and job-authority admits no Job under an
    approval that names one. An approval that is gone or replaced authorizes nothing
    and needs no witness."""
    ref = apply_approval_of(owner, job.name)
    if ref is None:
        return
    resource = PTAHSCHEMAAPPROVALS if isinstance(owner, PtahSchema) else PTAHMIGRATIONAPPROVALS
    model = PtahSchemaApproval if isinstance(owner, PtahSchema) else PtahMigrationApproval
    key = ReadKey(resource, job.namespace, ref.name)
    fetched = yield from read(key)
    approval = stored(fetched, key, model, trail)
    if (
        not isinstance(approval, PtahSchemaApproval | PtahMigrationApproval)
        or approval.metadata.uid != ref.uid
    ):
        trail.passed(f"the Apply's approval {key} is gone: it authorizes nothing any more")
        return
    problem = witness_problem(approval, job.name, job.meta.uid or "")
    if problem is not None:
        raise trail.deny(NOT_WITNESSED, key=key, reason=problem)
    trail.passed(f"the Apply's approval {key} names this Job as the one it authorized")


def _naming_claim(
    owner: PtahSchema | PtahMigration, job: Candidate, trail: Trail
) -> tuple[Claim, bool]:
    """The claim of the record that names ``job`` by name and UID, and whether the Job
    is the running current schema Apply (the one Job that may be cleaned up early)."""
    status = owner.status
    name, uid = job.name, job.meta.uid
    operation = status.active_operation if status else None
    binding = status.execution_binding if status else None
    if operation is not None and operation.job_name == name and operation.job_uid == uid:
        if binding is None:
            raise trail.deny(NO_BINDING, kind=owner.kind)
        trail.passed(f"status.activeOperation names {name} by name and UID")
        if operation.execution_binding_id == binding.epoch:
            current = _claim(owner, binding)
            return current, isinstance(owner, PtahSchema) and operation.type == "Apply"
        return _retired_claim(owner, job, trail), False
    if isinstance(owner, PtahSchema):
        pending = owner.status.pending_observation if owner.status else None
        if pending is not None and (pending.apply_job_name, pending.apply_job_uid) == (name, uid):
            return _pending_claim(owner, job, binding, trail), False
    raise trail.deny(NOT_NAMED, kind=owner.kind)


def _claim(owner: PtahSchema | PtahMigration, binding: ExecutionBindingStatus | None) -> Claim:
    made = owner_family(owner).claim(built=None, stored=True, binding=binding)
    if made is None:
        raise TypeError("the active claim vanished between two reads of one decoded owner")
    return made


def _retired_claim(owner: PtahSchema | PtahMigration, job: Candidate, trail: Trail) -> Claim:
    """A still-active claim of a retired epoch: only a read-only schema claim whose Job
    the binding retirement names may be cleaned up, and it is then judged without the
    binding (its epoch is held to the retirement record instead)."""
    status = owner.status
    operation = status.active_operation if status else None
    retirement = (
        owner.status.pending_binding_retirement
        if isinstance(owner, PtahSchema) and owner.status
        else None
    )
    if (
        operation is None
        or retirement is None
        or retirement.retired_epoch != operation.execution_binding_id
        or retirement.job is None
        or (retirement.job.name, retirement.job.uid) != (job.name, job.meta.uid)
        or not operation_info("schema", operation.type).read_only
    ):
        raise trail.deny(RETIRED_NOT_FENCED)
    trail.passed("a read-only claim of the retired epoch the binding retirement names")
    return _claim(owner, None)


def _pending_claim(
    schema: PtahSchema,
    job: Candidate,
    binding: ExecutionBindingStatus | None,
    trail: Trail,
) -> Claim:
    status = schema.status
    pending = status.pending_observation if status else None
    retirement = status.pending_binding_retirement if status else None
    plan = pending.plan if pending else None
    if (
        pending is None
        or plan is None
        or pending.outcome != "OutcomeUnknown"
        or retirement is None
        or retirement.job is None
        or retirement.job.operation != "Apply"
        or (retirement.job.name, retirement.job.uid) != (job.name, job.meta.uid)
        or retirement.retired_epoch != plan.execution_binding_id
        or (binding is not None and binding.epoch == retirement.retired_epoch)
    ):
        raise trail.deny(PENDING_NOT_RETIRED)
    claim = pending_apply_claim(schema, pending, stored=True)
    if claim is None:
        raise trail.deny(PENDING_NOT_RETIRED)
    trail.passed("the unaccounted Apply the pending observation and the retirement name")
    return claim
