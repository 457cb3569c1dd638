"""The controller-write endpoint: who may write, which writes exist, which rule judges.

The manager's service account may create and delete Jobs, ConfigMaps and plans in
every namespace it serves, so RBAC alone would let a compromised or buggy manager run
any SQL through a Job it made up. This endpoint narrows the manager to the writes the
lifecycle defines, each judged by its own rule. Identity is an exact compare of the
request's username with the configured manager username; groups are never consulted,
because a group is shared by every service account in a namespace (and
``system:masters`` by every administrator), and none of them is the manager.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    PTAHMIGRATIONPLANS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    Resource,
)
from webhook.cleanup import judge_job_cleanup
from webhook.jobs import judge_job_create
from webhook.objects import (
    NOT_NAMED,
    STATUS_ON_CREATE,
    Candidate,
    candidate,
    carries_status,
    names_the_candidate,
    previous,
    request_kind_problem,
)
from webhook.plans import (
    judge_migration_plan_create,
    judge_plan_chunk_create,
    judge_schema_plan_create,
)
from webhook.projections import judge_projection_create
from webhook.review import DECODING, AdmissionRequest
from webhook.rules import (
    CONTROLLER_WRITE,
    Judgement,
    Refusal,
    Settings,
    Trail,
    rule,
)

IDENTITY: Final = rule(
    "identity",
    (CONTROLLER_WRITE,),
    "Only the manager, only the writes the lifecycle defines",
    description="""
    The request's userInfo.username must equal the configured manager username
    exactly; groups are never consulted (a namespace's service accounts share their
    groups, and system:masters is every administrator's). The manager never writes a
    subresource on this route: status writes are the manager-state endpoint's. The
    resources and verbs are closed: Job CREATE and UPDATE, ConfigMap CREATE (plan
    projections), PtahSchemaPlan, PtahSchemaPlanChunk and PtahMigrationPlan CREATE.
    Anything else is
    refused by name, so a registration that routes more here than it should fails
    closed.
    """,
    admits="nothing by itself: an allowed write goes on to the rule of its resource",
)
NOT_MANAGER: Final = IDENTITY.refuses(
    "request username is not the configured operator manager identity"
)
SUBRESOURCE: Final = IDENTITY.refuses("operator manager writes to subresources are not permitted")
OUTSIDE: Final = IDENTITY.refuses(
    "resource {resource} is outside the operator manager write contract"
)
JOB_VERBS: Final = IDENTITY.refuses(
    "the operator manager may only create Jobs or apply the exact cleanup TTL; {operation} is not"
)
CONFIGMAP_VERBS: Final = IDENTITY.refuses(
    "the operator manager may only create immutable plan projection ConfigMaps; {operation} is not"
)
SCHEMA_PLAN_VERBS: Final = IDENTITY.refuses(
    "the operator manager may only create PtahSchemaPlan manifests; {operation} is not"
)
CHUNK_VERBS: Final = IDENTITY.refuses(
    "the operator manager may only create immutable PtahSchemaPlanChunk objects; {operation} is not"
)
MIGRATION_PLAN_VERBS: Final = IDENTITY.refuses(
    "the operator manager may only create PtahMigrationPlan manifests; {operation} is not"
)


@dataclass(frozen=True, slots=True)
class Route:
    resource: Resource
    operations: frozenset[str]
    verbs: Refusal
    create: Callable[[Candidate, Trail, Settings], Judgement]


def _plain(judge: Callable[[Candidate, Trail], Judgement]) -> Callable[..., Judgement]:
    """A create rule that judges by what it reads alone, not by the deployment's settings."""

    def judged(found: Candidate, trail: Trail, settings: Settings) -> Judgement:
        return judge(found, trail)

    return judged


ROUTES: Final[dict[tuple[str, str, str], Route]] = {
    (r.resource.group, r.resource.version, r.resource.plural): r
    for r in (
        Route(JOBS, frozenset({"CREATE", "UPDATE"}), JOB_VERBS, judge_job_create),
        Route(CONFIGMAPS, frozenset({"CREATE"}), CONFIGMAP_VERBS, _plain(judge_projection_create)),
        Route(
            PTAHSCHEMAPLANS,
            frozenset({"CREATE"}),
            SCHEMA_PLAN_VERBS,
            _plain(judge_schema_plan_create),
        ),
        Route(
            PTAHSCHEMAPLANCHUNKS,
            frozenset({"CREATE"}),
            CHUNK_VERBS,
            _plain(judge_plan_chunk_create),
        ),
        Route(
            PTAHMIGRATIONPLANS,
            frozenset({"CREATE"}),
            MIGRATION_PLAN_VERBS,
            _plain(judge_migration_plan_create),
        ),
    )
}


def judge_controller_write(request: AdmissionRequest, settings: Settings) -> Judgement:
    """The controller-write endpoint's one entry: identity, shape, then the resource's rule."""
    trail = Trail(IDENTITY)
    if request.user_info.username != settings.manager_username:
        raise trail.deny(NOT_MANAGER)
    trail.passed("the username is the configured manager identity")
    if request.subresources:
        raise trail.deny(SUBRESOURCE)
    gvr = request.resource
    route = ROUTES.get((gvr.group, gvr.version, gvr.resource))
    if route is None:
        named = "/".join(p for p in (gvr.group, gvr.version, gvr.resource) if p)
        raise trail.deny(OUTSIDE, resource=named)
    if request.operation not in route.operations:
        raise trail.deny(route.verbs, operation=request.operation)
    trail.passed(f"{request.operation} of {route.resource.plural} is in the write contract")
    trail.enter(DECODING)
    problem = request_kind_problem(request, route.resource)
    if problem:
        raise trail.deny(problem)
    found = candidate(request, route.resource)
    if not names_the_candidate(request, found):
        raise trail.deny(NOT_NAMED)
    if request.operation == "CREATE" and carries_status(found.raw):
        raise trail.deny(STATUS_ON_CREATE)
    trail.passed(f"the object is the {route.resource.kind} the request names, strictly decoded")
    if request.operation == "UPDATE":
        old = previous(request, route.resource)
        return (yield from judge_job_cleanup(found, old, trail))
    return (yield from route.create(found, trail, settings))
