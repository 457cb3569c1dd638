"""PtahSchema and its satellites: plans, plan approvals."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field, model_validator

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
    ConsumedApprovalStatus,
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
from jobclaim.api.meta import Condition, ObjectMeta, ObjectReference, SecretKeySelector
from jobclaim.api.snapshot import AdmissionSnapshot

SchemaPhase = Literal[
    "Pending",
    "Resolving",
    "Verifying",
    "Observing",
    "Planning",
    "ReadyToApply",
    "AwaitingApproval",
    "Blocked",
    "Applying",
    "VerifyingConvergence",
    "InSync",
    "Suspended",
    "Failed",
]
SCHEMA_FINALIZER = "operator.ptah.run/active-operation"
# ptah's severities, as its drift and plan documents spell them. The runner reports a
# reading's highest severity in these words and the status records it as said: a
# narrower status type made every reading whose worst finding was "safe" (a table
# added) or "error" unrecordable, and the schema never left Observing.
Severity = Literal["safe", "info", "warning", "error", "destructive"]


class SchemaPolicy(WireModel):
    apply: ApplyPolicy = "OnApproval"
    """When a plan is applied: Never (plans only), OnApproval (a PtahSchemaApproval of the exact
    plan, the default) or Always (only a plan that destroys nothing and changes no privilege)."""
    allow_destructive: bool = False
    """Whether a plan may contain destructive statements."""
    drift_severity: Literal["all", "destructive"] = "all"
    """Which drift starts a plan: all, or only destructive drift."""
    exclude: list[str] = Field(default_factory=list)
    """Objects the drift reading ignores."""
    lock_timeout: str = "30s"
    """The database lock timeout the executor sets."""
    transaction_mode: TransactionMode = "all"
    """How statements are grouped into transactions: all, file or none."""
    protected_tables: list[str] = Field(default_factory=list)
    """Tables no plan may change."""
    # Absent (not a default object) so a schema that never names it keeps its digests.
    approval: ApprovalPolicy | None = None
    """No longer a setting: four-eyes is the chart's approvals.requireDistinctApprover, and a spec
    that sets approval.requireDistinctApprover is refused."""


class DevDatabaseSpec(WireModel):
    """A scratch database ptah compares in: never the target, and nothing it holds is kept."""

    url_from: SecretKeySelector
    """The Secret key holding the dev database's URL; only the Observe and Plan Pods read it
    (as PTAH_DEV_URL), never the controller, an Apply or a command line."""


# Said by the model and by its CEL twin (jobclaim.crds), so a user reads one sentence.
DEV_IS_TARGET: Final = "dev.urlFrom must not be the Secret key target.urlFrom names"


class PtahSchemaSpec(WireModel):
    target: DatabaseTargetSpec
    """The database the schema converges."""
    desired: OCIArtifactSourceSpec
    """The OCI artifact holding the desired schema, and how it is verified."""
    # Absent (not a default object) so a schema that never names it keeps its digests.
    dev: DevDatabaseSpec | None = None
    """A scratch database ptah loads the desired schema into to compare it with the target
    (schema drift and schema plan need one for SQL and HCL schemas). Never the target."""
    policy: SchemaPolicy = Field(default_factory=SchemaPolicy)
    """How drift is read and when a plan is applied."""
    interval: str = "10m"
    """How often an in-sync schema is observed again (Go duration, default 10m)."""
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    """How the operation Jobs run."""
    suspend: bool = False
    """Stop claiming new work; a dispatched Apply is still accounted for."""

    @model_validator(mode="after")
    def _dev_is_not_target(self) -> PtahSchemaSpec:
        # ptah creates and drops scratch objects in the dev database: pointed at the
        # target's own Secret key, that work would run in the database it converges.
        dev = self.dev
        if dev is not None and (dev.url_from.name, dev.url_from.key) == (
            self.target.url_from.name,
            self.target.url_from.key,
        ):
            raise ValueError(DEV_IS_TARGET)
        return self


class CurrentPlanStatus(WireModel):
    """The plan the schema would apply, and the approval reserved for it."""

    name: str
    uid: str
    fingerprint: Digest
    content_digest: Digest
    artifact_digest: Digest | None = None
    coordination_digest: Digest | None = None
    target_identity_digest: Digest | None = None
    actual_state_fingerprint: Digest | None = None
    desired_state_fingerprint: Digest | None = None
    policy_fingerprint: Digest | None = None
    verification_policy_uid: str | None = None
    verification_policy_digest: Digest | None = None
    execution_binding_id: Epoch
    controller_image: PinnedImage | None = None
    controller_revision: str | None = None
    controller_state_version: PositiveInt32
    ptah_version: str
    executor_image: PinnedImage | None = None
    runner_image: PinnedImage | None = None
    runner_protocol_version: PositiveInt32 | None = None
    destructive: bool = False
    privilege_changes: list[str] = Field(default_factory=list)
    statement_count: int = Field(default=0, ge=0)
    # Projections are named <plan>-000.. so the count fixes every name.
    chunk_count: int = Field(default=1, ge=1, le=16)
    created_at: Timestamp | None = None
    approval: ConsumedApprovalStatus | None = None


class ActiveOperationStatus(WireModel):
    """The claim: written before the Job exists, naming the Job it may create."""

    type: str
    id: str = Field(min_length=1)
    input_fingerprint: Digest
    job_name: str = Field(min_length=1, max_length=63)
    job_uid: str | None = None
    started_at: Timestamp | None = None
    attempt: int = Field(default=1, ge=1)
    execution_binding_id: Epoch
    admission_snapshot: AdmissionSnapshot | None = None
    admission_snapshot_refreshed: bool = False
    dispatch_started: bool = False
    dispatch_not_after: Timestamp | None = None
    execution_not_after: Timestamp | None = None
    termination_grace_period_seconds: int | None = None
    coordination_digest: Digest | None = None
    target_identity_digest: Digest | None = None
    lease_duration_seconds: int | None = Field(default=None, ge=5, le=86460)
    lease_epoch: str | None = None
    lease_continuity_lost: bool = False
    target: DatabaseTargetSpec | None = None
    source: OCIArtifactAccessBinding | None = None
    verification_policy_uid: str | None = None
    verification_policy_digest: Digest | None = None


class PendingObservationStatus(WireModel):
    """An Apply that may have changed the database; it holds the realm until proven."""

    outcome: Literal["ApplySucceeded", "OutcomeUnknown"]
    apply_operation_id: str
    apply_job_name: str
    apply_job_uid: str | None = None
    admission_snapshot: AdmissionSnapshot | None = None
    apply_pod_uids: list[str] = Field(default_factory=list, max_length=8)
    apply_pod_count: int = Field(default=0, ge=0)
    apply_generation: int | None = None
    observe_after: Timestamp | None = None
    plan: CurrentPlanStatus | None = None
    dispatched_by: ManagerRecord | None = None
    target: DatabaseTargetSpec | None = None
    coordination_digest: Digest
    plan_required: bool = False
    lease_duration_seconds: int = Field(ge=5, le=86460)
    lease_epoch: Epoch


class RetiredPlanReference(WireModel):
    name: str
    uid: str
    fingerprint: Digest


class RetiredJobStatus(WireModel):
    operation: str
    name: str
    uid: str | None = None


class BindingRetirementStatus(WireModel):
    """What an execution-binding rotation still owes the retired epoch."""

    retired_epoch: Epoch
    plan: RetiredPlanReference | None = None
    job: RetiredJobStatus | None = None


class DriftObservationStatus(WireModel):
    """The last drift reading of the database against the verified artifact."""

    observed_at: Timestamp
    artifact_digest: Digest
    drift: bool
    highest_severity: Severity | None = None
    finding_count: int = Field(default=0, ge=0)
    report_digest: Digest | None = None
    target_identity_digest: Digest | None = None


class SettledProofStatus(WireModel):
    """A proof no read could finish, ended by a person: no Apply is attributed to it."""

    apply_operation_id: str
    outcome: Literal["ApplySucceeded", "OutcomeUnknown"]
    settlement_ref: ObjectReference
    settled_by: ApproverRecord
    reason: str | None = None
    settled_at: Timestamp


class PtahSchemaStatus(WireModel):
    observed_generation: int | None = None
    phase: SchemaPhase | None = None
    execution_binding: ExecutionBindingStatus | None = None
    source: OCIArtifactAccessBinding | None = None
    verification: ArtifactVerificationStatus | None = None
    observation: DriftObservationStatus | None = None
    reading_failure: ReadingFailureStatus | None = None
    plan: CurrentPlanStatus | None = None
    applied: CurrentPlanStatus | None = None
    active_operation: ActiveOperationStatus | None = None
    pending_observation: PendingObservationStatus | None = None
    pending_lock_release: TargetLockReleaseStatus | None = None
    pending_binding_retirement: BindingRetirementStatus | None = None
    settled_proof: SettledProofStatus | None = None
    last_attempt_time: Timestamp | None = None
    last_successful_reconciliation: Timestamp | None = None
    next_reconciliation_time: Timestamp | None = None
    conditions: list[Condition] = Field(default_factory=list)


class PtahSchema(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchema"] = "PtahSchema"
    metadata: ObjectMeta
    spec: PtahSchemaSpec
    """Which database converges to which schema artifact, and under which policy."""
    status: PtahSchemaStatus | None = None


class PlanChunk(WireModel):
    name: str
    key: Literal["chunk"] = "chunk"
    index: int = Field(ge=0, lt=16)
    digest: Digest
    size: int = Field(ge=1, le=512 * 1024)


class PtahSchemaPlanSpec(WireModel):
    schema_ref: ObjectReference
    fingerprint: Digest
    content_digest: Digest
    coordination_digest: Digest
    target_identity_digest: Digest | None = None
    execution_binding_id: Epoch
    controller_state_version: PositiveInt32
    ptah_version: str
    executor_image: PinnedImage
    runner_protocol_version: PositiveInt32
    dispatched_by: ManagerRecord | None = None
    destructive: bool = False
    privilege_changes: list[str] = Field(default_factory=list)
    statement_count: int = Field(ge=1)
    chunks: list[PlanChunk] = Field(min_length=1, max_length=16)


class PublishedChunk(WireModel):
    name: str
    uid: str
    index: int


class PtahSchemaPlanStatus(WireModel):
    conditions: list[Condition] = Field(default_factory=list)
    published_chunks: list[PublishedChunk] = Field(default_factory=list)


class PtahSchemaPlan(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaPlan"] = "PtahSchemaPlan"
    metadata: ObjectMeta
    spec: PtahSchemaPlanSpec
    status: PtahSchemaPlanStatus | None = None


class PtahSchemaPlanChunkSpec(WireModel):
    """One verified slice of a plan's statements, owned by the plan."""

    plan_ref: ObjectReference
    index: int = Field(ge=0, lt=16)
    # Base64 of at most 512 KiB of plan bytes.
    data: str = Field(min_length=1, max_length=699_052)
    digest: Digest
    size: int = Field(ge=1, le=512 * 1024)


class PtahSchemaPlanChunk(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaPlanChunk"] = "PtahSchemaPlanChunk"
    metadata: ObjectMeta
    spec: PtahSchemaPlanChunkSpec


class ApprovalStatus(WireModel):
    conditions: list[Condition] = Field(default_factory=list)
    consumed_by: str | None = Field(default=None, min_length=1)
    """The claim (its operation id) that spent this decision; set once, with Consumed.
    Admission admits a mutating Job only for the claim its approval names here."""
    consumed_job: ObjectReference | None = None
    """The one Job this decision authorized, by name and UID; set once, after the Job
    was created. Admission admits no Job for a decision that names one, and the
    Job's cleanup TTL only once it is named here, so the decision outlives its Job as
    the witness that it ran: one approval, one run, forever."""


class PtahSchemaApprovalSpec(WireModel):
    schema_ref: ObjectReference
    plan_ref: ObjectReference
    plan_fingerprint: Digest
    execution_binding_id: Epoch | None = None
    approver: ApproverRecord | None = None
    approved_at: Timestamp | None = None
    mutation_request_uid: str | None = None


class PtahSchemaApproval(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaApproval"] = "PtahSchemaApproval"
    metadata: ObjectMeta
    spec: PtahSchemaApprovalSpec
    status: ApprovalStatus | None = None


class PtahSchemaProofSettlementSpec(WireModel):
    """A person's settlement of one pending proof: it names the Apply attempt it ends.

    ``settledBy``, ``settledAt`` and ``mutationRequestUID`` are stamped by admission
    from the creating request, whatever the client wrote.
    """

    schema_ref: ObjectReference
    """The PtahSchema, by name and UID, whose proof this settles."""
    apply_operation_id: str = Field(min_length=1)
    """The Apply attempt the proof is owed for (status.pendingObservation.applyOperationID)."""
    reason: str | None = Field(default=None, max_length=1024)
    """Why no reading can finish the proof, in the settler's words."""
    settled_by: ApproverRecord | None = None
    """Who settled it: stamped by admission from the creating request."""
    settled_at: Timestamp | None = None
    """When: stamped by admission."""
    mutation_request_uid: str | None = None
    """The admission request that created it: stamped by admission."""


class PtahSchemaProofSettlement(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaProofSettlement"] = "PtahSchemaProofSettlement"
    metadata: ObjectMeta
    spec: PtahSchemaProofSettlementSpec
    status: ApprovalStatus | None = None
