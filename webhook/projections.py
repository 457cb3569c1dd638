"""Plan projections: the ConfigMaps a schema Apply Pod reads its plan from.

The Apply Pod holds no Kubernetes credential and mounts no custom resource, so the
controller copies each verified chunk into an immutable ConfigMap named after the
plan, before it writes dispatchStarted. A projection is therefore admitted only for
the Apply that status names while it can still be dispatched (no mark, no Job UID):
a projection written after the mark would change what a Job that may already be
running reads. Its bytes must be exactly the chunk the plan recorded, with its size
and digest, and its whole shape exactly what ``jobclaim.build_projection`` builds.

The same checks hold the stored projections to their plan when the Apply Job is
created (``jobs``): a projection replaced in between would hand the Job other SQL.
"""

from __future__ import annotations

from typing import Final

from jobclaim import (
    build_projection,
    chunk_problem,
    decode_chunk,
    projection_problem,
    schema_plan_problem,
)
from jobclaim.api import PlanChunk, PtahSchema, PtahSchemaPlan
from jobclaim.apiserver import PTAHSCHEMAPLANS
from webhook.objects import Candidate, owner_meta, read_owner_of_kind
from webhook.rules import CONTROLLER_WRITE, Judgement, Object, ReadKey, Trail, rule

PROJECTION_CREATE: Final = rule(
    "projection-create",
    (CONTROLLER_WRITE,),
    "ConfigMap CREATE: a plan projection, only while its Apply can still be dispatched",
    description="""
    A schema Apply Pod reads its plan from immutable ConfigMaps the controller stages
    before it writes dispatchStarted. A projection is admitted only for the Apply that
    status.activeOperation names while that Apply can still be dispatched
    (dispatchStarted false, no Job UID) and whose status.plan is this projection's
    plan: once the mark is durable a Job may exist, and a projection written then
    would change what it reads. The projection must be immutable, carry exactly the
    bytes of the chunk the plan lists under its name (the recorded size and SHA-256
    digest), and be exactly the ConfigMap jobclaim.build_projection builds: its
    labels, its single PtahSchemaPlan controller owner and nothing else.
    """,
    admits="the projection the controller stages for the Apply it is about to dispatch",
)
PLAN_NOT_BOUND: Final = PROJECTION_CREATE.refuses(
    "the plan {key} does not belong to the schema that owns it"
)
NOT_DISPATCHABLE: Final = PROJECTION_CREATE.refuses(
    "the plan projection does not belong to an Apply that can still be dispatched"
)
NOT_RECORDED: Final = PROJECTION_CREATE.refuses(
    "the plan {key} is not the plan status.plan records: {reason}"
)
NOT_LISTED: Final = PROJECTION_CREATE.refuses(
    "the plan projection {name} is not a chunk its plan lists"
)
NOT_IMMUTABLE: Final = PROJECTION_CREATE.refuses("the plan projection is not immutable")
NOT_THE_CHUNK: Final = PROJECTION_CREATE.refuses(
    "the plan projection is not its plan's chunk: {reason}"
)


def projection_mismatch(raw: Object, plan: PtahSchemaPlan, chunk: PlanChunk) -> str | None:
    """Why a submitted or stored ConfigMap is not ``chunk``'s projection, or None."""
    binary = raw.get("binaryData")
    encoded = binary.get("chunk") if isinstance(binary, dict) else None
    if not isinstance(encoded, str):
        return "it carries no chunk bytes"
    data = decode_chunk(encoded)
    if data is None:
        return "its chunk is not base64"
    problem = chunk_problem(chunk, data)
    if problem:
        return problem
    expected = build_projection(
        namespace=plan.metadata.namespace or "",
        schema_name=plan.spec.schema_ref.name,
        plan_name=plan.metadata.name or "",
        plan_uid=plan.metadata.uid or "",
        chunk=chunk,
        data=data,
    )
    return projection_problem(raw, expected)


def judge_projection_create(found: Candidate, trail: Trail) -> Judgement:
    trail.enter(PROJECTION_CREATE)
    plan = yield from read_owner_of_kind(
        found.meta, PtahSchemaPlan, what="plan projection", trail=trail
    )
    plan_key = ReadKey(PTAHSCHEMAPLANS, found.namespace, plan.metadata.name or "")
    schema = yield from read_owner_of_kind(plan.metadata, PtahSchema, what="plan", trail=trail)
    schema_meta = owner_meta(schema)
    if (plan.spec.schema_ref.name, plan.spec.schema_ref.uid) != (schema_meta.name, schema_meta.uid):
        raise trail.deny(PLAN_NOT_BOUND, key=plan_key)
    trail.passed("the plan's schemaRef is its owner")
    status = schema.status
    operation = status.active_operation if status else None
    record = status.plan if status else None
    if (
        operation is None
        or operation.type != "Apply"
        or operation.job_uid
        or operation.dispatch_started
        or record is None
    ):
        raise trail.deny(NOT_DISPATCHABLE)
    trail.passed(f"the active Apply {operation.job_name} has not marked dispatchStarted")
    problem = schema_plan_problem(plan, record, owner=schema_meta)
    if problem:
        raise trail.deny(NOT_RECORDED, key=plan_key, reason=problem)
    trail.passed(f"status.plan records {plan_key}")
    chunk = next((c for c in plan.spec.chunks if c.name == found.name), None)
    if chunk is None:
        raise trail.deny(NOT_LISTED, name=found.name)
    if found.raw.get("immutable") is not True:
        raise trail.deny(NOT_IMMUTABLE)
    problem = projection_mismatch(found.raw, plan, chunk)
    if problem:
        raise trail.deny(NOT_THE_CHUNK, reason=problem)
    trail.passed(f"chunk {chunk.index}: the recorded size and digest, exactly as built")
    return trail.allow()
