"""The documents ptah prints on stdout, read the way the original operator reads them.

Each reader takes exactly one JSON value (a second document, trailing text, a
duplicate key or a non-UTF-8 byte is refused: ``result.strict_json``) and holds it to
the shape ptah publishes (``../shared/reference/ptah-cli.md``, the original
``internal/dataplane``). What is strict and what is not is deliberate:

* a ``contract_version`` other than 1 is refused: ptah raises it when a field changes
  meaning, so the fields this runner knows may already mean something else;
* an outcome, a migration state or a severity outside the published enums is refused:
  an unknown outcome is a decision nobody taught the runner to make;
* fields ptah does not declare in the contract are ignored, because ptah adds
  fields without raising the version (the original reads them the same way);
* the documents' own consistency (a refusal exactly when the outcome is refused, a
  saved plan exactly when there are changes, applied versions that were planned) is
  checked here, once, so a decision never reads a contradiction.

Pure. Each reader raises ``DocumentError`` with one lower-case sentence.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from jobclaim.api import Severity
from runner.result import first_problem, strict_json

CONTRACT_VERSION: Final = 1
MAX_LISTED: Final = 4096

PlanOutcome = Literal["changes", "no-changes", "refused", "failed"]
ApplyOutcome = Literal[
    "applied", "no-changes", "dry-run", "canceled", "refused", "failed", "unknown"
]
RunOutcome = Literal["up-to-date", "applied", "dry-run", "failed", "partial", "unknown"]
MigrationState = Literal[
    "applied", "modified", "dirty", "pending", "out-of-order", "checkpoint-covered"
]
PLAN_OUTCOMES: Final = ("changes", "no-changes", "refused", "failed")
APPLY_OUTCOMES: Final = (
    "applied",
    "no-changes",
    "dry-run",
    "canceled",
    "refused",
    "failed",
    "unknown",
)
RUN_OUTCOMES: Final = ("up-to-date", "applied", "dry-run", "failed", "partial", "unknown")

Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Word = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
MediaType = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$"
    ),
]
Requirement = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
RefusalCode = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9._-]{0,63}$")]
Size = Annotated[int, Field(ge=0)]
Version = Annotated[int, Field(ge=1)]
_SEVERITY_WORD: Final = re.compile(r"^(safe|info|warning|error|destructive)$")


class DocumentError(ValueError):
    """A document ptah printed that this runner cannot account for."""


class Document(BaseModel):
    """ptah's snake_case fields; undeclared fields ignored, no coercion, immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, allow_inf_nan=False)


def _pinned(reference: str, digest: str) -> bool:
    return reference.endswith("@" + digest)


class ResolveDocument(Document):
    """``oci resolve --format json``: the tag's immutable descriptor."""

    reference: Word
    pinned_reference: Word
    digest: Digest
    media_type: MediaType
    size: Size

    @model_validator(mode="after")
    def _bound(self) -> Self:
        if not _pinned(self.pinned_reference, self.digest):
            raise ValueError("the pinned reference does not name the digest it reports")
        return self


class VerificationFinding(Document):
    requirement: Requirement
    detail: Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class VerifyDocument(Document):
    """``oci verify --format json``: which policy requirements hold, and which do not."""

    reference: Word
    digest: Digest
    satisfied: list[Requirement] = Field(max_length=64)
    findings: list[VerificationFinding] = Field(max_length=64)

    @model_validator(mode="after")
    def _bound(self) -> Self:
        if not _pinned(self.reference, self.digest):
            raise ValueError("the verified reference is not pinned to the digest it reports")
        named = [*self.satisfied, *(f.requirement for f in self.findings)]
        if len(set(named)) != len(named):
            raise ValueError("a requirement is reported twice")
        return self


class InspectDocument(ResolveDocument):
    """``oci inspect --format json --no-referrers``: the descriptor and artifact type.

    Its annotations, layers and subjects are not read: only the immutable descriptor
    and the artifact type reach a result.
    """

    artifact_type: Word


class DriftFindingDocument(Document):
    category: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    count: Annotated[int, Field(ge=1, le=2**31 - 1)]
    severity: Severity


class DriftDocument(Document):
    """``schema drift --format json``: exit 1 exactly when ``failed``."""

    drift: bool
    failed: bool
    highest_severity: str = ""
    dialect: str = ""
    ignored_tables: list[str] = Field(default_factory=list, max_length=MAX_LISTED)
    findings: list[DriftFindingDocument] = Field(default_factory=list, max_length=MAX_LISTED)
    diff: Any = None
    error: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.failed and not self.drift:
            raise ValueError("a drift report fails only when it found drift")
        if self.drift and not _SEVERITY_WORD.fullmatch(self.highest_severity):
            raise ValueError("a drift report that found drift names its highest severity")
        categories = [f.category for f in self.findings]
        if len(set(categories)) != len(categories):
            raise ValueError("a drift report lists a category twice")
        return self


class SchemaRefusal(Document):
    code: RefusalCode
    tables: list[Word] = Field(default_factory=list, max_length=MAX_LISTED)
    changed: str = ""


def _refusal_problem(refused: bool, refusal: SchemaRefusal | None) -> str | None:
    if refused and refusal is None:
        return "a refused outcome names its refusal"
    if not refused and refusal is not None:
        return "only a refused outcome carries a refusal"
    return None


class PlanReport(Document):
    """``schema plan --output FILE --json``."""

    contract_version: Literal[1]
    outcome: PlanOutcome
    plan_digest: str = ""
    plan_path: str = ""
    refusal: SchemaRefusal | None = None
    error: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problem = _refusal_problem(self.outcome == "refused", self.refusal)
        if problem:
            raise ValueError(problem)
        saved = bool(self.plan_digest or self.plan_path)
        if self.outcome == "changes":
            if not re.fullmatch(r"sha256:[0-9a-f]{64}", self.plan_digest) or not self.plan_path:
                raise ValueError(
                    "a plan with changes names the digest and path of the plan it saved"
                )
        elif saved:
            raise ValueError(f"a plan that reports {self.outcome} names no saved plan")
        return self


class ApplyReport(Document):
    """``schema apply --plan FILE --auto-approve --json [--dry-run]``."""

    contract_version: Literal[1]
    outcome: ApplyOutcome
    plan_name: str = ""
    plan_digest: str = ""
    statements: list[str] = Field(default_factory=list, max_length=MAX_LISTED)
    refusal: SchemaRefusal | None = None
    error: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problem = _refusal_problem(self.outcome == "refused", self.refusal)
        if problem:
            raise ValueError(problem)
        if self.plan_digest and not re.fullmatch(r"sha256:[0-9a-f]{64}", self.plan_digest):
            raise ValueError("the plan digest is not a sha256 digest")
        return self


class MigrationRecord(Document):
    version: Version
    version_key: str = ""
    description: str = ""
    checksum: str = ""
    applied_checksum: str = ""
    checkpoint: bool = False
    transaction_mode: str = ""
    state: MigrationState


class DirtyRevision(Document):
    version: Version
    applied: Annotated[int, Field(ge=0)] = 0
    total: Annotated[int, Field(ge=0)] = 0
    error: str = ""


class StatusDocument(Document):
    """``migrations status --migrations-dir DIR --json``."""

    contract_version: Literal[1]
    current_version: Annotated[int, Field(ge=0)]
    checkpoint_version: Annotated[int, Field(ge=0)] = 0
    total_migrations: Annotated[int, Field(ge=0)]
    has_pending_changes: bool
    migrations: list[MigrationRecord] = Field(default_factory=list, max_length=MAX_LISTED)
    dirty_revision: DirtyRevision | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if len(self.migrations) > self.total_migrations:
            raise ValueError("the status lists more migrations than it counts")
        versions = [m.version for m in self.migrations]
        if len(set(versions)) != len(versions):
            raise ValueError("the status lists a version twice")
        return self

    def versions_in(self, *states: str) -> list[MigrationRecord]:
        return [m for m in self.migrations if m.state in states]


class RunDocument(Document):
    """``migrations up --migrations-dir DIR --json --expect-sequence FILE``."""

    contract_version: Literal[1]
    direction: Literal["up"]
    outcome: RunOutcome
    planned: list[Version] = Field(default_factory=list, max_length=MAX_LISTED)
    applied: list[Version] = Field(default_factory=list, max_length=MAX_LISTED)
    error: str = ""
    status: StatusDocument | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if any(version not in self.planned for version in self.applied):
            raise ValueError("the run reports a version applied that it never planned")
        if self.outcome in ("up-to-date", "applied") and self.error:
            raise ValueError(f"a run that reports {self.outcome} carries no error")
        if (self.outcome == "applied") != bool(self.applied) and self.outcome in (
            "applied",
            "up-to-date",
        ):
            raise ValueError("a run applied versions exactly when its outcome is applied")
        return self


_D = TypeVar("_D", bound=Document)


def decode(kind: type[_D], data: bytes) -> _D:
    """One document of ``kind`` from a child's whole stdout, or ``DocumentError``."""
    if not data.strip():
        raise DocumentError("ptah printed no document")
    try:
        value = strict_json(data)
    except ValueError as error:
        # json's "Extra data" is a second document or trailing text.
        raise DocumentError(f"ptah's output is not one JSON document: {error}") from None
    if not isinstance(value, dict):
        raise DocumentError("ptah's document is not a JSON object")
    contract = value.get("contract_version", CONTRACT_VERSION)
    if "contract_version" in kind.model_fields and contract != CONTRACT_VERSION:
        raise DocumentError(
            f"ptah's document speaks contract version {contract!r}, not {CONTRACT_VERSION}"
        )
    try:
        return kind.model_validate(value)
    except ValidationError as error:
        raise DocumentError(
            f"ptah's document is not what it must be: {first_problem(error)}"
        ) from None
