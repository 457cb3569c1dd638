"""A person's decisions, stamped by admission: who approved, acknowledged or settled.

An approval authorizes SQL, an acknowledgment or a settlement ends an account nobody
could read; each is only worth the identity it records. The client's words there
prove nothing (anyone who may create the object may type ``cto@example.com``), so:

- the mutating endpoint (``/mutate-stamp``) overwrites the stamp on CREATE with the
  AdmissionRequest's own ``userInfo`` (username, UID, groups), its request UID and
  the webhook's clock, whatever the client wrote, as a JSONPatch; on every create and
  spec-changing update of a PtahSchema or PtahMigration it records the requester as
  the spec's last writer (``SPEC_WRITER_ANNOTATION``);
- the validating endpoint (``/validate-decisions``) refuses a create whose stamp is
  not its request's (a write that skipped the mutating webhook, or a webhook
  replaced by another), any later change of a decision's spec, a spec-writer record
  that is not the request's, a spec that still sets four-eyes for itself, and, with
  four-eyes (the chart's setting), the spec's last writer approving.

The mutating and the validating call of one request carry different request UIDs
(the API server draws a new one per webhook call), so the validating side cannot
compare ``mutationRequestUID`` with its own: it compares what one request shares
across calls, the identity, exactly, and holds the time to a window of its clock.

Decide-then-perform: ``stamp_for`` and the patch builders are pure functions of the
request and the time; the judges only route and decode around them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import orjson

from jobclaim import (
    REQUEST_UID_FIELD,
    STAMP_FUTURE_SKEW_SECONDS,
    STAMP_WINDOW_SECONDS,
    STAMPED,
    Stamp,
    StampedKind,
    parse_stamp_time,
    stamp_time,
)
from jobclaim.api import SPEC_WRITER_ANNOTATION, PtahMigration, PtahSchema
from jobclaim.apiserver import PTAH_RESOURCES, PTAHMIGRATIONS, PTAHSCHEMAS, Resource
from webhook.objects import (
    NOT_NAMED,
    Candidate,
    candidate,
    previous,
    request_kind_problem,
    stored,
)
from webhook.realms import judge_realm
from webhook.review import DECODING, AdmissionRequest
from webhook.rules import (
    DECISIONS,
    STAMP,
    Judgement,
    ReadKey,
    Settings,
    Trail,
    read,
    rule,
)

STAMPING: Final = rule(
    "stamp",
    (STAMP,),
    "Admission stamps who made a decision, and who last changed a spec",
    description="""
    The mutating endpoint. On CREATE of a PtahSchemaApproval, a PtahMigrationApproval,
    a PtahMigrationRunAcknowledgment or a PtahSchemaProofSettlement it answers a
    JSONPatch that writes the stamp over whatever the client sent: the identity field
    (approver, acknowledgedBy or settledBy) from userInfo (username, uid, groups), the
    time field (approvedAt, acknowledgedAt or settledAt) from the webhook's clock, and
    mutationRequestUID from the request uid. The rest of the object is decoded
    strictly first. On CREATE of a PtahSchema or PtahMigration, and on an UPDATE that
    changes its spec, it records userInfo.username in the
    operator.ptah.run/spec-last-changed-by annotation; an UPDATE that leaves the spec
    alone gets the annotation it had back. A request without a username, any other
    resource, operation or subresource is refused, so a registration that routes more
    here fails closed. Dry-run requests are stamped exactly like real ones.
    """,
    admits="every request it stamps, with the patch that stamps it",
)
OUTSIDE_STAMP: Final = STAMPING.refuses("resource {resource} is outside the stamp contract")
STAMP_OPERATION: Final = STAMPING.refuses(
    "operation {operation} of {kind} is outside the stamp contract"
)
STAMP_SUBRESOURCE: Final = STAMPING.refuses(
    "subresource {subresource} is outside the stamp contract"
)
NO_USERNAME: Final = STAMPING.refuses("the request carries no username to stamp")

STAMP_CHECK: Final = rule(
    "stamp-check",
    (DECISIONS,),
    "A created decision carries its own request's stamp",
    description="""
    A created PtahSchemaApproval, PtahMigrationApproval, PtahMigrationRunAcknowledgment
    or PtahSchemaProofSettlement must carry exactly the stamp the mutating endpoint
    writes for this request: the identity's username, uid and groups equal to
    userInfo's, the time within 120 seconds before the webhook's clock (30 seconds
    after, for clocks that disagree), and a mutationRequestUID. A request's two
    webhook calls carry different request uids, so the uid cannot be compared with
    this call's; it must be one the API server could have drawn (a UUID). A create
    that skipped the mutating webhook therefore passes only by writing the truth
    about its own author and time.
    """,
    admits="nothing by itself: an approval goes on to four-eyes",
)
UNSTAMPED: Final = STAMP_CHECK.refuses(
    "the {kind} carries no {field}: it was not stamped by admission"
)
FORGED: Final = STAMP_CHECK.refuses(
    "the {kind}'s {field} is {written}, but the request was made with {actual}: "
    "the stamp is not this request's"
)
NOT_NOW: Final = STAMP_CHECK.refuses(
    "the {kind}'s {field} {written} is not this request's time ({now}): "
    "the stamp is not this request's"
)
NOT_A_REQUEST_UID: Final = STAMP_CHECK.refuses(
    "the {kind}'s " + REQUEST_UID_FIELD + " {written} is not an admission request uid"
)

IMMUTABLE: Final = rule(
    "decision-immutable",
    (DECISIONS,),
    "A decision cannot change once created",
    description="""
    An UPDATE of a PtahSchemaApproval, PtahMigrationApproval,
    PtahMigrationRunAcknowledgment or PtahSchemaProofSettlement that changes anything
    in its spec, the stamp included, is refused: a decision names exactly what was
    decided by whom, and an edited one would name something nobody decided. Its
    metadata (labels, finalizers) may change; its status is the manager's.
    """,
    admits="updates that leave the spec as it was",
)
CHANGED: Final = IMMUTABLE.refuses(
    "the spec of a {kind} cannot change once created ({fields} changed); "
    "delete it and create another"
)

FOUR_EYES: Final = rule(
    "four-eyes",
    (DECISIONS,),
    "With four-eyes, the spec's last writer does not approve it",
    description="""
    Four-eyes is the platform's setting, not the resource's: the chart's
    approvals.requireDistinctApprover, which reaches the webhook through its own
    configuration (PTAH_REQUIRE_DISTINCT_APPROVER), so nobody who may write a spec can
    switch it off for the change they are about to approve. A created approval names
    its PtahSchema or PtahMigration, which is read directly: it must exist with the
    named uid. With four-eyes on, the approver (userInfo.username) must not be the
    identity the operator.ptah.run/spec-last-changed-by annotation records as the last
    to change the resource's spec, and a resource with no such record cannot be
    approved until a spec change records one. A stored spec that still names
    policy.approval.requireDistinctApprover changes nothing here, true or false.
    """,
    admits="approvals with four-eyes off, or by someone other than the spec's last writer",
)
TARGET_MISSING: Final = FOUR_EYES.refuses("the {key} the {kind} names does not exist")
TARGET_REPLACED: Final = FOUR_EYES.refuses("the {key} is not the one the {kind} names (uid {uid})")
WRITER_UNKNOWN: Final = FOUR_EYES.refuses(
    "{key} needs a distinct approver (the chart's approvals.requireDistinctApprover), and "
    "the last writer of its spec is not recorded; a change of its spec records one"
)
SAME_PERSON: Final = FOUR_EYES.refuses(
    "{approver} may not approve {key}: the chart's approvals.requireDistinctApprover "
    "requires a distinct approver, and {writer} last changed its spec"
)

SPEC_WRITER: Final = rule(
    "spec-writer",
    (DECISIONS,),
    "The spec's last writer is the request's user",
    description="""
    On CREATE of a PtahSchema or PtahMigration, and on an UPDATE that changes its
    spec, the operator.ptah.run/spec-last-changed-by annotation must name
    userInfo.username; on an UPDATE that leaves the spec alone it must be what it was.
    Four-eyes decides by this record, so nobody may write it but the mutating
    endpoint.
    """,
    admits="writes whose record is the one the mutating endpoint stamps",
)
WRITER_FORGED: Final = SPEC_WRITER.refuses(
    "the " + SPEC_WRITER_ANNOTATION + " annotation of the {kind} must be {expected}, not {written}"
)

SETTING_MOVED: Final = rule(
    "approval-setting-moved",
    (DECISIONS,),
    "Four-eyes is not a spec's to set",
    description="""
    On CREATE of a PtahSchema or PtahMigration, and on an UPDATE that changes its spec,
    the spec must not name policy.approval.requireDistinctApprover, true or false.
    Four-eyes is the chart's approvals.requireDistinctApprover now: a switch in the spec
    could be turned off by the very person whose change it should hold to a second
    approver, in the same write. The field stays in the CRD only so that this sentence
    answers a spec that still sets it (the API server would drop an unknown field
    without a word). An UPDATE that leaves the spec alone (the manager's finalizer, a
    label) is not refused, so a resource stored with the field keeps working until its
    spec next changes, and its status is never judged here.
    """,
    admits="specs that do not name the setting, and writes that leave the spec alone",
)
MOVED: Final = SETTING_MOVED.refuses(
    "spec.policy.approval.requireDistinctApprover is no longer a {kind} setting: four-eyes "
    "is the chart's approvals.requireDistinctApprover, which the platform sets for the "
    "whole cluster; remove the field from the spec"
)

_BY_GVR: Final[dict[tuple[str, str, str], Resource]] = {
    (r.group, r.version, r.plural): r for r in PTAH_RESOURCES
}
_SPEC_KINDS: Final = frozenset({PTAHSCHEMAS.kind, PTAHMIGRATIONS.kind})
_TARGET_MODELS: Final[Mapping[str, type[PtahSchema] | type[PtahMigration]]] = {
    PTAHSCHEMAS.kind: PtahSchema,
    PTAHMIGRATIONS.kind: PtahMigration,
}
_UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_POINTER: Final = "/metadata/annotations/" + SPEC_WRITER_ANNOTATION.replace("~", "~0").replace(
    "/", "~1"
)


# -- the pure core -----------------------------------------------------------------------


def stamp_for(request: AdmissionRequest, now: datetime) -> Stamp:
    """The stamp this request earns: its user, its uid, the time."""
    user = request.user_info
    return Stamp(user.username, user.uid, tuple(user.groups), request.uid, stamp_time(now))


def stamp_patch(kind: StampedKind, stamp: Stamp) -> list[dict[str, Any]]:
    """JSONPatch operations writing ``stamp`` over the spec's fields ("add" replaces)."""
    return [
        {"op": "add", "path": f"/spec/{field}", "value": value}
        for field, value in stamp.fields(kind).items()
    ]


def _annotations(raw: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    meta = raw.get("metadata") if raw is not None else None
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else None


def _spec_writer(raw: Mapping[str, Any] | None) -> str | None:
    value = (_annotations(raw) or {}).get(SPEC_WRITER_ANNOTATION)
    return value if isinstance(value, str) else None


def expected_spec_writer(
    request: AdmissionRequest, new: Mapping[str, Any], old: Mapping[str, Any] | None
) -> str | None:
    """Who the record must name after this write: the requester when the spec is new
    or changed, else whoever it named before (None: no record)."""
    if old is None or new.get("spec") != old.get("spec"):
        return request.user_info.username
    return _spec_writer(old)


def spec_writer_patch(
    request: AdmissionRequest, new: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """JSONPatch operations that make the record what ``expected_spec_writer`` says."""
    expected, written = expected_spec_writer(request, new, old), _spec_writer(new)
    if expected == written:
        return []
    if expected is None:
        return [{"op": "remove", "path": _POINTER}]
    if _annotations(new) is None:
        return [
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {SPEC_WRITER_ANNOTATION: expected},
            }
        ]
    return [{"op": "add", "path": _POINTER, "value": expected}]


def _shown(value: object) -> str:
    return "nothing" if value is None else orjson.dumps(value).decode()


def stamp_mismatch(
    kind: StampedKind, spec: Mapping[str, Any], request: AdmissionRequest, now: datetime
) -> tuple[Any, dict[str, object]] | None:
    """The refusal (and its parts) when ``spec`` does not carry this request's stamp."""
    for field in kind.fields:
        if not spec.get(field):
            return UNSTAMPED, {"kind": kind.kind, "field": field}
    identity = spec[kind.identity_field]
    expected = stamp_for(request, now).identity()
    for part in ("username", "uid", "groups"):
        written = identity.get(part) if isinstance(identity, Mapping) else None
        if written != expected.get(part):
            return FORGED, {
                "kind": kind.kind,
                "field": f"{kind.identity_field}.{part}",
                "written": _shown(written),
                "actual": _shown(expected.get(part)),
            }
    at = parse_stamp_time(spec[kind.time_field])
    age = (now - at).total_seconds() if at is not None else None
    if age is None or age > STAMP_WINDOW_SECONDS or -age > STAMP_FUTURE_SKEW_SECONDS:
        written_at = spec[kind.time_field]
        return NOT_NOW, {
            "kind": kind.kind,
            "field": kind.time_field,
            "written": _shown(written_at),
            "now": stamp_time(now),
        }
    request_uid = spec[REQUEST_UID_FIELD]
    if not isinstance(request_uid, str) or not _UUID.match(request_uid):
        return NOT_A_REQUEST_UID, {"kind": kind.kind, "written": _shown(request_uid)}
    return None


def names_moved_setting(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether this write sets the spec's own four-eyes switch: a create or a spec
    change whose spec names it (a write that leaves the spec alone is not judged)."""
    if old is not None and new.get("spec") == old.get("spec"):
        return False
    spec = new.get("spec")
    policy = spec.get("policy") if isinstance(spec, Mapping) else None
    approval = policy.get("approval") if isinstance(policy, Mapping) else None
    return isinstance(approval, Mapping) and "requireDistinctApprover" in approval


def changed_fields(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[str]:
    """The top-level spec fields that differ, in sorted order."""
    before, after = old.get("spec") or {}, new.get("spec") or {}
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


# -- the shell: routing and decoding ------------------------------------------------------


def _resource(request: AdmissionRequest, trail: Trail) -> Resource:
    gvr = request.resource
    resource = _BY_GVR.get((gvr.group, gvr.version, gvr.resource))
    if resource is None or (resource.kind not in STAMPED and resource.kind not in _SPEC_KINDS):
        named = "/".join(p for p in (gvr.group, gvr.version, gvr.resource) if p)
        raise trail.deny(OUTSIDE_STAMP, resource=named)
    for subresource in request.subresources:
        raise trail.deny(STAMP_SUBRESOURCE, subresource=subresource)
    allowed = ("CREATE",) if resource.kind in STAMPED else ("CREATE", "UPDATE")
    if request.operation not in allowed:
        raise trail.deny(STAMP_OPERATION, operation=request.operation, kind=resource.kind)
    trail.passed(f"{request.operation} of {resource.plural} is in the stamp contract")
    return resource


def _names(request: AdmissionRequest, found: Candidate) -> bool:
    # A create by generateName reaches admission without its name.
    return bool(
        request.namespace
        and found.namespace == request.namespace
        and (not request.name or found.name == request.name)
    )


def _decoded(request: AdmissionRequest, resource: Resource, trail: Trail) -> Candidate:
    problem = request_kind_problem(request, resource)
    if problem:
        raise trail.deny(problem)
    found = candidate(request, resource)
    if not _names(request, found):
        raise trail.deny(NOT_NAMED)
    return found


def _unstamped(request: AdmissionRequest, kind: StampedKind) -> AdmissionRequest:
    """The request with the stamp fields taken out of its object: whatever the client
    wrote there is overwritten, so only the rest must decode."""
    raw = request.object
    if raw is None or not isinstance(raw.get("spec"), dict):
        return request
    spec = {k: v for k, v in raw["spec"].items() if k not in kind.fields}
    return request.model_copy(update={"object": {**raw, "spec": spec}})


def judge_stamp(request: AdmissionRequest, settings: Settings) -> Judgement:
    """The mutating endpoint's one entry: the stamp, or the spec-writer record."""
    yield from ()  # reads nothing; a generator like every rule
    now = settings.clock()
    trail = Trail(STAMPING)
    resource = _resource(request, trail)
    if not request.user_info.username:
        raise trail.deny(NO_USERNAME)
    trail.enter(DECODING)
    kind = STAMPED.get(resource.kind)
    if kind is not None:
        _decoded(_unstamped(request, kind), resource, trail)
        trail.passed(f"the {resource.kind} decodes strictly, its stamp aside")
        trail.enter(STAMPING)
        stamp = stamp_for(request, now)
        trail.passed(f"stamped {kind.identity_field} {stamp.username} at {stamp.at}")
        return trail.allow(patch=orjson.dumps(stamp_patch(kind, stamp)))
    new = _decoded(request, resource, trail)
    old = previous(request, resource) if request.operation == "UPDATE" else None
    trail.passed(f"the {resource.kind} decodes strictly")
    trail.enter(STAMPING)
    operations = spec_writer_patch(request, new.raw, old.raw if old else None)
    expected = expected_spec_writer(request, new.raw, old.raw if old else None)
    trail.passed(f"{SPEC_WRITER_ANNOTATION} is {_shown(expected)}")
    return trail.allow(patch=orjson.dumps(operations) if operations else None)


def judge_decision_write(request: AdmissionRequest, settings: Settings) -> Judgement:
    """The validating endpoint's one entry: stamp, immutability, four-eyes, spec writer."""
    now = settings.clock()
    trail = Trail(STAMPING)
    resource = _resource_for_validation(request, trail)
    trail.enter(DECODING)
    new = _decoded(request, resource, trail)
    old = previous(request, resource) if request.operation == "UPDATE" else None
    trail.passed(f"the {resource.kind} decodes strictly")
    kind = STAMPED.get(resource.kind)
    if kind is None:
        trail.enter(SPEC_WRITER)
        expected = expected_spec_writer(request, new.raw, old.raw if old else None)
        written = _spec_writer(new.raw)
        if written != expected:
            raise trail.deny(
                WRITER_FORGED,
                kind=resource.kind,
                expected=_shown(expected),
                written=_shown(written),
            )
        trail.passed(f"{SPEC_WRITER_ANNOTATION} is {_shown(expected)}, as stamped")
        trail.enter(SETTING_MOVED)
        if names_moved_setting(new.raw, old.raw if old else None):
            raise trail.deny(MOVED, kind=resource.kind)
        trail.passed("the spec does not set four-eyes for itself")
        yield from judge_realm(new.raw, old.raw if old else None, request.namespace, trail)
        return trail.allow()
    if old is not None:
        trail.enter(IMMUTABLE)
        changed = changed_fields(new.raw, old.raw)
        if changed:
            raise trail.deny(CHANGED, kind=kind.kind, fields=", ".join(changed))
        trail.passed("the spec is as it was created")
        return trail.allow()
    trail.enter(STAMP_CHECK)
    spec = new.raw.get("spec") or {}
    mismatch = stamp_mismatch(kind, spec, request, now)
    if mismatch is not None:
        refusal, parts = mismatch
        raise trail.deny(refusal, **parts)
    trail.passed(f"the stamp is this request's: {request.user_info.username}")
    if not kind.four_eyes:
        return trail.allow()
    trail.enter(FOUR_EYES)
    ref = spec.get(kind.target_field) or {}
    key = ReadKey(kind.target, request.namespace, str(ref.get("name") or ""))
    fetched = yield from read(key)
    target = stored(fetched, key, _TARGET_MODELS[kind.target.kind], trail)
    if target is None:
        raise trail.deny(TARGET_MISSING, key=key, kind=kind.kind)
    if target.metadata.uid != ref.get("uid"):
        raise trail.deny(TARGET_REPLACED, key=key, kind=kind.kind, uid=ref.get("uid"))
    # The deployment's word alone: a stored spec's policy.approval, which its own
    # author could set to false beside the change, is not read.
    if not settings.require_distinct_approver:
        trail.passed("the webhook's configuration does not require a distinct approver")
        return trail.allow()
    writer = (target.metadata.annotations or {}).get(SPEC_WRITER_ANNOTATION)
    if not writer:
        raise trail.deny(WRITER_UNKNOWN, key=key)
    approver = request.user_info.username
    if writer == approver:
        raise trail.deny(SAME_PERSON, approver=approver, key=key, writer=writer)
    trail.passed(f"{approver} is not {writer}, who last changed the spec")
    return trail.allow()


def _resource_for_validation(request: AdmissionRequest, trail: Trail) -> Resource:
    gvr = request.resource
    resource = _BY_GVR.get((gvr.group, gvr.version, gvr.resource))
    if resource is not None and resource.kind in STAMPED and request.operation == "UPDATE":
        # An update of a decision is judged (and refused when it changes the spec).
        for subresource in request.subresources:
            raise trail.deny(STAMP_SUBRESOURCE, subresource=subresource)
        trail.passed(f"UPDATE of {resource.plural} is judged for immutability")
        return resource
    return _resource(request, trail)
