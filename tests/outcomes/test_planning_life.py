"""Both families from a new resource to InSync, with no claim asked for by a test.

The controller claims every reading itself (the phase machine), each through the
dispatch sequence with its own Job, and a scripted node runs each Job with the frame
a runner would write. What a test does is what a person does: create the resource,
approve a plan, change the spec; and what time does: an interval passing.
"""

from __future__ import annotations

from typing import get_args

import pytest

from controller.runtime.reconciler import Key
from jobclaim.api import Severity
from jobclaim.apiserver import (
    LEASES,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
)
from jobclaim.projection import decode_chunk
from tests.outcomes.lifekit import (
    Status,
    apply_jobs,
    approve,
    drive,
    new_migration,
    new_schema,
    phase,
)
from tests.support.dispatchworld import LEASE_NS, NS, Rig, conditions, make_rig
from tests.support.outcomeworld import status_of
from tests.support.scriptednode import ScriptedNode

# Every claim here is the controller's own (tests/outcomes/conftest.py).
pytestmark = pytest.mark.usefixtures("no_requested_claims")


def lease_free(rig: Rig) -> bool:
    return all(not lease["spec"].get("holderIdentity") for lease in rig.api.list(LEASES, LEASE_NS))


def test_a_new_schema_reads_plans_and_after_approval_applies_to_in_sync() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_schema(rig)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert node.ran == ["resolve", "verify", "observe", "plan"]
    assert status["observedGeneration"] == rig.resource(key)["metadata"]["generation"]
    plan = rig.api.get(PTAHSCHEMAPLANS, NS, status["plan"]["name"])
    chunk = rig.api.get(PTAHSCHEMAPLANCHUNKS, NS, plan["spec"]["chunks"][0]["name"])
    assert decode_chunk(chunk["spec"]["data"]) == node.db.plan_text.encode()
    assert status["plan"]["uid"] == plan["metadata"]["uid"]
    assert status["verification"]["policyDigest"] == plan_policy(status)
    found = conditions(rig.resource(key))
    assert found["ApprovalRequired"] == "True" and found["PlanReady"] == "True"
    assert (found["Ready"], found["Reconciling"], found["Stalled"]) == ("False", "False", "False")
    assert lease_free(rig) and apply_jobs(rig) == []

    approve(rig, key)
    status = drive(rig, node, key, phase("InSync"))
    assert node.ran[4:] == ["apply", "observe", "plan"]  # the Apply, then its proof
    assert status["applied"]["name"] == plan["metadata"]["name"]
    assert "pendingObservation" not in status and lease_free(rig)
    found = conditions(rig.resource(key))
    assert (found["Ready"], found["Reconciling"], found["InSync"]) == ("True", "False", "True")
    assert status["nextReconciliationTime"]


@pytest.mark.parametrize("severity", get_args(Severity))
def test_a_drift_reading_is_recorded_whatever_severity_ptah_gives_its_worst_finding(
    severity: str,
) -> None:
    # A reading whose worst finding was "safe" (a table added) once failed every
    # pass on the status model, and the schema stayed Observing (found on the lab
    # cluster by the realm scenario).
    rig = make_rig()
    node = ScriptedNode(rig)
    node.db.severity = severity
    key = new_schema(rig)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert node.ran == ["resolve", "verify", "observe", "plan"]
    assert status["observation"]["highestSeverity"] == severity


def plan_policy(status: Status) -> str:
    return str(status["plan"]["verificationPolicyDigest"])


def in_sync_schema(rig: Rig, node: ScriptedNode) -> Key:
    key = new_schema(rig)
    drive(rig, node, key, phase("AwaitingApproval"))
    approve(rig, key)
    drive(rig, node, key, phase("InSync"))
    return key


def test_an_in_sync_schema_is_observed_each_interval_and_a_new_drift_is_planned() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = in_sync_schema(rig, node)
    first = status_of(rig, key)["applied"]["name"]
    ran = len(node.ran)
    # Quiet: before the interval nothing is claimed and nothing is written.
    rig.clocks.advance(300)
    rig.api.clear_calls()
    rig.settle(key)
    assert node.run_jobs() == 0 and rig.api.writes() == []
    # The interval passes with the database unchanged: the tag is resolved again (the
    # same bytes), then one Observe, still InSync.
    rig.clocks.advance(301)
    drive(rig, node, key, phase("InSync"))
    assert node.ran[ran:] == ["resolve", "observe"]
    # Someone changes the database: the next interval's Observe finds drift, and a
    # new plan is published for approval.
    node.db.drift = True
    node.db.plan_text = "ALTER TABLE orders ADD COLUMN note text;\n"
    rig.clocks.advance(601)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert node.ran[ran + 2 :] == ["resolve", "observe", "plan"]
    assert status["plan"]["name"] != first
    assert len(apply_jobs(rig)) == 1  # the first plan's; the new one waits for approval


def test_a_spec_change_resolves_again_and_discards_the_plan_with_its_approvals() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_schema(rig)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    old_plan = status["plan"]["uid"]
    # An approval lands together with a spec edit: the edit wins.
    rig.api.patch_spec(PTAHSCHEMAS, NS, key.name, {"interval": "1h"})
    approval = approve(rig, key)
    rig.reconcile(key)
    status = status_of(rig, key)
    assert status["activeOperation"]["type"] == "Resolve"
    assert "plan" not in status
    stale = conditions(rig.api.get(PTAHSCHEMAAPPROVALS, NS, approval))
    assert stale.get("Stale") == "True"
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert node.ran.count("resolve") == 2 and apply_jobs(rig) == []
    assert status["observedGeneration"] == rig.resource(key)["metadata"]["generation"]
    # The republished plan (same content, same name) is not authorized by the stale
    # approval: it waits for a new one.
    assert status["plan"]["uid"] == old_plan
    rig.settle(key)
    assert "activeOperation" not in status_of(rig, key)


def test_a_failed_reading_is_retried_after_its_interval_with_backoff_and_never_applies() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_schema(rig)
    node.fail("verify", "policy_denied", "cannot open postgres://app:hunter2@db/orders: denied")
    status = drive(rig, node, key, lambda s: "readingFailure" in s and "activeOperation" not in s)
    failure = status["readingFailure"]
    assert failure["operation"] == "Verify" and failure["failures"] == 1
    assert "hunter2" not in failure["message"] and "postgres://app:***@db" in failure["message"]
    assert status["nextReconciliationTime"] == failure["retryNotBefore"]
    found = {c["type"]: c for c in rig.resource(key)["status"]["conditions"]}
    assert found["Stalled"]["status"] == "True" and "hunter2" not in found["Stalled"]["message"]
    assert found["ReconciliationFailed"]["message"] == failure["message"]
    # Nothing is claimed before the retry time (30s, the default interval).
    rig.clocks.advance(29)
    rig.settle(key)
    assert "activeOperation" not in status_of(rig, key)
    # It fails again: the next retry waits twice as long.
    node.fail("verify", "policy_denied", "still denied")
    rig.clocks.advance(2)
    status = drive(rig, node, key, lambda s: s.get("readingFailure", {}).get("failures") == 2)
    rig.clocks.advance(59)
    rig.settle(key)
    assert "activeOperation" not in status_of(rig, key)
    rig.clocks.advance(2)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert "readingFailure" not in status
    assert node.ran == ["resolve", "verify", "verify", "verify", "observe", "plan"]
    assert apply_jobs(rig) == []


def test_a_new_migration_reads_history_plans_and_after_approval_verifies_its_history() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_migration(rig)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert node.ran == ["resolve", "verify", "migration-history"]
    plan = rig.api.get(PTAHMIGRATIONPLANS, NS, status["plan"]["name"])
    assert [m["version"] for m in plan["spec"]["migrations"]] == ["20260101000000"]
    assert plan["spec"]["historyFingerprint"] == status["history"]["fingerprint"]
    assert apply_jobs(rig) == []
    approve(rig, key)
    status = drive(rig, node, key, phase("InSync"))
    assert node.ran[3:] == ["migration-apply", "migration-history"]
    assert status["lastRun"]["appliedVersions"] == ["20260101000000"]
    assert status["history"]["pendingCount"] == 0 and lease_free(rig)
    # A version published later is read at the next interval and planned anew.
    node.db.pending = ["20260201000000"]
    rig.clocks.advance(601)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    assert node.ran[5:] == ["resolve", "migration-history"]
    assert status["plan"]["name"] != plan["metadata"]["name"]
    assert len(apply_jobs(rig)) == 1


def test_an_unresolved_run_blocks_until_a_history_read_an_interval_later_settles_it() -> None:
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_migration(rig)
    drive(rig, node, key, phase("AwaitingApproval"))
    node.db.uncertain = True
    approve(rig, key)
    status = drive(rig, node, key, phase("Blocked"))
    assert status["unresolvedRun"]["outcome"] == "Unknown"
    # A spec edit meanwhile resolves and verifies again; the run still blocks.
    rig.api.patch_spec(PTAHMIGRATIONS, NS, key.name, {"policy": {"lockTimeout": "6m"}})
    status = drive(rig, node, key, phase("Blocked"))
    assert node.ran[-2:] == ["resolve", "verify"] and "unresolvedRun" in status
    assert status["observedGeneration"] == rig.resource(key)["metadata"]["generation"]
    # An interval after the record, a History read finds nothing pending: settled.
    rig.clocks.advance(601)
    status = drive(rig, node, key, phase("InSync"))
    # (The History comes first: only a reading settles the run; the tag's Resolve,
    # due in the same interval, follows it.)
    assert node.ran[-2:] == ["migration-history", "resolve"]
    assert "unresolvedRun" not in status and status["resolvedRun"]["resolution"] == "HistoryRead"
    assert len(apply_jobs(rig)) == 1


def test_a_history_read_again_republishes_the_same_plan_under_its_first_time() -> None:
    """A second History reading of an unchanged history derives the plan already stored.

    Its createdAt is audit only and the second reading's time is later: the plan keeps
    the time it was first derived, and the migration keeps waiting for its approval
    (it went Failed on a real cluster: "spec.createdAt is not the value its claim
    publishes").
    """
    rig = make_rig()
    node = ScriptedNode(rig)
    key = new_migration(rig)
    status = drive(rig, node, key, phase("AwaitingApproval"))
    first = rig.api.get(PTAHMIGRATIONPLANS, NS, status["plan"]["name"])
    # The status loses its reading and plan (a status wipe; on the cluster, the faults
    # suite's History read again): the next passes read the history again, later.
    stored = rig.resource(key)
    rig.api.patch_status(
        PTAHMIGRATIONS,
        NS,
        key.name,
        {"plan": None, "history": None, "phase": "Pending"},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    rig.clocks.advance(5)
    status = drive(
        rig,
        node,
        key,
        lambda s: node.ran.count("migration-history") == 2 and phase("AwaitingApproval")(s),
    )
    assert status["history"]["observedAt"] != first["spec"]["createdAt"]
    again = rig.api.get(PTAHMIGRATIONPLANS, NS, status["plan"]["name"])
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert again["spec"]["createdAt"] == first["spec"]["createdAt"]
