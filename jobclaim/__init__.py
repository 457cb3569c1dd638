"""What a claim is, and whether a Job is its: the contract the controller and the
webhook share.

The public surface is this module; everything the two sides need is named here, so
neither reaches into a private module and grows a second copy of a rule.
"""

from jobclaim._canonical import (
    canonical_json,
    digest_of,
    is_digest,
    is_epoch,
    is_pinned_image,
    sha256_digest,
)
from jobclaim.admission import seal, snapshot_digest, snapshot_problem
from jobclaim.builder import (
    JobInputs,
    annotations_for,
    build_job,
    labels_for,
    migration_job_inputs,
    schema_job_inputs,
)
from jobclaim.claim import (
    CLEANUP_TTL_SECONDS,
    Claim,
    Owner,
    migration_claim,
    pending_apply_claim,
    schema_claim,
)
from jobclaim.errors import BuildRefused, InvalidInput, PtahError
from jobclaim.livejob import Finished, finished, manager_record_of, pod_stopped, runner_state
from jobclaim.match import MATCH, Verdict, manager_record_problem, match
from jobclaim.naming import (
    coordination_digest,
    is_dns_label,
    job_name,
    lease_holder,
    lease_name,
    migration_plan_name,
    plan_name,
    projection_names,
)
from jobclaim.operations import (
    MIGRATION_OPERATIONS,
    SCHEMA_OPERATIONS,
    LockRule,
    OperationInfo,
    migration_operation,
    operation_info,
    schema_operation,
)
from jobclaim.owners import MigrationOwner, OwnerFamily, SchemaOwner, owner_family
from jobclaim.plans import (
    PLAN_CONTRACT_VERSION,
    SchemaPlanContent,
    build_migration_plan,
    build_plan_chunk,
    build_schema_plan,
    published_plan_problem,
)
from jobclaim.projection import (
    build_projection,
    chunk_geometry_problem,
    chunk_problem,
    decode_chunk,
    projection_problem,
)
from jobclaim.recordedplan import migration_plan_problem, schema_plan_problem
from jobclaim.template import template_digest

__all__ = [
    "CLEANUP_TTL_SECONDS",
    "MATCH",
    "MIGRATION_OPERATIONS",
    "PLAN_CONTRACT_VERSION",
    "SCHEMA_OPERATIONS",
    "BuildRefused",
    "Claim",
    "Finished",
    "InvalidInput",
    "JobInputs",
    "LockRule",
    "MigrationOwner",
    "OperationInfo",
    "Owner",
    "OwnerFamily",
    "PtahError",
    "SchemaOwner",
    "SchemaPlanContent",
    "Verdict",
    "annotations_for",
    "build_job",
    "build_migration_plan",
    "build_plan_chunk",
    "build_projection",
    "build_schema_plan",
    "canonical_json",
    "chunk_geometry_problem",
    "chunk_problem",
    "coordination_digest",
    "decode_chunk",
    "digest_of",
    "finished",
    "is_digest",
    "is_dns_label",
    "is_epoch",
    "is_pinned_image",
    "job_name",
    "labels_for",
    "lease_holder",
    "lease_name",
    "manager_record_of",
    "manager_record_problem",
    "match",
    "migration_claim",
    "migration_job_inputs",
    "migration_operation",
    "migration_plan_name",
    "migration_plan_problem",
    "operation_info",
    "owner_family",
    "pending_apply_claim",
    "plan_name",
    "pod_stopped",
    "projection_names",
    "projection_problem",
    "published_plan_problem",
    "runner_state",
    "schema_claim",
    "schema_job_inputs",
    "schema_operation",
    "schema_plan_problem",
    "seal",
    "sha256_digest",
    "snapshot_digest",
    "snapshot_problem",
    "template_digest",
]
