"""The planning half on a real API server: the controller claims its own readings, its
Jobs are admitted, its plan is published through the webhook, and an approval leads
to the Apply Job.

No kubelet runs here, so each reading's Job is run by a stand-in node: the Pod the
real Job controller created for it creates its result record under its own bound
token (a TokenRequest for that Pod, used by the runner's own recorder, judged by the
real admission chain), is then marked Succeeded with its runner container terminated
(an admin's write to ``pods/status``, as a kubelet's would be), and the real Job
controller completes the Job. Everything else is the product: the chart's CRDs and
RBAC, the webhook served over TLS and registered, the controller's passes as the
manager, which reads the records.

While the controller publishes, the same manager identity tries what must be
refused: a plan before its Plan Job is harvested, a plan naming another Job's
manager record, and a chunk whose bytes are not the plan's.

Waiting on the Job controller is a bounded poll: it acts on its own time.
"""

from __future__ import annotations

import pytest

from controller.pieces.events import RecordingSink
from controller.runtime.reconciler import Key
from jobclaim import SchemaPlanContent, build_schema_plan, manager_record_of, sha256_digest
from jobclaim.api import PtahSchema
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    ApiError,
)
from kube.client import KubeApi
from lab import run as localrun
from tests.realapi.publishstage import (  # noqa: F401  (the fixture)
    NodeLogs,
    node_logs,
    run_on_stand_in_node,
    schema_status,
)
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    operator,
    registered_webhook,
)
from tests.support.scriptednode import POLICY, Database

pytestmark = pytest.mark.controlplane


def _unharvested_plan_is_refused(
    operator: Operator,  # noqa: F811
    logs: NodeLogs,
    namespace: str,
    db: Database,
) -> None:
    """The Plan Job ran but is not harvested (no cleanup TTL yet): a plan from it is
    not one the webhook admits, even built exactly as the controller would."""
    schema = PtahSchema.model_validate(operator.admin.get(PTAHSCHEMAS, namespace, "orders"))
    assert schema.status is not None and schema.status.execution_binding is not None
    claim = schema.status.active_operation
    assert claim is not None and claim.type == "Plan"
    job = operator.admin.get(JOBS, namespace, claim.job_name)
    text = db.plan_text.encode()
    built = build_schema_plan(
        schema,
        binding=schema.status.execution_binding,
        dispatched_by=manager_record_of(job),
        content=SchemaPlanContent(
            content_digest=sha256_digest(text),
            statement_count=1,
            destructive=False,
            privilege_changes=(),
            chunks=((sha256_digest(text), len(text)),),
        ),
    )
    try:
        KubeApi.create(logs, PTAHSCHEMAPLANS, namespace, built)
    except ApiError as error:
        logs.refused.append(f"a plan from a Job not harvested: {error}")
        return
    raise AssertionError("the webhook admitted a plan from a Plan Job nobody harvested")


def test_the_controller_reads_publishes_through_the_webhook_and_applies_once_approved(
    operator: Operator,  # noqa: F811
    node_logs: NodeLogs,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    db = Database()
    with registered_webhook(operator, tmp_path_factory.mktemp("webhook-certs")) as (staged, _):
        namespace = staged.namespace
        controller = localrun.LocalController(node_logs, namespace, events=RecordingSink())
        reconcile = controller.reconciler.reconcile
        key = Key("PtahSchema", namespace, "orders")
        operator.admin.create(
            CONFIGMAPS,
            namespace,
            {"metadata": {"name": "orders-schema-policy"}, "data": {"policy.json": POLICY}},
        )
        operator.admin.create(PTAHSCHEMAS, namespace, localrun.example_schema(namespace))
        ran: list[str] = []
        for _ in range(80):
            reconcile(key)
            status = schema_status(operator, namespace)
            claim = status.get("activeOperation") or {}
            if status.get("phase") == "AwaitingApproval" and not claim:
                break
            if claim.get("jobUID") and claim["type"] not in ran[-1:]:
                # The Job the controller created for its own claim was admitted.
                run_on_stand_in_node(operator, namespace, claim, db)
                if claim["type"] == "Plan":
                    _unharvested_plan_is_refused(operator, node_logs, namespace, db)
                ran.append(claim["type"])
        else:
            raise AssertionError(f"no plan was published; readings run: {ran}")
        assert ran == ["Resolve", "Verify", "Observe", "Plan"]
        plan = operator.admin.get(PTAHSCHEMAPLANS, namespace, status["plan"]["name"])
        assert plan["metadata"]["uid"] == status["plan"]["uid"]
        refused = dict(entry.split(": ", 1) for entry in node_logs.refused)
        assert len(refused) == 3, node_logs.refused
        assert (
            "not the exact harvested successful operation instance"
            in (refused["a plan from a Job not harvested"])
        )
        assert (
            "is not the plan its Plan operation publishes"
            in (refused["a plan naming another Job's manager record"])
        )
        assert "is not the one its plan stores" in refused["a chunk whose bytes are not the plan's"]

        node_logs.shadow = False
        localrun.approve(operator.admin, namespace, "orders")
        for _ in range(20):
            reconcile(key)
            claim = schema_status(operator, namespace).get("activeOperation") or {}
            if claim.get("type") == "Apply" and claim.get("jobUID"):
                break
        else:
            raise AssertionError(
                f"the approval led to no Apply Job: {schema_status(operator, namespace)}"
            )
        jobs = [j["metadata"]["name"] for j in operator.admin.list(JOBS, namespace)]
        assert claim["jobName"] in jobs
        assert sum("-apply-" in name for name in jobs) == 1
