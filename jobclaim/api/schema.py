"""PtahSchema and its satellites: plans, plan approvals."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

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


# A name in a policy list: an object selector or a table, as ptah reads one.
PolicyName = Annotated[str, StringConstraints(min_length=1, max_length=253)]


class SchemaPolicy(WireModel):
    """How drift is read and when a plan is applied."""

    apply: ApplyPolicy = "OnApproval"
    """When a plan is applied: Never (plans only), OnApproval (a PtahSchemaApproval of the exact
    plan, the default) or Always (only a plan that destroys nothing and changes no privilege)."""
    allow_destructive: bool = False
    """Whether a plan may contain destructive statements."""
    drift_severity: Literal["all", "destructive"] = "all"
    """Which drift starts a plan: all, or only destructive drift."""
    exclude: list[PolicyName] = Field(default_factory=list, max_length=64)
    """Objects the drift reading and the plan ignore (ptah selectors, at most 64)."""
    lock_timeout: Annotated[str, LOCK_TIMEOUT] = "30s"
    """How long the executor waits for the database lock it takes before writing (1s to 1h)."""
    transaction_mode: TransactionMode = "all"
    """How statements are grouped into transactions: all, file or none."""
    protected_tables: list[PolicyName] = Field(default_factory=list, max_length=64)
    """Tables no plan may change (at most 64)."""
    # Absent (not a default object) so a schema that never names it keeps its digests.
    approval: ApprovalPolicy | None = None
    """No longer a setting: four-eyes is the chart's approvals.requireDistinctApprover, and a spec
    that sets approval.requireDistinctApprover is refused."""


# Said by the models and by their CEL twins (jobclaim.crds), so a user reads one sentence.
DEV_ONE_SOURCE: Final = "dev names exactly one of urlFrom and provided"
DEV_IS_TARGET: Final = "dev.urlFrom must not be the Secret key target.urlFrom names"


class ProvidedDevDatabase(WireModel):
    """The operator provides the scratch database: a container of the chart's scratch image
    for the target's engine, beside ptah in the Observe and Plan Pods, on an in-memory volume,
    reachable only inside the Pod and gone with it."""


class DevDatabaseSpec(WireModel):
    """A scratch database ptah compares in: never the target, and nothing it holds is kept.
    Exactly one of urlFrom and provided."""

    url_from: SecretKeySelector | None = None
    """The Secret key holding the dev database's URL; only the Observe and Plan Pods read it
    (as PTAH_DEV_URL), never the controller, an Apply or a command line."""
    provided: ProvidedDevDatabase | None = None
    """The operator provides the scratch database (write provided: {}): a container of the
    chart's execution.scratchImages image for the target's engine, in the Observe and Plan
    Pods only, on an in-memory volume, listening on the Pod's loopback only."""

    @model_validator(mode="after")
    def _one_source(self) -> DevDatabaseSpec:
        # Both named would leave which database ptah compares in to an order nobody
        # wrote down; neither is a dev block that says nothing.
        if (self.url_from is None) == (self.provided is None):
            raise ValueError(DEV_ONE_SOURCE)
        return self


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
    interval: Annotated[str, INTERVAL] = "10m"
    """How often an in-sync schema is observed again (a duration from 10s to 24h, default 10m)."""
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    """How the operation Jobs run."""
    suspend: bool = False
    """Stop claiming new work; a dispatched Apply is still accounted for."""

    @model_validator(mode="after")
    def _dev_is_not_target(self) -> PtahSchemaSpec:
        # ptah creates and drops scratch objects in the dev database: pointed at the
        # target's own Secret key, that work would run in the database it converges.
        url_from = self.dev.url_from if self.dev is not None else None
        if url_from is not None and (url_from.name, url_from.key) == (
            self.target.url_from.name,
            self.target.url_from.key,
        ):
            raise ValueError(DEV_IS_TARGET)
        return self


class CurrentPlanStatus(WireModel):
    """The plan the schema would apply, and the approval reserved for it."""

    name: str
    """The PtahSchemaPlan's name."""
    uid: str
    """The PtahSchemaPlan's UID."""
    fingerprint: Digest
    """The plan's fingerprint: what an approval names."""
    content_digest: Digest
    """The SHA-256 of the plan document's bytes, which the Apply Job checks before it runs them."""
    artifact_digest: Digest | None = None
    """The digest of the verified artifact the plan was made from."""
    coordination_digest: Digest | None = None
    """The digest naming the database realm the plan was made for."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the Plan reading saw; the Apply must see the same."""
    actual_state_fingerprint: Digest | None = None
    """The fingerprint of the database schema the plan starts from."""
    desired_state_fingerprint: Digest | None = None
    """The fingerprint of the desired schema the plan ends at."""
    policy_fingerprint: Digest | None = None
    """The fingerprint of the policy the plan was made under."""
    verification_policy_uid: str | None = None
    """The UID of the verification policy ConfigMap the artifact was verified under."""
    verification_policy_digest: Digest | None = None
    """The digest of the verification policy the artifact was verified under."""
    execution_binding_id: Epoch
    """The execution epoch the plan was made under; an Apply runs only under the same one."""
    controller_image: PinnedImage | None = None
    """The controller image, pinned by digest, that made the plan."""
    controller_revision: str | None = None
    """The controller's source revision that made the plan."""
    controller_state_version: PositiveInt32
    """The controller's state-format version the plan was made under."""
    ptah_version: str
    """The ptah version that made the plan."""
    executor_image: PinnedImage | None = None
    """The executor image, pinned by digest, that made the plan."""
    runner_image: PinnedImage | None = None
    """The runner image, pinned by digest, of the Plan Job."""
    runner_protocol_version: PositiveInt32 | None = None
    """The runner protocol of the Plan Job."""
    destructive: bool = False
    """Whether the plan records a destructive statement."""
    privilege_changes: list[str] = Field(default_factory=list)
    """The privilege changes the plan records."""
    statement_count: int = Field(default=0, ge=0)
    """How many statements the plan holds."""
    # Projections are named <plan>-000.. so the count fixes every name.
    chunk_count: int = Field(default=1, ge=1, le=16)
    """How many PtahSchemaPlanChunks hold the plan's bytes (named <plan>-000 on)."""
    created_at: Timestamp | None = None
    """When the plan was recorded."""
    approval: ConsumedApprovalStatus | None = None
    """The approval spent on this plan, once an Apply claimed it."""


class ActiveOperationStatus(WireModel):
    """The claim: written before the Job exists, naming the Job it may create."""

    type: str
    """The operation: Resolve, Verify, Observe, Plan or Apply."""
    id: str = Field(min_length=1)
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
    admission_snapshot: AdmissionSnapshot | None = None
    """What admission adds to the Job's Pod, persisted before the Job may exist."""
    admission_snapshot_refreshed: bool = False
    """Whether the admission snapshot was read again after it moved."""
    dispatch_started: bool = False
    """Set before the one Job create: after it, a missing Job is an unknown outcome, never a
    reason to create another."""
    dispatch_not_after: Timestamp | None = None
    """The Job must start by this time, or it runs nothing."""
    execution_not_after: Timestamp | None = None
    """The Job's work must end by this time; the runner stops it then."""
    termination_grace_period_seconds: int | None = None
    """The grace the runner gives ptah to stop when the deadline comes."""
    coordination_digest: Digest | None = None
    """The digest naming the database realm the claim holds."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the claim expects."""
    lease_duration_seconds: int | None = Field(default=None, ge=5, le=86460)
    """The duration of the realm's Lease while the claim holds it."""
    lease_epoch: str | None = None
    """The tenure epoch under which the claim holds the realm's Lease."""
    lease_continuity_lost: bool = False
    """Whether the Lease tenure was lost while the Job may have run."""
    target: DatabaseTargetSpec | None = None
    """The database target the claim was made for (from the spec at the time)."""
    source: OCIArtifactAccessBinding | None = None
    """The artifact, pinned by digest, the claim reads."""
    verification_policy_uid: str | None = None
    """The UID of the verification policy ConfigMap the claim reads."""
    verification_policy_digest: Digest | None = None
    """The digest of the verification policy the claim reads."""
    registry_ca_digest: Digest | None = Field(default=None, alias="registryCADigest")
    """The SHA-256 digest of the registry CA bundle (spec transport.caFrom) the claim pinned when
    it was made; its Job trusts that bundle and no other."""


class PendingObservationStatus(WireModel):
    """An Apply that may have changed the database; it holds the realm until proven."""

    outcome: Literal["ApplySucceeded", "OutcomeUnknown"]
    """What the Apply reported: ApplySucceeded, or OutcomeUnknown when nobody can tell."""
    apply_operation_id: str
    """The Apply's operation ID."""
    apply_job_name: str
    """The Apply Job's name."""
    apply_job_uid: str | None = None
    """The Apply Job's UID."""
    admission_snapshot: AdmissionSnapshot | None = None
    """The admission snapshot of the Apply Job."""
    apply_pod_uids: list[str] = Field(default_factory=list, max_length=8)
    """The UIDs of the Apply Job's Pods."""
    apply_pod_count: int = Field(default=0, ge=0)
    """How many Pods the Apply Job made."""
    apply_generation: int | None = None
    """The metadata.generation the Apply ran for."""
    observe_after: Timestamp | None = None
    """The proving reading waits until this time, when nothing the Apply started can still
    write."""
    plan: CurrentPlanStatus | None = None
    """The plan the Apply ran."""
    dispatched_by: ManagerRecord | None = None
    """The manager that dispatched the Apply."""
    target: DatabaseTargetSpec | None = None
    """The database target the Apply ran against."""
    coordination_digest: Digest
    """The digest naming the database realm the proof holds."""
    plan_required: bool = False
    """Whether the proof needs a Plan reading, rather than an Observe, to finish."""
    lease_duration_seconds: int = Field(ge=5, le=86460)
    """The duration of the realm's Lease the proof holds."""
    lease_epoch: Epoch
    """The tenure epoch under which the proof holds the realm's Lease."""


class RetiredPlanReference(WireModel):
    name: str
    """The plan's name."""
    uid: str
    """The plan's UID."""
    fingerprint: Digest
    """The plan's fingerprint."""


class RetiredJobStatus(WireModel):
    operation: str
    """The Job's operation."""
    name: str
    """The Job's name."""
    uid: str | None = None
    """The Job's UID."""


class BindingRetirementStatus(WireModel):
    """What an execution-binding rotation still owes the retired epoch."""

    retired_epoch: Epoch
    """The epoch that was retired."""
    plan: RetiredPlanReference | None = None
    """The plan of the retired epoch still to be deleted."""
    job: RetiredJobStatus | None = None
    """The Job of the retired epoch still to be accounted for."""


class DriftObservationStatus(WireModel):
    """The last drift reading of the database against the verified artifact."""

    observed_at: Timestamp
    """When the reading finished."""
    artifact_digest: Digest
    """The digest of the artifact the database was compared with."""
    drift: bool
    """Whether the database differs from the artifact."""
    highest_severity: Severity | None = None
    """The highest severity among the findings: safe, info, warning, error or destructive."""
    finding_count: int = Field(default=0, ge=0)
    """How many findings the reading made."""
    report_digest: Digest | None = None
    """The digest of the drift report."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the reading saw."""


class SettledProofStatus(WireModel):
    """A proof no read could finish, ended by a person: no Apply is attributed to it."""

    apply_operation_id: str
    """The Apply whose proof was settled."""
    outcome: Literal["ApplySucceeded", "OutcomeUnknown"]
    """What the Apply had reported."""
    settlement_ref: ObjectReference
    """The PtahSchemaProofSettlement that settled it."""
    settled_by: ApproverRecord
    """Who settled it, as admission stamped it."""
    reason: str | None = None
    """Why, in the settler's words."""
    settled_at: Timestamp
    """When it was settled."""


class PtahSchemaStatus(WireModel):
    observed_generation: int | None = None
    """The metadata.generation the status was last computed from."""
    phase: SchemaPhase | None = None
    """Where the schema stands: Pending, Resolving, Verifying, Observing, Planning,
    ReadyToApply, AwaitingApproval, Blocked, Applying, VerifyingConvergence, InSync,
    Suspended or Failed."""
    execution_binding: ExecutionBindingStatus | None = None
    """What the operation Jobs are bound to: images, versions, epoch."""
    source: OCIArtifactAccessBinding | None = None
    """The desired artifact, resolved to a digest."""
    source_checked_at: Timestamp | None = None
    """When a Resolve last read the reference (a tag is read again every interval; a
    moved digest retires the plan that was not applied)."""
    verification: ArtifactVerificationStatus | None = None
    """What the Verify reading found for the resolved artifact."""
    observation: DriftObservationStatus | None = None
    """The last drift reading of the database."""
    reading_failure: ReadingFailureStatus | None = None
    """The last reading that failed, and when it is tried again."""
    plan: CurrentPlanStatus | None = None
    """The plan the schema would apply, and the approval spent on it."""
    applied: CurrentPlanStatus | None = None
    """The plan the last confirmed Apply ran."""
    active_operation: ActiveOperationStatus | None = None
    """The claim: the one operation in progress and the Job it may create."""
    pending_observation: PendingObservationStatus | None = None
    """An Apply that may have changed the database, which a reading must prove before the
    realm is released."""
    pending_lock_release: TargetLockReleaseStatus | None = None
    """A realm Lease release still owed."""
    pending_binding_retirement: BindingRetirementStatus | None = None
    """What a rotation of the execution binding still owes the retired epoch."""
    settled_proof: SettledProofStatus | None = None
    """A proof a person settled."""
    last_attempt_time: Timestamp | None = None
    """When an operation was last attempted."""
    last_successful_reconciliation: Timestamp | None = None
    """When the schema was last found in sync."""
    next_reconciliation_time: Timestamp | None = None
    """When the schema is next read."""
    conditions: list[Condition] = Field(default_factory=list)
    """kstatus conditions: Ready, ApprovalRequired and others."""


class PtahSchema(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchema"] = "PtahSchema"
    metadata: ObjectMeta
    spec: PtahSchemaSpec
    """Which database converges to which schema artifact, and under which policy."""
    status: PtahSchemaStatus | None = None
    """What the operator found and did; written by the operator only."""


class PlanChunk(WireModel):
    name: str
    """The PtahSchemaPlanChunk's name."""
    key: Literal["chunk"] = "chunk"
    """The key the chunk's data is under: chunk."""
    index: int = Field(ge=0, lt=16)
    """The chunk's place in the plan, from 0."""
    digest: Digest
    """The SHA-256 of the chunk's bytes."""
    size: int = Field(ge=1, le=512 * 1024)
    """The chunk's size in bytes (at most 512 KiB)."""


class PtahSchemaPlanSpec(WireModel):
    schema_ref: ObjectReference
    """The PtahSchema the plan was made for."""
    fingerprint: Digest
    """The plan's fingerprint: what an approval names."""
    content_digest: Digest
    """The SHA-256 of the plan document's bytes."""
    coordination_digest: Digest
    """The digest naming the database realm the plan was made for."""
    target_identity_digest: Digest | None = None
    """The digest of the database identity the Plan reading saw."""
    execution_binding_id: Epoch
    """The execution epoch the plan was made under."""
    controller_state_version: PositiveInt32
    """The controller's state-format version the plan was made under."""
    ptah_version: str
    """The ptah version that made the plan."""
    executor_image: PinnedImage
    """The executor image, pinned by digest, that made the plan."""
    runner_protocol_version: PositiveInt32
    """The runner protocol of the Plan Job."""
    dispatched_by: ManagerRecord | None = None
    """The manager that dispatched the Plan Job."""
    destructive: bool = False
    """Whether the plan records a destructive statement."""
    privilege_changes: list[str] = Field(default_factory=list)
    """The privilege changes the plan records."""
    statement_count: int = Field(ge=1)
    """How many statements the plan holds."""
    chunks: list[PlanChunk] = Field(min_length=1, max_length=16)
    """The PtahSchemaPlanChunks holding the plan's bytes, in order."""


class PublishedChunk(WireModel):
    name: str
    """The chunk's name."""
    uid: str
    """The chunk's UID."""
    index: int
    """The chunk's place in the plan."""


class PtahSchemaPlanStatus(WireModel):
    conditions: list[Condition] = Field(default_factory=list)
    """kstatus conditions of the plan."""
    published_chunks: list[PublishedChunk] = Field(default_factory=list)
    """The chunks published so far, by name and UID."""


class PtahSchemaPlan(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaPlan"] = "PtahSchemaPlan"
    metadata: ObjectMeta
    spec: PtahSchemaPlanSpec
    """The plan the operator recorded: what it was made from, and where its bytes are."""
    status: PtahSchemaPlanStatus | None = None
    """Which of the plan's chunks are published."""


class PtahSchemaPlanChunkSpec(WireModel):
    """One verified slice of a plan's statements, owned by the plan."""

    plan_ref: ObjectReference
    """The PtahSchemaPlan this chunk belongs to."""
    index: int = Field(ge=0, lt=16)
    """The chunk's place in the plan, from 0."""
    # Base64 of at most 512 KiB of plan bytes.
    data: str = Field(min_length=1, max_length=699_052)
    """The chunk's bytes, base64-encoded."""
    digest: Digest
    """The SHA-256 of the chunk's bytes."""
    size: int = Field(ge=1, le=512 * 1024)
    """The chunk's size in bytes (at most 512 KiB)."""


class PtahSchemaPlanChunk(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaPlanChunk"] = "PtahSchemaPlanChunk"
    metadata: ObjectMeta
    spec: PtahSchemaPlanChunkSpec
    """One verified slice of a plan's bytes."""


class ApprovalStatus(WireModel):
    conditions: list[Condition] = Field(default_factory=list)
    """kstatus conditions: Consumed (spent by a claim), Stale (outlived by its plan)."""
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
    """The PtahSchema, by name and UID, whose plan this approves."""
    plan_ref: ObjectReference
    """The PtahSchemaPlan approved, by name and UID."""
    plan_fingerprint: Digest
    """The fingerprint of the exact plan approved; no other plan runs under this approval."""
    execution_binding_id: Epoch | None = None
    """The execution epoch the plan was made under."""
    approver: ApproverRecord | None = None
    """Who approved: stamped by admission from the creating request."""
    approved_at: Timestamp | None = None
    """When: stamped by admission."""
    mutation_request_uid: str | None = None
    """The admission request that created it: stamped by admission."""


class PtahSchemaApproval(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahSchemaApproval"] = "PtahSchemaApproval"
    metadata: ObjectMeta
    spec: PtahSchemaApprovalSpec
    """A person's approval of one exact plan; never edited."""
    status: ApprovalStatus | None = None
    """Whether the approval was spent, and on which claim and Job."""


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
    """A person's settlement of one pending proof; never edited."""
    status: ApprovalStatus | None = None
    """Whether the settlement was spent."""
