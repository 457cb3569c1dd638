"""Wire and CRD types of ``operator.ptah.run/v1alpha1``: the single source for the CRDs."""

from collections.abc import Mapping
from typing import Final

from jobclaim.api._base import API_VERSION, GROUP, VERSION, WireModel, to_wire_name
from jobclaim.api.common import (
    SPEC_WRITER_ANNOTATION,
    ApprovalPolicy,
    ApproverRecord,
    DatabaseTargetSpec,
    ExecutionBindingStatus,
    ExecutionSpec,
    ManagerRecord,
    OCIArtifactSourceSpec,
    PodMetadataSpec,
    ResourceRequirements,
    TargetLockReleaseStatus,
)
from jobclaim.api.meta import Condition, ObjectMeta, ObjectReference, OwnerReference
from jobclaim.api.migration import (
    MIGRATION_FINALIZER,
    UNRESOLVED_RUN_ANNOTATION,
    MigrationOperationStatus,
    PtahMigration,
    PtahMigrationApproval,
    PtahMigrationPlan,
    PtahMigrationRunAcknowledgment,
    PtahMigrationSpec,
    PtahMigrationStatus,
    ResolvedMigrationRunStatus,
    UnresolvedMigrationRunStatus,
)
from jobclaim.api.schema import (
    SCHEMA_FINALIZER,
    ActiveOperationStatus,
    BindingRetirementStatus,
    CurrentPlanStatus,
    PendingObservationStatus,
    PtahSchema,
    PtahSchemaApproval,
    PtahSchemaPlan,
    PtahSchemaPlanChunk,
    PtahSchemaProofSettlement,
    PtahSchemaSpec,
    PtahSchemaStatus,
)
from jobclaim.api.snapshot import AdmissionSnapshot

# Every kind the group serves, for CRD generation and strict decoding by kind.
KINDS: Final[Mapping[str, type[WireModel]]] = {
    "PtahSchema": PtahSchema,
    "PtahSchemaPlan": PtahSchemaPlan,
    "PtahSchemaPlanChunk": PtahSchemaPlanChunk,
    "PtahSchemaApproval": PtahSchemaApproval,
    "PtahSchemaProofSettlement": PtahSchemaProofSettlement,
    "PtahMigration": PtahMigration,
    "PtahMigrationPlan": PtahMigrationPlan,
    "PtahMigrationApproval": PtahMigrationApproval,
    "PtahMigrationRunAcknowledgment": PtahMigrationRunAcknowledgment,
}

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "MIGRATION_FINALIZER",
    "SCHEMA_FINALIZER",
    "SPEC_WRITER_ANNOTATION",
    "UNRESOLVED_RUN_ANNOTATION",
    "VERSION",
    "ActiveOperationStatus",
    "AdmissionSnapshot",
    "ApprovalPolicy",
    "ApproverRecord",
    "BindingRetirementStatus",
    "Condition",
    "CurrentPlanStatus",
    "DatabaseTargetSpec",
    "ExecutionBindingStatus",
    "ExecutionSpec",
    "ManagerRecord",
    "MigrationOperationStatus",
    "OCIArtifactSourceSpec",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "PendingObservationStatus",
    "PodMetadataSpec",
    "PtahMigration",
    "PtahMigrationApproval",
    "PtahMigrationPlan",
    "PtahMigrationRunAcknowledgment",
    "PtahMigrationSpec",
    "PtahMigrationStatus",
    "PtahSchema",
    "PtahSchemaApproval",
    "PtahSchemaPlan",
    "PtahSchemaPlanChunk",
    "PtahSchemaProofSettlement",
    "PtahSchemaSpec",
    "PtahSchemaStatus",
    "ResolvedMigrationRunStatus",
    "ResourceRequirements",
    "TargetLockReleaseStatus",
    "UnresolvedMigrationRunStatus",
    "WireModel",
    "to_wire_name",
]
