"""AdmissionReview v1 exactly: strict, complete decoding and the three answers.

Complete, because refusing a real API server's request as malformed blocks every
write the webhook is registered for: a real request carries ``options``, ``dryRun``,
``userInfo.uid`` and ``userInfo.extra``, the ``request*`` triple, omits empty fields
and sends a PATCH as an UPDATE with ``oldObject``. Strict, because a field this code
does not know may carry a meaning it does not judge, and a duplicate key is read
differently by different JSON parsers: the API server's Go decoder keeps the last
value, a reviewer's tool may show the first. Either is answered with HTTP 400 naming
the field, never with a verdict.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webhook.rules import (
    CONTROLLER_WRITE,
    DECISIONS,
    MANAGER_STATE,
    STAMP,
    Malformed,
    rule,
    validated,
)

DECODING: Final = rule(
    "decoding",
    (CONTROLLER_WRITE, MANAGER_STATE, STAMP, DECISIONS),
    "Strict decoding of the review and the objects in it",
    description="""
    The AdmissionReview v1 is decoded completely and strictly: every field a real API
    server sends is modelled, and an unknown or duplicated field anywhere in the review
    is answered with HTTP 400 naming the field. A field is known by its wire name only:
    the Python name a model gives it (user_info for userInfo) is an unknown field, here
    and in every object the webhook decodes, since no API server sends it. A duplicate
    key is read differently by different JSON parsers (the API server keeps the last
    value), so the webhook would otherwise judge an object the API server does not
    store. The objects inside are decoded strictly too, and must be the kind, namespace
    and name the request names; a create carrying an oldObject or a status is not a
    create this contract knows. Dry-run requests are judged exactly like real ones.
    """,
    admits="nothing by itself: a decoded request goes on to the rules of its endpoint",
)
TOO_LARGE: Final = DECODING.refuses("the review body exceeds {limit} bytes", code=400)
NOT_JSON: Final = DECODING.refuses("the review is not JSON: {detail}", code=400)
TOO_DEEP: Final = DECODING.refuses("the review nests deeper than this webhook reads", code=400)
DUPLICATE: Final = DECODING.refuses("duplicate field {path}", code=400)
NOT_A_REVIEW: Final = DECODING.refuses("the review does not decode: {diagnostics}", code=400)
NO_UID: Final = DECODING.refuses("the review carries no request uid", code=400)

API_VERSION: Final = "admission.k8s.io/v1"
# The API server caps a request body at 3 MiB; a review of a larger object is not one
# it would send, and parsing it would only cost memory.
MAX_BODY_BYTES: Final = 3 * 1024 * 1024 + 64 * 1024
MAX_DIAGNOSTICS: Final = 4
_JSON_SPACE: Final = b" \t\n\r"

Object = dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class GroupVersionKind(_Strict):
    group: str = ""
    version: str
    kind: str


class GroupVersionResource(_Strict):
    group: str = ""
    version: str
    resource: str


class UserInfo(_Strict):
    username: str = ""
    uid: str = ""
    groups: list[str] = Field(default_factory=list)
    # Authenticator-specific facts (a token's credential ID, a node binding). Decoded
    # so a real request is accepted; never logged, never consulted.
    extra: dict[str, list[str]] = Field(default_factory=dict)


class Preconditions(_Strict):
    uid: str | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")


class OperationOptions(_Strict):
    """The union of CreateOptions, UpdateOptions, PatchOptions and DeleteOptions."""

    api_version: str | None = Field(default=None, alias="apiVersion")
    kind: str | None = None
    dry_run: list[str] | None = Field(default=None, alias="dryRun")
    field_manager: str | None = Field(default=None, alias="fieldManager")
    field_validation: str | None = Field(default=None, alias="fieldValidation")
    force: bool | None = None
    grace_period_seconds: int | None = Field(default=None, alias="gracePeriodSeconds")
    preconditions: Preconditions | None = None
    orphan_dependents: bool | None = Field(default=None, alias="orphanDependents")
    propagation_policy: str | None = Field(default=None, alias="propagationPolicy")
    ignore_store_read_error_with_cluster_breaking_potential: bool | None = Field(
        default=None, alias="ignoreStoreReadErrorWithClusterBreakingPotential"
    )


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class AdmissionRequest(_Strict):
    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str = Field(default="", alias="subResource")
    request_kind: GroupVersionKind | None = Field(default=None, alias="requestKind")
    request_resource: GroupVersionResource | None = Field(default=None, alias="requestResource")
    request_sub_resource: str = Field(default="", alias="requestSubResource")
    name: str = ""
    namespace: str = ""
    operation: Operation
    user_info: UserInfo = Field(alias="userInfo")
    # The objects stay raw JSON here; each rule decodes the kinds it judges, strictly.
    object: Object | None = None
    old_object: Object | None = Field(default=None, alias="oldObject")
    dry_run: bool = Field(default=False, alias="dryRun")
    options: OperationOptions | None = None

    @property
    def subresources(self) -> tuple[str, ...]:
        if not (self.sub_resource or self.request_sub_resource):
            return ()  # every request but a subresource's, without building a tuple
        return tuple(s for s in (self.sub_resource, self.request_sub_resource) if s)


class AdmissionReview(_Strict):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class _Duplicates(dict[str, Any]):
    """A JSON object that saw a key twice; remembered so the path can be named."""

    def __init__(self, pairs: Sequence[tuple[str, Any]], duplicate: str) -> None:
        super().__init__(pairs)
        self.duplicate = duplicate


def _repeated(pairs: Sequence[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise ValueError("no key repeats")


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told not to.
    raise ValueError(f"{name} is not a JSON value")


def _find_duplicate(value: Any, path: str) -> str | None:
    if isinstance(value, _Duplicates):
        return f"{path}.{value.duplicate}" if path else value.duplicate
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find_duplicate(item, f"{path}.{key}" if path else key)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_duplicate(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _readable_uid(raw: Any) -> str:
    request = raw.get("request") if isinstance(raw, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def field_path(location: Sequence[int | str]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def validation_message(error: ValidationError, *, prefix: str = "") -> str:
    """At most four diagnostics, each naming its field, then how many more there were.

    Unknown fields come first: they are the likeliest reason a real request fails, and
    the one a reader most needs named.
    """
    details = sorted(error.errors(), key=lambda d: d["type"] != "extra_forbidden")
    parts = []
    for detail in details[:MAX_DIAGNOSTICS]:
        where = field_path([prefix, *detail["loc"]] if prefix else detail["loc"]) or "the document"
        if detail["type"] == "extra_forbidden":
            parts.append(f"unknown field {where}")
        elif detail["type"] == "missing":
            parts.append(f"missing field {where}")
        else:
            parts.append(f"{where}: {_lower_first(detail['msg'])}")
    more = len(details) - MAX_DIAGNOSTICS
    text = "; ".join(parts)
    if more > 0:
        text += f" (and {more} more strict decoding errors)"
    return text


def parse_review(body: bytes) -> AdmissionReview:
    """The review in ``body``, or ``Malformed`` naming the first thing wrong with it."""
    if len(body) > MAX_BODY_BYTES:
        raise Malformed(TOO_LARGE.sentence(limit=MAX_BODY_BYTES))
    raw = _decode(body)
    duplicate = None if _keys_proven_distinct(body, raw) else _duplicate_path(body)
    if duplicate:
        raise Malformed(DUPLICATE.sentence(path=duplicate), uid=_readable_uid(raw))
    try:
        review = validated(AdmissionReview, raw)
    except ValidationError as error:
        diagnostics = validation_message(error)
        raise Malformed(
            NOT_A_REVIEW.sentence(diagnostics=diagnostics), uid=_readable_uid(raw)
        ) from error
    if not review.request.uid:
        raise Malformed(NO_UID.sentence())
    return review


def _decode(body: bytes) -> Any:
    """The JSON in ``body`` as orjson reads it, the one reading every rule judges.

    orjson is strict RFC 8259 (UTF-8 only, no NaN, no lone surrogates) and reads a
    review several times faster than the standard library, which matters because every
    request is decoded. An integer beyond 64 bits reads as a float, which no strict
    field accepts and no rebuild equals. What orjson refuses is refused; the standard
    library is asked only to say why, in the words and with the "too deep" distinction
    it always gave.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        _pairs_exactly(body)  # raises for everything it too refuses
        raise Malformed(NOT_JSON.sentence(detail=str(error).lower())) from error


def _keys_proven_distinct(body: bytes, tree: Any) -> bool:
    """Whether ``body`` is shown, without reading it pair by pair, to repeat no key.

    ``tree`` is orjson's reading, in which a repeated key, and whatever it shadowed, is
    gone. Written back, it is the API server's own compact form, so a body that is
    exactly that text (a trailing newline aside) repeats nothing. Any other body, the
    same JSON written another way, is held to its string count instead: each string,
    keys included, is two delimiting quotes in the body and two in ``tree`` written
    back, so the counts are equal exactly when nothing was dropped. Both are a few
    C-level passes where reading pair by pair is a Python call per object. False means
    "not shown", never "repeated": the exact reading then decides, and names the key.
    """
    try:
        again = orjson.dumps(tree)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes
        return False
    return again == body.rstrip(_JSON_SPACE) or _delimiters(body) == _delimiters(again)


def _delimiters(text: bytes) -> int:
    """The quotes that open or close a string in ``text``, which orjson has read as JSON.

    Inside a string a quote is only ever the second half of the escape ``\\"``, and a
    backslash only ever starts an escape, so once each escaped backslash (``\\\\``, taken
    left to right as the parser takes them) is removed, every remaining ``\\"`` is a
    quote inside a string and every other quote delimits one. ``\\u0022`` holds no
    quote character at all.
    """
    if b"\\" not in text:
        return text.count(b'"')
    unpaired = text.replace(b"\\\\", b"")
    return unpaired.count(b'"') - unpaired.count(b'\\"')


def _duplicate_path(body: bytes) -> str | None:
    """The path of the first repeated key in ``body``, read pair by pair, or None."""
    tree, repeated = _pairs_exactly(body)
    # Walked only when the parser saw a repeated key.
    return _find_duplicate(tree, "") if repeated else None


def _pairs_exactly(body: bytes) -> tuple[Any, bool]:
    """``body`` read by the standard library, each object kept with its repeated key,
    and whether any object repeated one.

    Slow (a Python call per object), so it runs only when counting could not show the
    keys distinct, and to say why orjson refused a body.
    """
    repeated: list[bool] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(items)
        if len(result) == len(items):
            return result
        repeated.append(True)
        return _Duplicates(items, _repeated(items))

    try:
        tree = json.loads(body, object_pairs_hook=pairs, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as error:
        raise Malformed(NOT_JSON.sentence(detail=str(error).lower())) from error
    except RecursionError as error:
        raise Malformed(TOO_DEEP.sentence()) from error
    return tree, bool(repeated)


def response(
    uid: str, *, allowed: bool, code: int, message: str, patch: bytes | None = None
) -> Object:
    """An AdmissionReview v1 response: the request uid echoed, the verdict and why, and
    a mutating endpoint's JSONPatch (base64, as the API server reads it)."""
    answer: Object = {"uid": uid, "allowed": allowed, "status": {"code": code, "message": message}}
    if patch is not None and allowed:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(patch).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": answer}
