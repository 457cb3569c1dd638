"""An Apply of either family, staged exactly as the controller stages it, for the attack
table (``test_attacks.py``): every step is one of the manager's real writes, made with
its own identity and itself admitted by the webhook, so a control row proves the whole
path; one keyword changes one thing a stolen manager identity would forge.

A schema Apply: the binding, the plan (the admin publishes it, as ``make run``'s
stand-in does: the webhook admits a manager's schema plan only from a harvested Plan
Job), a person's approval stamped by admission, the claim, the projections, the
approval spent, the mark. A migration Apply (``controller.families.migration.dispatch``): the
binding, the readings, the plan the manager publishes from them, the approval, the
claim, the approval spent, the mark.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import httpx

from controller.pieces.approvals import consumed_status
from controller.pieces.operationidentity import (
    ClaimFields,
    input_fingerprint,
    migration_operation,
    schema_operation,
)
from jobclaim import (
    BuildRefused,
    JobInputs,
    build_job,
    build_migration_plan,
    build_projection,
    migration_job_inputs,
    schema_job_inputs,
    sha256_digest,
)
from jobclaim.api import (
    DatabaseTargetSpec,
    ExecutionBindingStatus,
    ManagerRecord,
    MigrationSequenceEntry,
    ObjectReference,
    OCIArtifactAccessBinding,
    PtahMigration,
    PtahSchema,
    PtahSchemaPlan,
)
from jobclaim.api.common import ConsumedApprovalStatus
from jobclaim.api.migration import PtahMigrationStatus, UnresolvedMigrationRunStatus
from jobclaim.api.schema import PendingObservationStatus
from jobclaim.apiserver import (
    CONFIGMAPS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    Object,
    Resource,
)
from jobclaim.builder import repository_of
from jobclaim.times import timestamp, utc_now
from lab import run as localrun
from lab.standin import claim_reading, resolution, resolve_result, run_on_stand_in
from tests.realapi.attackstage import (
    Stage,
    admitted,
    as_manager,
    create_job,
    migration_object,
    path_of,
    schema_object,
)
from tests.support.claimworld import SEQUENCE, snapshot_for

SAFE: Final = (b"CREATE TABLE orders_v2 (id bigint PRIMARY KEY);\n",)
# What Resolve and Verify would have recorded for the example migration's artifact.
MIGRATIONS_DIGEST: Final = "sha256:" + "7" * 64
MIGRATIONS_REPOSITORY: Final = "registry.example.com/shop/billing-migrations"


Owned = PtahSchema | PtahMigration


def write_status(stage: Stage, owner: Owned, status: Any) -> Any:
    """The manager's status write, whole, at the version it reads."""
    resource = PTAHSCHEMAS if isinstance(owner, PtahSchema) else PTAHMIGRATIONS
    manager, name = stage.operator.manager, owner.metadata.name or ""
    current = manager.get(resource, stage.namespace, name)
    written = manager.patch_status(
        resource,
        stage.namespace,
        name,
        status.to_wire(),
        resource_version=current["metadata"]["resourceVersion"],
    )
    return type(owner).model_validate(written)


def spend(stage: Stage, resource: Resource, approval: str, claim: str) -> None:
    """The manager spends the approval on the claim (``controller.pieces.approvals``)."""
    manager = stage.operator.manager
    current = manager.get(resource, stage.namespace, approval)
    manager.patch_status(
        resource,
        stage.namespace,
        approval,
        consumed_status(current, now=timestamp(utc_now()), claim=claim),
        resource_version=current["metadata"]["resourceVersion"],
    )


@dataclass(frozen=True)
class Forged:
    """What a stolen manager identity writes into status in place of the controller's
    own: the images and Ptah version it binds, and its claim's target and realm. The
    defaults are the controller's."""

    executor: str | None = None
    ptah_version: str | None = None
    runner: str | None = None
    manager: str | None = None
    target_key: str | None = None
    coordination: str | None = None

    def binding(self, epoch: str | None = None) -> ExecutionBindingStatus:
        base = localrun.LOCAL_BINDING
        return ExecutionBindingStatus(
            epoch=epoch or "v1-" + uuid.uuid4().hex,
            controller_state_version=base.controller_state_version,
            ptah_version=self.ptah_version or base.ptah_version,
            executor_image=self.executor or base.executor_image,
            runner_protocol_version=base.runner_protocol_version,
            scratch_images=base.scratch_images,
        )

    def record(self) -> ManagerRecord:
        base = localrun.LOCAL_MANAGER
        return ManagerRecord(
            controller_image=self.manager or base.controller_image,
            controller_revision=base.controller_revision,
            runner_image=self.runner or base.runner_image,
        )

    def claim(self, claim: Any, target: DatabaseTargetSpec) -> Any:
        """The claim with the forged target key and coordination digest, if any."""
        if self.target_key is not None:
            wire = target.to_wire()
            wire["urlFrom"]["key"] = self.target_key
            target = DatabaseTargetSpec.model_validate(wire)
        update: dict[str, Any] = {"target": target}
        if self.coordination is not None:
            update["coordination_digest"] = self.coordination
        return claim.model_copy(update=update)


CONTROLLER: Final = Forged()


def new_binding() -> ExecutionBindingStatus:
    return CONTROLLER.binding()


@dataclass
class Staged:
    """A marked Apply claim and the Job it reserves (not yet created)."""

    owner: Any
    job: Object
    claim_id: str
    approval: str | None

    @property
    def resource(self) -> Resource:
        return PTAHSCHEMAS if isinstance(self.owner, PtahSchema) else PTAHMIGRATIONS

    @property
    def approvals(self) -> Resource:
        return PTAHSCHEMAAPPROVALS if isinstance(self.owner, PtahSchema) else PTAHMIGRATIONAPPROVALS

    @property
    def name(self) -> str:
        return self.owner.metadata.name or ""


def _apply_fields(name: str, binding: ExecutionBindingStatus, attempt: int) -> ClaimFields:
    """What the controller forms an Apply claim from (``controller.pieces.operationidentity``)."""
    return ClaimFields(
        operation="Apply",
        fingerprint=input_fingerprint({"apply": name}),
        epoch=binding.epoch,
        nonce=uuid.uuid4().bytes,
        started_at=timestamp(utc_now()),
        attempt=attempt,
    )


def _claim_and_mark(
    stage: Stage,
    owner: Any,
    claimed: Any,
    job_of: Callable[[Any, str | None], Object],
    *,
    approval: tuple[Resource, str] | None,
    spend_by: str | None,
    staged: Callable[[Any], None] = lambda owner: None,
) -> Staged:
    """The controller's dispatch steps for a claim in ``claimed`` (a status): the
    admission snapshot of its Job, the claim written, what the Pod mounts staged, the
    approval spent on the claim (or on ``spend_by``), the dispatch mark; and the Job it
    reserves, built as the controller builds it."""
    claim = claimed.active_operation
    draft = job_of(owner.model_copy(update={"status": claimed}), None)
    claim = claim.model_copy(update={"admission_snapshot": snapshot_for(draft["spec"]["template"])})
    owner = write_status(stage, owner, claimed.model_copy(update={"active_operation": claim}))
    staged(owner)
    if approval is not None:
        spend(stage, approval[0], approval[1], spend_by or claim.id)
    marked = claim.model_copy(update={"dispatch_started": True})
    assert owner.status is not None
    owner = write_status(stage, owner, owner.status.model_copy(update={"active_operation": marked}))
    job = job_of(owner, claim.admission_snapshot.digest)
    return Staged(owner, job, claim.id, approval[1] if approval else None)


# -- a schema Apply ------------------------------------------------------------------------


def stage_apply(
    stage: Stage,
    *,
    statements: tuple[bytes, ...] = SAFE,
    destructive: bool = False,
    forged: Forged = CONTROLLER,
    attempt: int = 1,
    approve: bool = True,
    approve_another_plan: bool = False,
    spend_by: str | None = None,
    pending: bool = False,
    policy: str = "OnApproval",
) -> Staged:
    """A PtahSchema whose Apply claim is marked, with every write made as the controller
    makes it; one change per keyword is what a stolen manager identity would forge."""
    admin, manager, ns = stage.operator.admin, stage.operator.manager, stage.namespace
    name = f"orders-{uuid.uuid4().hex[:8]}"
    raw = schema_object(stage, name)
    raw["spec"]["policy"]["apply"] = policy
    stored = admin.create(PTAHSCHEMAS, ns, raw)
    binding = forged.binding()
    # The readings ran under the controller's own binding (their Jobs were admitted);
    # a forged one is sealed in with the claim below, as a stolen identity would.
    manager.patch_status(
        PTAHSCHEMAS,
        ns,
        name,
        {"executionBinding": CONTROLLER.binding(binding.epoch).to_wire()},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    approval: Object | None = None
    if approve_another_plan:
        # A person approved an earlier plan of this schema; the manager holds that
        # approval for the plan it publishes next.
        other = (b"CREATE TABLE orders_v3 (id bigint);\n",)
        localrun.seed_plan(
            admin,
            manager,
            ns,
            name,
            plane=stage.operator.plane,
            statements=other,
            await_reading=False,
        )
        approval = admin.create(
            PTAHSCHEMAAPPROVALS, ns, localrun.approval_for(admin.get(PTAHSCHEMAS, ns, name))
        )
    plan = localrun.seed_plan(
        admin,
        manager,
        ns,
        name,
        plane=stage.operator.plane,
        statements=statements,
        await_reading=False,
        destructive=destructive,
    )
    schema = PtahSchema.model_validate(admin.get(PTAHSCHEMAS, ns, name))
    if approve and approval is None:
        approval = admin.create(PTAHSCHEMAAPPROVALS, ns, localrun.approval_for(schema.to_wire()))
    reserved = None
    if approval is not None:
        spec = approval["spec"]
        reserved = ConsumedApprovalStatus(
            name=approval["metadata"]["name"],
            uid=approval["metadata"]["uid"],
            approver=spec["approver"],
            approved_at=spec["approvedAt"],
        )
    claim = schema_operation(schema, **_apply_fields(name, binding, attempt))
    claim = forged.claim(claim, schema.spec.target)
    record = forged.record()
    status = schema.status
    assert status is not None
    claimed = status.model_copy(
        update={
            "execution_binding": binding,
            "active_operation": claim,
            "plan": plan.model_copy(update={"approval": reserved}),
            "phase": "Applying",
        }
    )
    if pending:
        claimed = claimed.model_copy(update={"pending_observation": _pending()})

    def job_of(owner: PtahSchema, digest: str | None) -> Object:
        return build_job(
            schema_job_inputs(owner, binding=binding, manager=record, snapshot_digest=digest)
        )

    return _claim_and_mark(
        stage,
        schema,
        claimed,
        job_of,
        approval=(PTAHSCHEMAAPPROVALS, reserved.name) if reserved else None,
        spend_by=spend_by,
        staged=lambda written: _project(stage, written),
    )


def _pending() -> PendingObservationStatus:
    return PendingObservationStatus(
        outcome="OutcomeUnknown",
        apply_operation_id="an-earlier-apply",
        apply_job_name="ptah-apply-orders-earlier",
        coordination_digest="sha256:" + "a" * 64,
        lease_duration_seconds=60,
        lease_epoch="v1-" + "e" * 32,
    )


def _project(stage: Stage, schema: PtahSchema) -> None:
    """The manager stages the plan's projections, as the controller does before marking."""
    assert schema.status is not None and schema.status.plan is not None
    ns = stage.namespace
    plan = PtahSchemaPlan.model_validate(
        stage.operator.admin.get(PTAHSCHEMAPLANS, ns, schema.status.plan.name)
    )
    for chunk in plan.spec.chunks:
        stored = stage.operator.admin.get(PTAHSCHEMAPLANCHUNKS, ns, chunk.name)
        data = base64.b64decode(stored["spec"]["data"])
        projection = build_projection(
            namespace=ns,
            schema_name=schema.metadata.name or "",
            plan_name=plan.metadata.name or "",
            plan_uid=plan.metadata.uid or "",
            chunk=chunk,
            data=data,
        )
        stage.operator.manager.create(CONFIGMAPS, ns, projection)


# -- a migration Apply ---------------------------------------------------------------------


def migrations(versions: tuple[str, ...] = SEQUENCE) -> tuple[MigrationSequenceEntry, ...]:
    return tuple(
        MigrationSequenceEntry(version=v, digest=sha256_digest(v.encode())) for v in versions
    )


def read_migration(
    stage: Stage, migration: PtahMigration, artifact: str = MIGRATIONS_DIGEST
) -> PtahMigration:
    """Resolve runs on the stand-in node (its Pod records the artifact pinned by
    digest, which admission requires of ``status.artifact``); the manager then records
    what Resolve, Verify and History found: that artifact, verified (the example names
    no policy, so nothing rests on it), and two migrations pending against it."""
    ops = stage.operator
    ns, name = stage.namespace, migration.metadata.name or ""
    claim = claim_reading(
        ops.manager,
        PTAHMIGRATIONS,
        ns,
        name,
        "Resolve",
        record=localrun.LOCAL_MANAGER,
        admission=localrun.manager_config().admission,
    )
    pinned = resolution(migration.spec.artifact.oci_ref, artifact)
    run_on_stand_in(ops.plane, ops.admin, ns, claim["jobName"], resolve_result(claim, pinned))
    migration = PtahMigration.model_validate(ops.manager.get(PTAHMIGRATIONS, ns, name))
    now = timestamp(utc_now())
    status = migration.status.to_wire() if migration.status else {}
    status.pop("activeOperation", None)
    status.update(
        artifact=pinned.to_wire(),
        verification={"artifactDigest": artifact, "verifiedAt": now},
        history={
            "observedAt": now,
            "fingerprint": sha256_digest(f"history of {artifact}".encode()),
            "pendingCount": len(SEQUENCE),
        },
        observedGeneration=migration.metadata.generation,
    )
    written: PtahMigration = write_status(
        stage, migration, PtahMigrationStatus.model_validate(status)
    )
    return written


def publish_migration_plan(stage: Stage, migration: PtahMigration) -> Object:
    """The manager publishes the plan its recorded History reading derives
    (``migration-plan-create``) and records it in ``status.plan``."""
    plan = build_migration_plan(migration, migrations=migrations(), created_at=timestamp(utc_now()))
    return stage.operator.manager.create(PTAHMIGRATIONPLANS, stage.namespace, plan)


def migration_approval(migration: PtahMigration, plan: Object) -> Object:
    """A person's approval of ``plan``, as ``kubectl ptah approve migration`` writes it;
    admission stamps who made it."""
    meta = migration.metadata
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahMigrationApproval",
        "metadata": {"name": f"{meta.name}-{uuid.uuid4().hex[:6]}", "namespace": meta.namespace},
        "spec": {
            "migrationRef": {"name": meta.name, "uid": meta.uid},
            "planRef": {"name": plan["metadata"]["name"], "uid": plan["metadata"]["uid"]},
            "planFingerprint": plan["spec"]["fingerprint"],
            "historyFingerprint": plan["spec"]["historyFingerprint"],
            "executionBindingID": plan["spec"]["executionBindingID"],
            "approver": {"username": "admin"},
            "approvedAt": timestamp(utc_now()),
            "mutationRequestUID": str(uuid.uuid4()),
        },
    }


def stage_migration_apply(
    stage: Stage,
    *,
    forged: Forged = CONTROLLER,
    artifact: OCIArtifactAccessBinding | None = None,
    attempt: int = 1,
    approve: bool = True,
    approve_another_plan: bool = False,
    spend_by: str | None = None,
    unresolved: bool = False,
    policy: str = "OnApproval",
) -> Staged:
    """A PtahMigration whose Apply claim is marked, every write made as the controller
    makes it (``controller.families.migration.dispatch``); one change per keyword is what a
    stolen manager identity would forge."""
    admin, ns = stage.operator.admin, stage.namespace
    name = f"billing-{uuid.uuid4().hex[:8]}"
    raw = migration_object(stage, name)
    raw["spec"]["policy"]["apply"] = policy
    created = PtahMigration.model_validate(admin.create(PTAHMIGRATIONS, ns, raw))
    binding = forged.binding()
    # The readings run under the controller's own binding; a forged one is sealed in
    # with the claim below.
    migration = write_status(
        stage, created, PtahMigrationStatus(execution_binding=CONTROLLER.binding(binding.epoch))
    )
    approval: Object | None = None
    if approve_another_plan:
        # A person approved the plan of an earlier reading (another artifact); the
        # manager holds that approval for the plan it publishes next.
        migration = read_migration(stage, migration, artifact="sha256:" + "8" * 64)
        earlier = publish_migration_plan(stage, migration)
        approval = admin.create(PTAHMIGRATIONAPPROVALS, ns, migration_approval(migration, earlier))
    migration = read_migration(stage, migration)
    plan = publish_migration_plan(stage, migration)
    plan_ref = ObjectReference(name=plan["metadata"]["name"], uid=plan["metadata"]["uid"])
    assert migration.status is not None
    migration = write_status(
        stage, migration, migration.status.model_copy(update={"plan": plan_ref})
    )
    if approve and approval is None:
        approval = admin.create(PTAHMIGRATIONAPPROVALS, ns, migration_approval(migration, plan))
    claim = migration_operation(migration, **_apply_fields(name, binding, attempt))
    approval_ref = (
        ObjectReference(name=approval["metadata"]["name"], uid=approval["metadata"]["uid"])
        if approval is not None
        else None
    )
    claim = forged.claim(claim, migration.spec.target).model_copy(
        update={
            "plan_ref": plan_ref,
            "approval_ref": approval_ref,
            "source": artifact or claim.source,
        }
    )
    record = forged.record()
    status = migration.status
    assert status is not None
    claimed = status.model_copy(
        update={"execution_binding": binding, "active_operation": claim, "phase": "Applying"}
    )
    if unresolved:
        claimed = claimed.model_copy(update={"unresolved_run": _unresolved()})
    sequence = tuple(entry.version for entry in migrations())

    def job_of(owner: PtahMigration, digest: str | None) -> Object:
        return _submitted(
            migration_job_inputs(
                owner,
                binding=binding,
                manager=record,
                expected_sequence=sequence,
                snapshot_digest=digest,
            )
        )

    return _claim_and_mark(
        stage,
        migration,
        claimed,
        job_of,
        approval=(PTAHMIGRATIONAPPROVALS, approval_ref.name) if approval_ref else None,
        spend_by=spend_by,
    )


def _submitted(inputs: JobInputs) -> Object:
    """The Job the manager submits: the builder's; for a resolution the builder refuses
    (another repository than the spec's), the Job a stolen identity submits anyway, the
    builder's Job for the spec's repository with the forged reference written in."""
    try:
        return build_job(inputs)
    except BuildRefused:
        resolved, source = inputs.resolved, inputs.source
        if resolved is None or source is None:
            raise
        honest = f"{repository_of(source.oci_ref)}@{resolved.digest}"
        job = build_job(inputs._replace(resolved=resolved.model_copy(update={"reference": honest})))
        forged: Object = json.loads(json.dumps(job).replace(honest, resolved.reference))
        return forged


def _unresolved() -> UnresolvedMigrationRunStatus:
    return UnresolvedMigrationRunStatus(
        outcome="Unknown",
        operation_id="an-earlier-apply",
        job_name="ptah-apply-billing-earlier",
        recorded_at=timestamp(utc_now()),
    )


# -- what status remembers -----------------------------------------------------------------


def dispatch(stage: Stage, staged: Staged) -> Staged:
    """The manager creates the claim's Job and records its UID: the state to attack."""
    created = create_job(stage, staged.job, dry_run=False)
    admitted(created)
    owner = staged.owner
    recorded = owner.status.active_operation.model_copy(
        update={"job_uid": created.json()["metadata"]["uid"]}
    )
    staged.owner = write_status(
        stage, owner, owner.status.model_copy(update={"active_operation": recorded})
    )
    return staged


def status_patch(
    stage: Stage,
    staged: Staged,
    change: Callable[[dict[str, Any]], Any],
    *,
    dry_run: bool = True,
) -> httpx.Response:
    """The status, as ``change`` leaves it, written whole at the version read (the JSON
    patch ``kube.client`` writes status with); a dry run unless told."""
    current = stage.operator.manager.get(staged.resource, stage.namespace, staged.name)
    status = json.loads(json.dumps(current["status"]))
    change(status)
    ops = [
        {
            "op": "replace",
            "path": "/metadata/resourceVersion",
            "value": current["metadata"]["resourceVersion"],
        },
        {"op": "add", "path": "/status", "value": status},
    ]
    path = path_of(staged.resource, stage.namespace, staged.name, "status")
    return as_manager(
        stage, "PATCH", path, ops, dry_run=dry_run, content_type="application/json-patch+json"
    )
