"""PtahMigration and its satellites: plans, approvals, run acknowledgments."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jobclaim.api._base import (
    Digest,
    Epoch,
    PinnedImage,
    PositiveInt32,
    Timestamp,
    WireModel,
)
from jobclaim.api.common import (
    ApplyPolicy,
    ApprovalPolicy,
    ApproverRecord,
    ArtifactVerificationStatus,
    DatabaseTargetSpec,
    ExecutionBindingStatus,
    ExecutionSpec,
    ManagerRecord,
    OCIArtifactAccessBinding,
    OCIArtifactSourceSpec,
    ReadingFailureStatus,
    TargetLockReleaseStatus,
    TransactionMode,
)
from jobclaim.api.meta import Condition, ObjectMeta, ObjectReference
from jobclaim.api.schema import ApprovalStatus
from jobclaim.api.snapshot import AdmissionSnapshot

MigrationPhase = Literal[
    "Pending",
    "Resolving",
    "Verifying",
    "Reading",
    "Planning",
    "AwaitingApproval",
    "Blocked",
    "Applying",
    "VerifyingHistory",
    "InSync",
    "Suspended",
    "Failed",
]
MIGRATION_FINALIZER = "operator.ptah.run/migration-operation"
UNRESOLVED_RUN_ANNOTATION = "operator.ptah.run/unresolved-run"
RunOutcome = Literal["UpToDate", "Applied", "Failed", "Partial", "Unknown"]


class MigrationPolicy(WireModel):
    apply: ApplyPolicy = "OnApproval"
    """When a migration plan is applied: Never, OnApproval (the default) or Always."""
    lock_timeout: str = "5m"
    """The database lock timeout the executor sets."""
    transaction_mode: TransactionMode = "all"
    """How migrations are grouped into transactions: all, file or none."""
    approval: ApprovalPolicy | None = None
    """No longer a setting: four-eyes is the chart's approvals.requireDistinctApprover, and a spec
    that sets approval.requireDistinctApprover is refused."""


class PtahMigrationSpec(WireModel):
    target: DatabaseTargetSpec
    """The database the migrations run against."""
    artifact: OCIArtifactSourceSpec
    """The OCI artifact holding the ordered migrations, and how it is verified."""
    policy: MigrationPolicy = Field(default_factory=MigrationPolicy)
    """When a migration plan is applied."""
    interval: str = "10m"
    """How often the history is read again (Go duration, default 10m)."""
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    """How the operation Jobs run."""
    suspend: bool = False
    """Stop claiming new work; a dispatched Apply is still accounted for."""


class MigrationHistoryStatus(WireModel):
    observed_at: Timestamp | None = None
    contract_version: int | None = None
    current_version: str | None = None
    checkpoint_version: str | None = None
    applied_count: int = 0
    pending_count: int = 0
    fingerprint: Digest | None = None
    target_identity_digest: Digest | None = None
    dirty: bool = False
    modified_versions: list[str] = Field(default_factory=list)
    out_of_order_versions: list[str] = Field(default_factory=list)


class MigrationOperationStatus(WireModel):
    """The claim: written before the Job exists, naming the Job it may create."""

    type: str
    id: Digest
    input_fingerprint: Digest
    job_name: str = Field(min_length=1, max_length=63)
    job_uid: str | None = None
    started_at: Timestamp | None = None
    attempt: int = Field(default=1, ge=1)
    execution_binding_id: Epoch
    source: OCIArtifactAccessBinding | None = None
    target: DatabaseTargetSpec | None = None
    coordination_digest: Digest | None = None
    plan_ref: ObjectReference | None = None
    approval_ref: ObjectReference | None = None
    dispatch_started: bool = False
    dispatch_not_after: Timestamp | None = None
    execution_not_after: Timestamp | None = None
    admission_snapshot: AdmissionSnapshot | None = None
    admission_snapshot_refreshed: bool = False
    lease_duration_seconds: int | None = Field(default=None, ge=5, le=86460)
    lease_epoch: str | None = None
    lease_continuity_lost: bool = False
    retry_not_before: Timestamp | None = None


class MigrationRunStatus(WireModel):
    outcome: RunOutcome
    job_name: str | None = None
    job_uid: str | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    applied_versions: list[str] = Field(default_factory=list, max_length=256)
    dispatched_by: ManagerRecord | None = None
    message: str | None = None


class UnresolvedMigrationRunStatus(WireModel):
    """A run nobody accounted for; only a reading or an acknowledgment settles it."""

    outcome: Literal["Partial", "Unknown"]
    operation_id: str
    job_name: str
    job_uid: str | None = None
    plan_ref: ObjectReference | None = None
    target_identity_digest: Digest | None = None
    dispatched_by: ManagerRecord | None = None
    recorded_at: Timestamp


class ResolvedMigrationRunStatus(WireModel):
    operation_id: str
    outcome: Literal["Partial", "Unknown"]
    resolution: Literal["HistoryRead", "Acknowledged"]
    acknowledgment_ref: ObjectReference | None = None
    acknowledged_by: ApproverRecord | None = None
    resolved_at: Timestamp


class PtahMigrationStatus(WireModel):
    observed_generation: int | None = None
    phase: MigrationPhase | None = None
    conditions: list[Condition] = Field(default_factory=list)
    execution_binding: ExecutionBindingStatus | None = None
    artifact: OCIArtifactAccessBinding | None = None
    verification: ArtifactVerificationStatus | None = None
    reading_failure: ReadingFailureStatus | None = None
    history: MigrationHistoryStatus | None = None
    plan: ObjectReference | None = None
    active_operation: MigrationOperationStatus | None = None
    last_run: MigrationRunStatus | None = None
    unresolved_run: UnresolvedMigrationRunStatus | None = None
    resolved_run: ResolvedMigrationRunStatus | None = None
    pending_lock_release: TargetLockReleaseStatus | None = None
    next_reconciliation_time: Timestamp | None = None


class PtahMigration(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigration"] = "PtahMigration"
    metadata: ObjectMeta
    spec: PtahMigrationSpec
    """Which database runs which ordered migrations, and under which policy."""
    status: PtahMigrationStatus | None = None


class MigrationSequenceEntry(WireModel):
    version: str
    name: str | None = None
    digest: Digest


class PtahMigrationPlanSpec(WireModel):
    migration_ref: ObjectReference
    fingerprint: Digest
    migrations: list[MigrationSequenceEntry] = Field(min_length=1)
    history_fingerprint: Digest
    current_version: str | None = None
    artifact_digest: Digest
    coordination_digest: Digest
    target_identity_digest: Digest | None = None
    execution_binding_id: Epoch
    controller_state_version: PositiveInt32
    ptah_version: str
    executor_image: PinnedImage
    runner_protocol_version: PositiveInt32
    created_at: Timestamp | None = None


class PtahMigrationPlan(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigrationPlan"] = "PtahMigrationPlan"
    metadata: ObjectMeta
    spec: PtahMigrationPlanSpec


class PtahMigrationApprovalSpec(WireModel):
    migration_ref: ObjectReference
    plan_ref: ObjectReference
    plan_fingerprint: Digest
    history_fingerprint: Digest | None = None
    execution_binding_id: Epoch | None = None
    approver: ApproverRecord | None = None
    approved_at: Timestamp | None = None
    mutation_request_uid: str | None = None


class PtahMigrationApproval(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigrationApproval"] = "PtahMigrationApproval"
    metadata: ObjectMeta
    spec: PtahMigrationApprovalSpec
    status: ApprovalStatus | None = None


class PtahMigrationRunAcknowledgmentSpec(WireModel):
    migration_ref: ObjectReference
    operation_id: str = Field(min_length=1)
    acknowledged_by: ApproverRecord | None = None
    acknowledged_at: Timestamp | None = None
    mutation_request_uid: str | None = None


class PtahMigrationRunAcknowledgment(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigrationRunAcknowledgment"] = "PtahMigrationRunAcknowledgment"
    metadata: ObjectMeta
    spec: PtahMigrationRunAcknowledgmentSpec
    status: ApprovalStatus | None = None
