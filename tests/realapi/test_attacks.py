"""The attack table of issue 21, on the real API server, as the manager's own identity.

A stolen manager identity holds exactly the manager's RBAC (the chart's ClusterRole,
which ``lab.run.grant_manager`` applies) and passes every check that asks only who
is writing. Each row below is one thing it can try with that: forge a claim in
status and create a Job for it, rewrite or drop what status remembers, change a
resource's spec, switch off a webhook. Every attack is refused with its sentence,
by the webhook (registered by url and caBundle, as ``make run`` registers it), by
the chart's ValidatingAdmissionPolicies (rendered by helm and bound to this test's
namespace) or by RBAC; the control rows are the writes the real manager makes, and
are admitted. Attacks on a Job are dry runs (``dryRun=All`` still calls validating
webhooks), so no row leaves a Job behind for another row to trip over.

The Apply is staged the way the controller stages it: the binding, the plan (the
admin publishes it, as ``make run``'s stand-in does), a person's approval stamped by
admission, the claim, the projections, the approval spent, the mark; each of those
writes is itself admitted, so the control row proves the whole path.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import pytest

from controller.approvals import consumed_status
from controller.operationidentity import input_fingerprint, schema_operation
from jobclaim import build_job, build_projection, lease_holder, lease_name
from jobclaim.api import (
    DatabaseTargetSpec,
    ExecutionBindingStatus,
    ManagerRecord,
    PtahSchema,
    PtahSchemaPlan,
)
from jobclaim.api.common import ConsumedApprovalStatus
from jobclaim.api.schema import PendingObservationStatus
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Object,
    Resource,
)
from jobclaim.builder import schema_job_inputs
from jobclaim.naming import LEASE_EPOCH_ANNOTATION
from jobclaim.times import timestamp, utc_now
from lab import run as localrun
from tests.chart.support import VALUES, Helm, HelmUnavailable, build_helm
from tests.jobclaim.world import snapshot_for
from tests.realapi.operator import (  # noqa: F401
    Operator,
    Webhooked,
    operator,
    registered_webhook,
)
from webhook import jobauthority as authority
from webhook import transitions

pytestmark = pytest.mark.controlplane

HARNESS_KUBE_VERSION: Final = "1.37.2"
SAFE: Final = (b"CREATE TABLE orders_v2 (id bigint PRIMARY KEY);\n",)
DROP: Final = (b"CREATE TABLE orders_v2 (id bigint);\n", b"DROP TABLE orders;\n")
GRANT: Final = (b"GRANT ALL ON ALL TABLES IN SCHEMA public TO mallory;\n",)
EVIL: Final = "registry.evil.example/ptah@sha256:" + "6" * 64
POLICIES: Final = (
    "ptah-operator-status-writer",
    "ptah-operator-unresolved-run-annotation",
    "ptah-operator-manager-metadata-only",
)


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


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
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


@pytest.fixture(scope="module")
def stage(
    operator: Operator,  # noqa: F811
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
    stage.operator.admin.create(PTAHSCHEMAS, stage.namespace, _schema_object(stage, name))

    def refusing() -> bool:
        response = as_manager(
            stage,
            "PATCH",
            _path(PTAHSCHEMAS, stage.namespace, name),
            {"spec": {"policy": {"apply": "Always"}}},
        )
        return response.status_code == 403 and "ValidatingAdmissionPolicy" in response.text

    localrun.until(refusing, "the chart's admission policies to be in force")


# -- talking to the API server as the manager -------------------------------------------


def _suffix(stage: Stage) -> str:
    return next(iter(stage.staged.label.values()))


def _path(resource: Resource, namespace: str | None, name: str = "", sub: str = "") -> str:
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


# -- staging an Apply exactly as the controller stages it --------------------------------


def _schema_object(stage: Stage, name: str) -> Object:
    return localrun.example_schema(stage.namespace, name)


@dataclass
class Staged:
    schema: PtahSchema
    job: Object
    claim_id: str
    approval: str | None


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
    spend_by: str | None = None,
    pending: bool = False,
) -> Staged:
    """A PtahSchema whose Apply claim is marked, with every write made as the controller
    makes it; one change per keyword is what a stolen manager identity would forge."""
    admin, manager, ns = stage.operator.admin, stage.operator.manager, stage.namespace
    name = f"orders-{uuid.uuid4().hex[:8]}"
    stored = admin.create(PTAHSCHEMAS, ns, _schema_object(stage, name))
    base = localrun.LOCAL_BINDING
    binding = ExecutionBindingStatus(
        epoch="v1-" + uuid.uuid4().hex,
        controller_state_version=base.controller_state_version,
        ptah_version=base.ptah_version,
        executor_image=executor or base.executor_image,
        runner_protocol_version=base.runner_protocol_version,
    )
    manager.patch_status(
        PTAHSCHEMAS,
        ns,
        name,
        {"executionBinding": binding.to_wire()},
        resource_version=stored["metadata"]["resourceVersion"],
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
    approval_name: str | None = None
    reserved = None
    if approve:
        created = admin.create(PTAHSCHEMAAPPROVALS, ns, localrun.approval_for(schema.to_wire()))
        approval_name = created["metadata"]["name"]
        spec = created["spec"]
        reserved = ConsumedApprovalStatus(
            name=approval_name,
            uid=created["metadata"]["uid"],
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
    if target_key is not None:
        target = schema.spec.target.to_wire()
        target["urlFrom"]["key"] = target_key
        claim = claim.model_copy(update={"target": DatabaseTargetSpec.model_validate(target)})
    record = ManagerRecord(
        controller_image=localrun.LOCAL_MANAGER.controller_image,
        controller_revision=localrun.LOCAL_MANAGER.controller_revision,
        runner_image=runner or localrun.LOCAL_MANAGER.runner_image,
    )
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
        claimed = claimed.model_copy(update={"pending_observation": _pending(schema)})
    draft = build_job(
        schema_job_inputs(
            schema.model_copy(update={"status": claimed}), binding=binding, manager=record
        )
    )
    claim = claim.model_copy(update={"admission_snapshot": snapshot_for(draft["spec"]["template"])})
    schema = _write_status(stage, name, claimed.model_copy(update={"active_operation": claim}))
    _project(stage, schema)
    if approval_name is not None:
        _spend(stage, approval_name, spend_by or claim.id)
    assert schema.status is not None and schema.status.active_operation is not None
    marked = schema.status.active_operation.model_copy(update={"dispatch_started": True})
    schema = _write_status(
        stage, name, schema.status.model_copy(update={"active_operation": marked})
    )
    job = build_job(
        schema_job_inputs(
            schema,
            binding=binding,
            manager=record,
            snapshot_digest=marked.admission_snapshot.digest if marked.admission_snapshot else None,
        )
    )
    return Staged(schema, job, claim.id, approval_name)


def _pending(schema: PtahSchema) -> PendingObservationStatus:
    return PendingObservationStatus(
        outcome="OutcomeUnknown",
        apply_operation_id="an-earlier-apply",
        apply_job_name="ptah-apply-orders-earlier",
        coordination_digest="sha256:" + "a" * 64,
        lease_duration_seconds=60,
        lease_epoch="v1-" + "e" * 32,
    )


def _write_status(stage: Stage, name: str, status: Any) -> PtahSchema:
    manager = stage.operator.manager
    current = manager.get(PTAHSCHEMAS, stage.namespace, name)
    written = manager.patch_status(
        PTAHSCHEMAS,
        stage.namespace,
        name,
        status.to_wire(),
        resource_version=current["metadata"]["resourceVersion"],
    )
    return PtahSchema.model_validate(written)


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


def _spend(stage: Stage, approval: str, claim: str) -> None:
    """The manager spends the approval on the claim (``controller.approvals``)."""
    manager = stage.operator.manager
    current = manager.get(PTAHSCHEMAAPPROVALS, stage.namespace, approval)
    manager.patch_status(
        PTAHSCHEMAAPPROVALS,
        stage.namespace,
        approval,
        consumed_status(current, now=timestamp(utc_now()), claim=claim),
        resource_version=current["metadata"]["resourceVersion"],
    )


def create_job(stage: Stage, job: Object, *, dry_run: bool = True) -> httpx.Response:
    body = {"apiVersion": "batch/v1", "kind": "Job", **job}
    return as_manager(stage, "POST", _path(JOBS, stage.namespace), body, dry_run=dry_run)


# -- the table: Job creates ---------------------------------------------------------------

JOB_ROWS: Final[list[tuple[str, dict[str, Any], Any, str]]] = [
    (
        "a DROP TABLE plan recorded non-destructive",
        {"statements": DROP},
        authority.PLAN_UNDERSTATED,
        "DROP TABLE orders",
    ),
    (
        "a GRANT ALL plan recorded without privilege changes",
        {"statements": GRANT},
        authority.PLAN_UNDERSTATED,
        "GRANT ALL",
    ),
    (
        "the claim pointed at another key of the database Secret",
        {"target_key": "admin-url"},
        authority.TARGET_NOT_SPEC,
        "",
    ),
    (
        "the binding re-sealed over an executor from another registry",
        {"executor": EVIL},
        authority.EXECUTOR_NOT_PINNED,
        "registry.evil.example",
    ),
    (
        "a runner image from another registry",
        {"runner": EVIL},
        authority.RUNNER_NOT_PINNED,
        "registry.evil.example",
    ),
    ("an Apply with no approval", {"approve": False}, authority.NO_APPROVAL, ""),
    (
        "an approval spent by another claim",
        {"spend_by": "another-claim"},
        authority.APPROVAL_NOT_SPENT,
        "another-claim",
    ),
    (
        "a second attempt of the mutating claim",
        {"attempt": 2},
        authority.SECOND_ATTEMPT,
        "attempt 2",
    ),
    (
        "an Apply while an earlier Apply is unaccounted for",
        {"pending": True},
        authority.EARLIER_APPLY,
        "ptah-apply-orders-earlier",
    ),
]


def test_the_managers_own_apply_is_admitted(stage: Stage) -> None:
    staged = stage_apply(stage)
    admitted(create_job(stage, staged.job, dry_run=False))
    # ... and exactly once: the claim holds no UID yet, but its Job exists now.
    assert create_job(stage, staged.job).status_code == 409


@pytest.mark.parametrize(
    ("name", "forged", "refusal", "detail"), JOB_ROWS, ids=[r[0] for r in JOB_ROWS]
)
def test_a_forged_apply_is_refused(
    stage: Stage, name: str, forged: dict[str, Any], refusal: Any, detail: str
) -> None:
    staged = stage_apply(stage, **forged)
    response = create_job(stage, staged.job)
    refused_with(response, template(refusal))
    if detail:
        assert detail in response.json()["message"], response.json()["message"]


# -- the table: what status remembers ----------------------------------------------------


@pytest.fixture(scope="module")
def dispatched(stage: Stage) -> Staged:
    """An Apply whose Job the manager created and recorded: the state to attack."""
    staged = stage_apply(stage)
    created = create_job(stage, staged.job, dry_run=False).json()
    schema = staged.schema
    assert schema.status is not None and schema.status.active_operation is not None
    recorded = schema.status.active_operation.model_copy(
        update={"job_uid": created["metadata"]["uid"]}
    )
    staged.schema = _write_status(
        stage,
        schema.metadata.name or "",
        schema.status.model_copy(update={"active_operation": recorded}),
    )
    return staged


def status_patch(
    stage: Stage, staged: Staged, change: Any, *, dry_run: bool = True
) -> httpx.Response:
    """The status, as ``change`` leaves it, written whole at the version read (the JSON
    patch ``kube.client`` writes status with); a dry run unless told."""
    name = staged.schema.metadata.name or ""
    current = stage.operator.manager.get(PTAHSCHEMAS, stage.namespace, name)
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
    path = _path(PTAHSCHEMAS, stage.namespace, name, "status")
    return as_manager(
        stage, "PATCH", path, ops, dry_run=dry_run, content_type="application/json-patch+json"
    )


def _drop(key: str) -> Any:
    return lambda status: status.pop(key)


STATUS_ROWS: Final[list[tuple[str, Any, Any]]] = [
    (
        "dispatchStarted and jobUID cleared",
        lambda s: s["activeOperation"].update(dispatchStarted=False, jobUID=None),
        transitions.JOB_UID_CHANGED,
    ),
    (
        "the marked claim dropped without its record",
        _drop("activeOperation"),
        transitions.RETIRED_WITHOUT_RECORD,
    ),
    (
        "the marked claim moved to a second attempt beside the first attempt's Job",
        lambda s: s["activeOperation"].update(
            attempt=2, jobName=s["activeOperation"]["jobName"][:-2] + "-2", jobUID=None
        ),
        transitions.CLAIM_REWRITTEN,
    ),
    (
        "the marked claim moved to another Secret key",
        lambda s: s["activeOperation"]["target"]["urlFrom"].update(key="admin-url"),
        transitions.CLAIM_REWRITTEN,
    ),
]


def test_the_managers_own_status_write_is_admitted(stage: Stage, dispatched: Staged) -> None:
    admitted(status_patch(stage, dispatched, lambda s: s.update(phase="Applying")))


@pytest.mark.parametrize(
    ("name", "change", "refusal"), STATUS_ROWS, ids=[r[0] for r in STATUS_ROWS]
)
def test_a_status_rewrite_is_refused(
    stage: Stage, dispatched: Staged, name: str, change: Any, refusal: Any
) -> None:
    refused_with(status_patch(stage, dispatched, change), template(refusal))


def test_a_pending_observation_is_not_dropped_without_its_proof(stage: Stage) -> None:
    staged = stage_apply(stage, pending=True)
    response = status_patch(stage, staged, _drop("pendingObservation"))
    refused_with(response, template(transitions.RECORD_DROPPED))
    assert "pendingObservation" in response.json()["message"]


def test_a_release_is_not_dropped_while_the_lease_is_held(stage: Stage) -> None:
    staged = stage_apply(stage)
    uid = staged.schema.metadata.uid or ""
    digest, epoch = "sha256:" + "b" * 64, "v1-" + "d" * 32
    lease = {
        "metadata": {
            "name": lease_name(digest),
            "namespace": localrun.MANAGER_NAMESPACE,
            "annotations": {LEASE_EPOCH_ANNOTATION: epoch},
        },
        "spec": {"holderIdentity": lease_holder(uid, "an-old-claim"), "leaseDurationSeconds": 60},
    }
    stage.operator.admin.create(LEASES, localrun.MANAGER_NAMESPACE, lease)
    release = {
        "coordinationDigest": digest,
        "operationID": "an-old-claim",
        "leaseDurationSeconds": 60,
        "leaseEpoch": epoch,
    }
    admitted(
        status_patch(stage, staged, lambda s: s.update(pendingLockRelease=release), dry_run=False)
    )
    refused_with(
        status_patch(stage, staged, _drop("pendingLockRelease")),
        template(transitions.RELEASE_DROPPED),
    )
    # The control: once the Lease is handed back, the record goes.
    stage.operator.admin.patch_spec(
        LEASES, localrun.MANAGER_NAMESPACE, lease_name(digest), {"holderIdentity": ""}
    )
    admitted(status_patch(stage, staged, _drop("pendingLockRelease")))


def test_a_spent_approval_cannot_be_unspent(stage: Stage, dispatched: Staged) -> None:
    assert dispatched.approval is not None
    path = _path(PTAHSCHEMAAPPROVALS, stage.namespace, dispatched.approval, "status")
    refused_with(
        as_manager(stage, "PATCH", path, {"status": {"conditions": [], "consumedBy": None}}),
        template(transitions.CONSUMED_CHANGED),
    )


# -- the table: spec, and the webhooks themselves ------------------------------------------

SPEC_ROWS: Final[list[tuple[str, Object]]] = [
    ("policy.apply set to Always", {"spec": {"policy": {"apply": "Always"}}}),
    ("the database Secret re-pointed", {"spec": {"target": {"urlFrom": {"name": "admin-db"}}}}),
    ("the service account changed", {"spec": {"execution": {"serviceAccountName": "admin"}}}),
    ("a label changed", {"metadata": {"labels": {"team": "mallory"}}}),
]


@pytest.mark.parametrize(("name", "patch"), SPEC_ROWS, ids=[r[0] for r in SPEC_ROWS])
def test_the_manager_cannot_change_a_resources_spec(stage: Stage, name: str, patch: Object) -> None:
    schema = stage.operator.admin.create(
        PTAHSCHEMAS, stage.namespace, _schema_object(stage, f"spec-{uuid.uuid4().hex[:8]}")
    )
    path = _path(PTAHSCHEMAS, stage.namespace, schema["metadata"]["name"])
    response = as_manager(stage, "PATCH", path, patch)
    refused_with(
        response, "may change only the finalizers and the operator.ptah.run/unresolved-run"
    )


def test_the_managers_metadata_writes_are_admitted(stage: Stage) -> None:
    schema = stage.operator.admin.create(
        PTAHSCHEMAS, stage.namespace, _schema_object(stage, f"meta-{uuid.uuid4().hex[:8]}")
    )
    path = _path(PTAHSCHEMAS, stage.namespace, schema["metadata"]["name"])
    admitted(
        as_manager(
            stage,
            "PATCH",
            path,
            {"metadata": {"finalizers": ["operator.ptah.run/active-operation"]}},
        )
    )
    admitted(
        as_manager(
            stage,
            "PATCH",
            path,
            {"metadata": {"annotations": {"operator.ptah.run/unresolved-run": "{}"}}},
        )
    )


def test_the_manager_cannot_switch_off_or_repoint_its_webhooks(stage: Stage) -> None:
    assert stage.configurations, "the test registered no webhook configurations"
    for name in stage.configurations:
        kind = (
            MUTATING_WEBHOOK_CONFIGURATIONS
            if "stamp" in name
            else VALIDATING_WEBHOOK_CONFIGURATIONS
        )
        patch = {"webhooks": [{"name": "x", "clientConfig": {"caBundle": ""}}]}
        for method, body in (("PATCH", patch), ("DELETE", {})):
            response = as_manager(stage, method, _path(kind, None, name), body)
            assert response.status_code == 403, (name, method, response.text[:300])
            assert "forbidden" in response.text


def test_the_manager_cannot_unbind_the_policies(stage: Stage) -> None:
    for obj_name in POLICIES:
        response = as_manager(
            stage, "DELETE", _path(VAPB, None, f"{obj_name}-{_suffix(stage)}"), {}
        )
        assert response.status_code == 403, response.text[:300]
