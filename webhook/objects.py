"""The objects inside a review and the objects a rule reads, decoded strictly.

A candidate Job or ConfigMap is decoded as far as a rule relies on its shape: its
top-level fields and its whole ``metadata`` are closed sets, so a field nobody
reviewed is a 400 naming it. A Job's ``spec`` stays raw: ``jobclaim.match`` compares
it with the rebuild, where any field the builder did not write already refuses.
Operator kinds are decoded with their full models, which are the CRD schemas.

Objects read from the API server are decoded the same way; one that does not decode
is refused (403) rather than guessed at, since a stored object this code cannot read
is one it cannot vouch for.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError

from jobclaim.api import API_VERSION, GROUP, KINDS, ObjectMeta, OwnerReference
from jobclaim.apiserver import BY_KIND, CONFIGMAPS, Resource
from webhook.review import DECODING, AdmissionRequest, validation_message
from webhook.rules import Fetched, Malformed, Object, ReadKey, Refusal, Trail, read, rule, validated

NO_OBJECT: Final = DECODING.refuses("the {operation} request carries no object", code=400)
CREATE_WITH_OLD: Final = DECODING.refuses("a create request carries an oldObject", code=400)
UPDATE_WITHOUT_OLD: Final = DECODING.refuses("an update request carries no oldObject", code=400)
UNDECODABLE: Final = DECODING.refuses("{where} does not decode: {diagnostics}", code=400)
KIND_MISMATCH: Final = DECODING.refuses("the admission request kind does not match its resource")
CONVERTED: Final = DECODING.refuses(
    "converted or equivalent resource/kind requests are not permitted"
)
OBJECT_KIND: Final = DECODING.refuses("{where} is not a {kind} of {api_version}", code=400)
NOT_NAMED: Final = DECODING.refuses(
    "the candidate namespace and name do not match the admission request"
)
STATUS_ON_CREATE: Final = DECODING.refuses("a created object must not carry a status")

READS: Final = rule(
    "reads",
    ("controller-write", "manager-state", "decisions"),
    "Reads from the API server",
    description="""
    Every object a rule depends on is read directly from the API server on every
    request, never from a cache: a cached owner could still show a claim the
    controller already retired. A read that fails answers HTTP 500, so the API server
    (failurePolicy Fail) refuses the write; no code path answers "allowed" after an
    exception. A stored object that does not decode is refused, never guessed at.
    """,
    admits="nothing by itself",
)
READ_FAILED: Final = READS.refuses("directly read {key}: {error}", code=500)
DEFECT: Final = READS.refuses("the webhook failed while judging the request: {error}", code=500)
STORED_UNDECODABLE: Final = READS.refuses("the stored {key} does not decode: {diagnostics}")

Model = TypeVar("Model", bound=BaseModel)

# Every operator kind by name, typed as models (the package's table is a plain dict).
OPERATOR_KINDS: Final[Mapping[str, type[BaseModel]]] = {
    kind: model
    for kind, model in KINDS.items()
    if isinstance(model, type) and issubclass(model, BaseModel)
}
_TOP_LEVEL: Final[Mapping[str, frozenset[str]]] = {
    "Job": frozenset({"apiVersion", "kind", "metadata", "spec", "status"}),
    "ConfigMap": frozenset({"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}),
}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A decoded object: the raw JSON (what ``match`` compares) and its typed metadata."""

    raw: Object
    meta: ObjectMeta
    model: BaseModel | None = None

    @property
    def namespace(self) -> str:
        return self.meta.namespace or ""

    @property
    def name(self) -> str:
        return self.meta.name or ""


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def decode(raw: Object, resource: Resource, where: str) -> Candidate:
    """``raw`` as a ``resource.kind``, strictly; ``Malformed`` naming the field otherwise."""
    if raw.get("apiVersion") != resource.api_version or raw.get("kind") != resource.kind:
        raise Malformed(
            OBJECT_KIND.sentence(where=where, kind=resource.kind, api_version=resource.api_version)
        )
    model_type: type[BaseModel] | None = (
        OPERATOR_KINDS.get(resource.kind) if resource.group == GROUP else None
    )
    if model_type is not None:
        try:
            model = validated(model_type, raw)
        except ValidationError as error:
            diagnostics = validation_message(error, prefix=where)
            raise Malformed(UNDECODABLE.sentence(where=where, diagnostics=diagnostics)) from error
        return Candidate(raw, owner_meta(model), model)
    allowed = _TOP_LEVEL.get(resource.kind)
    if allowed is None:
        raise Malformed(
            OBJECT_KIND.sentence(where=where, kind=resource.kind, api_version=resource.api_version)
        )
    unknown = raw.keys() - allowed
    if unknown:
        # The first in sorted order, so the same body always names the same field.
        key = min(unknown)
        raise Malformed(UNDECODABLE.sentence(where=where, diagnostics=f"unknown field {key}"))
    problems = _shape_problem(raw, resource.kind)
    if problems:
        raise Malformed(
            UNDECODABLE.sentence(where=where, diagnostics=f"{where}.{problems}".split(".", 1)[1])
        )
    try:
        meta = validated(ObjectMeta, raw.get("metadata"))
    except ValidationError as error:
        diagnostics = validation_message(error, prefix=f"{where}.metadata")
        raise Malformed(UNDECODABLE.sentence(where=where, diagnostics=diagnostics)) from error
    return Candidate(raw, meta)


def _shape_problem(raw: Object, kind: str) -> str | None:
    if kind == "Job":
        if not isinstance(raw.get("spec"), dict):
            return "spec: a Job has a spec object"
        if "status" in raw and not isinstance(raw["status"], dict):
            return "status: a Job's status is an object"
        return None
    for key in ("data", "binaryData"):
        if key in raw and not _strings(raw[key]):
            return f"{key}: a ConfigMap's {key} maps names to strings"
    if "immutable" in raw and not isinstance(raw["immutable"], bool):
        return "immutable: input should be a valid boolean"
    return None


def candidate(request: AdmissionRequest, resource: Resource) -> Candidate:
    """The request's new object, decoded, after the request-shape checks every write takes."""
    if request.object is None:
        raise Malformed(NO_OBJECT.sentence(operation=request.operation.lower()))
    if request.operation == "CREATE" and request.old_object is not None:
        raise Malformed(CREATE_WITH_OLD.sentence())
    return decode(request.object, resource, "request.object")


def previous(request: AdmissionRequest, resource: Resource) -> Candidate:
    """The request's oldObject, decoded; an UPDATE without one is malformed."""
    if request.old_object is None:
        raise Malformed(UPDATE_WITHOUT_OLD.sentence())
    return decode(request.old_object, resource, "request.oldObject")


def names_the_candidate(request: AdmissionRequest, found: Candidate) -> bool:
    return bool(
        request.namespace
        and request.name
        and found.namespace == request.namespace
        and found.name == request.name
    )


def carries_status(raw: Object) -> bool:
    """A create's object carries a status only when it is non-empty.

    The API server clears a Job's status on create and still serializes ``status: {}``
    into the review, so an empty status is how "none" is spelled on the wire.
    """
    status = raw.get("status")
    return status is not None and status != {}


def request_kind_problem(request: AdmissionRequest, resource: Resource) -> Refusal | None:
    """Whether the request is exactly the resource it claims: the kind and no conversion.

    A converted request (``requestKind`` or ``requestResource`` other than the kind and
    resource) was made against another version or an equivalent resource; the object
    this webhook sees is then not the one its author wrote.
    """
    gvk = request.kind
    if (gvk.group, gvk.version, gvk.kind) != (resource.group, resource.version, resource.kind):
        return KIND_MISMATCH
    # Compared field by field: the same verdict as the models' ``==`` (one model type,
    # no extra or private attributes), without its generic path on every request.
    requested = request.request_kind
    if requested is not None and (requested.group, requested.version, requested.kind) != (
        gvk.group,
        gvk.version,
        gvk.kind,
    ):
        return CONVERTED
    gvr, requested_resource = request.resource, request.request_resource
    if requested_resource is not None and (
        requested_resource.group,
        requested_resource.version,
        requested_resource.resource,
    ) != (gvr.group, gvr.version, gvr.resource):
        return CONVERTED
    return None


OWNER: Final = rule(
    "owner",
    ("controller-write",),
    "Every manager write is owned by one current operator resource",
    description="""
    A Job, a plan projection or a plan carries exactly one owner reference, a
    controlling, deletion-blocking reference to the operator resource it belongs to.
    That owner is read directly from the API server and must be the same object (the
    same UID) the reference names; an owner being deleted accepts no new work, because
    its finalizer is already settling what exists. A Job's cleanup TTL alone may be set
    while its owner is being deleted: that is how a deleted resource's Jobs go away.
    """,
    admits="nothing by itself: the owner is handed to the rule of the written kind",
)
NO_OWNER: Final = OWNER.refuses("the {what} does not have one exact {kinds} controller owner")
OWNER_MISSING: Final = OWNER.refuses("the {what}'s controller owner {key} does not exist")
OWNER_REPLACED: Final = OWNER.refuses("the {what}'s controller owner is not the current {key}")
OWNER_DELETING: Final = OWNER.refuses("the {what}'s controller owner {key} is being deleted")


def controller_owner(meta: ObjectMeta, kinds: tuple[str, ...]) -> OwnerReference | None:
    """The single owner reference, when it is a controlling operator owner of ``kinds``."""
    refs = meta.owner_references or []
    if len(refs) != 1:
        return None
    ref = refs[0]
    if (
        ref.api_version != API_VERSION
        or ref.kind not in kinds
        or ref.controller is not True
        or ref.block_owner_deletion is not True
        or not ref.name
        or not ref.uid
    ):
        return None
    return ref


def stored(fetched: Fetched, key: ReadKey, model: type[Model], trail: Trail) -> Model | None:
    """The stored object at ``key`` decoded as ``model``, or None when it does not exist.

    Refuses when it exists but does not decode.
    """
    found = fetched.get(key)
    if found is None:
        return None
    try:
        return found.decode(model)
    except ValidationError as error:
        diagnostics = validation_message(error)
        raise trail.deny(STORED_UNDECODABLE, key=key, diagnostics=diagnostics) from error


def read_owner(
    meta: ObjectMeta,
    models: Mapping[str, type[BaseModel]],
    *,
    what: str,
    trail: Trail,
    allow_deleting: bool = False,
) -> Generator[tuple[ReadKey, ...], Fetched, BaseModel]:
    """Read the one controller owner ``meta`` names, directly, and hold it to the reference.

    ``models`` maps each owner kind the rule accepts to the model it decodes with.
    """
    previous = trail.rule
    trail.enter(OWNER)
    ref = controller_owner(meta, tuple(models))
    if ref is None:
        raise trail.deny(NO_OWNER, what=what, kinds=" or ".join(models))
    key = ReadKey(BY_KIND[ref.kind], meta.namespace or "", ref.name)
    fetched = yield from read(key)
    owner = stored(fetched, key, models[ref.kind], trail)
    if owner is None:
        raise trail.deny(OWNER_MISSING, what=what, key=key)
    owner_metadata = owner_meta(owner)
    if owner_metadata.uid != ref.uid:
        raise trail.deny(OWNER_REPLACED, what=what, key=key)
    deleting = owner_metadata.deletion_timestamp is not None
    if deleting and not allow_deleting:
        raise trail.deny(OWNER_DELETING, what=what, key=key)
    state = "being deleted, which a cleanup allows" if deleting else "not being deleted"
    trail.passed(f"{key} read directly: the referenced UID, {state}")
    trail.enter(previous)
    return owner


def owner_meta(model: BaseModel) -> ObjectMeta:
    meta = getattr(model, "metadata", None)
    if not isinstance(meta, ObjectMeta):
        raise TypeError(f"{type(model).__name__} has no object metadata")
    return meta


def read_owner_of_kind(
    meta: ObjectMeta, model: type[Model], *, what: str, trail: Trail
) -> Generator[tuple[ReadKey, ...], Fetched, Model]:
    """``read_owner`` for a rule that accepts one owner kind, typed as that kind."""
    owner = yield from read_owner(meta, {model.__name__: model}, what=what, trail=trail)
    if not isinstance(owner, model):
        raise TypeError(f"the owner decoded as {type(owner).__name__}, not {model.__name__}")
    return owner


def configmap_key(namespace: str, name: str) -> ReadKey:
    return ReadKey(CONFIGMAPS, namespace, name)
