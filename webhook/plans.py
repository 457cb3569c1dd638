"""Plan CREATE: a plan, and a plan's chunk, are only ever recomputed ones.

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

The plan's statements are stored in PtahSchemaPlanChunk objects while it is being
published; each is held to the digest and size the plan recorded and rebuilt with
``jobclaim.build_plan_chunk``. A migration has no Plan operation: its plan is derived
from the History reading the controller recorded in status, and is rebuilt with
``jobclaim.build_migration_plan``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Final

from jobclaim import (
    CLEANUP_TTL_SECONDS,
    BuildRefused,
    InvalidInput,
    PlanUnreadable,
    SchemaPlanContent,
    build_job,
    build_migration_plan,
    build_plan_chunk,
    build_schema_plan,
    finished,
    manager_record_of,
    match,
    published_plan_problem,
    reading_plan_content,
    schema_claim,
    schema_job_inputs,
)
from jobclaim.api import (
    PtahMigration,
    PtahMigrationPlan,
    PtahResultRecord,
    PtahSchema,
    PtahSchemaPlan,
    PtahSchemaPlanChunk,
)
from jobclaim.apiserver import JOBS, PTAHRESULTRECORDS, PTAHSCHEMAPLANS
from runner import decode_result
from webhook.objects import Candidate, owner_meta, read_owner_of_kind, stored
from webhook.records import result_problem
from webhook.rules import CONTROLLER_WRITE, Judgement, Object, ReadKey, Reads, Trail, read, rule

SCHEMA_PLAN_CREATE: Final = rule(
    "schema-plan-create",
    (CONTROLLER_WRITE,),
    "PtahSchemaPlan CREATE: only the plan the harvested Plan Job publishes",
    description="""
    The owning PtahSchema (read directly, same UID, not being deleted) must hold an
    active Plan claim with its Job's UID recorded. That Job is read directly: it must
    be the UID the claim recorded, Complete, and already carry the cleanup TTL the
    harvest sets; and it must still pass jobclaim.match against its rebuild
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
SOURCE_UNRECORDED: Final = SCHEMA_PLAN_CREATE.refuses(
    "the Plan Job {key} has no result record its Pod wrote"
)
SOURCE_RECORD_REFUSED: Final = SCHEMA_PLAN_CREATE.refuses(
    "the Plan Job's result record is not its claim's result: {reason}"
)
SCHEMA_PLAN_NOT_REBUILT: Final = SCHEMA_PLAN_CREATE.refuses(
    "the PtahSchemaPlan is not the plan its Plan operation publishes: {reason}"
)

PLAN_CHUNK_CREATE: Final = rule(
    "plan-chunk-create",
    (CONTROLLER_WRITE,),
    "PtahSchemaPlanChunk CREATE: only the bytes a publishing plan recorded",
    description="""
    A plan's statements are stored in PtahSchemaPlanChunk objects, owned by the plan.
    The owning PtahSchemaPlan and its PtahSchema are read directly (same UIDs, not
    being deleted, the plan's schemaRef naming its owner), and the schema must still
    hold the active Plan claim, with its Job recorded, under the execution binding
    the plan was made under: chunks are written while the plan is published, never
    later. The chunk must be one the plan lists, by name and index, hold exactly the
    bytes of the recorded size and SHA-256 digest, and be exactly the object
    jobclaim.build_plan_chunk builds.
    """,
    admits="the chunks of the plan the controller is publishing",
)
CHUNK_PLAN_NOT_BOUND: Final = PLAN_CHUNK_CREATE.refuses(
    "the plan {key} does not belong to the schema that owns it"
)
CHUNK_NOT_PUBLISHING: Final = PLAN_CHUNK_CREATE.refuses(
    "the plan chunk does not belong to a plan its active Plan operation is publishing"
)
CHUNK_NOT_LISTED: Final = PLAN_CHUNK_CREATE.refuses(
    "the plan chunk {name} is not a chunk its plan lists at index {index}"
)
CHUNK_NOT_BUILT: Final = PLAN_CHUNK_CREATE.refuses(
    "the plan chunk is not the one its plan stores: {reason}"
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
    found_plan = found.model
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
    key = ReadKey(JOBS, found.namespace, operation.job_name)
    fetched = yield from read(key)
    source = fetched.get(key)
    if source is None:
        raise trail.deny(SOURCE_MISSING, key=key)
    job = source.tree()
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
    recorded = yield from _recorded_content(schema, job, key, trail)
    # The bytes are the record's, bound by its content digest; how they are cut into
    # chunks is storage, held chunk by chunk to this plan and, at the Apply, whole to
    # the digest by the runner, which refuses a plan that is not these bytes.
    content = dataclasses.replace(recorded, chunks=SchemaPlanContent.of(found_plan.spec).chunks)
    try:
        expected = build_schema_plan(schema, binding=binding, dispatched_by=record, content=content)
    except InvalidInput as error:
        raise trail.deny(SCHEMA_PLAN_NOT_REBUILT, reason=str(error)) from error
    problem = published_plan_problem(found.raw, expected)
    if problem:
        raise trail.deny(SCHEMA_PLAN_NOT_REBUILT, reason=problem)
    trail.passed("equal to jobclaim.build_schema_plan's rebuild, name and fingerprint included")
    return trail.allow()


def _recorded_content(
    schema: PtahSchema, job: Object, key: ReadKey, trail: Trail
) -> Reads[SchemaPlanContent]:
    """The plan the Plan Pod recorded: what a published plan must be made of."""
    record_key = ReadKey(PTAHRESULTRECORDS, key.namespace, key.name)
    fetched = yield from read(record_key)
    record = stored(fetched, record_key, PtahResultRecord, trail)
    if record is None:
        raise trail.deny(SOURCE_UNRECORDED, key=key)
    why = result_problem(schema, job, record)
    if why is not None:
        raise trail.deny(SOURCE_RECORD_REFUSED, reason=why)
    section = decode_result(record.spec.result).plan
    if section is None:
        raise trail.deny(SOURCE_RECORD_REFUSED, reason="it holds no plan")
    try:
        content, _ = reading_plan_content(
            section.stdout.encode("utf-8"),
            content_digest=section.plan_content_digest,
            statement_count=section.statement_count,
            reported_destructive=section.destructive,
            engine=schema.spec.target.engine,
        )
    except (InvalidInput, PlanUnreadable) as error:
        raise trail.deny(SOURCE_RECORD_REFUSED, reason=str(error)) from error
    trail.passed(f"{record_key}: the Plan Pod's own record of the plan, its claim's result")
    return content


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
    problem = published_plan_problem(found.raw, expected)
    if problem:
        raise trail.deny(MIGRATION_PLAN_NOT_REBUILT, reason=problem)
    trail.passed("equal to jobclaim.build_migration_plan's rebuild from the recorded reading")
    return trail.allow()


def judge_plan_chunk_create(found: Candidate, trail: Trail) -> Judgement:
    trail.enter(PLAN_CHUNK_CREATE)
    if not isinstance(found.model, PtahSchemaPlanChunk):
        raise TypeError("a PtahSchemaPlanChunk candidate was decoded as another kind")
    candidate = found.model
    plan = yield from read_owner_of_kind(found.meta, PtahSchemaPlan, what="plan chunk", trail=trail)
    schema = yield from read_owner_of_kind(plan.metadata, PtahSchema, what="plan", trail=trail)
    schema_meta = owner_meta(schema)
    plan_key = ReadKey(PTAHSCHEMAPLANS, found.namespace, plan.metadata.name or "")
    if (plan.spec.schema_ref.name, plan.spec.schema_ref.uid) != (schema_meta.name, schema_meta.uid):
        raise trail.deny(CHUNK_PLAN_NOT_BOUND, key=plan_key)
    status = schema.status
    operation = status.active_operation if status else None
    binding = status.execution_binding if status else None
    epochs = {
        operation.execution_binding_id if operation else None,
        binding.epoch if binding else None,
        plan.spec.execution_binding_id,
    }
    if operation is None or operation.type != "Plan" or not operation.job_uid or len(epochs) != 1:
        raise trail.deny(CHUNK_NOT_PUBLISHING)
    trail.passed(f"{plan_key} is published by the active Plan claim, binding in force")
    index = candidate.spec.index
    chunk = next((c for c in plan.spec.chunks if (c.name, c.index) == (found.name, index)), None)
    if chunk is None:
        raise trail.deny(CHUNK_NOT_LISTED, name=found.name, index=index)
    try:
        data = base64.b64decode(candidate.spec.data, validate=True)
        expected = build_plan_chunk(plan, chunk, data)
    except (binascii.Error, ValueError) as error:
        raise trail.deny(CHUNK_NOT_BUILT, reason="its data is not base64") from error
    except InvalidInput as error:
        raise trail.deny(CHUNK_NOT_BUILT, reason=str(error)) from error
    problem = published_plan_problem(found.raw, expected, what="plan chunk")
    if problem:
        raise trail.deny(CHUNK_NOT_BUILT, reason=problem)
    trail.passed(f"chunk {index}: the recorded size and digest, exactly as built")
    return trail.allow()
