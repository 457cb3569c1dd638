"""Fail closed: while the webhook cannot be called, no Job is created, and the
controller knows nothing was stored (issue 8, test 6).

The Job endpoint is served by a webhook server of its own, registered with
``failurePolicy: Fail``, while status writes and plan projections go to another
that stays up: the dispatch then gets as far as the Job create (the claim, the
projections, the spent approval and the dispatch mark are all written) and only the
create meets the stopped webhook. The API server refuses it (a 500 "failed calling
webhook", which admission answers before storage); the controller classifies that
as refused before storing (``classify_create``), withdraws the mark, and, once the
webhook is back, creates the Job exactly once.

Passes are run by hand (``Reconciler.reconcile``), so the test decides when the
webhook comes back relative to the passes; the one poll is for the API server to
start calling a newly registered or restarted webhook, which nothing announces.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from controller.mutationlifecycle import CreateOutcome, Stop, classify_create
from controller.pieces.events import RecordingSink
from controller.runtime.reconciler import Key
from jobclaim.apiserver import (
    JOBS,
    PTAHSCHEMAS,
    NotFound,
    Object,
    Resource,
)
from kube.client import KubeApi
from lab import run as localrun
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    dry_run_job_create,
    operator,
    register,
    unregister,
    webhooked_namespace,
)

pytestmark = pytest.mark.controlplane

WEBHOOK_DOWN = "failed calling webhook"


class CountingApi(KubeApi):
    """The manager's adapter, keeping every Job create it attempted and its answer."""

    job_creates: list[BaseException | None]

    def create(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        if resource != JOBS:
            return super().create(resource, namespace, obj)
        try:
            created = super().create(resource, namespace, obj)
        except BaseException as error:
            self.job_creates.append(error)
            raise
        self.job_creates.append(None)
        return created


@pytest.fixture
def counting_manager(operator: Operator) -> Iterator[CountingApi]:  # noqa: F811
    api = CountingApi.from_kubeconfig(operator.plane.kubeconfig("manager"))
    api.job_creates = []
    with api:
        yield api


def _claim(operator: Operator, namespace: str) -> dict[str, Any]:  # noqa: F811
    status = operator.admin.get(PTAHSCHEMAS, namespace, "orders").get("status") or {}
    return dict(status.get("activeOperation") or {})


def _answering(answer: httpx.Response) -> bool:
    """The Job webhook judged the probe: it refuses a Job no claim reserved with a
    sentence of its own, not the API server's report of a failed call."""
    return answer.status_code == 403 and WEBHOOK_DOWN not in answer.text


def _pass_until(passes: Any, key: Key, done: Any, *, limit: int = 12) -> list[Stop]:
    """Run passes until ``done(stop)``; a pass asks for its successor itself, so the
    count bounds a bug, never a wait."""
    stops: list[Stop] = []
    for _ in range(limit):
        stop = passes(key)
        stops.append(stop)
        if done(stop):
            return stops
    raise AssertionError(f"no pass reached the expected point: {stops}")


def test_a_stopped_webhook_refuses_the_create_and_the_job_is_created_once_after(
    operator: Operator,  # noqa: F811
    counting_manager: CountingApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    staged = webhooked_namespace(operator)
    namespace = staged.namespace
    certificates = tmp_path_factory.mktemp("webhook-certs")
    rest = localrun.LocalWebhook(operator.manager, certificates)
    jobs = localrun.LocalWebhook(operator.manager, certificates)
    rest.start()
    jobs.start()
    names = register(staged, rest, jobs=jobs)
    events = RecordingSink()
    controller = localrun.LocalController(counting_manager, namespace, events=events)
    reconcile = controller.reconciler.reconcile
    try:
        # The readings before the Apply run on the stand-in node, their Jobs admitted.
        key = Key("PtahSchema", namespace, "orders")
        operator.admin.create(PTAHSCHEMAS, namespace, localrun.example_schema(namespace))
        reconcile(key)  # installs the execution binding
        localrun.seed_plan(
            operator.admin,
            operator.manager,
            namespace,
            "orders",
            plane=operator.plane,
            await_reading=False,
        )
        localrun.approve(operator.admin, namespace, "orders")
        # The Job webhook answers, then stops: its port stays bound and refuses.
        localrun.until(
            lambda: _answering(dry_run_job_create(operator.plane, namespace, "manager")),
            "the API server to call the Job webhook",
        )
        jobs.stop()
        localrun.until(
            lambda: WEBHOOK_DOWN in dry_run_job_create(operator.plane, namespace, "manager").text,
            "the API server to call the stopped Job webhook",
        )

        stops = _pass_until(reconcile, key, lambda s: bool(counting_manager.job_creates))
        refused = stops[-1]
        assert refused.reason == "the create was refused before storing"
        [error] = counting_manager.job_creates
        assert error is not None and WEBHOOK_DOWN in str(error)
        assert classify_create(error) is CreateOutcome.REFUSED_BEFORE_STORING
        claim = refused_claim = _claim(operator, namespace)
        with pytest.raises(NotFound):
            operator.admin.get(JOBS, namespace, claim["jobName"])
        # The mark was written before the create and withdrawn after it.
        assert not claim.get("dispatchStarted")
        assert not claim.get("jobUID")
        reasons = events.reasons()
        assert reasons.count("DispatchMarked") == 1
        assert reasons.count("DispatchWithdrawn") == 1
        assert reasons.index("DispatchMarked") < reasons.index("DispatchWithdrawn")

        jobs.start()
        # Answering now: the webhook refuses the probe (a Job no claim reserved)
        # with a sentence of its own instead of the API server's call failure.
        localrun.until(
            lambda: _answering(dry_run_job_create(operator.plane, namespace, "manager")),
            "the API server to call the restarted Job webhook",
        )
        _pass_until(reconcile, key, lambda _s: bool(_claim(operator, namespace).get("jobUID")))

        assert [e is None for e in counting_manager.job_creates] == [False, True]
        claim = _claim(operator, namespace)
        stored = operator.admin.list(JOBS, namespace)
        assert [(j["metadata"]["name"], j["metadata"]["uid"]) for j in stored] == [
            (claim["jobName"], claim["jobUID"])
        ]
        assert claim["dispatchStarted"] is True
        # The same claim dispatched again under the approval it had already spent:
        # the refusal retired nothing and asked for no new approval.
        assert claim["id"] == refused_claim["id"]
        assert events.reasons().count("Claimed") == 1
        assert "ClaimRetired" not in events.reasons()
        # Marked twice, spent once: the spending is announced (and counted) once.
        assert events.reasons().count("DispatchMarked") == 2
        assert events.reasons().count("ApprovalConsumed") == 1
    finally:
        unregister(operator, names)
        jobs.close()
        rest.close()
