"""Spec and status types both families share."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, model_validator

from jobclaim.api._base import (
    Digest,
    Epoch,
    PinnedImage,
    PositiveInt32,
    Timestamp,
    WireModel,
)
from jobclaim.api.meta import ConfigMapKeySelector, NamedReference, SecretKeySelector
from jobclaim.api.snapshot import Toleration

# The identity admission recorded as the last to change a PtahSchema's or a
# PtahMigration's spec: the mutating webhook stamps it on every write that changes the
# spec, and four-eyes refuses that identity as the approver.
SPEC_WRITER_ANNOTATION: Final = "operator.ptah.run/spec-last-changed-by"

Engine = Literal["PostgreSQL", "MySQL"]
ApplyPolicy = Literal["Never", "OnApproval", "Always"]
TransactionMode = Literal["all", "file", "none"]


class DatabaseTargetSpec(WireModel):
    """Which database. Exactly one of coordinationKey and realmRef names its realm."""

    engine: Engine
    """The database engine: PostgreSQL or MySQL."""
    coordination_key: str | None = Field(default=None, min_length=1, max_length=253)
    """Names the database realm: resources with equal keys (and engine) share one Lease, so their
    work never overlaps. Exactly one of coordinationKey and realmRef."""
    realm_ref: NamedReference | None = None
    """A cluster PtahRealm naming the database realm instead of a coordination key."""
    shared_realm: bool = False
    """Whether this resource may share its realm with others in a Shared PtahRealm."""
    url_from: SecretKeySelector
    """The Secret key holding the database URL; only the operation Pod reads it, never the
    controller."""

    @model_validator(mode="after")
    def _one_realm(self) -> DatabaseTargetSpec:
        if (self.coordination_key is None) == (self.realm_ref is None):
            raise ValueError("exactly one of coordinationKey and realmRef names the realm")
        return self


class OCIArtifactSourceSpec(WireModel):
    oci_ref: str = Field(min_length=1, max_length=512)
    """The OCI artifact (tag or digest) holding the desired schema or the migrations; the Resolve
    reading pins it to a digest."""
    registry_auth_from: NamedReference | None = None
    """A Secret with registry credentials for the artifact, read only by the Pods that reach the
    registry (Resolve, Verify, and the fetch step), never by one that opens the database. Its key
    registry (required) grants the credential to one registry host[:port]; username and password,
    or token, hold the credential."""
    verification_policy_from: ConfigMapKeySelector | None = None
    """The ConfigMap key holding the verification policy the Verify reading checks the artifact
    against; a plan is bound to its UID and digest."""


class ResourceRequirements(WireModel):
    limits: dict[str, str] | None = None
    """Resource limits of the operation Pod's containers."""
    requests: dict[str, str] | None = None
    """Resource requests of the operation Pod's containers."""

    def to_wire(self) -> dict[str, Any]:
        # Exactly what the inherited model_dump writes for two optional maps of strings
        # (a test holds the two equal), without its fixed cost: every Job rebuild, and
        # so every Job-create review, writes the resources.
        wire: dict[str, Any] = {}
        if self.limits is not None:
            wire["limits"] = dict(self.limits)
        if self.requests is not None:
            wire["requests"] = dict(self.requests)
        return wire


class PodMetadataSpec(WireModel):
    """Metadata a user declares for the operation Pods (for third-party admission)."""

    labels: dict[str, str] = Field(default_factory=dict, max_length=16)
    """Labels added to the operation Pods (for third-party admission); they cannot replace the ones
    the operator sets."""
    annotations: dict[str, str] = Field(default_factory=dict, max_length=16)
    """Annotations added to the operation Pods; they cannot replace the ones the operator sets."""


class ExecutionSpec(WireModel):
    active_deadline_seconds: int = Field(default=900, ge=30, le=86400)
    """How long one operation Job may run (30 to 86400 seconds)."""
    failure_retry_interval: str = "30s"
    """How long after a failed reading it is tried again; doubled for each repeat, up to an hour."""
    connect_timeout: str = "10s"
    """How long the executor waits to connect to the database."""
    resources: ResourceRequirements | None = None
    """Resources of the operation Pod's containers."""
    service_account_name: str | None = None
    """The ServiceAccount the operation Pod runs as (default: default); it mounts no token."""
    image_pull_secrets: list[NamedReference] | None = None
    """Pull secrets for the runner and executor images."""
    node_selector: dict[str, str] | None = None
    """Node selector of the operation Pod."""
    tolerations: list[Toleration] | None = None
    """Tolerations of the operation Pod."""
    # Affinity is Kubernetes' own deep type; it is carried verbatim into the Pod.
    affinity: dict[str, Any] | None = None
    """Affinity of the operation Pod, carried verbatim."""
    # Unlike every other empty value here, an empty runtimeClassName is not the same as
    # none: the API server keeps it (a pointer) and then refuses the Job as invalid, so
    # it is refused here, where the user can be told, and by the CRD.
    runtime_class_name: str | None = Field(default=None, min_length=1)
    """RuntimeClass of the operation Pod."""
    priority_class_name: str | None = None
    """PriorityClass of the operation Pod."""
    pod_metadata: PodMetadataSpec | None = None
    """Labels and annotations declared for the operation Pods."""


class ExecutionBindingStatus(WireModel):
    """What the operation Jobs are bound to; a change to any part installs a new epoch."""

    epoch: Epoch
    controller_state_version: PositiveInt32
    ptah_version: str = Field(min_length=1, max_length=128)
    executor_image: PinnedImage
    runner_protocol_version: PositiveInt32


class ManagerRecord(WireModel):
    """Who dispatched: audit only, bound by nothing (the admission snapshot pins it)."""

    controller_image: PinnedImage
    controller_revision: str = Field(min_length=1, max_length=128)
    runner_image: PinnedImage


class TargetLockReleaseStatus(WireModel):
    """A Lease release a retirement owes; all four parts are needed to release exactly."""

    coordination_digest: Digest
    operation_id: str = Field(min_length=1)
    lease_duration_seconds: int = Field(ge=5, le=86460)
    lease_epoch: Epoch


class ApprovalPolicy(WireModel):
    """Kept so that a spec still naming the old four-eyes switch is answered, not
    silently pruned. Four-eyes is the chart's ``approvals.requireDistinctApprover``: a
    switch in the spec could be turned off by the person it should hold to a second
    approver. The decisions webhook refuses a create or a spec change that names it
    (``approval-setting-moved``); a stored spec that still does decodes, and nothing
    reads it."""

    require_distinct_approver: bool | None = None
    """Moved to the chart's approvals.requireDistinctApprover; a create or a spec change that sets
    it (true or false) is refused. Remove it."""


class ApproverRecord(WireModel):
    username: str = Field(min_length=1)
    uid: str | None = None
    groups: list[str] = Field(default_factory=list)


class ConsumedApprovalStatus(WireModel):
    name: str
    uid: str
    approver: ApproverRecord
    approved_at: Timestamp


class OCIArtifactAccessBinding(WireModel):
    reference: str
    digest: Digest
    media_type: str | None = None
    size: int | None = None


class ArtifactVerificationStatus(WireModel):
    """What the Verify reading found for the resolved artifact, and under which policy."""

    artifact_digest: Digest
    policy_uid: str | None = None
    policy_digest: Digest | None = None
    requirements: list[str] = Field(default_factory=list, max_length=64)
    verified_at: Timestamp


class ReadingFailureStatus(WireModel):
    """The last reading that failed: the executor's own sentence (redacted), how many
    times in a row, and when it is tried again (backing off on each repeat)."""

    operation: str
    code: str | None = None
    message: str = Field(max_length=1024)
    failures: int = Field(ge=1)
    failed_at: Timestamp
    retry_not_before: Timestamp
