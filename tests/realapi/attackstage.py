"""The stage of the attack table (``test_attacks.py``): a namespace judged by the webhook
and the chart's policies, requests made with the manager's own token, and an Apply
of either family staged exactly as the controller stages it.

A stolen manager identity holds exactly the manager's RBAC (the chart's ClusterRole,
which ``lab.run.grant_manager`` applies) and passes every check that asks only who is
writing. Each staging step below is one of the manager's real writes, itself admitted
by the webhook, so a control row proves the whole path; one keyword changes one thing
a stolen identity would forge.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import pytest
import yaml

from controller.approvals import consumed_status
from controller.operationidentity import input_fingerprint, migration_operation, schema_operation
from jobclaim import (
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
    JOBS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Object,
    Resource,
)
from jobclaim.times import timestamp, utc_now
from lab import run as localrun
from tests.chart.support import VALUES, Helm, HelmUnavailable, build_helm
from tests.jobclaim.world import SEQUENCE, snapshot_for
from tests.realapi.operator import Operator, Webhooked, registered_webhook

HARNESS_KUBE_VERSION: Final = "1.37.2"
SAFE: Final = (b"CREATE TABLE orders_v2 (id bigint PRIMARY KEY);\n",)
EVIL: Final = "registry.evil.example/ptah@sha256:" + "6" * 64
POLICIES: Final = (
    "ptah-operator-status-writer",
    "ptah-operator-unresolved-run-annotation",
    "ptah-operator-manager-metadata-only",
)
# What Resolve and Verify would have recorded for the example migration's artifact.
MIGRATIONS_DIGEST: Final = "sha256:" + "7" * 64
MIGRATIONS_REPOSITORY: Final = "registry.example.com/shop/billing-migrations"


@dataclass
class Stage:
    """One test namespace judged by the webhook and the chart's policies."""

    operator: Operator
    staged: Webhooked
    hook: localrun.LocalWebhook
    configurations: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return self.staged.namespace


@pytest.fixture(scope="module", name="helm")
def helm_fixture(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = build_helm()
    except HelmUnavailable as error:
        pytest.fail(f"the attack table needs helm to render the chart's policies: {error}")
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


def _policies(helm: Helm, label: dict[str, str]) -> list[Object]:
    """The chart's admission policies and bindings, each binding narrowed to the test's
    namespace so the session's other tests on this server never meet them."""
    objects = helm.render(
        [VALUES / "required.yaml"], extra=["--kube-version", HARNESS_KUBE_VERSION]
    )
    chosen = [
        o
        for o in objects
        if o["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ]
    assert {o["metadata"]["name"] for o in chosen} == set(POLICIES), "the chart's policies moved"
    suffix = next(iter(label.values()))
    for obj in chosen:
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{suffix}"
        if obj["kind"] == "ValidatingAdmissionPolicyBinding":
            obj["spec"]["policyName"] = f"{obj['spec']['policyName']}-{suffix}"
            obj["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": label}}
    return chosen


VAP: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    namespaced=False,
)
VAPB: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)


@pytest.fixture(scope="module", name="stage")
def stage_fixture(
    operator: Operator,
    helm: Helm,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stage]:
    certificates = tmp_path_factory.mktemp("attack-certs")
    with registered_webhook(operator, certificates) as (staged, hook):
        policies = _policies(helm, staged.label)
        for obj in policies:
            resource = VAP if obj["kind"] == "ValidatingAdmissionPolicy" else VAPB
            localrun.apply(operator.plane, resource, obj, identity="admin")
        found = Stage(operator, staged, hook)
        for prefix_kind in (VALIDATING_WEBHOOK_CONFIGURATIONS, MUTATING_WEBHOOK_CONFIGURATIONS):
            for item in operator.admin.list(prefix_kind, None):
                if item["metadata"]["name"].startswith(staged.prefix):
                    found.configurations.append(item["metadata"]["name"])
        _await_policies(found)
        try:
            yield found
        finally:
            for obj in reversed(policies):
                resource = VAP if obj["kind"] == "ValidatingAdmissionPolicy" else VAPB
                operator.admin.delete(resource, None, obj["metadata"]["name"])


def _await_policies(stage: Stage) -> None:
    """A new policy is in force once the API server has compiled it; nothing announces
    that, so a probe write it must refuse is retried under the harness's deadline."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    stage.operator.admin.create(PTAHSCHEMAS, stage.namespace, schema_object(stage, name))

    def refusing() -> bool:
        response = as_manager(
            stage,
            "PATCH",
            path_of(PTAHSCHEMAS, stage.namespace, name),
            {"spec": {"policy": {"apply": "Always"}}},
        )
        return response.status_code == 403 and "ValidatingAdmissionPolicy" in response.text

    localrun.until(refusing, "the chart's admission policies to be in force")


# -- talking to the API server as the manager -------------------------------------------


def suffix_of(stage: Stage) -> str:
    return next(iter(stage.staged.label.values()))


def path_of(resource: Resource, namespace: str | None, name: str = "", sub: str = "") -> str:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    where = f"/namespaces/{namespace}" if namespace else ""
    tail = f"/{name}" if name else ""
    return f"{prefix}{where}/{resource.plural}{tail}" + (f"/{sub}" if sub else "")


def as_manager(
    stage: Stage,
    method: str,
    path: str,
    body: Any,
    *,
    dry_run: bool = True,
    content_type: str = "application/merge-patch+json",
) -> httpx.Response:
    """One request with the manager's own bearer token; a dry run unless told."""
    plane = stage.operator.plane
    if method == "POST":
        content_type = "application/json"
    with httpx.Client(verify=plane.ssl_context(), timeout=60.0) as http:
        return http.request(
            method,
            f"{plane.server_url}{path}",
            params={"dryRun": "All"} if dry_run else {},
            content=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {plane.token('manager')}",
                "Content-Type": content_type,
            },
        )


def refused_with(response: httpx.Response, sentence: str) -> None:
    assert response.status_code in (403, 422), (response.status_code, response.text[:600])
    message = response.json().get("message", "")
    assert sentence in message, (sentence, message)


def admitted(response: httpx.Response) -> None:
    assert response.status_code < 300, (response.status_code, response.text[:800])


def template(refusal: Any, **parts: str) -> str:
    """The sentence up to its first placeholder: what a refusal must contain."""
    return str(refusal.template).split("{", 1)[0] if not parts else refusal.sentence(**parts)


def create_job(stage: Stage, job: Object, *, dry_run: bool = True) -> httpx.Response:
    body = {"apiVersion": "batch/v1", "kind": "Job", **job}
    return as_manager(stage, "POST", path_of(JOBS, stage.namespace), body, dry_run=dry_run)


# -- the manager's writes, as the controller makes them ---------------------------------


def schema_object(stage: Stage, name: str) -> Object:
    return localrun.example_schema(stage.namespace, name)


def migration_object(stage: Stage, name: str) -> Object:
    raw = yaml.safe_load((localrun.EXAMPLES / "ptahmigration.yaml").read_text())
    raw["metadata"] = {"name": name, "namespace": stage.namespace}
    return dict(raw)


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
    """The manager spends the approval on the claim (``controller.approvals``)."""
    manager = stage.operator.manager
    current = manager.get(resource, stage.namespace, approval)
    manager.patch_status(
        resource,
        stage.namespace,
        approval,
        consumed_status(current, now=timestamp(utc_now()), claim=claim),
        resource_version=current["metadata"]["resourceVersion"],
    )


def new_binding(executor: str | None = None) -> ExecutionBindingStatus:
    base = localrun.LOCAL_BINDING
    return ExecutionBindingStatus(
        epoch="v1-" + uuid.uuid4().hex,
        controller_state_version=base.controller_state_version,
        ptah_version=base.ptah_version,
        executor_image=executor or base.executor_image,
        runner_protocol_version=base.runner_protocol_version,
    )


def _record(runner: str | None) -> ManagerRecord:
    return ManagerRecord(
        controller_image=localrun.LOCAL_MANAGER.controller_image,
        controller_revision=localrun.LOCAL_MANAGER.controller_revision,
        runner_image=runner or localrun.LOCAL_MANAGER.runner_image,
    )


def _other_key(target: DatabaseTargetSpec, key: str | None) -> DatabaseTargetSpec:
    if key is None:
        return target
    wire = target.to_wire()
    wire["urlFrom"]["key"] = key
    return DatabaseTargetSpec.model_validate(wire)


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


def _mark(stage: Stage, owner: Any) -> Any:
    """The dispatch mark, the last write before the one create."""
    assert owner.status is not None and owner.status.active_operation is not None
    marked = owner.status.active_operation.model_copy(update={"dispatch_started": True})
    return write_status(stage, owner, owner.status.model_copy(update={"active_operation": marked}))


# -- a schema Apply ------------------------------------------------------------------------


def stage_apply(
    stage: Stage,
    *,
    statements: tuple[bytes, ...] = SAFE,
    destructive: bool = False,
    executor: str | None = None,
    runner: str | None = None,
    target_key: str | None = None,
    attempt: int = 1,
    approve: bool = True,
    approve_another_plan: bool = False,
    spend_by: str | None = None,
    pending: bool = False,
) -> Staged:
    """A PtahSchema whose Apply claim is marked, with every write made as the controller
    makes it; one change per keyword is what a stolen manager identity would forge."""
    admin, manager, ns = stage.operator.admin, stage.operator.manager, stage.namespace
    name = f"orders-{uuid.uuid4().hex[:8]}"
    stored = admin.create(PTAHSCHEMAS, ns, schema_object(stage, name))
    binding = new_binding(executor)
    manager.patch_status(
        PTAHSCHEMAS,
        ns,
        name,
        {"executionBinding": binding.to_wire()},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    approval: Object | None = None
    if approve_another_plan:
        # A person approved an earlier plan of this schema; the manager holds that
        # approval for the plan it publishes next.
        other = (b"CREATE TABLE orders_v3 (id bigint);\n",)
        localrun.seed_plan(admin, manager, ns, name, statements=other, await_reading=False)
        approval = admin.create(
            PTAHSCHEMAAPPROVALS, ns, localrun.approval_for(admin.get(PTAHSCHEMAS, ns, name))
        )
    plan = localrun.seed_plan(
        admin,
        manager,
        ns,
        name,
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
    claim = schema_operation(
        schema,
        operation="Apply",
        fingerprint=input_fingerprint({"apply": name}),
        epoch=binding.epoch,
        nonce=uuid.uuid4().bytes,
        started_at=timestamp(utc_now()),
        attempt=attempt,
    )
    claim = claim.model_copy(update={"target": _other_key(schema.spec.target, target_key)})
    record = _record(runner)
    status = schema.status
    assert status is not None
    claimed = status.model_copy(
        update={
            "active_operation": claim,
            "plan": plan.model_copy(update={"approval": reserved}),
            "phase": "Applying",
        }
    )
    if pending:
        claimed = claimed.model_copy(update={"pending_observation": _pending()})
    draft = build_job(
        schema_job_inputs(
            schema.model_copy(update={"status": claimed}), binding=binding, manager=record
        )
    )
    claim = claim.model_copy(update={"admission_snapshot": snapshot_for(draft["spec"]["template"])})
    schema = write_status(stage, schema, claimed.model_copy(update={"active_operation": claim}))
    _project(stage, schema)
    if reserved is not None:
        spend(stage, PTAHSCHEMAAPPROVALS, reserved.name, spend_by or claim.id)
    schema = _mark(stage, schema)
    operation = schema.status.active_operation
    job = build_job(
        schema_job_inputs(
            schema,
            binding=binding,
            manager=record,
            snapshot_digest=operation.admission_snapshot.digest,
        )
    )
    return Staged(schema, job, claim.id, reserved.name if reserved else None)


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
    """The manager records what Resolve, Verify and History would have found: the
    artifact pinned by digest, verified, and two migrations pending against it."""
    now = timestamp(utc_now())
    status = migration.status.to_wire() if migration.status else {}
    status.update(
        artifact={"reference": f"{MIGRATIONS_REPOSITORY}@{artifact}", "digest": artifact},
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
    executor: str | None = None,
    runner: str | None = None,
    target_key: str | None = None,
    artifact: OCIArtifactAccessBinding | None = None,
    attempt: int = 1,
    approve: bool = True,
    approve_another_plan: bool = False,
    spend_by: str | None = None,
    unresolved: bool = False,
    always: bool = False,
) -> Staged:
    """A PtahMigration whose Apply claim is marked, every write made as the controller
    makes it (``controller.migration_dispatch``); one change per keyword is what a
    stolen manager identity would forge."""
    admin, ns = stage.operator.admin, stage.namespace
    name = f"billing-{uuid.uuid4().hex[:8]}"
    raw = migration_object(stage, name)
    if always:
        raw["spec"]["policy"]["apply"] = "Always"
    created = PtahMigration.model_validate(admin.create(PTAHMIGRATIONS, ns, raw))
    binding = new_binding(executor)
    migration = write_status(stage, created, PtahMigrationStatus(execution_binding=binding))
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
    claim = migration_operation(
        migration,
        operation="Apply",
        fingerprint=input_fingerprint({"apply": name}),
        epoch=binding.epoch,
        nonce=uuid.uuid4().bytes,
        started_at=timestamp(utc_now()),
        attempt=attempt,
    )
    approval_ref = (
        ObjectReference(name=approval["metadata"]["name"], uid=approval["metadata"]["uid"])
        if approval is not None
        else None
    )
    claim = claim.model_copy(
        update={
            "plan_ref": plan_ref,
            "approval_ref": approval_ref,
            "target": _other_key(migration.spec.target, target_key),
            "source": artifact or claim.source,
        }
    )
    record = _record(runner)
    status = migration.status
    assert status is not None
    claimed = status.model_copy(update={"active_operation": claim, "phase": "Applying"})
    if unresolved:
        claimed = claimed.model_copy(update={"unresolved_run": _unresolved()})
    sequence = tuple(entry.version for entry in migrations())

    def job_of(owner: PtahMigration, digest: str | None = None) -> Object:
        return build_job(
            migration_job_inputs(
                owner,
                binding=binding,
                manager=record,
                expected_sequence=sequence,
                snapshot_digest=digest,
            )
        )

    draft = job_of(migration.model_copy(update={"status": claimed}))
    claim = claim.model_copy(update={"admission_snapshot": snapshot_for(draft["spec"]["template"])})
    migration = write_status(
        stage, migration, claimed.model_copy(update={"active_operation": claim})
    )
    if approval_ref is not None:
        spend(stage, PTAHMIGRATIONAPPROVALS, approval_ref.name, spend_by or claim.id)
    migration = _mark(stage, migration)
    assert claim.admission_snapshot is not None
    job = job_of(migration, claim.admission_snapshot.digest)
    return Staged(migration, job, claim.id, approval_ref.name if approval_ref else None)


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
