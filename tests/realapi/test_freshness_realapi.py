"""Freshness on a real API server: the webhook admits the writes a refresh makes.

A schema is read up to its plan, approved, and an interval later read again: the tag
is resolved again (its Job's own Pod records what it read, and only that record lets
the manager write a moved digest, ``manager-transitions``), and the database is read
again. Control row: nothing moved, the approval is consumed and the Apply Job is
created. A tag pushed to new bytes, or a database changed by hand, retires the plan
with its approval marked Stale, and a plan is made again; nothing is applied.

The controller's wall clock runs ahead of the API server's by an interval (the
decisions read it; the API server's time decides nothing here), so no test waits for
one. Jobs run on the stand-in node as in ``test_planning_realapi``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from controller.context.passcontext import Environment
from controller.pieces.events import RecordingSink
from controller.pieces.targetlock import TargetLock
from controller.runtime.reconciler import Key, Reconciler
from jobclaim.apiserver import CONFIGMAPS, JOBS, PTAHSCHEMAAPPROVALS, PTAHSCHEMAS
from jobclaim.times import utc_now
from lab import run as localrun
from tests.realapi.publishstage import (  # noqa: F401  (the fixture)
    NodeLogs,
    node_logs,
    run_on_stand_in_node,
    schema_status,
)
from tests.support import scriptednode
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    operator,
    registered_webhook,
)
from tests.support.scriptednode import POLICY, Database

pytestmark = pytest.mark.controlplane

MOVED = "sha256:" + "8" * 64


class AheadClock:
    """The real wall clock plus an offset the test moves."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utc_now() + self.offset


def _drive(
    operator: Operator,  # noqa: F811
    reconcile: Callable[[Key], Any],
    key: Key,
    db: Database,
    done: Callable[[dict[str, Any]], bool],
) -> list[str]:
    """Passes, running each claim's Job on the stand-in node, until ``done``; the
    claims whose Jobs ran."""
    ran: list[str] = []
    recorded: set[str] = set()
    for _ in range(120):
        stop = reconcile(key)
        status = schema_status(operator, key.namespace)
        claim = status.get("activeOperation") or {}
        # A pass that asks to run again at once has not decided yet.
        if done(status) and not claim and stop.requeue_after != 0.0:
            return ran
        if claim.get("jobUID") and claim["jobName"] not in recorded:
            recorded.add(claim["jobName"])
            ran.append(claim["type"])
            if claim["type"] != "Apply":
                run_on_stand_in_node(operator, key.namespace, claim, db)
    raise AssertionError(f"not reached; ran {ran}, status {schema_status(operator, key.namespace)}")


def waiting(status: dict[str, Any]) -> bool:
    return status.get("phase") == "AwaitingApproval"


def _nothing(_db: Database, _mp: pytest.MonkeyPatch) -> None:
    pass


def _tag_moved(_db: Database, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(scriptednode, "ARTIFACT", MOVED)


def _database_moved(db: Database, _mp: pytest.MonkeyPatch) -> None:
    db.severity = "error"


@pytest.mark.parametrize(
    ("change", "ran"),
    [
        (_nothing, ["Resolve", "Observe", "Apply"]),
        (_tag_moved, ["Resolve", "Verify", "Observe", "Plan"]),
        (_database_moved, ["Resolve", "Observe", "Plan"]),
    ],
    ids=["unchanged", "tag-moved", "database-moved"],
)
def test_the_webhook_admits_a_refresh_and_the_plan_it_retires(
    operator: Operator,  # noqa: F811
    node_logs: NodeLogs,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Database, pytest.MonkeyPatch], None],
    ran: list[str],
) -> None:
    db = Database()
    node_logs.shadow = False
    clock = AheadClock()
    with registered_webhook(operator, tmp_path_factory.mktemp("webhook-certs")) as (staged, _):
        namespace = staged.namespace
        config = localrun.manager_config()
        env = Environment(
            api=node_logs,
            config=config,
            lock=TargetLock(node_logs, config.lease_namespace, wall=clock),
            wall=clock,
        )
        reconcile = Reconciler(env, RecordingSink(), namespace=namespace).reconcile
        key = Key("PtahSchema", namespace, "orders")
        operator.admin.create(
            CONFIGMAPS,
            namespace,
            {"metadata": {"name": "orders-schema-policy"}, "data": {"policy.json": POLICY}},
        )
        operator.admin.create(PTAHSCHEMAS, namespace, localrun.example_schema(namespace))
        assert _drive(operator, reconcile, key, db, waiting) == [
            "Resolve",
            "Verify",
            "Observe",
            "Plan",
        ]
        first = schema_status(operator, namespace)["plan"]
        approval = localrun.approve(operator.admin, namespace, "orders")["metadata"]["name"]
        change(db, monkeypatch)
        clock.offset = timedelta(seconds=601)
        if ran[-1] == "Apply":
            # Unchanged: the refresh keeps the plan, the approval is consumed, the
            # Apply Job is created (the webhook admitted every write on the way).
            got: list[str] = []
            for _ in range(60):
                reconcile(key)
                status = schema_status(operator, namespace)
                claim = status.get("activeOperation") or {}
                if claim.get("type") == "Apply" and claim.get("jobUID"):
                    got.append("Apply")
                    break
                if claim.get("jobUID") and claim["type"] not in got:
                    got.append(claim["type"])
                    run_on_stand_in_node(operator, namespace, claim, db)
            assert got == ran
            assert status["plan"]["uid"] == first["uid"]
            return
        assert _drive(operator, reconcile, key, db, waiting) == ran
        status = schema_status(operator, namespace)
        held = operator.admin.get(PTAHSCHEMAAPPROVALS, namespace, approval)
        found = {c["type"]: c for c in held["status"]["conditions"]}
        assert found["Stale"]["status"] == "True"
        assert found["Stale"]["reason"] == "PlanInputsMoved"
        assert "Consumed" not in found or found["Consumed"]["status"] != "True"
        jobs = [j["metadata"]["name"] for j in operator.admin.list(JOBS, namespace)]
        assert not any("-apply-" in name for name in jobs)
        if change is _tag_moved:
            assert status["source"]["digest"] == MOVED
            assert status["plan"]["artifactDigest"] == MOVED
        else:
            assert status["observation"]["highestSeverity"] == "error"
