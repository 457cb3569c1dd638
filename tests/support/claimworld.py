"""A small, real world for jobclaim tests: a resource with a claim, its Job, and the
Job as the API server would hand it back.

Everything is built through the product's own functions (claiming, builder, seal), so
a test that passes here passes for the Job the controller would really create.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import yaml

from controller.pieces.operationidentity import (
    input_fingerprint,
    migration_operation,
    schema_operation,
)
from jobclaim import (
    Claim,
    SchemaPlanContent,
    build_job,
    migration_claim,
    migration_job_inputs,
    plan_name,
    schema_claim,
    schema_job_inputs,
    seal,
    sha256_digest,
    template_digest,
)
from jobclaim.api import (
    CurrentPlanStatus,
    ExecutionBindingStatus,
    ManagerRecord,
    PtahMigration,
    PtahMigrationStatus,
    PtahSchema,
    PtahSchemaStatus,
)
from jobclaim.api.common import OCIArtifactAccessBinding, ScratchImages
from jobclaim.api.migration import MigrationHistoryStatus, MigrationSequenceEntry
from jobclaim.api.snapshot import AdmissionSnapshot, BoundObject, ServiceAccountBinding
from jobclaim.builder import JobInputs
from runner import RUNNER_PROTOCOL_VERSION

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EPOCH = "v1-" + "a" * 32
OTHER_EPOCH = "v1-" + "b" * 32
BINDING = ExecutionBindingStatus(
    epoch=EPOCH,
    controller_state_version=3,
    ptah_version="1.9.0",
    executor_image="registry.example.com/ptah@sha256:" + "1" * 64,
    runner_protocol_version=RUNNER_PROTOCOL_VERSION,
    # Bound by every world; only a schema whose spec.dev is provided runs one.
    scratch_images=ScratchImages(
        postgresql="registry.example.com/ptah-scratch-postgresql@sha256:" + "7" * 64,
        mysql="registry.example.com/ptah-scratch-mariadb@sha256:" + "8" * 64,
    ),
)
MANAGER = ManagerRecord(
    controller_image="registry.example.com/ptah-operator@sha256:" + "2" * 64,
    controller_revision="r1",
    runner_image="registry.example.com/ptah-runner@sha256:" + "3" * 64,
)
JOB_UID = "0f6d2a52-8c1b-4d59-9b0e-5b8a3e1c7f21"
NOW = "2026-12-02T12:00:00Z"


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def snapshot_for(template: dict[str, Any]) -> AdmissionSnapshot:
    return seal(
        AdmissionSnapshot(
            digest="",
            template_digest=template_digest(template),
            service_account=ServiceAccountBinding(
                object=BoundObject(name="default", uid="sa-uid", resource_version="7")
            ),
        )
    )


@dataclass(frozen=True)
class World:
    family: str
    operation: str
    resource: PtahSchema | PtahMigration
    built: dict[str, Any]

    @property
    def submitted(self) -> dict[str, Any]:
        """The Job as a validating webhook sees it on CREATE."""
        return as_admitted(self.built, JOB_UID)

    @property
    def stored(self) -> dict[str, Any]:
        """The Job as an uncached read returns it after the create."""
        job = as_admitted(self.built, JOB_UID)
        job["metadata"]["resourceVersion"] = "4711"
        job["metadata"]["managedFields"] = [
            {"manager": "ptah-operator", "operation": "Update", "apiVersion": "batch/v1"}
        ]
        job["status"] = {}
        return job

    def claim(self, mode: str, **changes: Any) -> Claim:
        """``rebuild-stored``, ``rebuild-submitted`` or ``envelope``."""
        built = None if mode == "envelope" else self.built
        stored = mode != "rebuild-submitted"
        if isinstance(self.resource, PtahSchema):
            made = schema_claim(self.resource, built=built, stored=stored, binding=BINDING)
        else:
            made = migration_claim(self.resource, built=built, stored=stored, binding=BINDING)
        assert made is not None
        return replace(made, **changes)

    def job(self, mode: str) -> dict[str, Any]:
        return self.submitted if mode == "rebuild-submitted" else self.stored


def as_admitted(job: dict[str, Any], uid: str) -> dict[str, Any]:
    """What the API server adds to a Job before validating admission sees it."""
    out = copy.deepcopy(job)
    meta = out["metadata"]
    meta.update(uid=uid, generation=1, creationTimestamp=NOW)
    name = meta["name"]
    out["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = out["spec"]["template"]
    template["metadata"]["labels"].update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )
    pod = template["spec"]
    pod["serviceAccount"] = pod["serviceAccountName"]
    return out


def plan_for(schema_uid: str) -> CurrentPlanStatus:
    fingerprint = "sha256:" + "c" * 64
    return CurrentPlanStatus(
        name=plan_name(fingerprint),
        uid="plan-uid",
        fingerprint=fingerprint,
        content_digest="sha256:" + "d" * 64,
        execution_binding_id=EPOCH,
        controller_state_version=BINDING.controller_state_version,
        ptah_version=BINDING.ptah_version,
        statement_count=3,
        chunk_count=2,
    )


# What Resolve recorded: every later claim snapshots it (controller.claiming).
RESOLVED = OCIArtifactAccessBinding(
    reference="registry.example.com/shop/orders-schema@sha256:" + "5" * 64,
    digest="sha256:" + "5" * 64,
)
RESOLVED_MIGRATIONS = OCIArtifactAccessBinding(
    reference="registry.example.com/shop/billing-migrations@sha256:" + "6" * 64,
    digest="sha256:" + "6" * 64,
)


# The scratch database a schema world names: its own Secret key (the golden Jobs of
# before provided existed), or the operator's (jobclaim.scratch).
DEV_URL_FROM: Final = {"urlFrom": {"name": "orders-dev-db", "key": "url"}}
DEV_PROVIDED: Final = {"provided": {}}


def schema_world(
    operation: str = "Apply",
    *,
    registry_ca_digest: str | None = None,
    dev: dict[str, Any] = DEV_URL_FROM,
    engine: str = "PostgreSQL",
) -> World:
    raw = example("ptahschema.yaml")
    raw["metadata"].update(uid="schema-uid-1", generation=1, resourceVersion="10")
    raw["spec"]["dev"] = dev
    raw["spec"]["target"]["engine"] = engine
    # A private registry, so the golden Jobs pin where its credential goes.
    raw["spec"]["desired"].setdefault("registryAuthFrom", {"name": "orders-registry"})
    schema = PtahSchema.model_validate(raw)
    schema = schema.model_copy(update={"status": PtahSchemaStatus(source=RESOLVED)})
    fingerprint = input_fingerprint({"operation": operation, "generation": 1})
    claim = schema_operation(
        schema,
        operation=operation,
        fingerprint=fingerprint,
        epoch=EPOCH,
        nonce=b"\x01" * 16,
        started_at=NOW,
        execution_not_after="2026-12-02T12:15:00Z",
    ).model_copy(update={"registry_ca_digest": registry_ca_digest})
    plan = plan_for("schema-uid-1") if operation == "Apply" else None
    status = PtahSchemaStatus(
        execution_binding=BINDING, source=RESOLVED, plan=plan, active_operation=claim
    )
    schema = schema.model_copy(update={"status": status})
    draft = build_job(schema_job_inputs(schema, binding=BINDING, manager=MANAGER))
    snapshot = snapshot_for(draft["spec"]["template"])
    claim = claim.model_copy(update={"admission_snapshot": snapshot})
    schema = schema.model_copy(
        update={"status": status.model_copy(update={"active_operation": claim})}
    )
    built = build_job(
        schema_job_inputs(schema, binding=BINDING, manager=MANAGER, snapshot_digest=snapshot.digest)
    )
    return World("schema", operation, schema, built)


SEQUENCE = ("20260101000000", "20260102000000")


def migration_world(operation: str = "Apply", *, registry_ca_digest: str | None = None) -> World:
    raw = example("ptahmigration.yaml")
    raw["metadata"].update(uid="migration-uid-1", generation=1, resourceVersion="10")
    raw["spec"]["artifact"].setdefault("registryAuthFrom", {"name": "billing-registry"})
    migration = PtahMigration.model_validate(raw)
    migration = migration.model_copy(
        update={"status": PtahMigrationStatus(artifact=RESOLVED_MIGRATIONS)}
    )
    fingerprint = input_fingerprint({"operation": operation, "generation": 1})
    claim = migration_operation(
        migration,
        operation=operation,
        fingerprint=fingerprint,
        epoch=EPOCH,
        nonce=b"\x02" * 16,
        started_at=NOW,
        execution_not_after="2026-12-02T12:15:00Z",
    ).model_copy(update={"registry_ca_digest": registry_ca_digest})
    sequence = SEQUENCE if operation == "Apply" else ()
    status = PtahMigrationStatus(
        execution_binding=BINDING, artifact=RESOLVED_MIGRATIONS, active_operation=claim
    )
    migration = migration.model_copy(update={"status": status})
    draft = build_job(
        migration_job_inputs(
            migration, binding=BINDING, manager=MANAGER, expected_sequence=sequence
        )
    )
    snapshot = snapshot_for(draft["spec"]["template"])
    claim = claim.model_copy(update={"admission_snapshot": snapshot})
    migration = migration.model_copy(
        update={"status": status.model_copy(update={"active_operation": claim})}
    )
    built = build_job(
        migration_job_inputs(
            migration,
            binding=BINDING,
            manager=MANAGER,
            expected_sequence=sequence,
            snapshot_digest=snapshot.digest,
        )
    )
    return World("migration", operation, migration, built)


def job_inputs(world: World) -> JobInputs:
    """The inputs the world's claim builds its Job from, as the controller gathers them."""
    resource: Any = world.resource
    if world.family == "schema":
        return schema_job_inputs(resource, binding=BINDING, manager=MANAGER)
    sequence = SEQUENCE if world.operation == "Apply" else ()
    return migration_job_inputs(
        resource, binding=BINDING, manager=MANAGER, expected_sequence=sequence
    )


# Every operation of both families, by name: one world each.
EVERY_OPERATION: dict[str, Callable[[], World]] = {
    "schema Resolve": lambda: schema_world("Resolve"),
    "schema Verify": lambda: schema_world("Verify"),
    "schema Observe": lambda: schema_world("Observe"),
    "schema Plan": lambda: schema_world("Plan"),
    "schema Apply": lambda: schema_world("Apply"),
    "migration Resolve": lambda: migration_world("Resolve"),
    "migration Verify": lambda: migration_world("Verify"),
    "migration History": lambda: migration_world("History"),
    "migration Apply": lambda: migration_world("Apply"),
}


# A schema's published plan and a migration's recorded reading, for the plan builders.
PLAN_CONTENT = SchemaPlanContent(
    content_digest=sha256_digest(b"plan"),
    statement_count=2,
    destructive=False,
    privilege_changes=(),
    chunks=((sha256_digest(b"a"), 1), (sha256_digest(b"b"), 1)),
)


def plan_schema() -> PtahSchema:
    schema = schema_world("Plan").resource
    assert isinstance(schema, PtahSchema)
    return schema


def planned_migration(pending: int = 2) -> PtahMigration:
    migration = migration_world("History").resource
    assert isinstance(migration, PtahMigration) and migration.status
    status = migration.status.model_copy(
        update={
            "history": MigrationHistoryStatus(
                fingerprint=sha256_digest(b"history"), pending_count=pending
            ),
            "artifact": OCIArtifactAccessBinding(
                reference="registry.example.com/m:1", digest=sha256_digest(b"artifact")
            ),
        }
    )
    return migration.model_copy(update={"status": status})


PLAN_SEQUENCE = (
    MigrationSequenceEntry(version="1", digest=sha256_digest(b"1")),
    MigrationSequenceEntry(version="2", digest=sha256_digest(b"2")),
)
