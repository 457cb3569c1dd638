"""The runner's account of one operation: the payload of a result record.

One model, strictly validated, whichever way it arrives. A record is the only thing
the controller believes about what a Job did, so a payload that contradicts itself
(a successful Apply that never started its mutation, a read-only Plan that says it
changed the database, a refusal that carries a plan) is refused as a whole rather
than read in the most convenient way.

The rules that a termination summary must obey too live in ``account_problem``,
which both models call: a summary can then say less than its record, never something
the record's own rules would have refused.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Final, Literal, Self, cast, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from jobclaim import MIGRATION_OPERATIONS, SCHEMA_OPERATIONS
from jobclaim.api import Severity

# The result's shape and transport, bound into every execution binding. 7: the result
# is a PtahResultRecord the Pod creates under its own token, and the log carries only
# its name and digest; a protocol-6 runner writes its result into its log, which a
# protocol-7 manager no longer reads. A Job of the other version is refused by name
# ("runner protocol 6 is not 7"), never half read.
RUNNER_PROTOCOL_VERSION: Final = 7
PROTOCOL_MISMATCH: Final = "runner_protocol_mismatch"

# The runner's operations and whether each may change the database, read from the
# operation tables the claim was decided from: a second list here could call an
# operation read-only that the claim treats as mutating.
MUTATING: Final[dict[str, bool]] = {
    info.runner_operation: info.mutating
    for table in (SCHEMA_OPERATIONS, MIGRATION_OPERATIONS)
    for info in table.values()
}
RunnerOperation = Literal[
    "resolve", "verify", "observe", "plan", "apply", "migration-history", "migration-apply"
]
RUNNER_OPERATIONS: Final = tuple(sorted(MUTATING))
assert set(get_args(RunnerOperation)) == set(MUTATING), "the Literal and the tables disagree"
# Resolve and Verify read an artifact and never open the database.
DATABASE_OPERATIONS: Final = frozenset(RUNNER_OPERATIONS) - {"resolve", "verify"}
# Which payload section belongs to which operation.
SECTION_OF: Final[dict[str, str]] = {
    "resolve": "resolve",
    "verify": "verify",
    "observe": "observe",
    "plan": "plan",
    "apply": "apply",
    "migration-history": "migration_history",
    "migration-apply": "migration_run",
}
# Where ptah's exit 1 is an answer, not a failure (``schema drift``, ``migrations status``).
EXPECTED_NEGATIVE: Final = frozenset({"observe", "migration-history"})
MAX_OPERATION_ID: Final = 253
MAX_MESSAGE: Final = 1024
MAX_PLAN_TEXT: Final = 1024 * 1024
MAX_VERSIONS: Final = 256
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def runner_operation(value: str) -> RunnerOperation:
    if value not in MUTATING:
        raise ValueError(f"{value!r} is not a runner operation")
    return cast(RunnerOperation, value)


def _clean_line(value: str) -> str:
    if _CONTROL.search(value) or value != value.strip():
        raise ValueError("must be one line without control characters or edge spaces")
    return value


Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Line = Annotated[str, StringConstraints(min_length=1, max_length=512), AfterValidator(_clean_line)]
OperationId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_OPERATION_ID), AfterValidator(_clean_line)
]
ErrorCode = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,62}$")]
Version = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")]
Count = Annotated[int, Field(ge=0, le=2**31 - 1)]
RunOutcome = Literal["UpToDate", "Applied", "Failed", "Partial", "Unknown"]


class Model(BaseModel):
    """camelCase on the wire, unknown fields refused, no coercion, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
        strict=True,
        allow_inf_nan=False,
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_wire(cls, data: object) -> Self:
        """Validate wire data by its wire names only: a second spelling is ambiguity."""
        return cls.model_validate(data, strict=True, by_alias=True, by_name=False)


class ErrorReport(Model):
    code: ErrorCode
    message: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_MESSAGE), AfterValidator(_clean_line)
    ]


class ResolveSection(Model):
    resolved_digest: Digest
    resolved_reference: Line
    resolved_media_type: Line
    resolved_size: Count
    observed_artifact_type: Line | None = None


class VerifySection(Model):
    verification_policy_digest: Digest
    verification_requirements: list[Line] = Field(default_factory=list, max_length=64)


class DriftFinding(Model):
    """One category of ptah's drift summary; the raw diff is never recorded."""

    category: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
    count: Annotated[int, Field(ge=1, le=2**31 - 1)]
    severity: Severity


class ObserveSection(Model):
    observed_dialect: Line
    observed_drift: bool
    highest_drift_severity: Severity | None = None
    drift_finding_count: Count
    drift_findings: list[DriftFinding] = Field(default_factory=list, max_length=64)
    drift_findings_truncated: bool = False
    drift_report_digest: Digest

    @model_validator(mode="after")
    def _consistent(self) -> ObserveSection:
        if (self.highest_drift_severity is None) == self.observed_drift:
            raise ValueError("a highest drift severity is reported exactly when there is drift")
        listed = len(self.drift_findings)
        if listed > self.drift_finding_count or self.drift_findings_truncated != (
            listed < self.drift_finding_count
        ):
            raise ValueError("the listed drift findings disagree with their count")
        return self


class PlanSection(Model):
    plan_outcome: Literal["Changes", "NoChanges"]
    plan_content_digest: Digest
    statement_count: Count
    destructive: bool = False
    # The plan document itself, which the controller publishes; multi-line by nature.
    stdout: Annotated[str, StringConstraints(max_length=MAX_PLAN_TEXT)] = ""

    @model_validator(mode="after")
    def _consistent(self) -> PlanSection:
        if (self.plan_outcome == "NoChanges") != (self.statement_count == 0):
            raise ValueError("a plan has statements exactly when its outcome is Changes")
        return self


class ApplySection(Model):
    plan_content_digest: Digest
    statement_count: Count


class PendingMigration(Model):
    version: Version
    name: Line | None = None
    digest: Digest


class MigrationHistorySection(Model):
    contract_version: Annotated[int, Field(ge=1, le=2**31 - 1)]
    current_version: Version | None = None
    checkpoint_version: Version | None = None
    applied_count: Count
    pending_count: Count
    pending: list[PendingMigration] = Field(default_factory=list, max_length=MAX_VERSIONS)
    fingerprint: Digest
    dirty: bool = False
    modified_versions: list[Version] = Field(default_factory=list, max_length=MAX_VERSIONS)
    out_of_order_versions: list[Version] = Field(default_factory=list, max_length=MAX_VERSIONS)
    # The database is at a version above every one the artifact holds.
    ahead: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> MigrationHistorySection:
        if len(self.pending) > self.pending_count:
            raise ValueError("more pending migrations are listed than counted")
        return self


class MigrationRunSection(Model):
    outcome: RunOutcome
    applied_versions: list[Version] = Field(default_factory=list, max_length=MAX_VERSIONS)


def migration_problem(
    outcome: str,
    applied: int,
    *,
    mutation_started: bool | None,
    uncertain: bool | None,
    error: bool,
) -> str | None:
    """Why a migration run's outcome contradicts its flags, or None.

    Shared by the record and the summary, which carries only the count.
    """
    if outcome in ("Applied", "UpToDate"):
        if error:
            return f"a run that reports {outcome} carries no error"
        if (outcome == "Applied") != (applied > 0):
            return "a run applied versions exactly when its outcome is Applied"
        if outcome == "Applied" and mutation_started is not True:
            return "a run that applied versions must report that its mutation started"
        return None
    if not error:
        return f"a run that reports {outcome} must carry an error"
    if outcome == "Failed" and applied:
        return "a Failed run applied nothing; a run that applied some versions is Partial"
    if outcome == "Partial" and not (applied and mutation_started is True):
        return "a Partial run applied some versions after its mutation started"
    if outcome == "Unknown" and uncertain is not True:
        return "a run whose outcome is Unknown must be reported uncertain"
    return None


def account_problem(
    operation: str,
    *,
    protocol_version: int,
    mutation_started: bool | None,
    uncertain: bool | None,
    error_code: str | None,
    target_identity_digest: str | None,
    coordination_digest: str | None,
) -> str | None:
    """Why an account of ``operation`` contradicts itself, or None.

    The rules both a result and a summary obey; each model adds what it alone carries.
    """
    refusal = error_code == PROTOCOL_MISMATCH
    if protocol_version != RUNNER_PROTOCOL_VERSION and not refusal:
        return f"runner protocol {protocol_version} is not {RUNNER_PROTOCOL_VERSION}"
    if MUTATING[operation]:
        if mutation_started is None or uncertain is None:
            return "a mutating operation must say whether its mutation started and is uncertain"
    elif mutation_started is not None or uncertain is not None:
        # A read-only account that speaks of mutation is either confused or foreign.
        return "a read-only operation reports no mutation flags"
    if uncertain and (error_code is None or mutation_started is not True):
        return "an uncertain outcome is an error of a mutation that started"
    if refusal and mutation_started:
        return "a protocol refusal is made before anything runs"
    if operation == "apply" and error_code is None and not mutation_started:
        return "a successful apply must report that its mutation started"
    if operation not in DATABASE_OPERATIONS:
        if target_identity_digest is not None or coordination_digest is not None:
            return f"{operation} never opens the database, so it reports no database identity"
    elif error_code is None and target_identity_digest is None:
        # The identity is what the controller compares against the claim's database.
        return "a successful database operation must report the database it opened"
    return None


class RunnerResult(Model):
    """The result record's payload."""

    protocol_version: Annotated[int, Field(ge=1, le=2**31 - 1)]
    operation: RunnerOperation
    operation_id: OperationId
    # -1: refused before any child ran. Otherwise the child's exit status (128+n: signal n).
    child_exit_code: Annotated[int, Field(ge=-1, le=255)]
    mutation_started: bool | None = None
    uncertain: bool | None = None
    coordination_digest: Digest | None = None
    target_identity_digest: Digest | None = None
    error: ErrorReport | None = None
    resolve: ResolveSection | None = None
    verify: VerifySection | None = None
    observe: ObserveSection | None = None
    plan: PlanSection | None = None
    apply: ApplySection | None = None
    migration_history: MigrationHistorySection | None = None
    migration_run: MigrationRunSection | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None

    @property
    def error_code(self) -> str | None:
        return self.error.code if self.error else None

    def sections(self) -> dict[str, object]:
        return {
            name: getattr(self, name) for name in set(SECTION_OF.values()) if getattr(self, name)
        }

    @model_validator(mode="after")
    def _consistent(self) -> RunnerResult:
        problem = self._problem()
        if problem:
            raise ValueError(problem)
        return self

    def _problem(self) -> str | None:
        problem = account_problem(
            self.operation,
            protocol_version=self.protocol_version,
            mutation_started=self.mutation_started,
            uncertain=self.uncertain,
            error_code=self.error_code,
            target_identity_digest=self.target_identity_digest,
            coordination_digest=self.coordination_digest,
        )
        if problem:
            return problem
        sections = self.sections()
        own = SECTION_OF[self.operation]
        if set(sections) - {own}:
            return f"a {self.operation} result carries another operation's section"
        if self.child_exit_code == -1 and (self.error is None or self.mutation_started or sections):
            return "a refusal before the child ran carries an error and nothing else"
        if self.error_code == PROTOCOL_MISMATCH and self.child_exit_code != -1:
            return "a protocol refusal is made before any child runs"
        if self.error is None:
            # ptah exits 1 for an expected negative: drift found, migrations pending.
            allowed = (0, 1) if self.operation in EXPECTED_NEGATIVE else (0,)
            if self.child_exit_code not in allowed:
                return "a successful result comes from a child that exited 0"
            if own not in sections:
                return f"a successful {self.operation} result carries its {own} section"
        elif sections and self.operation != "migration-apply":
            # Only a migration run has something to say after an error: what it applied.
            return f"a failed {self.operation} result carries no {own} section"
        run = self.migration_run
        if run is not None:
            return migration_problem(
                run.outcome,
                len(run.applied_versions),
                mutation_started=self.mutation_started,
                uncertain=self.uncertain,
                error=self.error is not None,
            )
        return None


def strict_json(data: bytes | str) -> object:
    """Decode JSON that has exactly one reading, or raise ValueError.

    Duplicate keys are refused (two readers could each pick another copy), as are
    NaN and the infinities (no digest or model can hold them).
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(items)
        if len(result) != len(items):
            raise ValueError("a JSON object repeats a key")
        return result

    def constant(name: str) -> object:
        raise ValueError(f"{name} is not a JSON number")

    try:
        # Decoded here, not by json.loads, which would guess UTF-16 from a leading NUL.
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except RecursionError as error:
        raise ValueError("the JSON document nests too deeply") from error
    except UnicodeDecodeError as error:
        raise ValueError("the JSON document is not UTF-8") from error


def decode_result(data: bytes | str) -> RunnerResult:
    """A result from its JSON form, or ValueError naming the first problem."""
    try:
        return RunnerResult.from_wire(strict_json(data))
    except ValidationError as error:
        raise ValueError(first_problem(error)) from None


def first_problem(error: ValidationError) -> str:
    """One lower-case sentence for a validation error, naming where it is."""
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"])
    message = message.removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    return f"{where}: {message}" if where else message


def encode_json(value: object) -> bytes:
    """Compact, sorted, ASCII-only JSON: bytes that survive any log decoding unchanged.

    A log reader may hand the controller text decoded with replacement characters; a
    payload of pure ASCII re-encodes to the bytes its digest was taken over.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")
