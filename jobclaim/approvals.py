"""Whether an approval authorizes a plan: the one reading, for the controller and admission.

A person approves one plan of one resource by creating a PtahSchemaApproval or a
PtahMigrationApproval; admission stamps who approved, when, and the request that
created it. An approval authorizes a mutating claim only when it names the resource
and the plan by name and UID, carries the plan's fingerprint (which binds everything
else the plan was computed under) and carries admission's stamp. An approval being
deleted, marked Stale, or already Consumed authorizes nothing. The controller chooses
and spends approvals by these functions (``controller.pieces.approvals``), and the
controller-write webhook holds every mutating Job to the approval its claim spent
by the same ones, so the two cannot disagree about what a person authorized.

Pure: every function takes objects already read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from jobclaim.api import (
    CurrentPlanStatus,
    ObjectReference,
    PtahMigration,
    PtahMigrationApproval,
    PtahSchema,
    PtahSchemaApproval,
)
from jobclaim.api.meta import Condition
from jobclaim.stamps import STAMPED, stamp_problem

__all__ = [
    "CONSUMED",
    "STALE",
    "apply_approval_of",
    "approval_stamp_problem",
    "consumed_by",
    "migration_approval_problem",
    "schema_approval_problem",
    "witness_problem",
]

CONSUMED: Final = "Consumed"
STALE: Final = "Stale"


def _true(conditions: Iterable[Condition], kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in conditions)


def approval_stamp_problem(approval: PtahSchemaApproval | PtahMigrationApproval) -> str | None:
    """Why the approval's admission stamp cannot be believed, or None.

    Admission stamps who approved, when and in which request; without a stamp the
    controller can verify, the approval could have been written by anything that can
    create the object, naming anyone (``jobclaim.stamps.stamp_problem``).
    """
    spec = approval.spec.to_wire()
    return stamp_problem(STAMPED[approval.kind], spec, approval.metadata.creation_timestamp)


def _state_problem(
    approval: PtahSchemaApproval | PtahMigrationApproval, *, consumed_ok: bool, check_stamp: bool
) -> str | None:
    """Why the approval authorizes nothing whatever it names, or None."""
    conditions = approval.status.conditions if approval.status else []
    if approval.metadata.deletion_timestamp is not None:
        return "it is being deleted"
    if _true(conditions, STALE):
        return "it is marked stale"
    if not consumed_ok and _true(conditions, CONSUMED):
        return "it was already consumed"
    return approval_stamp_problem(approval) if check_stamp else None


def schema_approval_problem(
    approval: PtahSchemaApproval,
    *,
    schema_name: str,
    schema_uid: str,
    plan: CurrentPlanStatus,
    consumed_ok: bool = False,
    check_stamp: bool = True,
) -> str | None:
    """Why ``approval`` does not authorize applying ``plan`` to the schema, or None.

    ``check_stamp=False`` asks whether it would, were its stamp believed: how the
    approvals skipped only for their stamp are found, to say so in an Event."""
    spec = approval.spec
    if (spec.schema_ref.name, spec.schema_ref.uid) != (schema_name, schema_uid):
        return "it names another schema"
    if (spec.plan_ref.name, spec.plan_ref.uid) != (plan.name, plan.uid):
        return "it names another plan"
    # The fingerprint binds everything the plan was computed under; nothing else of
    # the plan needs comparing.
    if spec.plan_fingerprint != plan.fingerprint:
        return "it approves another plan fingerprint"
    if spec.execution_binding_id not in (None, plan.execution_binding_id):
        return "it names another execution epoch than its plan"
    return _state_problem(approval, consumed_ok=consumed_ok, check_stamp=check_stamp)


def migration_approval_problem(
    approval: PtahMigrationApproval,
    *,
    migration_name: str,
    migration_uid: str,
    plan_ref: ObjectReference,
    plan_fingerprint: str,
    consumed_ok: bool = False,
    check_stamp: bool = True,
) -> str | None:
    """Why ``approval`` does not authorize applying the plan to the migration, or None."""
    spec = approval.spec
    if (spec.migration_ref.name, spec.migration_ref.uid) != (migration_name, migration_uid):
        return "it names another migration"
    if (spec.plan_ref.name, spec.plan_ref.uid) != (plan_ref.name, plan_ref.uid):
        return "it names another plan"
    if not plan_fingerprint or spec.plan_fingerprint != plan_fingerprint:
        return "it approves another plan fingerprint"
    return _state_problem(approval, consumed_ok=consumed_ok, check_stamp=check_stamp)


def consumed_by(approval: PtahSchemaApproval | PtahMigrationApproval) -> str | None:
    """The claim (operation id) that spent the approval, or None while it is unspent."""
    status = approval.status
    if status is None or not _true(status.conditions, CONSUMED):
        return None
    return status.consumed_by


def apply_approval_of(owner: PtahSchema | PtahMigration, job_name: str) -> ObjectReference | None:
    """The approval that authorized the Apply Job ``job_name``, from the owner's records:
    the active Apply claim's (a schema's ``status.plan.approval``, a migration's
    ``approvalRef``) or the Apply a schema's pending observation keeps. None when the
    Job is none of these, or when no approval authorized it (``policy.apply: Always``
    for a harmless plan).

    The controller witnesses this approval before it gives the Job its cleanup TTL, and
    admission admits that TTL only once the approval names the Job: one reading of
    which approval a Job ran under, for both.
    """
    if isinstance(owner, PtahMigration):
        claim = owner.status.active_operation if owner.status else None
        if claim is not None and claim.type == "Apply" and claim.job_name == job_name:
            return claim.approval_ref
        return None
    status = owner.status
    if status is None:
        return None
    operation = status.active_operation
    if operation is not None and operation.type == "Apply" and operation.job_name == job_name:
        held = status.plan.approval if status.plan else None
        return ObjectReference(name=held.name, uid=held.uid) if held else None
    pending = status.pending_observation
    if pending is not None and pending.apply_job_name == job_name:
        held = pending.plan.approval if pending.plan else None
        return ObjectReference(name=held.name, uid=held.uid) if held else None
    return None


def witness_problem(
    approval: PtahSchemaApproval | PtahMigrationApproval, job_name: str, job_uid: str
) -> str | None:
    """Why the approval is not the witness of exactly this Job, or None."""
    status = approval.status
    witnessed = status.consumed_job if status else None
    if witnessed is None:
        return "it names no Job it authorized yet"
    if (witnessed.name, witnessed.uid) != (job_name, job_uid):
        return f"it authorized Job {witnessed.name} ({witnessed.uid}), not this one"
    return None
