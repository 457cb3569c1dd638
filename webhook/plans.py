"""Plan CREATE: a PtahSchemaPlan or PtahMigrationPlan is only ever a recomputed one.

A plan is what a person approves, and an approved plan is what an Apply runs, so a
plan the manager did not derive from a reading it can account for is SQL nobody
reviewed. A schema plan is published from the Plan Job of the active Plan claim: that
Job is read directly and must be the exact instance the claim recorded, finished
successfully and already harvested (cleanup TTL set), and must still be its claim's
(``jobclaim.match`` against the rebuild, stored mode, binding in force). The plan is
then rebuilt with ``jobclaim.build_schema_plan`` from the claim, the binding and the
Plan Job's manager record, taking from the candidate only what the reading found
(the statements' digest and storage), and must equal the rebuild field for field,
its fingerprint-derived name included.

A migration has no Plan operation: its plan is derived from the History reading the
controller recorded in status, and is rebuilt with ``jobclaim.build_migration_plan``.
"""

from __future__ import annotations

from typing import Final

from jobclaim import (
    CLEANUP_TTL_SECONDS,
    BuildRefused,
    InvalidInput,
    SchemaPlanContent,
    build_job,
    build_migration_plan,
    build_schema_plan,
    finished,
    manager_record_of,
    match,
    published_plan_problem,
    schema_claim,
    schema_job_inputs,
)
from jobclaim.api import PtahMigration, PtahMigrationPlan, PtahSchema, PtahSchemaPlan
from jobclaim.apiserver import JOBS
from webhook.objects import Candidate, read_owner_of_kind
from webhook.rules import CONTROLLER_WRITE, Judgement, Key, Object, Trail, read, rule

SCHEMA_PLAN_CREATE: Final = rule(
    "schema-plan-create",
    (CONTROLLER_WRITE,),
    "PtahSchemaPlan CREATE: only the plan the harvested Plan Job publishes",
    description="""
    The owning PtahSchema (read directly, same UID, not being deleted) must hold an
    active Plan claim with its Job's UID recorded. That Job is read directly: it must
    be the UID the claim recorded, Complete, and already carry the 300-second cleanup
    TTL the harvest sets; and it must still pass jobclaim.match against its rebuild
    (stored mode, binding in force), so a plan cannot be published from a Job its
    claim would not recognize. The plan is rebuilt with jobclaim.build_schema_plan
    from the claim, the binding in force and the Plan Job's manager record, taking
    from the candidate only the statements' content digest, count, destructiveness,
    privilege changes and chunk storage; every other field, the fingerprint and the
    name derived from it included, must equal the rebuild.
    """,
    admits="the plan the controller publishes from the Plan Job it just harvested",
)
NOT_PUBLISHING: Final = SCHEMA_PLAN_CREATE.refuses(
    "the PtahSchema has no active Plan operation with a recorded Job to publish from"
)
NO_BINDING: Final = SCHEMA_PLAN_CREATE.refuses(
    "the PtahSchema records no execution binding in force"
)
SOURCE_MISSING: Final = SCHEMA_PLAN_CREATE.refuses(
    "the plan publication source Job {key} does not exist"
)
SOURCE_NOT_HARVESTED: Final = SCHEMA_PLAN_CREATE.refuses(
    "the plan publication source Job is not the exact harvested successful operation instance"
)
SOURCE_RECORD: Final = SCHEMA_PLAN_CREATE.refuses(
    "the plan publication source Job's manager record cannot be read: {reason}"
)
SOURCE_REBUILD: Final = SCHEMA_PLAN_CREATE.refuses(
    "the active Plan operation cannot reconstruct its Job: {reason}"
)
SOURCE_OUTSIDE: Final = SCHEMA_PLAN_CREATE.refuses(
    "the terminal Plan Job is outside its active Plan operation intent: {reason}"
)
SCHEMA_PLAN_NOT_REBUILT: Final = SCHEMA_PLAN_CREATE.refuses(
    "the PtahSchemaPlan is not the plan its Plan operation publishes: {reason}"
)

MIGRATION_PLAN_CREATE: Final = rule(
    "migration-plan-create",
    (CONTROLLER_WRITE,),
    "PtahMigrationPlan CREATE: only the plan the recorded History reading derives",
    description="""
    The owning PtahMigration is read directly (same UID, not being deleted). The plan
    is rebuilt with jobclaim.build_migration_plan from the History reading and the
    verified artifact the migration's status records and the execution binding in
    force, taking from the candidate only the pending sequence (whose length must be
    the pending count the reading found); every other field, the fingerprint and the
    name derived from it included, must equal the rebuild.
    """,
    admits="the plan the controller derives from the History reading it recorded",
)
MIGRATION_PLAN_NOT_REBUILT: Final = MIGRATION_PLAN_CREATE.refuses(
    "the PtahMigrationPlan is not the plan the migration's recorded reading publishes: {reason}"
)


def _harvested(job: Object, recorded_uid: str) -> bool:
    metadata = job.get("metadata")
    spec = job.get("spec")
    return (
        isinstance(metadata, dict)
        and isinstance(spec, dict)
        and metadata.get("uid") == recorded_uid
        and finished(job) == "Complete"
        and type(spec.get("ttlSecondsAfterFinished")) is int
        and spec.get("ttlSecondsAfterFinished") == CLEANUP_TTL_SECONDS
    )


def judge_schema_plan_create(found: Candidate, trail: Trail) -> Judgement:
    trail.enter(SCHEMA_PLAN_CREATE)
    if not isinstance(found.model, PtahSchemaPlan):
        raise TypeError("a PtahSchemaPlan candidate was decoded as another kind")
    plan = found.model
    schema = yield from read_owner_of_kind(
        found.meta, PtahSchema, what="PtahSchemaPlan", trail=trail
    )
    status = schema.status
    operation = status.active_operation if status else None
    binding = status.execution_binding if status else None
    if operation is None or operation.type != "Plan" or not operation.job_uid:
        raise trail.deny(NOT_PUBLISHING)
    if binding is None:
        raise trail.deny(NO_BINDING)
    key = Key(JOBS, found.namespace, operation.job_name)
    fetched = yield from read(key)
    job = fetched.get(key)
    if job is None:
        raise trail.deny(SOURCE_MISSING, key=key)
    if not _harvested(job, operation.job_uid):
        raise trail.deny(SOURCE_NOT_HARVESTED)
    trail.passed(f"source {key}: the recorded UID, Complete, cleanup TTL set")
    try:
        record = manager_record_of(job)
    except InvalidInput as error:
        raise trail.deny(SOURCE_RECORD, reason=str(error)) from error
    snapshot = operation.admission_snapshot
    try:
        built = build_job(
            schema_job_inputs(
                schema,
                binding=binding,
                manager=record,
                snapshot_digest=snapshot.digest if snapshot else None,
            )
        )
    except (BuildRefused, InvalidInput) as error:
        raise trail.deny(SOURCE_REBUILD, reason=str(error)) from error
    claim = schema_claim(schema, built=built, stored=True, binding=binding)
    if claim is None:
        raise TypeError("the active claim vanished between two reads of one decoded owner")
    verdict = match(job, claim)
    if not verdict:
        raise trail.deny(SOURCE_OUTSIDE, reason=verdict.reason)
    trail.passed("jobclaim.match: the Plan Job is its claim's (stored, binding in force)")
    try:
        expected = build_schema_plan(
            schema, binding=binding, dispatched_by=record, content=SchemaPlanContent.of(plan.spec)
        )
    except InvalidInput as error:
        raise trail.deny(SCHEMA_PLAN_NOT_REBUILT, reason=str(error)) from error
    problem = published_plan_problem(plan.to_wire(), expected)
    if problem:
        raise trail.deny(SCHEMA_PLAN_NOT_REBUILT, reason=problem)
    trail.passed("equal to jobclaim.build_schema_plan's rebuild, name and fingerprint included")
    return trail.allow()


def judge_migration_plan_create(found: Candidate, trail: Trail) -> Judgement:
    trail.enter(MIGRATION_PLAN_CREATE)
    if not isinstance(found.model, PtahMigrationPlan):
        raise TypeError("a PtahMigrationPlan candidate was decoded as another kind")
    plan = found.model
    migration = yield from read_owner_of_kind(
        found.meta, PtahMigration, what="PtahMigrationPlan", trail=trail
    )
    try:
        expected = build_migration_plan(
            migration, migrations=tuple(plan.spec.migrations), created_at=plan.spec.created_at
        )
    except InvalidInput as error:
        raise trail.deny(MIGRATION_PLAN_NOT_REBUILT, reason=str(error)) from error
    problem = published_plan_problem(plan.to_wire(), expected)
    if problem:
        raise trail.deny(MIGRATION_PLAN_NOT_REBUILT, reason=problem)
    trail.passed("equal to jobclaim.build_migration_plan's rebuild from the recorded reading")
    return trail.allow()
