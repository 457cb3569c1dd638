"""What a claim is: the explicit inputs every reader holds a Job to.

A ``Claim`` is a plain record built from a resource's status; ``match`` is a pure
function over it. Callers do all reads, so the controller and the webhook can hand
the same record to the same predicate and cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from jobclaim.api._base import API_VERSION
from jobclaim.api.common import (
    ArtifactVerificationStatus,
    ExecutionBindingStatus,
    OCIArtifactAccessBinding,
)
from jobclaim.api.meta import ConfigMapKeySelector
from jobclaim.api.migration import MigrationOperationStatus, PtahMigration
from jobclaim.api.schema import (
    ActiveOperationStatus,
    CurrentPlanStatus,
    PendingObservationStatus,
    PtahSchema,
    PtahSchemaStatus,
)
from jobclaim.api.snapshot import AdmissionSnapshot
from jobclaim.operations import Family, OperationInfo, family_of_kind, operation_info

# How long a harvested Job and its Pods outlive the harvest. The TTL is written before
# the outcome patch, so a manager that stops between the two must find the same
# terminal Job, Pod and log on its next pass: one hour outlives the longest manager
# outage the chart allows (a node lost with every replica on it: grace, eviction,
# restart, leader takeover, about seven minutes) with time left to schedule and pull.
# tests/chart/test_cleanup_ttl.py holds the chart to it; docs/architecture.md says why.
CLEANUP_TTL_SECONDS: Final = 3600


@dataclass(frozen=True, slots=True)
class Owner:
    """The resource a Job is dispatched for."""

    kind: str
    namespace: str
    name: str
    uid: str

    @property
    def family(self) -> Family | None:
        return family_of_kind(self.kind)

    def reference(self) -> dict[str, Any]:
        """The one controller owner reference an operation Job carries."""
        return {
            "apiVersion": API_VERSION,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    @classmethod
    def of(cls, kind: str, metadata: Any) -> Owner:
        return cls(
            kind=kind,
            namespace=metadata.namespace or "",
            name=metadata.name or "",
            uid=metadata.uid or "",
        )


@dataclass(frozen=True, slots=True)
class Claim:
    """Everything a Job is held to.

    ``built`` is the rebuilt Job when the claim's inputs still hold (full-rebuild
    mode); None means the inputs may have moved and only what the claim itself fixes
    is checked (envelope mode). ``stored`` says whether the Job was read back from the
    API server (it may then carry the cleanup TTL) or is being submitted.
    ``binding`` is the execution binding in force, when the reader knows it.
    """

    owner: Owner
    operation: str
    operation_id: str
    epoch: str
    job_name: str
    snapshot: AdmissionSnapshot | None
    input_fingerprint: str | None = None
    job_uid: str | None = None
    binding: ExecutionBindingStatus | None = None
    plan: CurrentPlanStatus | None = None
    built: Mapping[str, Any] | None = None
    stored: bool = True

    @property
    def info(self) -> OperationInfo:
        family = self.owner.family
        return operation_info(family, self.operation) if family else operation_info("", "")

    @property
    def mutating(self) -> bool:
        return self.info.mutating


def schema_claim(
    schema: PtahSchema,
    *,
    built: Mapping[str, Any] | None = None,
    stored: bool = True,
    binding: ExecutionBindingStatus | None = None,
) -> Claim | None:
    """The claim a PtahSchema's ``status.activeOperation`` makes, or None without one.

    An Apply claim carries ``status.plan``: the plan it runs is part of what it fixes.
    """
    status = schema.status
    operation = status.active_operation if status else None
    if status is None or operation is None:
        return None
    plan = status.plan if operation.type == "Apply" else None
    return _active_claim(schema, operation, plan, built=built, stored=stored, binding=binding)


def pending_apply_claim(
    schema: PtahSchema, pending: PendingObservationStatus, *, stored: bool = True
) -> Claim | None:
    """The claim a pending observation keeps on the Apply Job it records.

    The input fingerprint is no longer known (the Job's own must still be a digest),
    and the epoch is the one the plan was made under.
    """
    if pending.plan is None:
        return None
    return Claim(
        owner=Owner.of("PtahSchema", schema.metadata),
        operation="Apply",
        operation_id=pending.apply_operation_id,
        epoch=pending.plan.execution_binding_id,
        job_name=pending.apply_job_name,
        snapshot=pending.admission_snapshot,
        job_uid=pending.apply_job_uid,
        plan=pending.plan,
        stored=stored,
    )


def migration_claim(
    migration: PtahMigration,
    *,
    built: Mapping[str, Any] | None = None,
    stored: bool = True,
    binding: ExecutionBindingStatus | None = None,
) -> Claim | None:
    """The claim a PtahMigration's ``status.activeOperation`` makes, or None."""
    status = migration.status
    operation = status.active_operation if status else None
    if operation is None:
        return None
    return _active_claim(migration, operation, None, built=built, stored=stored, binding=binding)


def _active_claim(
    resource: PtahSchema | PtahMigration,
    operation: ActiveOperationStatus | MigrationOperationStatus,
    plan: CurrentPlanStatus | None,
    *,
    built: Mapping[str, Any] | None,
    stored: bool,
    binding: ExecutionBindingStatus | None,
) -> Claim:
    """The claim an active operation makes: both families' claims are read off the
    same fields, so a field one family adds to its claim reaches the other's too."""
    return Claim(
        owner=Owner.of(resource.kind, resource.metadata),
        operation=operation.type,
        operation_id=operation.id,
        epoch=operation.execution_binding_id,
        job_name=operation.job_name,
        snapshot=operation.admission_snapshot,
        input_fingerprint=operation.input_fingerprint,
        job_uid=operation.job_uid,
        binding=binding,
        plan=plan,
        built=built,
        stored=stored,
    )


# -- the artifact a claim reads --------------------------------------------------------

# The one operation that reads the artifact as written; it is what pins it.
RESOLVE: Final = "Resolve"
# The operations that need no verification of the artifact before they run: Resolve
# pins it, Verify is the verification. Every other operation reads what they vouched for.
UNVERIFIED_OPERATIONS: Final = frozenset({RESOLVE, "Verify"})


def resolved_artifact(resource: PtahSchema | PtahMigration) -> OCIArtifactAccessBinding | None:
    """What the last Resolve recorded: a schema's ``status.source``, a migration's
    ``status.artifact``."""
    status = resource.status
    if status is None:
        return None
    if isinstance(status, PtahSchemaStatus):
        return status.source
    return status.artifact


def resolved_source(
    resource: PtahSchema | PtahMigration, operation: str
) -> OCIArtifactAccessBinding | None:
    """The resolved artifact a claim of ``operation`` snapshots, or None for Resolve.

    Every operation after Resolve works on the artifact Resolve pinned by digest, and
    the claim records it so the Job is rebuilt from the claim alone: a tag that moved
    after Resolve must not reach Verify, a fetch or an Apply. The controller forms
    claims with it and admission holds every new claim to it.
    """
    return None if operation == RESOLVE else resolved_artifact(resource)


def requested_reference(resource: PtahSchema | PtahMigration) -> str:
    """The artifact's reference as the spec writes it: a tag, or a digest."""
    if isinstance(resource, PtahSchema):
        return resource.spec.desired.oci_ref
    return resource.spec.artifact.oci_ref


def verification_policy(resource: PtahSchema | PtahMigration) -> ConfigMapKeySelector | None:
    """The ConfigMap key the spec names as the artifact's verification policy."""
    if isinstance(resource, PtahSchema):
        return resource.spec.desired.verification_policy_from
    return resource.spec.artifact.verification_policy_from


def verification(resource: PtahSchema | PtahMigration) -> ArtifactVerificationStatus | None:
    """What the last Verify reading recorded."""
    return resource.status.verification if resource.status else None


def verified_as_asked(
    policy: ConfigMapKeySelector | None,
    artifact: OCIArtifactAccessBinding | None,
    verified: ArtifactVerificationStatus | None,
) -> bool:
    """Whether ``artifact`` is verified as the spec asks: a verification of its digest,
    and, where the spec names a policy, one made under a policy (its digest recorded).

    The controller reads the artifact as verified by this, and admission admits a
    claim after Verify by it: were they to differ, a policy named after the artifact
    was verified without one would leave the controller claiming what admission
    refuses, pass after pass, instead of verifying again.
    """
    if artifact is None or verified is None or verified.artifact_digest != artifact.digest:
        return False
    return policy is None or verified.policy_digest is not None


def artifact_verified(resource: PtahSchema | PtahMigration) -> bool:
    """:func:`verified_as_asked` of the artifact ``resource``'s status records."""
    return verified_as_asked(
        verification_policy(resource), resolved_artifact(resource), verification(resource)
    )
