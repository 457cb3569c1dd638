"""What ends a claim before its mark: a moved authorization, a taken projection name,
an admission envelope that keeps moving, and deletion.

Each row moves one thing after the claim was persisted and its realm taken, then
runs the passes. A moved authorization retires the claim (and, for an Apply, the plan
it was authorized by) and hands the realm back; nothing is ever created.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable

import pytest

from controller.runtime.reconciler import Key
from controller.stages.claimsupervision import HARVEST_PENDING
from jobclaim.api import ManagerRecord
from jobclaim.apiserver import (
    CONFIGMAPS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAS,
    SERVICEACCOUNTS,
    Resource,
)
from tests.support.claimworld import MANAGER
from tests.support.dispatchworld import NS, Rig, add_migration, add_schema, make_rig

Move = Callable[[Rig, str], object]


def _approval_stale(resource: Resource) -> Move:
    def move(rig: Rig, name: str) -> None:
        found = rig.api.get(resource, NS, f"{name}-approval")
        rig.api.patch_status(
            resource, NS, f"{name}-approval",
            {"conditions": [{"type": "Stale", "status": "True"}]},
            resource_version=found["metadata"]["resourceVersion"],
        )  # fmt: skip

    return move


def _tamper_chunk(rig: Rig, name: str) -> None:
    chunk = f"{rig.resource(Key('PtahSchema', NS, name))['status']['plan']['name']}-000"
    found = rig.api.get(PTAHSCHEMAPLANCHUNKS, NS, chunk)
    found["spec"]["data"] = base64.b64encode(b"DROP TABLE orders;\n").decode()
    rig.api.replace(PTAHSCHEMAPLANCHUNKS, NS, found)


SCHEMA_MOVES: list[tuple[str, Move | None]] = [
    ("control", None),
    ("suspended", lambda rig, n: rig.api.patch_spec(PTAHSCHEMAS, NS, n, {"suspend": True})),
    ("spec-changed", lambda rig, n: rig.api.patch_spec(PTAHSCHEMAS, NS, n, {"interval": "1h"})),
    ("approval-deleted", lambda rig, n: rig.api.delete(PTAHSCHEMAAPPROVALS, NS, f"{n}-approval")),
    ("approval-stale", _approval_stale(PTAHSCHEMAAPPROVALS)),
    ("chunk-tampered", _tamper_chunk),
]


def _claim_on_another_artifact(rig: Rig, name: str) -> None:
    """The claim's artifact is no longer the one its plan was read from (a status
    restored, or written by another hand): the approved versions would name other files."""
    found = rig.api.get(PTAHMIGRATIONS, NS, name)
    status = found["status"]
    other = "sha256:" + "9" * 64
    status["activeOperation"]["source"] = {
        "reference": "registry.example.com/shop/billing-migrations@" + other,
        "digest": other,
    }
    rig.api.patch_status(
        PTAHMIGRATIONS, NS, name, status, resource_version=found["metadata"]["resourceVersion"]
    )


MIGRATION_MOVES: list[tuple[str, Move | None]] = [
    ("control", None),
    ("suspended", lambda rig, n: rig.api.patch_spec(PTAHMIGRATIONS, NS, n, {"suspend": True})),
    ("approval-deleted",
     lambda rig, n: rig.api.delete(PTAHMIGRATIONAPPROVALS, NS, f"{n}-approval")),
    ("approval-stale", _approval_stale(PTAHMIGRATIONAPPROVALS)),
    ("plan-deleted", lambda rig, n: rig.api.delete(
        PTAHMIGRATIONPLANS, NS, rig.claim(Key("PtahMigration", NS, n))["planRef"]["name"])),
    ("claim-on-another-artifact", _claim_on_another_artifact),
]  # fmt: skip


ROWS = [("schema", w, m) for w, m in SCHEMA_MOVES] + [
    ("migration", w, m) for w, m in MIGRATION_MOVES
]


@pytest.mark.parametrize(("family", "what", "move"), ROWS, ids=[f"{f}-{w}" for f, w, _ in ROWS])
def test_a_moved_authorization_retires_the_claim(family: str, what: str, move: Move | None) -> None:
    rig = make_rig()
    key = add_schema(rig) if family == "schema" else add_migration(rig)
    rig.reconcile(key)  # claimed
    rig.reconcile(key)  # realm taken, staged, snapshot resolved
    if move is not None:
        move(rig, key.name)
    if move is None:
        rig.settle(key)
        assert rig.claim(key)["jobUID"]
        return
    # The pass that retires: what it leaves is read before the phase machine's next
    # pass claims the reading that comes next.
    stops = [rig.reconcile(key)]
    status = rig.resource(key)["status"]
    assert stops[0].reason.startswith("the claim was retired"), stops[0].reason
    assert "activeOperation" not in status and "pendingLockRelease" not in status
    assert rig.job_creates() == 0
    assert rig.leases()[0]["spec"]["holderIdentity"] == ""  # the realm is handed back
    plan_kept = what in ("suspended",)
    assert ("plan" in status) is plan_kept
    rig.settle(key)
    assert rig.claim(key).get("type") != "Apply"  # a reading comes next, never the Apply
    assert [j for j in rig.jobs() if "-apply-" in j["metadata"]["name"]] == []


def test_a_foreign_object_under_a_projection_name_retires_the_plan() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.reconcile(key)
    plan = rig.resource(key)["status"]["plan"]["name"]
    rig.api.create(CONFIGMAPS, NS, {"metadata": {"name": f"{plan}-000"}, "data": {"a": "b"}})
    stop = rig.reconcile(key)
    assert stop.reason.startswith("the claim was retired: a projection name is taken")
    assert "plan" not in rig.resource(key)["status"]
    assert rig.job_creates() == 0


def test_an_envelope_that_moves_is_resolved_once_then_refused() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.reconcile(key)
    rig.reconcile(key)  # the snapshot is durable
    first = rig.claim(key)["admissionSnapshot"]["templateDigest"]

    def new_runner(digit: str) -> None:
        runner = ManagerRecord(
            controller_image=MANAGER.controller_image,
            controller_revision=MANAGER.controller_revision,
            runner_image="registry.example.com/ptah-runner@sha256:" + digit * 64,
        )
        rig.env.config = dataclasses.replace(rig.env.config, manager=runner)

    new_runner("4")  # a template the snapshot predates
    assert rig.reconcile(key).reason == "the admission snapshot is durable; the pass returns"
    claim = rig.claim(key)
    assert claim["admissionSnapshotRefreshed"] is True
    assert claim["admissionSnapshot"]["templateDigest"] != first
    new_runner("5")  # and it moves again
    stop = rig.reconcile(key)
    assert stop.reason.startswith("the claim was retired: the Job's Pod template disagrees")
    assert rig.job_creates() == 0


def test_admission_that_cannot_be_pinned_writes_nothing() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.api.delete(SERVICEACCOUNTS, NS, "default")
    rig.reconcile(key)
    stop = rig.reconcile(key)
    assert stop.reason == "admission cannot be pinned"
    assert "admissionSnapshot" not in rig.claim(key)
    assert "AdmissionUnresolvable" in rig.sink.reasons(key.name)


def test_deletion_retires_an_undispatched_claim_and_keeps_a_dispatched_one() -> None:
    rig = make_rig()
    waiting = add_schema(rig, "orders-a")
    running = add_schema(rig, "orders-b", coordination_key="other-db")
    rig.reconcile(waiting)
    rig.settle(running)
    for key in (waiting, running):
        rig.api.delete(PTAHSCHEMAS, NS, key.name)
    rig.settle(waiting)
    assert rig.api.peek(PTAHSCHEMAS, NS, waiting.name) is None  # retired, finalizer gone
    assert rig.reconcile(running).reason in ("the Job is running", HARVEST_PENDING)
    assert rig.claim(running)["jobUID"]  # a dispatched claim holds deletion


@pytest.mark.parametrize(("policy", "jobs"), [("OnApproval", 0), ("Always", 1), ("Never", 0)])
def test_what_the_apply_policy_lets_through_without_an_approval(policy: str, jobs: int) -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False, apply_policy=policy)
    for _ in range(3):
        rig.settle(key)
    assert len(rig.jobs()) == jobs
    if jobs:
        # Nothing to spend: the claim holds no approval and the sequence skips none.
        assert "approval" not in rig.resource(key)["status"]["plan"]
        assert rig.claim(key)["jobUID"]
