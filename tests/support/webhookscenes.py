"""Scenes for webhook tests: the objects the API server holds, and one write to judge.

Every scene is built with the product's own functions (claiming, the Job builder, the
snapshot seal, the plan and projection builders) on top of ``tests.support.claimworld``,
so a scene the webhook admits is one the controller would really produce. A table
row copies a scene, changes one thing, and expects one sentence.

Reviews are spelled the way a real API server spells them: ``requestKind`` and
``requestResource`` present, ``oldObject: null`` on a create, ``options``, ``dryRun``
and ``userInfo.uid``/``extra`` present.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from controller.pieces.operationidentity import (
    input_fingerprint,
    migration_operation,
    schema_operation,
)
from jobclaim import (
    CLEANUP_TTL_SECONDS,
    SchemaPlanContent,
    build_job,
    build_migration_plan,
    build_plan_chunk,
    build_projection,
    build_schema_plan,
    migration_job_inputs,
    schema_job_inputs,
    sha256_digest,
)
from jobclaim.api import (
    ObjectReference,
    PtahMigration,
    PtahMigrationStatus,
    PtahSchema,
    PtahSchemaStatus,
)
from jobclaim.api.common import (
    ApproverRecord,
    ConsumedApprovalStatus,
    OCIArtifactAccessBinding,
)
from jobclaim.api.meta import Condition, ObjectMeta, OwnerReference
from jobclaim.api.migration import (
    MigrationHistoryStatus,
    MigrationSequenceEntry,
    PtahMigrationApproval,
    PtahMigrationApprovalSpec,
    PtahMigrationPlan,
    PtahMigrationPlanSpec,
)
from jobclaim.api.schema import (
    ApprovalStatus,
    BindingRetirementStatus,
    PendingObservationStatus,
    PlanChunk,
    PtahSchemaApproval,
    PtahSchemaApprovalSpec,
    PtahSchemaPlan,
    PtahSchemaPlanSpec,
    RetiredJobStatus,
)
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    Resource,
)
from runner import (
    RUNNER_PROTOCOL_VERSION,
    PodIdentity,
    RunnerResult,
    encode_result,
    record_for,
)
from tests.support.claimworld import (
    BINDING,
    DEV_URL_FROM,
    EPOCH,
    JOB_UID,
    MANAGER,
    NOW,
    OTHER_EPOCH,
    RESOLVED,
    RESOLVED_MIGRATIONS,
    SEQUENCE,
    World,
    example,
    plan_for,
    snapshot_for,
)
from tests.support.podworld import OBSERVED, TARGET, history
from webhook import DEFAULT_MANAGER_USERNAME, Engine, Outcome, Settings, StateReader
from webhook.rules import ImagePins

Obj = dict[str, Any]
MANAGER_USERNAME = DEFAULT_MANAGER_USERNAME
MANAGER_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:ptah-system")
CHUNKS = (b"CREATE TABLE a (id bigint);\n", b"CREATE INDEX a_id ON a (id);\n")
MIGRATION_PLAN = ObjectReference(name="ptah-mplan-0123456789abcdef01234567", uid="mplan-uid")
OWNER_UIDS = {"schema": "schema-uid-1", "migration": "migration-uid-1"}


def owner_world(
    family: str,
    operation: str,
    *,
    execution: Obj | None = None,
    attempt: int = 1,
    name: str | None = None,
    source: Obj | None = None,
    registry_ca_digest: str | None = None,
    dev: Obj | None = None,
) -> World:
    """``tests.support.claimworld``'s schema or migration world, with spec knobs to vary:
    ``source`` is merged into the artifact source, ``registry_ca_digest`` is the CA
    bundle's digest the claim pinned, ``dev`` a schema's spec.dev (default: its own
    Secret key)."""
    raw = example("ptahschema.yaml" if family == "schema" else "ptahmigration.yaml")
    raw["metadata"].update(uid=OWNER_UIDS[family], generation=1, resourceVersion="10")
    if family == "schema":
        raw["spec"]["dev"] = DEV_URL_FROM if dev is None else dev
    if name is not None:
        raw["metadata"]["name"] = name
    if execution is not None:
        raw["spec"]["execution"] = execution
    if source is not None:
        raw["spec"]["desired" if family == "schema" else "artifact"].update(source)
    fingerprint = input_fingerprint({"operation": operation, "generation": 1})
    claim_of = schema_operation if family == "schema" else migration_operation
    model = PtahSchema if family == "schema" else PtahMigration
    resource: Any = model.model_validate(raw)
    # What Resolve recorded, which every later claim snapshots.
    resolved: Any = (
        PtahSchemaStatus(source=RESOLVED)
        if family == "schema"
        else PtahMigrationStatus(artifact=RESOLVED_MIGRATIONS)
    )
    resource = resource.model_copy(update={"status": resolved})
    claim: Any = claim_of(
        resource,
        operation=operation,
        fingerprint=fingerprint,
        epoch=EPOCH,
        nonce=b"\x01" * 16,
        started_at=NOW,
        attempt=attempt,
        execution_not_after="2026-12-02T12:15:00Z",
    )
    claim = claim.model_copy(update={"registry_ca_digest": registry_ca_digest})
    if family == "schema":
        plan = plan_for(OWNER_UIDS[family]) if operation == "Apply" else None
        status: Any = resolved.model_copy(
            update={"execution_binding": BINDING, "plan": plan, "active_operation": claim}
        )
    else:
        if operation == "Apply":
            claim = claim.model_copy(update={"plan_ref": MIGRATION_PLAN})
        status = resolved.model_copy(
            update={"execution_binding": BINDING, "active_operation": claim}
        )
    sequence = SEQUENCE if family == "migration" and operation == "Apply" else ()

    def build(owner: Any, digest: str | None) -> Obj:
        if family == "schema":
            return build_job(
                schema_job_inputs(owner, binding=BINDING, manager=MANAGER, snapshot_digest=digest)
            )
        return build_job(
            migration_job_inputs(
                owner,
                binding=BINDING,
                manager=MANAGER,
                expected_sequence=sequence,
                snapshot_digest=digest,
            )
        )

    resource = resource.model_copy(update={"status": status})
    snapshot = snapshot_for(build(resource, None)["spec"]["template"])
    claim = claim.model_copy(update={"admission_snapshot": snapshot})
    resource = resource.model_copy(
        update={"status": status.model_copy(update={"active_operation": claim})}
    )
    return World(family, operation, resource, build(resource, snapshot.digest))


def with_claim(resource: Any, **changes: Any) -> Any:
    """``resource`` with its active claim changed."""
    status = resource.status
    claim = status.active_operation.model_copy(update=changes)
    return resource.model_copy(
        update={"status": status.model_copy(update={"active_operation": claim})}
    )


def with_status(resource: Any, **changes: Any) -> Any:
    return resource.model_copy(update={"status": resource.status.model_copy(update=changes)})


def stored_object(model: Any, uid: str | None = None) -> Obj:
    """A model as an uncached read returns it: server metadata added."""
    wire: Obj = model.to_wire()
    meta = wire["metadata"]
    meta.setdefault("uid", uid or f"{wire['kind'].lower()}-uid")
    meta.setdefault("resourceVersion", "77")
    meta.setdefault("creationTimestamp", NOW)
    return wire


# -- result records --------------------------------------------------------------------

RUNNER_OPS: Final = {
    "Observe": "observe",
    "Plan": "plan",
    "History": "migration-history",
    "Resolve": "resolve",
    "Verify": "verify",
}
PLAN_TEXT: Final = b"".join(CHUNKS)


def reading_result(claim: Obj, runner_op: str) -> RunnerResult:
    """A successful result of ``claim``'s reading, about its database."""
    wire: Obj = {
        "protocolVersion": RUNNER_PROTOCOL_VERSION,
        "operation": runner_op,
        "operationId": claim["id"],
        "childExitCode": 0,
        "coordinationDigest": claim.get("coordinationDigest"),
        "targetIdentityDigest": claim.get("targetIdentityDigest") or TARGET,
    }
    if runner_op == "plan":
        wire["plan"] = {
            "planOutcome": "Changes",
            "planContentDigest": sha256_digest(PLAN_TEXT),
            "statementCount": 2,
            "stdout": PLAN_TEXT.decode(),
        }
    elif runner_op == "observe":
        wire.update(OBSERVED)
    elif runner_op == "migration-history":
        wire.update(history())
    return RunnerResult.from_wire({k: v for k, v in wire.items() if v is not None})


def pod_record(job: Obj, result: RunnerResult) -> Obj:
    """The PtahResultRecord the Job's Pod created of ``result``, as a read returns it."""
    meta = job["metadata"]
    identity = PodIdentity(
        namespace=meta["namespace"],
        pod_name=f"{meta['name'][:50]}-x7k2q",
        pod_uid=f"pod-of-{meta['uid']}",
        job_name=meta["name"],
        job_uid=meta["uid"],
    )
    wire: Obj = record_for(identity, result, encode_result(result))
    wire["metadata"].update(uid=f"record-of-{meta['uid']}", resourceVersion="78")
    wire["metadata"]["creationTimestamp"] = NOW
    return wire


def admitted(obj: Obj, uid: str, *, generation: bool = True) -> Obj:
    """What the API server adds to a created object before validating admission sees it."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid=uid, creationTimestamp=NOW)
    if generation:
        out["metadata"]["generation"] = 1
    return out


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


@dataclass
class Scene:
    """What the API server holds, and one write to judge."""

    resource: Resource
    operation: str
    obj: Obj | None
    objects: list[Obj]
    old: Obj | None = None
    username: str = MANAGER_USERNAME
    groups: tuple[str, ...] = MANAGER_GROUPS
    subresource: str = ""
    dry_run: bool = False
    uid: str = "3f1c2b7a-0000-4000-8000-000000000001"
    extra: dict[str, Any] = field(default_factory=dict)
    # The webhook's clock, for rules that stamp or check a time (None: the real one).
    now: datetime | None = None
    # The webhook's four-eyes setting (the chart's approvals.requireDistinctApprover).
    require_distinct_approver: bool = False
    # userInfo.extra, when not the manager's Pod-bound token's.
    user_extra: dict[str, list[str]] | None = None

    def copy(self) -> Scene:
        return copy.deepcopy(self)

    def reader(self) -> StateReader:
        return StateReader(self.objects)

    def find(self, kind: str, name: str | None = None) -> Obj:
        for obj in self.objects:
            if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name):
                return obj
        raise KeyError(f"the scene holds no {kind} {name or ''}")

    def review(self) -> Obj:
        target = self.obj if self.obj is not None else self.old
        assert target is not None
        gvk = {"group": self.resource.group, "version": self.resource.version}
        gvk["kind"] = self.resource.kind
        gvr = {"group": self.resource.group, "version": self.resource.version}
        gvr["resource"] = self.resource.plural
        options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}
        request: Obj = {
            "uid": self.uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": dict(gvk),
            "requestResource": dict(gvr),
            "name": _meta(target).get("name", ""),
            "namespace": _meta(target).get("namespace", ""),
            "operation": self.operation,
            "userInfo": {
                "username": self.username,
                "uid": "9a1e0f4c-0000-4000-8000-00000000000a",
                "groups": list(self.groups),
                "extra": self.user_extra
                if self.user_extra is not None
                else {
                    "authentication.kubernetes.io/credential-id": ["JTI=secret-token-id-1"],
                    "authentication.kubernetes.io/pod-name": ["ptah-operator-7d9f-abcde"],
                },
            },
            "object": self.obj,
            "oldObject": self.old,
            "dryRun": self.dry_run,
            "options": {
                "apiVersion": "meta.k8s.io/v1",
                "kind": options_kind.get(self.operation, "DeleteOptions"),
                "fieldManager": "ptah-operator",
            },
        }
        if self.subresource:
            request["subResource"] = self.subresource
            request["requestSubResource"] = self.subresource
        request.update(self.extra)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }
        # A copy: a caller that edits the review must not edit the scene.
        return copy.deepcopy(review)

    def body(self) -> bytes:
        return json.dumps(self.review()).encode()


# -- Job CREATE ------------------------------------------------------------------------


def schema_plan_objects(schema: PtahSchema) -> list[Obj]:
    """The stored PtahSchemaPlan status.plan records, and its two projections."""
    assert schema.status and schema.status.plan
    record = schema.status.plan
    namespace = schema.metadata.namespace or ""
    chunks = [
        PlanChunk(name=f"{record.name}-{i:03d}", index=i, digest=sha256_digest(d), size=len(d))
        for i, d in enumerate(CHUNKS)
    ]
    plan = PtahSchemaPlan(
        metadata=ObjectMeta(
            name=record.name,
            namespace=namespace,
            uid=record.uid,
            labels={"operator.ptah.run/schema": schema.metadata.name or ""},
            owner_references=[
                OwnerReference(
                    api_version="operator.ptah.run/v1alpha1",
                    kind="PtahSchema",
                    name=schema.metadata.name or "",
                    uid=schema.metadata.uid or "",
                    controller=True,
                    block_owner_deletion=True,
                )
            ],
        ),
        spec=PtahSchemaPlanSpec(
            schema_ref=ObjectReference(
                name=schema.metadata.name or "", uid=schema.metadata.uid or ""
            ),
            fingerprint=record.fingerprint,
            content_digest=record.content_digest,
            coordination_digest=sha256_digest(b"coordination"),
            execution_binding_id=EPOCH,
            controller_state_version=BINDING.controller_state_version,
            ptah_version=BINDING.ptah_version,
            executor_image=BINDING.executor_image,
            runner_protocol_version=BINDING.runner_protocol_version,
            statement_count=3,
            chunks=chunks,
        ),
    )
    stored = stored_object(plan, record.uid)
    projections = [
        admitted(
            build_projection(
                namespace=namespace,
                schema_name=schema.metadata.name or "",
                plan_name=record.name,
                plan_uid=record.uid,
                chunk=chunk,
                data=data,
            ),
            f"cm-uid-{chunk.index}",
            generation=False,
        )
        for chunk, data in zip(chunks, CHUNKS, strict=True)
    ]
    return [stored, *projections]


def migration_plan_object(migration: PtahMigration) -> Obj:
    plan = PtahMigrationPlan(
        metadata=ObjectMeta(name=MIGRATION_PLAN.name, namespace=migration.metadata.namespace),
        spec=PtahMigrationPlanSpec(
            migration_ref=ObjectReference(
                name=migration.metadata.name or "", uid=migration.metadata.uid or ""
            ),
            fingerprint=sha256_digest(b"mplan"),
            migrations=[
                MigrationSequenceEntry(version=v, digest=sha256_digest(v.encode()))
                for v in SEQUENCE
            ],
            history_fingerprint=sha256_digest(b"history"),
            # The artifact the claim pulls: the plan binds it.
            artifact_digest=RESOLVED_MIGRATIONS.digest,
            coordination_digest=sha256_digest(b"coordination"),
            execution_binding_id=EPOCH,
            controller_state_version=BINDING.controller_state_version,
            ptah_version=BINDING.ptah_version,
            executor_image=BINDING.executor_image,
            runner_protocol_version=BINDING.runner_protocol_version,
        ),
    )
    return stored_object(plan, MIGRATION_PLAN.uid)


APPROVAL_UID: Final = "approval-uid-1"
APPROVER: Final = ApproverRecord(username="jane@example.com", groups=["approvers"])


def spent_approval(owner: Any, plan: Obj) -> Obj:
    """The stamped approval of ``plan`` a person made, spent by ``owner``'s claim."""
    claim = owner.status.active_operation
    meta = ObjectMeta(name="approve-1", namespace=owner.metadata.namespace)
    ref = ObjectReference(name=owner.metadata.name or "", uid=owner.metadata.uid or "")
    plan_ref = ObjectReference(name=plan["metadata"]["name"], uid=plan["metadata"]["uid"])
    stamp = {
        "approver": APPROVER,
        "approved_at": NOW,
        "mutation_request_uid": str(uuid.UUID(int=7)),
    }
    consumed = Condition(
        type="Consumed",
        status="True",
        reason="DispatchCommitted",
        message="spent",
        last_transition_time=NOW,
    )
    status = ApprovalStatus(conditions=[consumed], consumed_by=claim.id)
    fingerprint = plan["spec"]["fingerprint"]
    approval: Any
    if owner.kind == "PtahSchema":
        approval = PtahSchemaApproval(
            metadata=meta,
            spec=PtahSchemaApprovalSpec(
                schema_ref=ref, plan_ref=plan_ref, plan_fingerprint=fingerprint, **stamp
            ),
            status=status,
        )
    else:
        approval = PtahMigrationApproval(
            metadata=meta,
            spec=PtahMigrationApprovalSpec(
                migration_ref=ref, plan_ref=plan_ref, plan_fingerprint=fingerprint, **stamp
            ),
            status=status,
        )
    return stored_object(approval, APPROVAL_UID)


def holding_approval(owner: Any) -> Any:
    """``owner`` whose Apply claim holds the approval ``spent_approval`` makes."""
    if owner.kind == "PtahSchema":
        reserved = ConsumedApprovalStatus(
            name="approve-1", uid=APPROVAL_UID, approver=APPROVER, approved_at=NOW
        )
        plan = owner.status.plan.model_copy(update={"approval": reserved})
        return with_status(owner, plan=plan)
    return with_claim(owner, approval_ref=ObjectReference(name="approve-1", uid=APPROVAL_UID))


def job_create(family: str = "schema", operation: str = "Apply", **knobs: Any) -> Scene:
    """The one create of the Job an active claim reserved, dispatch marked if mutating;
    an Apply's claim holds a stamped approval of its plan, spent by this claim."""
    world = owner_world(family, operation, **knobs)
    owner = with_claim(world.resource, dispatch_started=operation == "Apply")
    if operation == "Apply":
        owner = holding_approval(owner)
    objects = [stored_object(owner, owner.metadata.uid)]
    if family == "schema" and operation == "Apply":
        objects += schema_plan_objects(owner)
        objects.append(spent_approval(owner, objects[1]))
    if family == "migration" and operation == "Apply":
        objects.append(migration_plan_object(owner))
        objects.append(spent_approval(owner, objects[1]))
    return Scene(JOBS, "CREATE", world.submitted, objects)


def world_of(scene: Scene) -> Any:
    """The owner in a scene, decoded."""
    for kind, model in (("PtahSchema", PtahSchema), ("PtahMigration", PtahMigration)):
        for obj in scene.objects:
            if obj["kind"] == kind:
                return model.model_validate(obj)
    raise KeyError("the scene holds no owner")


def put_owner(scene: Scene, owner: Any) -> None:
    scene.objects = [o for o in scene.objects if o["kind"] != owner.kind]
    scene.objects.insert(0, stored_object(owner, owner.metadata.uid))


def change_owner(scene: Scene, change: Callable[[Any], Any]) -> None:
    put_owner(scene, change(world_of(scene)))


# -- Job UPDATE (cleanup TTL) ------------------------------------------------------------


def terminal(job: Obj, condition: str = "Complete") -> Obj:
    out = copy.deepcopy(job)
    out["status"] = {
        "conditions": [{"type": condition, "status": "True", "lastTransitionTime": NOW}],
        "startTime": NOW,
        "completionTime": NOW,
    }
    return out


def with_ttl(job: Obj) -> Obj:
    out = copy.deepcopy(job)
    out["spec"]["ttlSecondsAfterFinished"] = CLEANUP_TTL_SECONDS
    out["metadata"]["generation"] = out["metadata"].get("generation", 1) + 1
    out["metadata"]["managedFields"] = [
        {"manager": "ptah-operator", "operation": "Update", "apiVersion": "batch/v1"},
        {"manager": "ptah-operator", "operation": "Update", "apiVersion": "batch/v1", "time": NOW},
    ]
    return out


def job_cleanup(family: str = "schema", operation: str = "Plan", *, running: bool = False) -> Scene:
    """The cleanup TTL on the finished Job the active claim names by name and UID."""
    world = owner_world(family, operation)
    owner = with_claim(world.resource, job_uid=JOB_UID, dispatch_started=operation == "Apply")
    old = world.stored if running else terminal(world.stored)
    objects = [stored_object(owner, owner.metadata.uid)]
    return Scene(JOBS, "UPDATE", with_ttl(old), objects, old=old)


def pending_apply_cleanup() -> Scene:
    """The retired Apply's Job a pending observation keeps and a retirement names."""
    world = owner_world("schema", "Apply")
    schema: Any = world.resource
    claim = schema.status.active_operation
    pending = PendingObservationStatus(
        outcome="OutcomeUnknown",
        apply_operation_id=claim.id,
        apply_job_name=claim.job_name,
        apply_job_uid=JOB_UID,
        admission_snapshot=claim.admission_snapshot,
        plan=schema.status.plan,
        coordination_digest=sha256_digest(b"coordination"),
        lease_duration_seconds=180,
        lease_epoch=EPOCH,
    )
    retirement = BindingRetirementStatus(
        retired_epoch=EPOCH,
        job=RetiredJobStatus(operation="Apply", name=claim.job_name, uid=JOB_UID),
    )
    owner = with_status(
        schema,
        active_operation=None,
        plan=None,
        pending_observation=pending,
        pending_binding_retirement=retirement,
        execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH}),
    )
    old = terminal(world.stored, "Failed")
    return Scene(JOBS, "UPDATE", with_ttl(old), [stored_object(owner, owner.metadata.uid)], old=old)


def retired_read_only_cleanup() -> Scene:
    """A read-only claim of a retired epoch whose Job the binding retirement names."""
    scene = job_cleanup("schema", "Plan")
    schema: Any = world_of(scene)
    claim = schema.status.active_operation
    retirement = BindingRetirementStatus(
        retired_epoch=EPOCH,
        job=RetiredJobStatus(operation="Plan", name=claim.job_name, uid=JOB_UID),
    )
    put_owner(
        scene,
        with_status(
            schema,
            pending_binding_retirement=retirement,
            execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH}),
        ),
    )
    return scene


# -- ConfigMap CREATE (projection) -------------------------------------------------------


def projection_create(index: int = 0) -> Scene:
    """A projection staged for the Apply status names, before its dispatch mark."""
    world = owner_world("schema", "Apply")
    schema = world.resource
    assert isinstance(schema, PtahSchema)
    plan, *projections = schema_plan_objects(schema)
    candidate = copy.deepcopy(projections[index])
    return Scene(
        CONFIGMAPS,
        "CREATE",
        candidate,
        [stored_object(schema, schema.metadata.uid), plan],
    )


# -- plan CREATE ---------------------------------------------------------------------------

PLAN_CONTENT = SchemaPlanContent(
    content_digest=sha256_digest(b"".join(CHUNKS)),
    statement_count=2,
    destructive=False,
    privilege_changes=(),
    chunks=tuple((sha256_digest(d), len(d)) for d in CHUNKS),
)


def schema_plan_create() -> Scene:
    """The plan the harvested Plan Job of the active Plan claim publishes."""
    world = owner_world("schema", "Plan")
    schema = with_claim(world.resource, job_uid=JOB_UID)
    job = terminal(world.stored)
    job["spec"]["ttlSecondsAfterFinished"] = CLEANUP_TTL_SECONDS
    plan = build_schema_plan(schema, binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT)
    owner = stored_object(schema, schema.metadata.uid)
    record = pod_record(job, reading_result(owner["status"]["activeOperation"], "plan"))
    objects = [owner, job, record]
    return Scene(PTAHSCHEMAPLANS, "CREATE", admitted(plan, "new-plan-uid"), objects)


def plan_chunk_create(index: int = 0) -> Scene:
    """A chunk of the plan the active Plan claim is publishing."""
    scene = schema_plan_create()
    assert scene.obj is not None
    plan_wire = stored_object(PtahSchemaPlan.model_validate(scene.obj), "published-plan-uid")
    plan = PtahSchemaPlan.model_validate(plan_wire)
    chunk = build_plan_chunk(plan, plan.spec.chunks[index], CHUNKS[index])
    return Scene(
        PTAHSCHEMAPLANCHUNKS,
        "CREATE",
        admitted(chunk, f"chunk-uid-{index}"),
        [scene.objects[0], plan_wire],
    )


MIGRATION_SEQUENCE = tuple(
    MigrationSequenceEntry(version=v, digest=sha256_digest(v.encode())) for v in SEQUENCE
)


def planned_migration() -> PtahMigration:
    world = owner_world("migration", "History")
    migration: Any = world.resource
    return with_status(
        migration,
        active_operation=None,
        history=MigrationHistoryStatus(
            fingerprint=sha256_digest(b"history"), pending_count=len(MIGRATION_SEQUENCE)
        ),
        artifact=OCIArtifactAccessBinding(
            reference="registry.example.com/shop/billing-migrations:2.0.1",
            digest=sha256_digest(b"artifact"),
        ),
    )


def migration_plan_create() -> Scene:
    migration = planned_migration()
    plan = build_migration_plan(migration, migrations=MIGRATION_SEQUENCE, created_at=NOW)
    return Scene(
        PTAHMIGRATIONPLANS,
        "CREATE",
        admitted(plan, "new-mplan-uid"),
        [stored_object(migration, migration.metadata.uid)],
    )


# -- manager state -------------------------------------------------------------------------


def status_write(username: str = MANAGER_USERNAME, groups: tuple[str, ...] = ()) -> Scene:
    """An UPDATE of a PtahSchema's status subresource."""
    world = owner_world("schema", "Plan")
    old = stored_object(world.resource, OWNER_UIDS["schema"])
    new = copy.deepcopy(old)
    new["status"]["phase"] = "Planning"
    return Scene(
        PTAHSCHEMAS,
        "UPDATE",
        new,
        [],
        old=old,
        username=username,
        groups=groups,
        subresource="status",
    )


def annotation_write(
    value: str | None, username: str = MANAGER_USERNAME, groups: tuple[str, ...] = ()
) -> Scene:
    """An UPDATE of a PtahMigration that sets (or, with None, removes) unresolved-run."""
    world = owner_world("migration", "History")
    old = stored_object(world.resource, OWNER_UIDS["migration"])
    old["metadata"]["annotations"] = {"operator.ptah.run/unresolved-run": "run-1"}
    new = copy.deepcopy(old)
    if value is None:
        del new["metadata"]["annotations"]
    else:
        new["metadata"]["annotations"]["operator.ptah.run/unresolved-run"] = value
    return Scene(PTAHMIGRATIONS, "UPDATE", new, [], old=old, username=username, groups=groups)


# -- judging -------------------------------------------------------------------------------

# The images the webhook's configuration pins: the ones the world's Jobs are built with.
PINS = ImagePins(
    executor_image=BINDING.executor_image,
    runner_image=MANAGER.runner_image,
    manager_image=MANAGER.controller_image,
    ptah_version=BINDING.ptah_version,
    scratch_images=BINDING.scratch_images,
)
SETTINGS = Settings(pins=PINS)


def decide(scene: Scene, endpoint: str = "controller-write", reader: Any = None) -> Outcome:
    """What the webhook answers ``scene``'s review, reading from ``reader`` (or the scene)."""
    now = scene.now
    settings = SETTINGS if now is None else Settings(clock=lambda: now, pins=PINS)
    if scene.require_distinct_approver:
        settings = dataclasses.replace(settings, require_distinct_approver=True)
    engine = Engine(reader if reader is not None else scene.reader(), settings)
    try:
        return engine.decide(endpoint, scene.body())  # type: ignore[arg-type]
    finally:
        engine.close()
