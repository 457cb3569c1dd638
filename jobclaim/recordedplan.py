"""Is this the plan the claim records? One answer, for the controller and the webhook.

The controller asks it when it authorizes a claim (and when it takes a new one); the
webhook asks it when it admits the claim's Job create. Before this module the two
checked different fields in both families: the webhook never asked a schema plan for
its owner or its epoch, the controller never asked a migration plan whether it was
being deleted or whose name it carried; so a plan one side refused the other could
admit. The field set is the spec's "every binding the plan was computed under still
holds": the same object (name and UID, not being deleted), the same content
(fingerprint and content digest, and for a schema the chunk geometry its projections
are named by), the same owner (name and UID) and the same execution epoch; for a
migration also the same artifact (its digest), which the Apply Job pulls the files of
the approved versions from.

Each answer is a lower-case reason or None; callers prefix it with their own subject.
"""

from __future__ import annotations

from jobclaim.api.meta import ObjectMeta, ObjectReference
from jobclaim.api.migration import PtahMigrationPlan
from jobclaim.api.schema import CurrentPlanStatus, PtahSchemaPlan
from jobclaim.projection import chunk_geometry_problem


def _identity_problem(meta: ObjectMeta, name: str, uid: str) -> str | None:
    # Name and UID together: a name alone can be reused by a replacement.
    if meta.name != name:
        return "its name or UID differs (its name differs)"
    if meta.uid != uid:
        return "its name or UID differs (its UID differs)"
    if meta.deletion_timestamp is not None:
        return "it is being deleted"
    return None


def _binding_problem(
    owner_ref: ObjectReference, owner: ObjectMeta, family: str, plan_epoch: str, epoch: str | None
) -> str | None:
    if (owner_ref.name, owner_ref.uid) != (owner.name, owner.uid):
        return f"it belongs to another {family}"
    if plan_epoch != epoch:
        return "it was made under another epoch"
    return None


def schema_plan_problem(
    plan: PtahSchemaPlan, record: CurrentPlanStatus, *, owner: ObjectMeta
) -> str | None:
    """Why the stored schema plan is not the one ``status.plan`` records, or None.

    The record carries the epoch it was computed under; the chunk geometry is what
    makes its projections the ones the Apply Job mounts (``<plan>-000`` .. by index).
    """
    spec = plan.spec
    problem = _identity_problem(plan.metadata, record.name, record.uid)
    if problem:
        return problem
    if spec.fingerprint != record.fingerprint:
        return "its fingerprint differs"
    if spec.content_digest != record.content_digest:
        return "its content digest differs"
    problem = _binding_problem(
        spec.schema_ref, owner, "schema", spec.execution_binding_id, record.execution_binding_id
    )
    if problem:
        return problem
    if len(spec.chunks) != record.chunk_count:
        return f"it lists {len(spec.chunks)} chunks, status.plan records {record.chunk_count}"
    return chunk_geometry_problem(record.name, spec.chunks)


def migration_plan_problem(
    plan: PtahMigrationPlan,
    ref: ObjectReference,
    *,
    owner: ObjectMeta,
    epoch: str | None,
    artifact: str | None,
) -> str | None:
    """Why the stored migration plan is not the one ``ref`` names under ``epoch`` and
    over ``artifact``, or None.

    ``epoch`` is the claim's execution epoch and ``artifact`` the digest of the artifact
    its Job pulls (for a claim not yet taken, the epoch in force and the artifact
    status records, which the claim will snapshot).
    """
    spec = plan.spec
    return (
        _identity_problem(plan.metadata, ref.name, ref.uid)
        or _binding_problem(
            spec.migration_ref, owner, "migration", spec.execution_binding_id, epoch
        )
        or _artifact_problem(spec.artifact_digest, artifact)
    )


def _artifact_problem(planned: str, artifact: str | None) -> str | None:
    # A migration plan names its migrations by version, and the Apply pulls their files
    # from the claim's artifact; ptah's --expect-sequence guard compares versions only.
    # A claim over another artifact would run, under the approved versions, files
    # nobody approved: the plan binds the artifact it was read from.
    if artifact != planned:
        return f"it was made from the artifact {planned}, not {artifact or 'none'}"
    return None
