"""PtahMigration and its satellites: plans, approvals, run acknowledgments."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from jobclaim.api._base import (
    Digest,
    Epoch,
    PinnedImage,
    PositiveInt32,
    Timestamp,
    WireModel,
)
from jobclaim.api._values import INTERVAL, LOCK_TIMEOUT
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
    lock_timeout: Annotated[str, LOCK_TIMEOUT] = "5m"
    """How long the executor waits for the database lock it takes before writing (1s to 1h)."""
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
    interval: Annotated[str, INTERVAL] = "10m"
    """How often the history is read again (a duration from 10s to 24h, default 10m)."""
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    """How the operation Jobs run."""
    suspend: bool = False
    """Stop claiming new work; a dispatched Apply is still accounted for."""


class MigrationHistoryStatus(WireModel):
    observed_at: Timestamp | None = None
    """When the history was read."""
    contract_version: int | None = None
    """The contract version of ptah's history document."""
    current_version: str | None = None
    """The latest applied migration version."""
    checkpoint_version: str | None = None
    """The checkpoint (baseline) version the history starts from."""
    applied_count: int = 0
    """How many migrations are applied."""
    pending_count: int = 0
    """How many migrations of the artifact are not applied yet."""
    fingerprint: Digest | None = None
    """The fingerprint of the history: what a migration plan and its approval are bound to."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the reading saw."""
    dirty: bool = False
    """Whether a migration is recorded as started and not finished."""
    modified_versions: list[str] = Field(default_factory=list)
    """Applied versions whose file in the artifact has changed since."""
    out_of_order_versions: list[str] = Field(default_factory=list)
    """Versions the artifact holds below the current version that were never applied."""
    ahead: bool = False
    """Whether the database is at a version the artifact does not hold (its history is
    ahead of the artifact): nothing is planned until the artifact catches up."""


class MigrationOperationStatus(WireModel):
    """The claim: written before the Job exists, naming the Job it may create."""

    type: str
    """The operation: Resolve, Verify, Read or Apply."""
    id: Digest
    """The claim's operation ID, unique to this claim."""
    input_fingerprint: Digest
    """The fingerprint of the inputs the claim was made from; when they move, the claim is
    retired."""
    job_name: str = Field(min_length=1, max_length=63)
    """The name of the one Job this claim may create."""
    job_uid: str | None = None
    """The Job's UID, once it was created and read back."""
    started_at: Timestamp | None = None
    """When the claim was made."""
    attempt: int = Field(default=1, ge=1)
    """Which attempt of the operation this is."""
    execution_binding_id: Epoch
    """The execution epoch the claim was made under."""
    source: OCIArtifactAccessBinding | None = None
    """The artifact, pinned by digest, the claim reads."""
    registry_ca_digest: Digest | None = Field(default=None, alias="registryCADigest")
    """The SHA-256 digest of the registry CA bundle (spec transport.caFrom) the claim pinned when
    it was made; its Job trusts that bundle and no other."""
    target: DatabaseTargetSpec | None = None
    """The database target the claim was made for (from the spec at the time)."""
    coordination_digest: Digest | None = None
    """The digest naming the database realm the claim holds."""
    plan_ref: ObjectReference | None = None
    """The PtahMigrationPlan an Apply runs."""
    approval_ref: ObjectReference | None = None
    """The PtahMigrationApproval an Apply spent."""
    dispatch_started: bool = False
    """Set before the one Job create: after it, a missing Job is an unknown outcome, never a
    reason to create another."""
    dispatch_not_after: Timestamp | None = None
    """The Job must start by this time, or it runs nothing."""
    execution_not_after: Timestamp | None = None
    """The Job's work must end by this time; the runner stops it then."""
    admission_snapshot: AdmissionSnapshot | None = None
    """What admission adds to the Job's Pod, persisted before the Job may exist."""
    admission_snapshot_refreshed: bool = False
    """Whether the admission snapshot was read again after it moved."""
    lease_duration_seconds: int | None = Field(default=None, ge=5, le=86460)
    """The duration of the realm's Lease while the claim holds it."""
    lease_epoch: str | None = None
    """The tenure epoch under which the claim holds the realm's Lease."""
    lease_continuity_lost: bool = False
    """Whether the Lease tenure was lost while the Job may have run."""
    retry_not_before: Timestamp | None = None
    """The operation is not tried again before this time."""


class MigrationRunStatus(WireModel):
    outcome: RunOutcome
    """How the run ended: UpToDate, Applied, Failed, Partial or Unknown."""
    job_name: str | None = None
    """The run's Job."""
    job_uid: str | None = None
    """The run Job's UID."""
    started_at: Timestamp | None = None
    """When the run started."""
    finished_at: Timestamp | None = None
    """When the run finished."""
    applied_versions: list[str] = Field(default_factory=list, max_length=256)
    """The versions the run applied."""
    dispatched_by: ManagerRecord | None = None
    """The manager that dispatched the run."""
    message: str | None = None
    """The run's failure, in the executor's words (redacted)."""


class UnresolvedMigrationRunStatus(WireModel):
    """A run nobody accounted for; only a reading or an acknowledgment settles it."""

    outcome: Literal["Partial", "Unknown"]
    """Partial (some migrations may have run) or Unknown (nobody can tell)."""
    operation_id: str
    """The run's operation ID."""
    job_name: str
    """The run's Job."""
    job_uid: str | None = None
    """The run Job's UID."""
    plan_ref: ObjectReference | None = None
    """The plan the run was for."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the run expected."""
    dispatched_by: ManagerRecord | None = None
    """The manager that dispatched the run."""
    recorded_at: Timestamp
    """When the run was recorded as unresolved."""


class ResolvedMigrationRunStatus(WireModel):
    operation_id: str
    """The run's operation ID."""
    outcome: Literal["Partial", "Unknown"]
    """What the run had been: Partial or Unknown."""
    resolution: Literal["HistoryRead", "Acknowledged"]
    """How it was settled: HistoryRead (a reading accounted for it) or Acknowledged (a
    person did)."""
    acknowledgment_ref: ObjectReference | None = None
    """The PtahMigrationRunAcknowledgment that settled it."""
    acknowledged_by: ApproverRecord | None = None
    """Who acknowledged it, as admission stamped it."""
    resolved_at: Timestamp
    """When it was settled."""


class PtahMigrationStatus(WireModel):
    observed_generation: int | None = None
    """The metadata.generation the status was last computed from."""
    phase: MigrationPhase | None = None
    """Where the migration stands: Pending, Resolving, Verifying, Reading, Planning,
    AwaitingApproval, Blocked, Applying, VerifyingHistory, InSync, Suspended or Failed."""
    conditions: list[Condition] = Field(default_factory=list)
    """kstatus conditions: Ready, ApprovalRequired and others."""
    execution_binding: ExecutionBindingStatus | None = None
    """What the operation Jobs are bound to: images, versions, epoch."""
    artifact: OCIArtifactAccessBinding | None = None
    """The migrations artifact, resolved to a digest."""
    source_checked_at: Timestamp | None = None
    """When a Resolve last read the reference (a tag is read again every interval; a
    moved digest retires the plan that was not applied)."""
    verification: ArtifactVerificationStatus | None = None
    """What the Verify reading found for the resolved artifact."""
    reading_failure: ReadingFailureStatus | None = None
    """The last reading that failed, and when it is tried again."""
    history: MigrationHistoryStatus | None = None
    """The last reading of the database's migration history."""
    plan: ObjectReference | None = None
    """The PtahMigrationPlan waiting to run."""
    active_operation: MigrationOperationStatus | None = None
    """The claim: the one operation in progress and the Job it may create."""
    last_run: MigrationRunStatus | None = None
    """The last migration run."""
    unresolved_run: UnresolvedMigrationRunStatus | None = None
    """A run nobody accounted for; only a reading or an acknowledgment settles it."""
    resolved_run: ResolvedMigrationRunStatus | None = None
    """How the last unresolved run was settled."""
    pending_lock_release: TargetLockReleaseStatus | None = None
    """A realm Lease release still owed."""
    next_reconciliation_time: Timestamp | None = None
    """When the history is next read."""


class PtahMigration(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigration"] = "PtahMigration"
    metadata: ObjectMeta
    spec: PtahMigrationSpec
    """Which database runs which ordered migrations, and under which policy."""
    status: PtahMigrationStatus | None = None
    """What the operator found and did; written by the operator only."""


class MigrationSequenceEntry(WireModel):
    version: str
    """The migration's version."""
    name: str | None = None
    """The migration's name."""
    digest: Digest
    """The digest of the migration's content."""


class PtahMigrationPlanSpec(WireModel):
    migration_ref: ObjectReference
    """The PtahMigration the plan was made for."""
    fingerprint: Digest
    """The plan's fingerprint: what an approval names."""
    migrations: list[MigrationSequenceEntry] = Field(min_length=1)
    """The migrations the plan runs, in order."""
    history_fingerprint: Digest
    """The fingerprint of the history the plan starts from; a moved history refuses the run."""
    current_version: str | None = None
    """The version the history stood at when the plan was made."""
    artifact_digest: Digest
    """The digest of the migrations artifact."""
    coordination_digest: Digest
    """The digest naming the database realm the plan was made for."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the reading saw."""
    execution_binding_id: Epoch
    """The execution epoch the plan was made under."""
    controller_state_version: PositiveInt32
    """The controller's state-format version the plan was made under."""
    ptah_version: str
    """The ptah version that read the history."""
    executor_image: PinnedImage
    """The executor image, pinned by digest, that read the history."""
    runner_protocol_version: PositiveInt32
    """The runner protocol of the reading's Job."""
    created_at: Timestamp | None = None
    """When the plan was recorded."""


class PtahMigrationPlan(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigrationPlan"] = "PtahMigrationPlan"
    metadata: ObjectMeta
    spec: PtahMigrationPlanSpec
    """The migrations a run would apply, bound to the history and artifact they were planned
    from."""


class PtahMigrationApprovalSpec(WireModel):
    migration_ref: ObjectReference
    """The PtahMigration, by name and UID, whose plan this approves."""
    plan_ref: ObjectReference
    """The PtahMigrationPlan approved, by name and UID."""
    plan_fingerprint: Digest
    """The fingerprint of the exact plan approved; no other plan runs under this approval."""
    history_fingerprint: Digest | None = None
    """The history fingerprint the plan starts from."""
    execution_binding_id: Epoch | None = None
    """The execution epoch the plan was made under."""
    approver: ApproverRecord | None = None
    """Who approved: stamped by admission from the creating request."""
    approved_at: Timestamp | None = None
    """When: stamped by admission."""
    mutation_request_uid: str | None = None
    """The admission request that created it: stamped by admission."""


class PtahMigrationApproval(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigrationApproval"] = "PtahMigrationApproval"
    metadata: ObjectMeta
    spec: PtahMigrationApprovalSpec
    """A person's approval of one exact migration plan; never edited."""
    status: ApprovalStatus | None = None
    """Whether the approval was spent, and on which claim and Job."""


class PtahMigrationRunAcknowledgmentSpec(WireModel):
    migration_ref: ObjectReference
    """The PtahMigration, by name and UID, whose unresolved run this acknowledges."""
    operation_id: str = Field(min_length=1)
    """The unresolved run's operation ID (status.unresolvedRun.operationID)."""
    acknowledged_by: ApproverRecord | None = None
    """Who acknowledged: stamped by admission from the creating request."""
    acknowledged_at: Timestamp | None = None
    """When: stamped by admission."""
    mutation_request_uid: str | None = None
    """The admission request that created it: stamped by admission."""


class PtahMigrationRunAcknowledgment(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahMigrationRunAcknowledgment"] = "PtahMigrationRunAcknowledgment"
    metadata: ObjectMeta
    spec: PtahMigrationRunAcknowledgmentSpec
    """A person's acknowledgment of one run nobody could account for; never edited."""
    status: ApprovalStatus | None = None
    """Whether the acknowledgment was spent."""
