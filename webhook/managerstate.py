"""The manager-state endpoint: status and the unresolved-run record are the manager's.

Everything the lifecycle decides from is in ``status``: the claim and its dispatch
mark, the admission snapshot, the pending observation, the binding retirement. A
person who could write status could clear a dispatch mark and have the controller
run an Apply a second time, or forge a claim the webhook would then admit a Job for.
So any write to a ``*/status`` subresource of an ``operator.ptah.run`` kind, and any
change of the ``operator.ptah.run/unresolved-run`` annotation (the marker that blocks
a migration from planning until its uncertain run is settled), is admitted only from
the manager's exact username. A person, another service account and ``system:masters``
are refused alike: RBAC grants administrators everything, and this is the one place
that says an administrator's hand on status is still not the controller's.
"""

from __future__ import annotations

from typing import Final

from jobclaim.api import UNRESOLVED_RUN_ANNOTATION
from jobclaim.apiserver import PTAH_RESOURCES, Resource
from webhook.objects import (
    NOT_NAMED,
    Candidate,
    candidate,
    names_the_candidate,
    previous,
    request_kind_problem,
)
from webhook.review import DECODING, AdmissionRequest
from webhook.rules import MANAGER_STATE, Judgement, Settings, Trail, rule
from webhook.transitions import judge_transition

STATE: Final = rule(
    "manager-state",
    (MANAGER_STATE,),
    "Status and the unresolved-run annotation are written by the manager alone",
    description="""
    Any write to a status subresource of an operator.ptah.run kind, and any create or
    update that sets, changes or removes the operator.ptah.run/unresolved-run
    annotation, is admitted only when userInfo.username equals the configured manager
    username exactly. Groups are never consulted, so system:masters is refused like
    anyone else. Every other write to an operator.ptah.run resource touches no
    manager-owned state and is admitted; a resource outside the group, a subresource
    other than status or an operation other than CREATE, UPDATE and DELETE is refused
    by name, so a registration that routes more here fails closed.
    """,
    admits="the manager's status writes, and every write that touches no manager-owned state",
)
OUTSIDE_GROUP: Final = STATE.refuses("resource {resource} is outside the manager-state contract")
OUTSIDE_OPERATION: Final = STATE.refuses(
    "operation {operation} is outside the manager-state contract"
)
OTHER_SUBRESOURCE: Final = STATE.refuses(
    "subresource {subresource} is outside the manager-state contract"
)
STATUS_NOT_MANAGER: Final = STATE.refuses(
    "only the configured operator manager may write the status of {kind} objects"
)
ANNOTATION_NOT_MANAGER: Final = STATE.refuses(
    "only the configured operator manager may change the "
    + UNRESOLVED_RUN_ANNOTATION
    + " annotation"
)

_BY_GVR: Final[dict[tuple[str, str, str], Resource]] = {
    (r.group, r.version, r.plural): r for r in PTAH_RESOURCES
}


def _annotation(found: Candidate | None) -> str | None:
    if found is None:
        return None
    return (found.meta.annotations or {}).get(UNRESOLVED_RUN_ANNOTATION)


def judge_manager_state(request: AdmissionRequest, settings: Settings) -> Judgement:
    """The manager-state endpoint's one entry."""
    trail = Trail(STATE)
    gvr = request.resource
    resource = _BY_GVR.get((gvr.group, gvr.version, gvr.resource))
    if resource is None:
        named = "/".join(p for p in (gvr.group, gvr.version, gvr.resource) if p)
        raise trail.deny(OUTSIDE_GROUP, resource=named)
    if request.operation not in ("CREATE", "UPDATE", "DELETE"):
        raise trail.deny(OUTSIDE_OPERATION, operation=request.operation)
    for subresource in request.subresources:
        if subresource != "status":
            raise trail.deny(OTHER_SUBRESOURCE, subresource=subresource)
    trail.enter(DECODING)
    problem = request_kind_problem(request, resource)
    if problem:
        raise trail.deny(problem)
    if request.operation == "DELETE":
        # Deleting a resource writes neither its status nor its annotations; the
        # finalizer the manager holds settles what deletion owes.
        trail.enter(STATE)
        trail.passed("a delete changes no manager-owned state")
        return trail.allow()
    new = candidate(request, resource)
    if not names_the_candidate(request, new):
        raise trail.deny(NOT_NAMED)
    old = previous(request, resource) if request.operation == "UPDATE" else None
    trail.passed(f"the object is the {resource.kind} the request names, strictly decoded")
    trail.enter(STATE)
    manager = request.user_info.username == settings.manager_username
    if request.subresources:
        if not manager:
            raise trail.deny(STATUS_NOT_MANAGER, kind=resource.kind)
        trail.passed("the manager writes status")
        if old is not None:
            # The manager's identity is not yet the manager's judgement: a stolen one
            # writes status too, and status is what the lifecycle remembers.
            yield from judge_transition(old, new, trail, settings)
            trail.enter(STATE)
    if _annotation(new) != _annotation(old):
        if not manager:
            raise trail.deny(ANNOTATION_NOT_MANAGER)
        trail.passed(f"the manager changes {UNRESOLVED_RUN_ANNOTATION}")
    if not request.subresources and _annotation(new) == _annotation(old):
        trail.passed("the write changes no manager-owned state")
    return trail.allow()
