"""Spec and status types both families share."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from jobclaim.api._base import (
    Digest,
    Epoch,
    PinnedImage,
    PositiveInt32,
    Timestamp,
    WireModel,
)
from jobclaim.api._values import (
    CONNECT_TIMEOUT,
    OCI_REFERENCE_RULE,
    RETRY_INTERVAL,
)
from jobclaim.api.meta import ConfigMapKeySelector, NamedReference, SecretKeySelector
from jobclaim.api.snapshot import Toleration
from jobclaim.times import parse_duration

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


# A Kubernetes object name: a DNS subdomain, at most 253 characters.
ObjectName = Annotated[str, StringConstraints(min_length=1, max_length=253)]
# The same, where an empty name is a value the API server stores (and reads as none).
MaybeObjectName = Annotated[str, StringConstraints(max_length=253)]

# Said by the model and by its CEL twin (jobclaim.crds), so a user reads one sentence.
CONNECT_OUTLASTS_DEADLINE: Final = "connectTimeout must be shorter than activeDeadlineSeconds"


# Said by the model and by its CEL twin (jobclaim.crds), so a user reads one sentence.
CREDENTIAL_IN_CLEAR: Final = (
    "transport.plainHTTP cannot be combined with registryAuthFrom: "
    "the registry credential would cross the network in clear text"
)


# Said by the model and by its CEL twin (jobclaim.crds), so a user reads one sentence.
CA_WITHOUT_TLS: Final = (
    "transport.caFrom cannot be combined with transport.plainHTTP: "
    "a registry spoken to in plain HTTP presents no certificate for the CA to check"
)


class RegistryTransportSpec(WireModel):
    """How the Pods that reach the registry talk to it."""

    # HTTP in capitals, as Kubernetes spells an initialism (to_wire_name knows only IDs).
    plain_http: bool = Field(default=False, alias="plainHTTP")
    """Talk plain HTTP to the registry (a registry on a private network without TLS); reaches
    ptah as PTAH_PLAIN_HTTP in the Resolve, Verify and fetch steps only. Refused together with
    registryAuthFrom."""
    ca_from: ConfigMapKeySelector | None = Field(default=None, alias="caFrom")
    """The ConfigMap key holding a PEM bundle trusted, in addition to the system roots, for the
    registry's certificate (a registry with its own authority). Each claim that reaches the
    registry pins the key's SHA-256 digest; ptah reads the bundle as PTAH_OCI_CA_FILE in the
    Resolve, Verify and fetch steps only, and a Resolve or Verify whose bundle is not the
    pinned one does not run."""

    @model_validator(mode="after")
    def _ca_needs_tls(self) -> RegistryTransportSpec:
        if self.plain_http and self.ca_from is not None:
            raise ValueError(CA_WITHOUT_TLS)
        return self


RegistryAuthMode = Literal["Environment", "DockerConfigJSON"]


class RegistryAuthReference(WireModel):
    """A Secret holding the registry credential, and the form it holds it in."""

    name: ObjectName
    """The Secret's name, in the resource's namespace."""
    mode: RegistryAuthMode = "Environment"
    """How the Secret holds the credential. Environment (the default): its key registry grants
    the credential to one registry host[:port], and username and password, or token, hold it;
    they reach ptah as PTAH_OCI_* variables. DockerConfigJSON: a Secret of type
    kubernetes.io/dockerconfigjson, whose .dockerconfigjson key is mounted as config.json in the
    directory DOCKER_CONFIG names, so ptah picks the credential for the registry by host as
    docker does."""


class OCIArtifactSourceSpec(WireModel):
    """Where an artifact comes from, and how it is verified."""

    oci_ref: Annotated[str, Field(min_length=1), OCI_REFERENCE_RULE]
    """The OCI artifact (tag or digest) holding the desired schema or the migrations; the Resolve
    reading pins it to a digest."""
    registry_auth_from: RegistryAuthReference | None = None
    """A Secret with registry credentials for the artifact, read only by the containers that reach
    the registry (Resolve, Verify, and the fetch step), never by one that opens the database. In
    the default mode, Environment, its key registry (required) grants the credential to one
    registry host[:port], and username and password, or token, hold the credential; mode
    DockerConfigJSON reads a kubernetes.io/dockerconfigjson Secret instead."""
    verification_policy_from: ConfigMapKeySelector | None = None
    """The ConfigMap key holding the verification policy the Verify reading checks the artifact
    against; a plan is bound to its UID and digest."""
    # Absent (not a default object) so a source that never names it is written as before.
    transport: RegistryTransportSpec | None = None
    """How the registry is reached: transport.plainHTTP for a registry without TLS,
    transport.caFrom for one whose certificate a private authority signed."""

    @model_validator(mode="after")
    def _no_credential_in_clear(self) -> OCIArtifactSourceSpec:
        if self.transport is not None and self.transport.plain_http and self.registry_auth_from:
            raise ValueError(CREDENTIAL_IN_CLEAR)
        return self


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
    failure_retry_interval: Annotated[str, RETRY_INTERVAL] = "30s"
    """How long after a failed reading it is tried again (1s to 1h); doubled for each repeat, up
    to an hour."""
    connect_timeout: Annotated[str, CONNECT_TIMEOUT] = "10s"
    """How long the executor waits to connect to the database (1s to 10m, and shorter than
    activeDeadlineSeconds)."""
    resources: ResourceRequirements | None = None
    """Resources of the operation Pod's containers."""
    service_account_name: MaybeObjectName | None = None
    """The ServiceAccount the operation Pod runs as (default: default); it mounts no token."""
    image_pull_secrets: list[NamedReference] | None = Field(default=None, max_length=16)
    """Pull secrets for the runner and executor images."""
    node_selector: dict[str, str] | None = Field(default=None, max_length=32)
    """Node selector of the operation Pod."""
    tolerations: list[Toleration] | None = Field(default=None, max_length=32)
    """Tolerations of the operation Pod."""
    # Affinity is Kubernetes' own deep type; it is carried verbatim into the Pod.
    affinity: dict[str, Any] | None = None
    """Affinity of the operation Pod, carried verbatim."""
    # Unlike every other empty value here, an empty runtimeClassName is not the same as
    # none: the API server keeps it (a pointer) and then refuses the Job as invalid, so
    # it is refused here, where the user can be told, and by the CRD.
    runtime_class_name: ObjectName | None = None
    """RuntimeClass of the operation Pod."""
    priority_class_name: MaybeObjectName | None = None
    """PriorityClass of the operation Pod."""
    pod_metadata: PodMetadataSpec | None = None
    """Labels and annotations declared for the operation Pods."""

    @model_validator(mode="after")
    def _connect_within_deadline(self) -> ExecutionSpec:
        # A connection attempt the Job's deadline cuts off ends as a killed Pod, not as
        # the executor's own sentence about an unreachable database.
        if parse_duration(self.connect_timeout) >= self.active_deadline_seconds:
            raise ValueError(CONNECT_OUTLASTS_DEADLINE)
        return self


class ScratchImages(WireModel):
    """The scratch database images, one per engine, a PtahSchema whose spec.dev is
    provided reads in (the chart's execution.scratchImages)."""

    postgresql: PinnedImage | None = None
    """The PostgreSQL scratch image, pinned by digest."""
    mysql: PinnedImage | None = None
    """The MySQL-family (MariaDB) scratch image, pinned by digest."""


class ExecutionBindingStatus(WireModel):
    """What the operation Jobs are bound to; a change to any part installs a new epoch."""

    epoch: Epoch
    """The epoch naming this binding; every claim, plan and Job made under it carries it."""
    controller_state_version: PositiveInt32
    """The controller's state-format version the binding was made under."""
    ptah_version: str = Field(min_length=1, max_length=128)
    """The ptah (data-plane) version the executor image runs."""
    executor_image: PinnedImage
    """The executor image, pinned by digest, every operation Job runs."""
    runner_protocol_version: PositiveInt32
    """The runner protocol the Jobs and the controller speak."""
    # Absent (not a default object) when the chart names none, so a binding made before
    # scratch images existed keeps its epoch and every digest over it.
    scratch_images: ScratchImages | None = None
    """The scratch database images, pinned by digest, the Observe and Plan Jobs of a schema
    whose spec.dev is provided run beside ptah."""


class ManagerRecord(WireModel):
    """Who dispatched: audit only, bound by nothing (the admission snapshot pins it)."""

    controller_image: PinnedImage
    """The controller image, pinned by digest, that dispatched."""
    controller_revision: str = Field(min_length=1, max_length=128)
    """The controller's source revision that dispatched."""
    runner_image: PinnedImage
    """The runner image, pinned by digest, the Job's install step copied the runner from."""


class TargetLockReleaseStatus(WireModel):
    """A Lease release a retirement owes; all four parts are needed to release exactly."""

    coordination_digest: Digest
    """The digest naming the database realm whose Lease is owed a release."""
    operation_id: str = Field(min_length=1)
    """The claim (operation ID) that held the Lease."""
    lease_duration_seconds: int = Field(ge=5, le=86460)
    """The Lease's duration as the claim held it."""
    lease_epoch: Epoch
    """The tenure epoch the claim held the Lease under; only that tenure is released."""


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
    """The username admission recorded for the request (userInfo.username)."""
    uid: str | None = None
    """The user's UID as admission recorded it, when the authenticator gives one."""
    groups: list[str] = Field(default_factory=list)
    """The user's groups as admission recorded them."""


class ConsumedApprovalStatus(WireModel):
    name: str
    """The approval's name."""
    uid: str
    """The approval's UID."""
    approver: ApproverRecord
    """Who approved, as admission stamped it."""
    approved_at: Timestamp
    """When the approval was made, as admission stamped it."""


class OCIArtifactAccessBinding(WireModel):
    reference: str
    """The artifact's reference, pinned by digest (repository@sha256:...)."""
    digest: Digest
    """The artifact manifest's digest."""
    media_type: str | None = None
    """The artifact manifest's media type."""
    size: int | None = None
    """The artifact manifest's size in bytes."""


class ArtifactVerificationStatus(WireModel):
    """What the Verify reading found for the resolved artifact, and under which policy."""

    artifact_digest: Digest
    """The digest of the artifact that was verified."""
    policy_uid: str | None = None
    """The UID of the verification policy ConfigMap it was verified under."""
    policy_digest: Digest | None = None
    """The digest of the verification policy it was verified under."""
    requirements: list[str] = Field(default_factory=list, max_length=64)
    """The policy's requirements the artifact met."""
    verified_at: Timestamp
    """When the Verify reading finished."""


class ReadingFailureStatus(WireModel):
    """The last reading that failed: the executor's own sentence (redacted), how many
    times in a row, and when it is tried again (backing off on each repeat)."""

    operation: str
    """The reading that failed (Resolve, Verify, Observe, Plan, ...)."""
    code: str | None = None
    """The executor's or runner's error code, when it gave one."""
    message: str = Field(max_length=1024)
    """The failure in the executor's own words, with credentials redacted."""
    failures: int = Field(ge=1)
    """How many times in a row this reading has failed."""
    failed_at: Timestamp
    """When it last failed."""
    retry_not_before: Timestamp
    """The reading is not tried again before this time."""
