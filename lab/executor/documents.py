"""The documents the executor prints and reads, as ptah spells them (snake_case, contract 1).

Each printed document is one JSON object on stdout. Optional fields are left out rather
than printed as null, as ptah's ``omitempty`` fields are; lists the contract always
carries are printed even when empty.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

CONTRACT_VERSION = 1
PLAN_FORMAT_VERSION = 1
SCHEMA_ARTIFACT_TYPE = "application/vnd.stokaro.ptah.schema.v1"
MIGRATIONS_ARTIFACT_TYPE = "application/vnd.stokaro.ptah.migrations.v1"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def render(document: BaseModel) -> str:
    """The exact text printed for ``document``: deterministic, so two runs compare by bytes."""
    return (
        json.dumps(
            document.model_dump(mode="json", exclude_none=True), indent=2, ensure_ascii=False
        )
        + "\n"
    )


# --- schema --------------------------------------------------------------------------


class PlanStatement(_Doc):
    sql: StrictStr
    severity: Literal["safe", "info", "warning", "error", "destructive"]
    reason: StrictStr


class PlanFile(_Doc):
    """The saved plan ``schema plan --output`` writes and ``schema apply --plan`` reads."""

    format_version: Literal[1]
    name: Annotated[StrictStr, Field(min_length=1)]
    dialect: Literal["postgres", "mysql"]
    from_fingerprint: Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
    to_fingerprint: Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
    exclude: list[StrictStr] | None = None
    destructive: StrictBool
    statements: list[PlanStatement]


class Refusal(_Doc):
    code: StrictStr
    tables: list[str] | None = None
    changed: Literal["schema", "rows"] | None = None
    plan_fingerprint: str | None = None
    database_fingerprint: str | None = None


class PlanReport(_Doc):
    contract_version: int = CONTRACT_VERSION
    outcome: Literal["changes", "no-changes", "refused", "failed"]
    plan_digest: str | None = None
    plan_path: str | None = None
    refusal: Refusal | None = None
    error: str | None = None


class ApplyReport(_Doc):
    contract_version: int = CONTRACT_VERSION
    outcome: Literal["applied", "no-changes", "dry-run", "canceled", "refused", "failed", "unknown"]
    plan_name: str | None = None
    plan_digest: str | None = None
    statements: list[str] | None = None
    refusal: Refusal | None = None
    error: str | None = None


class DriftFinding(_Doc):
    category: str
    count: int
    severity: str


class DriftReport(_Doc):
    drift: bool
    failed: bool
    failure_threshold: str
    highest_severity: str
    dialect: str
    findings: list[DriftFinding]
    diff: dict[str, list[str]]
    error: str | None = None


# --- migrations ----------------------------------------------------------------------


class MigrationRecord(_Doc):
    version: int
    version_key: str | None = None
    description: str | None = None
    checksum: str | None = None
    applied_checksum: str | None = None
    transaction_mode: str | None = None
    state: Literal["applied", "modified", "dirty", "pending", "out-of-order", "checkpoint-covered"]


class DirtyRevision(_Doc):
    version: int
    applied: int
    total: int
    error: str | None = None


class MigrationStatus(_Doc):
    contract_version: int = CONTRACT_VERSION
    current_version: int
    total_migrations: int
    has_pending_changes: bool
    migrations: list[MigrationRecord]
    dirty_revision: DirtyRevision | None = None


class MigrationRun(_Doc):
    contract_version: int = CONTRACT_VERSION
    direction: Literal["up"] = "up"
    outcome: Literal["up-to-date", "applied", "dry-run", "failed", "partial", "unknown"]
    planned: list[int]
    applied: list[int]
    error: str | None = None
    status: MigrationStatus | None = None


class ExpectedMigration(_Doc):
    version: Annotated[StrictInt, Field(gt=0)]
    version_key: StrictStr | None = None


class ExpectedSequence(_Doc):
    """``--expect-sequence``: parsed strictly (unknown fields, a missing list refused)."""

    migrations: list[ExpectedMigration]


# --- OCI -----------------------------------------------------------------------------


class ResolveReport(_Doc):
    reference: str
    pinned_reference: str
    digest: str
    media_type: str
    size: int


class InspectLayer(_Doc):
    media_type: str
    digest: str
    size: int
    title: str | None = None


class InspectReport(_Doc):
    reference: str
    pinned_reference: str
    digest: str
    media_type: str
    size: int
    artifact_type: str
    annotations: dict[str, str]
    layers: list[InspectLayer]


class VerificationFinding(_Doc):
    requirement: str
    detail: str


class VerifyReport(_Doc):
    reference: str
    digest: str
    satisfied: list[str]
    findings: list[VerificationFinding]
