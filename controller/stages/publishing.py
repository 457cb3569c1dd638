"""Publishing a plan from a reading's result: the PtahSchemaPlan and its chunks from a
Plan Job's record, the PtahMigrationPlan from a History Job's record.

The objects are built by the same functions the webhook rebuilds them with
(``jobclaim.build_schema_plan``, ``build_plan_chunk``, ``build_migration_plan``), so
the controller's publication is the one the webhook admits, and nothing here decides
a field the rebuild could disagree with. A plan's name is derived from its
fingerprint, so publishing is idempotent: a pass that stopped after a create finds
the object under the same name, holds it to the rebuild (``published_plan_problem``)
and goes on. An object under that name that is not the rebuild refuses the
publication (``PublishRefused``): nothing can make it the plan, and nothing may run
from it.

Durable order: the plan and its chunks are created while the claim is still live
and before the status patch that records ``status.plan`` and retires the claim. A
stop in between leaves the claim, whose next pass reads the same terminal Job's
record and finds the objects it published.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.context.passcontext import PassContext, migration_of, schema_of
from jobclaim import (
    PlanUnreadable,
    SchemaPlanContent,
    build_migration_plan,
    build_plan_chunk,
    build_schema_plan,
    manager_record_of,
    published_plan_problem,
    reading_plan_content,
)
from jobclaim.api import (
    CurrentPlanStatus,
    MigrationSequenceEntry,
    ObjectReference,
    PtahSchemaPlan,
)
from jobclaim.apiserver import (
    PTAHMIGRATIONPLANS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    AlreadyExists,
    Object,
    Resource,
)
from jobclaim.errors import InvalidInput, PtahError
from jobclaim.times import timestamp
from runner.result import MigrationHistorySection, PlanSection


class PublishRefused(PtahError):
    """The reading cannot become a plan: its text, or an object under the plan's name."""


def _create_or_hold(
    ctx: PassContext,
    resource: Resource,
    built: Mapping[str, Any],
    held_as: Callable[[Object], Mapping[str, Any]] | None = None,
) -> Object:
    """Create ``built``; an object already under its name must be exactly it.

    ``held_as`` rebuilds the expected object from the one found, for a field that is
    audit only and so may differ between two publications of one plan.
    """
    try:
        return ctx.api.create(resource, ctx.namespace, dict(built))
    except AlreadyExists:
        found = ctx.api.get(resource, ctx.namespace, built["metadata"]["name"])
    expected = built if held_as is None else held_as(found)
    problem = published_plan_problem(found, expected, what=resource.kind)
    if problem is not None:
        raise PublishRefused(problem)
    return found


def schema_plan_content(
    section: PlanSection, *, engine: str
) -> tuple[SchemaPlanContent, list[bytes]]:
    """What only the Plan Job's record knows, with the bytes it stores. Pure.

    ``jobclaim.reading_plan_content``, the derivation the webhook judges the published
    plan by from the same record, so a plan published here is never refused as
    understating itself."""
    try:
        return reading_plan_content(
            section.stdout.encode("utf-8"),
            content_digest=section.plan_content_digest,
            statement_count=section.statement_count,
            reported_destructive=section.destructive,
            engine=engine,
        )
    except PlanUnreadable as error:
        raise PublishRefused(f"the plan text cannot be read as statements: {error}") from error
    except InvalidInput as error:
        raise PublishRefused(str(error)) from error


def publish_schema_plan(ctx: PassContext, section: PlanSection, job: Object) -> CurrentPlanStatus:
    """Publish the active Plan claim's plan and chunks; the ``status.plan`` naming it."""
    schema = schema_of(ctx)
    status = schema.status
    binding = ctx.binding
    if status is None or binding is None:
        raise PublishRefused("the schema records no execution binding to publish under")
    content, chunks = schema_plan_content(section, engine=schema.spec.target.engine)
    try:
        record = manager_record_of(job)
        built = build_schema_plan(schema, binding=binding, dispatched_by=record, content=content)
    except InvalidInput as error:
        raise PublishRefused(f"the reading cannot form a plan: {error}") from error
    plan = PtahSchemaPlan.model_validate(_create_or_hold(ctx, PTAHSCHEMAPLANS, built))
    for chunk in plan.spec.chunks:
        _create_or_hold(
            ctx, PTAHSCHEMAPLANCHUNKS, build_plan_chunk(plan, chunk, chunks[chunk.index])
        )
    spec = plan.spec
    verification = status.verification
    source = status.source
    return CurrentPlanStatus(
        name=plan.metadata.name or "",
        uid=plan.metadata.uid or "",
        fingerprint=spec.fingerprint,
        content_digest=spec.content_digest,
        artifact_digest=source.digest if source else None,
        coordination_digest=spec.coordination_digest,
        target_identity_digest=spec.target_identity_digest,
        verification_policy_uid=verification.policy_uid if verification else None,
        verification_policy_digest=verification.policy_digest if verification else None,
        execution_binding_id=spec.execution_binding_id,
        controller_image=record.controller_image,
        controller_revision=record.controller_revision,
        controller_state_version=spec.controller_state_version,
        ptah_version=spec.ptah_version,
        executor_image=spec.executor_image,
        runner_image=record.runner_image,
        runner_protocol_version=spec.runner_protocol_version,
        destructive=spec.destructive,
        privilege_changes=list(spec.privilege_changes),
        statement_count=spec.statement_count,
        chunk_count=len(spec.chunks),
        created_at=timestamp(ctx.now()),
    )


def publish_migration_plan(ctx: PassContext, section: MigrationHistorySection) -> ObjectReference:
    """Publish the plan the History reading recorded in status derives; its reference.

    The sequence is the reading's pending list, which lives only in the record; the
    rest comes from ``status.history`` and ``status.artifact``, which the caller has
    made durable first (the webhook rebuilds the plan from them).
    """
    migration = migration_of(ctx)
    history = migration.status.history if migration.status else None
    entries = tuple(
        MigrationSequenceEntry(version=p.version, name=p.name, digest=p.digest)
        for p in section.pending
    )

    def built_at(created_at: str | None) -> dict[str, Any]:
        try:
            return build_migration_plan(migration, migrations=entries, created_at=created_at)
        except InvalidInput as error:
            raise PublishRefused(f"the reading cannot form a plan: {error}") from error

    def held_as(found: Object) -> dict[str, Any]:
        # createdAt is audit only (the fingerprint and the name leave it out): a later
        # History reading of the same history (a read-only Job run again) derives the
        # same plan, which keeps the time it was first derived. Held to its own time,
        # everything else must still be the rebuild; refusing it instead failed the
        # migration ("spec.createdAt is not the value its claim publishes").
        spec = found.get("spec")
        stamp = spec.get("createdAt") if isinstance(spec, dict) else None
        return built_at(stamp if isinstance(stamp, str) else None)

    # Derived from the recorded reading, so a repeated publication rebuilds the same object.
    built = built_at(history.observed_at if history else None)
    stored = _create_or_hold(ctx, PTAHMIGRATIONPLANS, built, held_as)
    meta = stored["metadata"]
    return ObjectReference(name=meta["name"], uid=meta["uid"])
