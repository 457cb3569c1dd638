"""The controller takes a PtahSchema from approval to a recorded Job on a real API
server (issue 8, test 5).

Everything is the product: the chart's CRDs, the manager's RBAC, the webhook served
over TLS and registered by url and caBundle, and the controller's reconciler
watching as the manager. The one stand-in is ``lab.run.seed_plan``: no
kubelet runs here, so the plan a Plan Job would have published is written directly
(the same helper ``make run`` uses).

Waiting on the controller is a poll of the resource under a deadline: the
controller acts on its own threads, and nothing but the resource says it is done.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from controller.pieces.events import RecordingSink
from jobclaim import match, schema_claim
from jobclaim.api import PtahSchema, PtahSchemaApproval
from jobclaim.apiserver import JOBS, PTAHSCHEMAAPPROVALS, PTAHSCHEMAS, Object
from lab import run as localrun
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    Webhooked,
    operator,
    registered_webhook,
)

pytestmark = pytest.mark.controlplane


@dataclass
class Running:
    staged: Webhooked
    controller: localrun.LocalController
    events: RecordingSink


@pytest.fixture
def running(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Running]:
    with registered_webhook(operator, tmp_path_factory.mktemp("webhook-certs")) as (staged, _):
        events = RecordingSink()
        controller = localrun.LocalController(operator.manager, staged.namespace, events=events)
        controller.start()
        try:
            yield Running(staged, controller, events)
        finally:
            # Not waited for: the verdict is taken, and the loop only ends once every
            # watch stream does, which the API server decides. Its threads are daemons.
            controller.stop(wait=0)


def test_an_approved_schema_gets_exactly_one_recorded_job(
    operator: Operator,  # noqa: F811
    running: Running,
) -> None:
    admin, namespace = operator.admin, running.staged.namespace
    admin.create(PTAHSCHEMAS, namespace, localrun.example_schema(namespace))
    localrun.wait_for(
        admin,
        namespace,
        "orders",
        lambda s: bool((s.get("status") or {}).get("executionBinding")),
    )
    plan = localrun.seed_plan(admin, operator.manager, namespace, "orders", plane=operator.plane)
    approval = localrun.approve(admin, namespace, "orders")
    stored = localrun.wait_for(
        admin, namespace, "orders", lambda s: localrun.recorded_job(s) is not None
    )

    schema = PtahSchema.model_validate(stored)
    assert schema.status is not None and schema.status.active_operation is not None
    claim = schema.status.active_operation
    assert claim.type == "Apply"
    assert claim.dispatch_started
    assert schema.status.plan is not None and schema.status.plan.uid == plan.uid
    jobs: list[Object] = admin.list(JOBS, namespace)
    assert [j["metadata"]["name"] for j in jobs] == [claim.job_name]
    job = jobs[0]
    assert job["metadata"]["uid"] == claim.job_uid
    # The Job the controller recorded is the one its claim builds, as stored.
    made = schema_claim(schema, binding=schema.status.execution_binding)
    assert made is not None
    verdict = match(job, made)
    assert verdict.matched, verdict.reason
    # The approval was spent on this dispatch, and only on it.
    spent = PtahSchemaApproval.model_validate(
        admin.get(PTAHSCHEMAAPPROVALS, namespace, approval["metadata"]["name"])
    )
    assert spent.status is not None
    assert [c.type for c in spent.status.conditions if c.status == "True"] == ["Consumed"]
    # The controller's own Resolve claim crossed its Job's boundaries too (its Job
    # never ran, and the stand-in withdrew it); the Apply's crossings are counted.
    reasons = [
        record.reason
        for _, record in running.events.records
        if record.reason in ("ApprovalConsumed", "DispatchMarked") or claim.job_name in record.note
    ]
    for crossed in ("ApprovalConsumed", "DispatchMarked", "JobCreated", "OperationStarted"):
        assert reasons.count(crossed) == 1, (crossed, reasons)
