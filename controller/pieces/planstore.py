"""A schema plan's bytes: read back verified from its chunks, and staged for the Apply Pod.

``load_plan`` is how every pass that authorizes an Apply learns what SQL it would
run. It reads each PtahSchemaPlanChunk uncached and holds it to the plan: the chunk
names the plan by name and UID, sits at the index the plan lists, and carries exactly
the recorded size and SHA-256 digest. Anything else raises ``PlanUnverified``; an
Apply must never run bytes nobody approved, and a plan whose chunks were replaced
after approval is such bytes.

``project`` is the stage step of the dispatch sequence. The Apply Pod holds no
Kubernetes credential and the kubelet mounts no custom resource, so the controller
copies the verified bytes into immutable ConfigMaps named like the chunks and owned
by the plan, before ``dispatchStarted``. It runs on every pass that can still create
the Job, so it must repeat safely: a projection an earlier pass wrote is read back and
must be exactly the one this plan builds (``jobclaim.projection_problem``). A
ConfigMap under a projection name that is not this plan's projection raises
``ProjectionConflict``: the name is derived from the plan, so no retry can clear it,
and the plan is retired. A write the API server refused, or whose outcome is unknown,
propagates: nothing has been marked yet, so the next pass simply tries again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobclaim import (
    LABEL_PLAN,
    build_projection,
    chunk_object_problem,
    chunk_problem,
    decode_chunk,
    plan_geometry_problem,
    projection_problem,
)
from jobclaim.api import PlanChunk, PtahSchemaPlan
from jobclaim.apiserver import (
    CONFIGMAPS,
    PTAHSCHEMAPLANCHUNKS,
    AlreadyExists,
    ApiClient,
    ApiReader,
    Conflict,
    NotFound,
    Object,
)
from jobclaim.errors import PtahError

__all__ = [
    "PlanUnverified",
    "ProjectionConflict",
    "chunk_object_problem",
    "decode_chunk",
    "load_plan",
    "plan_geometry_problem",
    "project",
    "projection_objects",
]

# A projection that vanished between our AlreadyExists and our read (its plan being
# garbage collected, say) is created again; a few rounds settle that, more would mean
# something keeps deleting it and the next pass should look again.
_ROUNDS = 3


class PlanUnverified(PtahError):
    """The stored chunks are not the bytes the plan recorded: the plan cannot run."""


class ProjectionConflict(PtahError):
    """A foreign object stands under a projection name: the plan must be retired."""


def _ordered(plan: PtahSchemaPlan) -> list[PlanChunk]:
    return sorted(plan.spec.chunks, key=lambda c: c.index)


def load_plan(api: ApiReader, namespace: str, plan: PtahSchemaPlan) -> list[bytes]:
    """Every chunk's bytes in index order, each read uncached and verified.

    Raises ``PlanUnverified`` when a chunk is missing or is not the plan's; other API
    errors propagate (the next pass reads again).
    """
    problem = plan_geometry_problem(plan)
    if problem is not None:
        raise PlanUnverified(f"plan {plan.metadata.name}: {problem}")
    out: list[bytes] = []
    for chunk in _ordered(plan):
        try:
            obj = api.get(PTAHSCHEMAPLANCHUNKS, namespace, chunk.name)
        except NotFound as error:
            raise PlanUnverified(
                f"plan {plan.metadata.name}: chunk {chunk.name} does not exist"
            ) from error
        data, problem = chunk_object_problem(plan, chunk, obj)
        if data is None:
            raise PlanUnverified(f"plan {plan.metadata.name}: {problem}")
        out.append(data)
    return out


def projection_objects(
    plan: PtahSchemaPlan, schema_name: str, chunks: Sequence[bytes]
) -> list[Object]:
    """The projections ``plan`` builds from verified ``chunks``, in index order.

    Refuses bytes that are not the plan's: staging them would hand the Apply Pod SQL
    the plan never recorded, whatever the caller believed it loaded.
    """
    problem = plan_geometry_problem(plan)
    if problem is not None:
        raise PlanUnverified(f"plan {plan.metadata.name}: {problem}")
    if schema_name != plan.spec.schema_ref.name:
        raise PlanUnverified(
            f"plan {plan.metadata.name} belongs to schema {plan.spec.schema_ref.name}, "
            f"not {schema_name}"
        )
    ordered = _ordered(plan)
    if len(chunks) != len(ordered):
        raise PlanUnverified(
            f"plan {plan.metadata.name} lists {len(ordered)} chunks, {len(chunks)} were given"
        )
    built: list[Object] = []
    for chunk, data in zip(ordered, chunks, strict=True):
        problem = chunk_problem(chunk, data)
        if problem is not None:
            raise PlanUnverified(f"plan {plan.metadata.name}: {problem}")
        built.append(
            build_projection(
                namespace=plan.metadata.namespace or "",
                schema_name=schema_name,
                plan_name=plan.metadata.name or "",
                plan_uid=plan.metadata.uid or "",
                chunk=chunk,
                data=data,
            )
        )
    return built


def _held_to(found: Mapping[str, Any], expected: Object, plan: PtahSchemaPlan) -> None:
    problem = projection_problem(found, expected)
    if problem is not None:
        name = expected["metadata"]["name"]
        raise ProjectionConflict(
            f"the ConfigMap {name} stands under a projection name of plan "
            f"{plan.metadata.name} and is not its projection: {problem}"
        )


def project(api: ApiClient, plan: PtahSchemaPlan, schema_name: str, chunks: list[bytes]) -> None:
    """Make every projection of ``plan`` exist and hold exactly ``chunks``.

    One uncached list by the plan label finds what earlier passes wrote, so a repeat
    costs one read; a projection name held by an object without the label is found by
    the create's AlreadyExists and read back. Raises ``ProjectionConflict`` for an
    object that is not this plan's projection; API errors propagate.
    """
    wanted = projection_objects(plan, schema_name, chunks)
    namespace = plan.metadata.namespace or ""
    listed = {
        str(obj.get("metadata", {}).get("name")): obj
        for obj in api.list(
            CONFIGMAPS, namespace, label_selector={LABEL_PLAN: plan.metadata.name or ""}
        )
    }
    for expected in wanted:
        name = expected["metadata"]["name"]
        if name in listed:
            _held_to(listed[name], expected, plan)
            continue
        _create_or_read_back(api, namespace, expected, plan)


def _create_or_read_back(
    api: ApiClient, namespace: str, expected: Object, plan: PtahSchemaPlan
) -> None:
    name = expected["metadata"]["name"]
    for _ in range(_ROUNDS):
        try:
            api.create(CONFIGMAPS, namespace, expected)
            return
        except AlreadyExists:
            pass
        try:
            found = api.get(CONFIGMAPS, namespace, name)
        except NotFound:
            continue
        _held_to(found, expected, plan)
        return
    # Not a conflict: nothing foreign was seen, only churn. The next pass looks again.
    raise Conflict(
        f"the projection {name} of plan {plan.metadata.name} keeps disappearing between "
        "its create and its read"
    )
