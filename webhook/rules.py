"""The rule registry, and the shape every rule is written in.

A rule is a pure function over the decoded request and the objects it read. Because
the objects must be read uncached from the API server, a rule is written as a
generator: it *yields* the keys it needs next and receives what the API server
answered (a ``Stored`` object each, None for "does not exist"), then *returns* its
Decision. It performs no I/O itself, so the same rule runs unchanged behind the HTTPS
endpoint (the shell reads through the ``ApiReader``), in ``explain`` (objects come
from a file) and in tests (objects come from a dict).

Every refusal sentence a rule can give is registered here with the rule, before any
request arrives. ``docs/admission-rules.md`` is generated from this registry, so the
document a security reviewer reads is the list the code refuses by.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError

from jobclaim.api import ScratchImages
from jobclaim.apiserver import Resource

Endpoint = Literal["controller-write", "manager-state", "stamp", "decisions", "records"]
CONTROLLER_WRITE: Final = "controller-write"
MANAGER_STATE: Final = "manager-state"
# The mutating endpoint: it stamps who made a person's decision object, and who last
# changed a resource's spec. Its validating twin checks both.
STAMP: Final = "stamp"
DECISIONS: Final = "decisions"
# Result records, written by operation Pods under their own tokens (webhook.records).
RECORDS: Final = "records"
ENDPOINT_PATHS: Final[Mapping[str, str]] = {
    CONTROLLER_WRITE: "/validate-controller-write",
    MANAGER_STATE: "/validate-manager-state",
    STAMP: "/mutate-stamp",
    DECISIONS: "/validate-decisions",
    RECORDS: "/validate-records",
}
MUTATING_ENDPOINTS: Final = frozenset({STAMP})
DEFAULT_MANAGER_USERNAME: Final = "system:serviceaccount:ptah-system:ptah-operator"
DEFAULT_COORDINATION_NAMESPACE: Final = "ptah-system"
ALLOWED_MESSAGE: Final = "write matches the operator admission contract"

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReadKey:
    """One object a rule reads: resource, namespace and name; or, with ``selector``
    (label pairs) and no name, the list of objects those labels select, answered as
    ``{"items": [...]}``."""

    resource: Resource
    namespace: str
    name: str
    selector: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        if self.selector:
            labels = ",".join(f"{k}={v}" for k, v in self.selector)
            return f"{self.resource.plural} in {self.namespace} labelled {labels}"
        return f"{self.resource.kind} {self.namespace}/{self.name}"


class ReadFailed(Exception):
    """A read that did not answer what the API server holds: HTTP 500, never a verdict."""

    def __init__(self, key: ReadKey, error: BaseException) -> None:
        super().__init__(f"{key}: {error}")
        self.key = key
        self.error = error


Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], raw: object) -> Model:
    """``model.model_validate(raw)`` by wire names only: the same validator, called
    without the classmethod's own argument checks, which cost as much again as
    decoding a small model, on every model of every request.

    Wire names only, here and in ``Stored.decode``: the models accept a Python field
    name too (``populate_by_name``, so code can build them by name), but no API server
    sends ``user_info`` for ``userInfo``, and a key it does not send is refused as
    unknown, named as sent.
    """
    return cast(
        Model, model.__pydantic_validator__.validate_python(raw, by_alias=True, by_name=False)
    )


class Stored:
    """One object a read answered: the JSON text the API server sent, when the reader
    hands it over, or else the tree it decoded.

    From the text, a model is decoded in one pass, without a tree built first only to
    be walked again. A text that does not decode is decoded once more from its tree,
    so a refusal names its fields in the very words a tree always gave, and a text
    that is not JSON fails the read, exactly as a reader that parsed it would have.
    """

    __slots__ = ("_key", "_text", "_tree")

    def __init__(
        self, key: ReadKey, *, text: bytes | None = None, tree: Object | None = None
    ) -> None:
        if (text is None) == (tree is None):
            raise TypeError("a stored object is either its text or its tree")
        self._key, self._text, self._tree = key, text, tree

    def tree(self) -> Object:
        """The object as JSON values (from a text, a fresh tree on every call)."""
        if self._tree is not None:
            return self._tree
        assert self._text is not None
        try:
            decoded = orjson.loads(self._text)
        except orjson.JSONDecodeError as error:
            raise ReadFailed(self._key, error) from error
        if not isinstance(decoded, dict):
            # A single GET answers one object; anything else has not said what the
            # API server holds, as a reader that checked it would have refused.
            raise ReadFailed(self._key, ValueError("the answer is not one JSON object"))
        return decoded

    def decode(self, model: type[Model]) -> Model:
        """The object as ``model``, strictly and by wire names only (``validated``);
        ``ValidationError`` when it is not one."""
        if self._text is not None:
            try:
                return cast(Model, decoded_text(model, self._text))
            except ValidationError:
                pass  # decided again below, from the tree, which words the refusal
        return validated(model, self.tree())


# The largest text ``decoded_text`` remembers, and how many it remembers: an owner, a
# plan or an approval is a few KiB, so the memo holds at most a few MiB of text and
# its models, whatever the API server answers.
DECODED_TEXT_MAX_BYTES: Final = 64 * 1024
DECODED_TEXTS: Final = 64


def decoded_text(model: type[BaseModel], text: bytes) -> BaseModel:
    """``text`` decoded as ``model``, strictly and by wire names only.

    Every controller write about one resource reads the same owner, plan and approval
    again, and the API server answers the very same bytes until the object changes
    (its resourceVersion is in them): the strict decode is a pure function of the
    model and the exact bytes, and its model is frozen, so one decode can answer every
    read of those bytes. Keyed by the whole text, never by a name or a version the
    manager could write: a different byte is a different entry. A text that does not
    decode raises, and is never remembered.
    """
    if type(text) is not bytes or len(text) > DECODED_TEXT_MAX_BYTES:
        # Only immutable bytes can be a key: a buffer could change after it was one.
        return _decode_json(model, text)
    return _decoded_text_memo(model, text)


def _decode_json(model: type[BaseModel], text: bytes) -> BaseModel:
    validator = model.__pydantic_validator__
    return cast(BaseModel, validator.validate_json(text, by_alias=True, by_name=False))


_decoded_text_memo = functools.lru_cache(maxsize=DECODED_TEXTS)(_decode_json)


def forget_decoded_texts() -> None:
    """Empty the decode memo (a test proves a remembered answer is a fresh one)."""
    _decoded_text_memo.cache_clear()


Fetched = Mapping[ReadKey, Stored | None]


@dataclass(frozen=True, slots=True)
class Decision:
    """What one request got: the verdict, the HTTP-level code, the rule and why.

    ``code`` is 200 when allowed, 403 when denied; 400 (malformed) and 500 (a read
    failed, or a defect) are produced by the shell, never with ``allowed`` true.
    """

    allowed: bool
    code: int
    rule: str
    message: str
    trail: tuple[str, ...] = ()
    # A mutating endpoint's JSONPatch (RFC 6902), as JSON; only ever on an allowed one.
    patch: bytes | None = None

    @property
    def verdict(self) -> str:
        if self.allowed:
            return "allowed"
        return {400: "malformed", 500: "error"}.get(self.code, "denied")


@dataclass(frozen=True, slots=True)
class Refusal:
    """One sentence a rule refuses with; ``{placeholders}`` are filled per request."""

    rule: str
    template: str
    code: int = 403

    def sentence(self, **parts: object) -> str:
        return self.template.format(**parts) if parts else self.template


@dataclass
class Rule:
    id: str
    endpoints: tuple[Endpoint, ...]
    title: str
    description: str
    admits: str
    refusals: list[Refusal] = field(default_factory=list)

    def refuses(self, template: str, *, code: int = 403) -> Refusal:
        refusal = Refusal(self.id, template, code)
        self.refusals.append(refusal)
        return refusal


REGISTRY: dict[str, Rule] = {}


def rule(
    id: str, endpoints: tuple[Endpoint, ...], title: str, *, description: str, admits: str
) -> Rule:
    """Register a rule; ids are unique, and the registry order is the document's."""
    if id in REGISTRY:
        raise ValueError(f"rule {id} is registered twice")
    registered = Rule(id, endpoints, title, " ".join(description.split()), admits)
    REGISTRY[id] = registered
    return registered


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ImagePins:
    """What the deployment pins every operation Job to: the chart's values, reaching the
    webhook through its own environment, never through a request or a status the
    manager writes. A stolen manager identity can write status; it cannot change the
    Deployment, so a Job judged by these runs only the images the platform chose."""

    executor_image: str
    runner_image: str
    manager_image: str
    ptah_version: str
    # The chart's execution.scratchImages (None: it names none), held like the executor.
    scratch_images: ScratchImages | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """What a deployment configures: whose writes are the manager's, the images Jobs
    are pinned to (None admits no Job), the namespace of the realm Leases (the
    evidence a release was done), whether an approval needs a distinct approver
    (four-eyes: the chart's ``approvals.requireDistinctApprover``, which reaches the
    webhook through its own environment like the pins, so the author of a spec cannot
    switch it off in that spec), and the clock a stamp is written and checked by (a
    test fixes it)."""

    manager_username: str = DEFAULT_MANAGER_USERNAME
    clock: Callable[[], datetime] = utc_now
    pins: ImagePins | None = None
    coordination_namespace: str = DEFAULT_COORDINATION_NAMESPACE
    require_distinct_approver: bool = False


class Malformed(Exception):
    """The review or an object in it cannot be judged: HTTP 400, never a verdict."""

    def __init__(self, message: str, *, uid: str = "", rule: str = "decoding") -> None:
        super().__init__(message)
        self.message = message
        self.uid = uid
        self.rule = rule


class Denied(Exception):
    """Raised (``raise trail.deny(...)``) anywhere inside a rule; carries the Decision."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(decision.message)
        self.decision = decision


class Trail:
    """The checks a request passed, in order, ending in its Decision.

    A rule refuses with ``raise trail.deny(...)`` (so a helper several calls deep ends
    the rule without threading a result back) and admits by returning ``allow()``.
    ``explain`` prints the steps; the decision log keeps the verdict and the reason.
    """

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.steps: list[str] = []

    def enter(self, rule: Rule) -> None:
        self.rule = rule

    def passed(self, step: str) -> None:
        self.steps.append(f"{self.rule.id}: {step}")

    def allow(self, *, patch: bytes | None = None) -> Decision:
        self.steps.append(f"{self.rule.id}: admitted")
        return Decision(True, 200, self.rule.id, ALLOWED_MESSAGE, tuple(self.steps), patch)

    def deny(self, refusal: Refusal, **parts: object) -> Denied:
        """The refusal to ``raise``: ``raise trail.deny(SENTENCE, part=...)``."""
        sentence = refusal.sentence(**parts)
        self.steps.append(f"{refusal.rule}: refused: {sentence}")
        return Denied(Decision(False, refusal.code, refusal.rule, sentence, tuple(self.steps)))


T = TypeVar("T")
# A step of a rule that reads: ``value = yield from step(...)``.
Reads = Generator[tuple[ReadKey, ...], Fetched, T]
Judgement = Reads[Decision]


def read(*keys: ReadKey) -> Reads[Fetched]:
    """``fetched = yield from read(key, ...)``: ask the shell for objects, in one batch."""
    fetched = yield keys
    return fetched
