"""Supervision: rebind by UID, renew, hold the Job to its claim, adopt only a match.

Drift is an unknown outcome for a mutating claim (never a second executor) and a new
attempt for a read-only one. While the inputs hold the Job is held to its rebuild,
with the manager record the Job itself carries; once they moved, to its envelope.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.stages.claimsupervision import HARVEST_PENDING
from jobclaim.api import ManagerRecord
from jobclaim.apiserver import JOBS, PTAHSCHEMAS, Unavailable
from kube.fake.inmemory import matching
from tests.support.claimworld import MANAGER
from tests.support.dispatchworld import NS, add_migration, add_schema, make_rig
from tests.support.outcomeworld import status_of
from tests.support.podworld import APPLIED, MIGRATED, finish_job, harvest_with, start_pod

RUNNING = "the Job is running"


def test_adoption_after_a_lost_create_response() -> None:
    for add in (add_schema, add_migration):
        rig = make_rig()
        key = add(rig)
        rig.api.fail_after_write(matching("create", JOBS), Unavailable("response lost"))
        reasons = [stop.reason for stop in rig.settle(key)]
        assert reasons[-3:] == [
            "the create's outcome is unknown; the next pass adopts the Job or records it",
            "the Job under the reserved name was adopted",
            RUNNING,
        ]
        (job,) = rig.jobs()
        claim = rig.claim(key)
        assert claim["jobUID"] == job["metadata"]["uid"]
        assert rig.job_creates() == 1
        assert rig.reconcile(key).reason == RUNNING


@pytest.mark.parametrize(
    "tamper",
    ["control", "spec", "owner", "epoch-annotation"],
)
def test_a_job_under_the_reserved_name_is_adopted_only_when_it_matches(tamper: str) -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.api.fail_after_write(matching("create", JOBS), Unavailable("response lost"))
    rig.reconcile(key)
    rig.reconcile(key)
    rig.reconcile(key)  # mark, then the create's answer is lost: no UID recorded
    name = rig.claim(key)["jobName"]
    if tamper == "spec":
        rig.api.patch_spec(JOBS, NS, name, {"activeDeadlineSeconds": 86400})
    if tamper == "owner":
        rig.api.patch_metadata(JOBS, NS, name, {"ownerReferences": []})
    if tamper == "epoch-annotation":
        rig.api.patch_metadata(
            JOBS, NS, name,
            {"annotations": {"operator.ptah.run/execution-binding-id": "v1-" + "9" * 32}},
        )  # fmt: skip
    stop = rig.reconcile(key)
    claim = rig.claim(key)
    if tamper == "control":
        assert stop.reason == "the Job under the reserved name was adopted"
        assert claim["jobUID"]
    else:
        assert stop.reason.startswith("the outcome is unknown")
        assert "jobUID" not in claim  # a Job that fails the match is never recorded
    assert rig.job_creates() == 1


def test_a_read_only_claim_that_drifted_runs_again_under_a_new_attempt() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    rig.reconciler.claim(key, "Observe")
    rig.settle(key)
    first = rig.claim(key)
    rig.api.patch_spec(JOBS, NS, first["jobName"], {"activeDeadlineSeconds": 86400})
    stop = rig.reconcile(key)
    assert stop.reason.startswith("a read-only claim runs again")
    retried = rig.claim(key)
    assert retried["attempt"] == 2 and retried["id"] == first["id"]
    assert retried["jobName"] != first["jobName"] and "jobUID" not in retried
    rig.settle(key)
    names = sorted(j["metadata"]["name"] for j in rig.jobs())
    assert names == sorted([first["jobName"], retried["jobName"]])  # the old one is left
    assert rig.claim(key)["jobUID"]


def test_a_read_only_job_that_vanished_runs_again() -> None:
    rig = make_rig()
    key = add_migration(rig)
    rig.reconciler.claim(key, "History")
    rig.settle(key)
    first = rig.claim(key)
    rig.api.delete(JOBS, NS, first["jobName"])
    assert rig.reconcile(key).reason.startswith("a read-only claim runs again")
    rig.settle(key)
    assert rig.claim(key)["attempt"] == 2
    assert len(rig.jobs()) == 1


def test_inputs_that_moved_hold_the_job_to_its_envelope() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    rig.api.patch_spec(PTAHSCHEMAS, NS, key.name, {"interval": "1h"})  # a new generation
    assert rig.reconcile(key).reason == RUNNING
    # Under an envelope match a tampered spec is not seen, but a foreign epoch is.
    name = rig.claim(key)["jobName"]
    rig.api.patch_metadata(
        JOBS, NS, name,
        {"annotations": {"operator.ptah.run/operation-id": "sha256:" + "0" * 64}},
    )  # fmt: skip
    assert rig.reconcile(key).reason.startswith("the outcome is unknown")


def test_a_manager_only_upgrade_adopts_its_predecessors_job() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.api.fail_after_write(matching("create", JOBS), Unavailable("response lost"))
    rig.reconcile(key)
    rig.reconcile(key)
    rig.reconcile(key)  # the create's answer was lost: no UID recorded
    upgraded = ManagerRecord(
        controller_image="registry.example.com/ptah-operator@sha256:" + "7" * 64,
        controller_revision="r2",
        runner_image=MANAGER.runner_image,
    )
    rig.env.config = dataclasses.replace(rig.env.config, manager=upgraded)
    assert rig.reconcile(key).reason == "the Job under the reserved name was adopted"
    assert rig.reconcile(key).reason == RUNNING


def test_a_finished_job_waits_for_the_harvest_and_keeps_renewing() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    name = rig.claim(key)["jobName"]
    # A Pod that terminated before its record landed: the record may still arrive.
    start_pod(rig, rig.api.get(JOBS, NS, name))
    finish_job(rig, name)
    before = rig.leases()[0]["spec"]["renewTime"]
    rig.clocks.advance(5)
    assert rig.reconcile(key).reason == HARVEST_PENDING
    assert rig.leases()[0]["spec"]["renewTime"] > before


# -- who dispatched: the record names the Job's manager, not the one reading it ------

UPGRADED = ManagerRecord(
    controller_image="registry.example.com/ptah-operator@sha256:" + "7" * 64,
    controller_revision="r2",
    runner_image=MANAGER.runner_image,
)


def _dispatched_by(status: dict[str, Any], family: str) -> object:
    record = status["pendingObservation"] if family == "schema" else status["lastRun"]
    return record.get("dispatchedBy")


@pytest.mark.parametrize("upgrade", [False, True], ids=["same-manager", "upgraded"])
@pytest.mark.parametrize("family", ["schema", "migration"])
def test_a_run_is_recorded_as_dispatched_by_the_manager_its_job_names(
    family: str, upgrade: bool
) -> None:
    """After an identity-only upgrade the adopting manager reads a Job its predecessor
    dispatched: the audit record names the predecessor (the Job's own record), as a
    published plan names its Plan Job's, never the manager that happened to read it."""
    rig = make_rig()
    key = (add_schema if family == "schema" else add_migration)(rig)
    rig.settle(key)
    assert rig.claim(key)["type"] == "Apply" and rig.claim(key)["jobUID"]
    if upgrade:
        rig.env.config = dataclasses.replace(rig.env.config, manager=UPGRADED)
    op, fields = ("apply", APPLIED) if family == "schema" else ("migration-apply", MIGRATED)
    harvest_with(rig, key, op, fields)
    rig.settle(key)
    status = status_of(rig, key)
    assert _dispatched_by(status, family) == MANAGER.model_dump(by_alias=True, mode="json")


def test_a_run_whose_job_was_never_read_names_no_dispatcher() -> None:
    """A marked claim whose Job is gone: nothing says which manager created it (the
    writing one may be a later release), so the unresolved record names none."""
    rig = make_rig()
    key = add_migration(rig)
    rig.settle(key)
    rig.env.config = dataclasses.replace(rig.env.config, manager=UPGRADED)
    rig.api.delete(JOBS, NS, rig.claim(key)["jobName"])
    rig.settle(key)
    status = status_of(rig, key)
    assert status["unresolvedRun"]["outcome"] == "Unknown"
    assert "dispatchedBy" not in status["unresolvedRun"]
    assert "dispatchedBy" not in status["lastRun"]
