"""Freshness, lived on the API double with the scripted node: a waiting plan is read
again every interval, a tag moved to new bytes or a database moved under the plan
retires it (its approval Stale) and plans again, an unchanged reading keeps it, and a
refresh that fails consumes no approval and claims no Apply until it succeeds.

Each table has a control row (nothing moved: the plan and its approval stand) and one
change per row that must retire the plan.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.outcomes.lifekit import (
    apply_jobs,
    approvals,
    approve,
    drive,
    new_migration,
    new_schema,
    phase,
)
from tests.support import scriptednode
from tests.support.dispatchworld import NS, Rig, conditions, make_rig
from tests.support.outcomeworld import status_of
from tests.support.scriptednode import ScriptedNode

# Every claim here is the controller's own (tests/outcomes/conftest.py).
pytestmark = pytest.mark.usefixtures("no_requested_claims")

MOVED_ARTIFACT = "sha256:" + "8" * 64


def _nothing(_rig: Rig, _node: ScriptedNode, _mp: pytest.MonkeyPatch) -> None:
    pass


def _tag_moved(_rig: Rig, _node: ScriptedNode, mp: pytest.MonkeyPatch) -> None:
    mp.setattr(scriptednode, "ARTIFACT", MOVED_ARTIFACT)


def _database_moved(_rig: Rig, node: ScriptedNode, _mp: pytest.MonkeyPatch) -> None:
    node.db.severity = "error"  # someone changed the database by hand


Change = Callable[[Rig, ScriptedNode, pytest.MonkeyPatch], None]


@pytest.mark.parametrize(
    ("change", "retired", "ran"),
    [
        (_nothing, False, ["resolve", "observe", "apply"]),
        (_tag_moved, True, ["resolve", "verify", "observe", "plan"]),
        (_database_moved, True, ["resolve", "observe", "plan"]),
    ],
    ids=["unchanged", "tag-moved", "database-moved"],
)
def test_a_waiting_plan_is_read_again_each_interval_and_retired_when_it_moved(
    monkeypatch: pytest.MonkeyPatch, change: Change, retired: bool, ran: list[str]
) -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_schema(rig)
    drive(rig, node, key, phase("AwaitingApproval"))
    before = len(node.ran)
    # The approval lands as the interval passes: the refresh is read before it is
    # consumed. (It is created first: the rig's admission stamp is of that time.)
    name = approve(rig, key)
    change(rig, node, monkeypatch)
    rig.clocks.advance(601)
    done = phase("AwaitingApproval") if retired else phase("InSync")
    drive(rig, node, key, done)
    assert node.ran[before : before + len(ran)] == ran
    held = conditions(rig.api.get(approvals(key), NS, name))
    if retired:
        # The plan that waited is retired with its approval Stale, and a plan is made
        # again from the new reading; nothing was applied.
        assert held.get("Stale") == "True" and held.get("Consumed") != "True"
        assert apply_jobs(rig) == []
        found = conditions(rig.resource(key))
        assert found["ApprovalRequired"] == "True" and found["PlanReady"] == "True"
    else:
        assert held.get("Consumed") == "True" and len(apply_jobs(rig)) == 1


def test_a_refresh_that_fails_consumes_no_approval_until_a_reading_succeeds() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_schema(rig)
    drive(rig, node, key, phase("AwaitingApproval"))
    # The registry goes down as the interval passes: the tag's Resolve fails, and the
    # approval that lands then waits.
    name = approve(rig, key)
    rig.clocks.advance(601)
    node.fail("resolve", "registry_unavailable", "registry.example.com: connection refused")
    status = drive(rig, node, key, lambda s: "readingFailure" in s and "activeOperation" not in s)
    assert status["readingFailure"]["operation"] == "Resolve"
    found = conditions(rig.resource(key))
    assert found["SourceFreshnessUnknown"] == "True" and found["RefreshFailed"] == "True"
    assert found["Stalled"] == "True"
    # Past the retry time it fails again: still nothing consumed, no Apply.
    node.fail("resolve", "registry_unavailable", "still refused")
    rig.clocks.advance(31)
    drive(rig, node, key, lambda s: s.get("readingFailure", {}).get("failures") == 2)
    assert conditions(rig.api.get(approvals(key), NS, name)).get("Consumed") != "True"
    assert apply_jobs(rig) == []
    # The registry is back: the Resolve (same bytes) and the refresh succeed, and only
    # then is the approval consumed and the Apply run.
    rig.clocks.advance(61)
    status = drive(rig, node, key, phase("InSync"))
    assert "readingFailure" not in status
    assert len(apply_jobs(rig)) == 1
    found = conditions(rig.resource(key))
    assert found["SourceFreshnessUnknown"] == "False" and found["RefreshFailed"] == "False"


@pytest.mark.parametrize(
    ("pending", "retired"),
    [(["20260101000000"], False), (["20260101000000", "20260201000000"], True)],
    ids=["unchanged", "history-moved"],
)
def test_a_waiting_migration_plan_is_read_again_and_replaced_when_the_history_moved(
    pending: list[str], retired: bool
) -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_migration(rig)
    first = drive(rig, node, key, phase("AwaitingApproval"))["plan"]
    name = approve(rig, key)
    node.db.pending = pending
    rig.clocks.advance(601)
    # The refresh comes before the approval is consumed.
    rig.settle(key, limit=40)
    status = status_of(rig, key)
    assert status["activeOperation"]["type"] == "Resolve"
    status = drive(rig, node, key, lambda s: s.get("phase") in ("AwaitingApproval", "InSync"))
    if retired:
        status = drive(rig, node, key, phase("AwaitingApproval"))
        assert status["plan"]["name"] != first["name"]
        assert conditions(rig.api.get(approvals(key), NS, name)).get("Stale") == "True"
        assert apply_jobs(rig) == []
    else:
        assert len(apply_jobs(rig)) == 1  # the approval still authorizes the same plan
