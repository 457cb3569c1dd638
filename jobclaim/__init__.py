"""What a claim is, and whether a Job is its: the contract the controller and the
webhook share.

The public surface is this module; everything the two sides need is named here, so
neither reaches into a private module and grows a second copy of a rule. Four
submodules are public as well, each one idea the sides speak directly:

- ``jobclaim.api``: the wire and CRD models (the single source of the CRDs);
- ``jobclaim.apiserver``: the API boundary (protocols, resources, one error hierarchy)
  that ``kube`` implements and every side calls through;
- ``jobclaim.errors``: the error tree;
- ``jobclaim.times``: the one RFC 3339 format and parse, and the clock.

Every other module here is the contract's own business and may move;
``tests/test_layers.py`` holds every shipping package to this surface.
"""

from jobclaim._canonical import (
    canonical_json,
    digest_of,
    is_digest,
    is_epoch,
    is_pinned_image,
    sha256_digest,
)
from jobclaim.admission import (
    MAX_KEYS,
    MAX_LIMIT_RANGES,
    seal,
    snapshot_digest,
    snapshot_problem,
)
from jobclaim.approvals import (
    CONSUMED,
    STALE,
    apply_approval_of,
    approval_stamp_problem,
    consumed_by,
    migration_approval_problem,
    schema_approval_problem,
    witness_problem,
)
from jobclaim.builder import (
    DEFAULT_GRACE_SECONDS,
    INSTALL_CONTAINER,
    RUNNER_CONTAINER,
    JobInputs,
    annotations_for,
    build_job,
    labels_for,
    migration_job_inputs,
    reaches_registry,
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
from jobclaim.envelope import (
    ANN_EPOCH,
    ANN_OPERATION_ID,
    ANN_PLAN_CONTENT_DIGEST,
    ANN_SNAPSHOT_DIGEST,
    LABEL_MANAGED_BY,
    LABEL_OPERATION,
    LABEL_OPERATION_ID,
    MANAGED_BY,
    PREFIX,
    operation_id_label_value,
)
from jobclaim.errors import BuildRefused, InvalidInput, PtahError
from jobclaim.livejob import Finished, finished, manager_record_of, pod_stopped, runner_state
from jobclaim.match import MATCH, Verdict, manager_record_problem, match
from jobclaim.naming import (
    LEASE_EPOCH_ANNOTATION,
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
    reading_plan_content,
)
from jobclaim.projection import (
    LABEL_PLAN,
    build_projection,
    chunk_geometry_problem,
    chunk_object_problem,
    chunk_problem,
    decode_chunk,
    plan_geometry_problem,
    projection_problem,
)
from jobclaim.recordedplan import migration_plan_problem, schema_plan_problem
from jobclaim.recordpod import (
    ENV_JOB_NAME,
    ENV_JOB_UID,
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    ENV_POD_UID,
    RECORD_CA_FILE,
    RECORD_IDENTITY_ENV,
    RECORD_TOKEN_DIR,
    RECORD_TOKEN_FILE,
)
from jobclaim.semantic import quantity_value
from jobclaim.stamps import (
    REQUEST_UID_FIELD,
    STAMP_FUTURE_SKEW_SECONDS,
    STAMP_WINDOW_SECONDS,
    STAMPED,
    Stamp,
    StampedKind,
    stamp_problem,
    stamp_time,
    written_stamp,
)

# The stamps' own reading of a recorded time; ``jobclaim.times.parse_time`` is the
# stricter RFC 3339 one the other records use.
from jobclaim.stamps import parse_time as parse_stamp_time
from jobclaim.statements import (
    ClassifiedBy,
    PlanContent,
    PlanUnreadable,
    Statement,
    approval_required,
    classify,
    plan_content,
    privilege_changes_of,
    recorded_content_problem,
    split_sql,
    statements_of,
)
from jobclaim.template import template_digest

__all__ = [
    "ANN_EPOCH",
    "ANN_OPERATION_ID",
    "ANN_PLAN_CONTENT_DIGEST",
    "ANN_SNAPSHOT_DIGEST",
    "CLEANUP_TTL_SECONDS",
    "CONSUMED",
    "DEFAULT_GRACE_SECONDS",
    "ENV_JOB_NAME",
    "ENV_JOB_UID",
    "ENV_POD_NAME",
    "ENV_POD_NAMESPACE",
    "ENV_POD_UID",
    "INSTALL_CONTAINER",
    "LABEL_MANAGED_BY",
    "LABEL_OPERATION",
    "LABEL_OPERATION_ID",
    "LABEL_PLAN",
    "LEASE_EPOCH_ANNOTATION",
    "MANAGED_BY",
    "MATCH",
    "MAX_KEYS",
    "MAX_LIMIT_RANGES",
    "MIGRATION_OPERATIONS",
    "PLAN_CONTRACT_VERSION",
    "PREFIX",
    "RECORD_CA_FILE",
    "RECORD_IDENTITY_ENV",
    "RECORD_TOKEN_DIR",
    "RECORD_TOKEN_FILE",
    "REQUEST_UID_FIELD",
    "RUNNER_CONTAINER",
    "SCHEMA_OPERATIONS",
    "STALE",
    "STAMPED",
    "STAMP_FUTURE_SKEW_SECONDS",
    "STAMP_WINDOW_SECONDS",
    "BuildRefused",
    "Claim",
    "ClassifiedBy",
    "Finished",
    "InvalidInput",
    "JobInputs",
    "LockRule",
    "MigrationOwner",
    "OperationInfo",
    "Owner",
    "OwnerFamily",
    "PlanContent",
    "PlanUnreadable",
    "PtahError",
    "SchemaOwner",
    "SchemaPlanContent",
    "Stamp",
    "StampedKind",
    "Statement",
    "Verdict",
    "annotations_for",
    "apply_approval_of",
    "approval_required",
    "approval_stamp_problem",
    "build_job",
    "build_migration_plan",
    "build_plan_chunk",
    "build_projection",
    "build_schema_plan",
    "canonical_json",
    "chunk_geometry_problem",
    "chunk_object_problem",
    "chunk_problem",
    "classify",
    "consumed_by",
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
    "migration_approval_problem",
    "migration_claim",
    "migration_job_inputs",
    "migration_operation",
    "migration_plan_name",
    "migration_plan_problem",
    "operation_id_label_value",
    "operation_info",
    "owner_family",
    "parse_stamp_time",
    "pending_apply_claim",
    "plan_content",
    "plan_geometry_problem",
    "plan_name",
    "pod_stopped",
    "privilege_changes_of",
    "projection_names",
    "projection_problem",
    "published_plan_problem",
    "quantity_value",
    "reaches_registry",
    "reading_plan_content",
    "recorded_content_problem",
    "runner_state",
    "schema_approval_problem",
    "schema_claim",
    "schema_job_inputs",
    "schema_operation",
    "schema_plan_problem",
    "seal",
    "sha256_digest",
    "snapshot_digest",
    "snapshot_problem",
    "split_sql",
    "stamp_problem",
    "stamp_time",
    "statements_of",
    "template_digest",
    "witness_problem",
    "written_stamp",
]
