"""Fault scenario 3 on the real cluster: the webhook unreachable while the manager creates the Job.

The spec's one exception to "one create per claim": a create the API server refused
before storing it (a fail-closed webhook that cannot be called) withdraws the
dispatch marker, and the next pass creates the Job under the approval already spent.

On the lab cluster with the chart installed (``lab_run``), the controller-write
webhook (the one that admits the manager's Job creates) is pointed at a Service
without endpoints, so the API server cannot call it. The status webhook is left
alone: the manager can still write its marker and withdraw it, which is the window
the spec describes (a replaced manager's webhook endpoints going first while a
leader is still dispatching). The migration's plan is then approved. What holds is
read from the API server and from PostgreSQL itself, never from the manager's logs:

- while the webhook is away: the approval is spent, no Job stands under the
  claim's reserved name, the marker is withdrawn (a DispatchWithdrawn Event and
  ``dispatchStarted`` false), and the database received no migration statement;
- once it is back: exactly one Apply Job for the migration, ever, and each
  migration's DDL reached the database once (an event trigger counts them).

The recovery time (webhook back -> Job created -> InSync) is printed, not asserted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

import psycopg
import pytest

from controller.pieces.events import REPORTING_CONTROLLER, last_observed, occurrences
from controller.stages.dispatch_steps import REFUSED_RETRY
from jobclaim.apiserver import (
    EVENTS,
    JOBS,
    PODS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONS,
    Object,
)
from jobclaim.envelope import LABEL_OPERATION, OWNER_LABEL
from lab.clusterrun import EXAMPLES, MANAGER_NAMESPACE, NAMESPACE, LabRun
from lab.progress import DONE, FAILED, failure_of, phase_of
from tests.cluster.clusterkit import Api, poll, probe_job, recovery
from tests.cluster.tenants import AUDIT

pytestmark = pytest.mark.cluster

MIGRATION = next(example for example in EXAMPLES if example.cli_kind == "migration")
DATABASE = MIGRATION.databases[0][1]
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
CONTROLLER_WRITE = "ptah-operator-controller-write"
UNREACHABLE = "ptah-fault-unreachable"
MANAGER_USER = f"system:serviceaccount:{MANAGER_NAMESPACE}:ptah-operator"
# Resolve, Verify, Read and Plan Jobs on a shared 2-core node before the plan waits.
PLAN_DEADLINE = 900.0


def _execute(run: LabRun, sql: str) -> None:
    assert run.postgres is not None
    with psycopg.connect(run.postgres.url(DATABASE), autocommit=True) as conn:
        conn.execute(sql.encode())


def _ddl(run: LabRun) -> list[tuple[object, ...]]:
    return run.query(
        DATABASE,
        "SELECT tag, object FROM fault_audit.ddl WHERE object LIKE 'public.%' ORDER BY n",
    )


def _migration(run: LabRun) -> Object:
    obj = run.get(MIGRATION)
    if phase_of(obj) in FAILED:
        pytest.fail(f"the migration failed: {failure_of(obj)}")
    return obj


def _apply_jobs(run: LabRun) -> list[Object]:
    selector = {OWNER_LABEL["migration"]: MIGRATION.name, LABEL_OPERATION: "apply"}
    return run.admin.list(JOBS, NAMESPACE, label_selector=selector)


def _redirect(api: Api, service: str) -> None:
    """Point the controller-write webhook at ``service`` (its path, port and CA kept)."""
    api.http.patch(
        f"{WEBHOOKS}/{CONTROLLER_WRITE}",
        json=[
            {
                "op": "replace",
                "path": "/webhooks/0/clientConfig/service/name",
                "value": service,
            }
        ],
        headers={"Content-Type": "application/json-patch+json"},
    ).raise_for_status()


def _probe_refusal(api: Api) -> str | None:
    """A dry-run Job create as the manager: the refusal's message once the webhook is away.

    Dry-run runs admission (the webhooks declare no side effects) and stores nothing;
    the API server picks up a changed webhook configuration on its own time.
    """
    job = probe_job("fault-probe")
    answer = api.http.post(
        f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
        params={"dryRun": "All"},
        json=job,
        headers={"Impersonate-User": MANAGER_USER},
    )
    text = answer.text
    return text if answer.status_code >= 500 and "failed calling webhook" in text else None


@pytest.fixture
def unreachable(api: Api) -> Iterator[None]:
    """A Service that selects no Pod, in the manager's namespace; removed at the end."""
    api.create(
        f"/api/v1/namespaces/{MANAGER_NAMESPACE}/services",
        {
            "metadata": {"name": UNREACHABLE},
            "spec": {
                "selector": {"ptah.run/fault": "no-pod-has-this"},
                "ports": [{"name": "https", "port": 443, "targetPort": 9443}],
            },
        },
    )
    try:
        yield
    finally:
        _redirect(api, "ptah-operator-webhook")
        api.delete(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/services/{UNREACHABLE}")


def _pending_approval(run: LabRun) -> Object:
    def awaiting() -> Object | None:
        obj = _migration(run)
        plan = ((obj.get("status") or {}).get("plan") or {}).get("name")
        return obj if phase_of(obj) == "AwaitingApproval" and plan else None

    return poll("the migration's plan awaiting approval", awaiting, timeout=PLAN_DEADLINE)


def _explain(run: LabRun, api: Api) -> None:
    """What the API server holds about the migration, printed when the scenario fails."""
    status = run.get(MIGRATION).get("status") or {}
    print(f"# status.phase={status.get('phase')} activeOperation={status.get('activeOperation')}")
    for condition in status.get("conditions") or []:
        kind, state = condition.get("type"), condition.get("status")
        print(f"# condition {kind}={state}: {condition.get('message')}")
    for event in run.admin.list(EVENTS, NAMESPACE):
        if (event.get("regarding") or {}).get("name") == MIGRATION.name:
            print(f"# event {event.get('reason')}: {str(event.get('note'))[:300]}")
    print(f"# status.lastRun={status.get('lastRun')}")
    print(f"# status.unresolvedRun={status.get('unresolvedRun')}")
    print(f"# status.plan={status.get('plan')}")
    for job in run.admin.list(JOBS, NAMESPACE):
        conditions = [
            (c.get("type"), c.get("status"), c.get("reason"))
            for c in (job.get("status") or {}).get("conditions") or []
        ]
        labels = job["metadata"].get("labels") or {}
        print(f"# job {job['metadata']['name']} {labels.get(LABEL_OPERATION)}: {conditions}")
    for pod in run.admin.list(PODS, NAMESPACE):
        print(f"# pod {pod['metadata']['name']}: {(pod.get('status') or {}).get('phase')}")
    print(f"# the database's DDL: {_ddl(run)}")
    for pod in run.admin.list(PODS, MANAGER_NAMESPACE):
        name = pod["metadata"]["name"]
        if name.startswith("ptah-operator-") and "rotator" not in name:
            log = api.text(
                f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{name}/log", tailLines="80"
            )
            print(f"# the log of {name}, last 80 lines:\n{log}")


def test_a_job_create_refused_by_an_unreachable_webhook_is_withdrawn_then_made_once(
    lab_run: LabRun, api: Api, unreachable: None
) -> None:
    try:
        _scenario(lab_run, api)
    except BaseException:
        _explain(lab_run, api)
        raise


def _scenario(run: LabRun, api: Api) -> None:
    _execute(run, AUDIT)
    _pending_approval(run)
    assert _apply_jobs(run) == []

    _redirect(api, UNREACHABLE)
    refusal = poll("the manager's Job creates refused by the webhook", lambda: _probe_refusal(api))
    print(f"# the webhook is unreachable: {refusal[:200]}")
    # The list's version, not the object's: an InSync object untouched since earlier
    # scenarios carries an old version the server's watch window no longer holds (410).
    since = api.get(f"/apis/operator.ptah.run/v1alpha1/namespaces/{NAMESPACE}/ptahmigrations")[
        "metadata"
    ]["resourceVersion"]
    # Earlier scenarios on this cluster approved (and spent) plans of the same
    # migration: only the approval made here counts.
    earlier = {a["metadata"]["uid"] for a in run.admin.list(PTAHMIGRATIONAPPROVALS, NAMESPACE)}
    print(f"# {run.approve(MIGRATION)}")

    # The manager spends the approval, marks, creates, is refused, withdraws the mark,
    # and tries again every few seconds while the webhook stays away. Each mark and
    # each withdrawal is a stored version of the migration: the watch replays them.
    marks = poll(
        "two marks, each withdrawn after a refused create",
        lambda: _marks(run, since) if _marks(run, since).count((True, False)) >= 2 else None,
    )
    print(f"# dispatchStarted in the stored versions since the approval: {marks}")
    withdrawn = poll("the manager's DispatchWithdrawn Event", lambda: _withdrawals(run) or None)
    notes = [w.note for w in withdrawn]
    said = sum(w.count for w in withdrawn)
    print(f"# DispatchWithdrawn said {said} times in {len(notes)} Events: {notes[0][:200]}")
    # The manager retries a refused create every REFUSED_RETRY, never in a loop on its
    # own status writes (it once marked and withdrew at 50 ms). A lower bound only: a
    # loaded machine makes the gaps longer, never shorter. The same refusal repeated is
    # one Event with a series (controller/pieces/events.py): its repeats are spread over its
    # first and last time, so the mean gap inside it is held to the bound, and the gap
    # between one Event's last time and the next one's first.
    gaps = [w.mean_gap() for w in withdrawn if w.count > 1] + [
        later.first - earlier.last for earlier, later in pairwise(withdrawn)
    ]
    print(f"# seconds between withdrawals: {[round(gap, 1) for gap in gaps]}")
    assert all(gap >= REFUSED_RETRY * 0.8 for gap in gaps), gaps
    operation: dict[str, Any] = _migration(run)["status"]["activeOperation"]
    assert operation["type"] == "Apply"
    reserved = operation["jobName"]
    approvals = [
        approval
        for approval in run.admin.list(PTAHMIGRATIONAPPROVALS, NAMESPACE)
        if approval["metadata"]["uid"] not in earlier
    ]
    assert len(approvals) == 1, approvals
    consumed = [
        c
        for c in (approvals[0].get("status") or {}).get("conditions") or []
        if c.get("type") == "Consumed" and c.get("status") == "True"
    ]
    assert consumed, f"the approval is spent: {approvals[0].get('status')}"
    assert _apply_jobs(run) == []
    assert _ddl(run) == [], "no statement may reach the database while no Job exists"

    _redirect(api, "ptah-operator-webhook")
    back = time.monotonic()
    jobs = poll("the Apply Job once the webhook is back", lambda: _apply_jobs(run) or None)
    created = time.monotonic() - back

    def in_sync() -> Object | None:
        obj = _migration(run)
        return obj if phase_of(obj) == DONE else None

    poll("the migration InSync", in_sync, timeout=PLAN_DEADLINE)
    settled = time.monotonic() - back
    recovery(f"webhook back -> Apply Job created {created:.1f}s, -> InSync {settled:.1f}s")

    jobs = _apply_jobs(run)
    assert [job["metadata"]["name"] for job in jobs] == [reserved]
    assert _migration(run)["status"]["lastRun"]["jobName"] == reserved
    ddl = _ddl(run)
    print(f"# the database's DDL during the scenario: {ddl}")
    # 0001's CREATE TABLE (and its primary key's index), 0002's ALTER TABLE: once each.
    assert ddl == [
        ("CREATE TABLE", "public.invoices"),
        ("CREATE INDEX", "public.invoices_pkey"),
        ("ALTER TABLE", "public.invoices"),
    ]
    assert run.query(DATABASE, "SELECT version FROM ptah_lab.revisions ORDER BY version") == [
        (1,),
        (2,),
    ]


@dataclass(frozen=True, order=True)
class Withdrawal:
    """One DispatchWithdrawn Event: first and last said (epoch seconds), how often."""

    first: float
    last: float
    count: int
    note: str

    def mean_gap(self) -> float:
        return (self.last - self.first) / (self.count - 1)


def _withdrawals(run: LabRun) -> list[Withdrawal]:
    """The manager's DispatchWithdrawn Events about the migration, oldest first."""
    return sorted(
        Withdrawal(
            datetime.fromisoformat(str(event["eventTime"])).timestamp(),
            datetime.fromisoformat(str(last_observed(event))).timestamp(),
            occurrences(event),
            str(event.get("note")),
        )
        for event in run.admin.list(EVENTS, NAMESPACE)
        if event.get("reason") == "DispatchWithdrawn"
        and event.get("reportingController") == REPORTING_CONTROLLER
        and (event.get("regarding") or {}).get("name") == MIGRATION.name
    )


def _marks(run: LabRun, since: str) -> list[tuple[bool, bool]]:
    """``dispatchStarted`` in each stored version after ``since``, as (before, after) pairs.

    A one-second watch from ``since`` replays every version the API server stored.
    """
    values = []
    for event in run.admin.watch(
        PTAHMIGRATIONS, NAMESPACE, resource_version=since, timeout_seconds=1
    ):
        if event.object["metadata"]["name"] == MIGRATION.name:
            operation = (event.object.get("status") or {}).get("activeOperation") or {}
            values.append(bool(operation.get("dispatchStarted")))
    return [pair for pair in pairwise(values) if pair[0] != pair[1]]
