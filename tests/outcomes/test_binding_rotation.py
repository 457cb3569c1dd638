"""Execution-binding rotation, for both families.

A migration retires everything in the write that moves the epoch (a dispatched Apply
is recorded unresolved first). A schema names what it leaves in
``pendingBindingRetirement`` and works it off: the retired plan's approvals marked
stale, a read-only claim kept until its Job stops, an Apply's Job adopted or given up
at its horizon, each Job's cleanup TTL set; no other rotation starts meanwhile.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from jobclaim import CLEANUP_TTL_SECONDS
from jobclaim.api import ScratchImages
from jobclaim.apiserver import JOBS, PTAHSCHEMAAPPROVALS, Unavailable
from kube.fake.inmemory import matching
from tests.support.claimworld import EPOCH
from tests.support.dispatchworld import NS, Rig, add_migration, add_schema, make_rig
from tests.support.outcomeworld import lease_holder_of, rotate_binding, status_of
from tests.support.podworld import (
    APPLIED,
    NO_CHANGES,
    OBSERVED,
    finish_job,
    harvest_with,
    job_of,
    start_pod,
    stop_pod,
)

NEW = "v1-" + "f" * 32
NEWER = "v1-" + "e" * 32


def epoch_of(rig: Rig, key: Any) -> str:
    return str(status_of(rig, key)["executionBinding"]["epoch"])


# (id, how far the migration got, what the rotation leaves)
MIGRATION_ROWS = [
    ("control: nothing claimed", "none", "rotated"),
    ("an undispatched claim holding the Lease", "leased", "rotated"),
    ("a dispatched Apply", "dispatched", "unresolved-first"),
]


@pytest.mark.parametrize(
    ("row", "state", "expected"), MIGRATION_ROWS, ids=[r[0] for r in MIGRATION_ROWS]
)
def test_a_migration_retires_everything_in_the_epoch_write(
    row: str, state: str, expected: str
) -> None:
    rig = make_rig()
    key = add_migration(rig)
    if state == "leased":
        rig.reconcile(key)
        rig.reconcile(key)
        assert lease_holder_of(rig) != ""
    if state == "dispatched":
        rig.settle(key)
    rotate_binding(rig)
    stop = rig.reconcile(key)
    status = status_of(rig, key)
    if expected == "unresolved-first":
        # The run is recorded first; the epoch has not moved yet.
        assert "unresolvedRun" in status and epoch_of(rig, key) == EPOCH
        assert "activeOperation" not in status
        rig.settle(key)
    else:
        assert stop.reason == "the execution binding was rotated"
    status = status_of(rig, key)
    assert epoch_of(rig, key) == NEW
    assert "activeOperation" not in status and "plan" not in status
    assert "pendingLockRelease" not in status
    if state == "leased":
        assert lease_holder_of(rig) == ""


def test_a_schema_marks_the_retired_plans_approvals_stale() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rotate_binding(rig)
    rig.reconcile(key)
    status = status_of(rig, key)
    record = status["pendingBindingRetirement"]
    assert record["retiredEpoch"] == EPOCH and record["plan"]["name"]
    assert "plan" not in status and epoch_of(rig, key) == NEW
    rig.settle(key)
    approval = rig.api.get(PTAHSCHEMAAPPROVALS, NS, f"{key.name}-approval")
    assert {c["type"]: c["status"] for c in approval["status"]["conditions"]} == {"Stale": "True"}
    assert "pendingBindingRetirement" not in status_of(rig, key)


def test_a_schema_keeps_a_read_only_claim_until_its_job_stops() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    rig.reconciler.claim(key, "Observe")
    rig.settle(key)
    claim = rig.claim(key)
    job = job_of(rig, key)
    pod = start_pod(rig, job, terminated=False)
    rotate_binding(rig)
    rig.settle(key)
    status = status_of(rig, key)
    assert status["activeOperation"]["id"] == claim["id"]  # kept while its Job runs
    assert status["pendingBindingRetirement"]["job"]["name"] == claim["jobName"]
    # No other rotation starts while the record stands.
    rotate_binding(rig, NEWER, version="v10.0.0")
    rig.settle(key)
    assert epoch_of(rig, key) == NEW
    # A terminal Job whose Pod still runs has not stopped reaching the database.
    finish_job(rig, job["metadata"]["name"])
    rig.settle(key)
    assert status_of(rig, key)["activeOperation"]["id"] == claim["id"]
    stop_pod(rig, pod["metadata"]["name"])
    rig.settle(key)
    status = status_of(rig, key)
    # Retired; what stands now is the phase machine's next reading, if anything.
    assert status.get("activeOperation", {}).get("id") != claim["id"]
    stored = rig.api.get(JOBS, NS, job["metadata"]["name"])
    assert stored["spec"]["ttlSecondsAfterFinished"] == CLEANUP_TTL_SECONDS
    # With the record gone, the waiting rotation goes ahead.
    rig.settle(key)
    assert "pendingBindingRetirement" not in status_of(rig, key)
    assert epoch_of(rig, key) == NEWER


def test_a_schema_records_a_dispatched_apply_and_accounts_for_its_job() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    apply_job = job_of(rig, key)
    pod = start_pod(rig, apply_job, terminated=False)
    rotate_binding(rig)
    rig.reconcile(key)
    status = status_of(rig, key)
    # One write: the epoch, the Apply's record, and the retirement naming its Job.
    assert epoch_of(rig, key) == NEW and "activeOperation" not in status
    assert status["pendingObservation"]["outcome"] == "OutcomeUnknown"
    assert status["pendingBindingRetirement"]["job"] == {
        "operation": "Apply",
        "name": apply_job["metadata"]["name"],
        "uid": apply_job["metadata"]["uid"],
    }
    rig.settle(key)
    assert "activeOperation" not in status_of(rig, key)  # no proof while the Job runs
    assert lease_holder_of(rig) != ""
    stop_pod(rig, pod["metadata"]["name"])
    finish_job(rig, apply_job["metadata"]["name"])
    rig.settle(key)
    stored = rig.api.get(JOBS, NS, apply_job["metadata"]["name"])
    assert stored["spec"]["ttlSecondsAfterFinished"] == CLEANUP_TTL_SECONDS
    status = status_of(rig, key)
    assert "pendingBindingRetirement" not in status
    # Now the proof goes on, under the retired Apply's Lease.
    assert status["activeOperation"]["type"] == "Observe"


def test_an_unharvested_unknown_apply_is_given_up_at_its_horizon() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.api.fail_before_write(matching("create", JOBS), Unavailable("lost"))
    rig.settle(key)  # marked, never created: an unknown outcome with no Job
    assert "applyJobUID" not in status_of(rig, key)["pendingObservation"]
    rotate_binding(rig)
    rig.settle(key)
    record = status_of(rig, key)["pendingBindingRetirement"]
    assert record["job"]["operation"] == "Apply" and "uid" not in record["job"]
    rig.clocks.advance(rig.env.config.apply_window_seconds + 61)
    rig.settle(key)
    assert "pendingBindingRetirement" not in status_of(rig, key)
    # Given up, never created: the proof goes on to its Observe, and no Apply exists.
    assert [j for j in rig.jobs() if "apply" in j["metadata"]["name"]] == []
    assert rig.claim(key)["type"] == "Observe"


def test_a_retired_apply_created_late_is_adopted_by_uid() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.api.fail_after_write(matching("create", JOBS), Unavailable("response lost"))
    for _ in range(6):
        stop = rig.reconcile(key)
        if stop.reason.startswith("the create's outcome is unknown"):
            break
    (job,) = rig.jobs()
    assert "jobUID" not in rig.claim(key)  # stored, never recorded
    rotate_binding(rig)
    rig.reconcile(key)
    record = status_of(rig, key)["pendingBindingRetirement"]
    assert record["job"]["name"] == job["metadata"]["name"] and "uid" not in record["job"]
    rig.reconcile(key)  # the retired plan's approvals first
    rig.reconcile(key)  # then the Job, found under the recorded name, held to the record
    status = status_of(rig, key)
    assert status["pendingBindingRetirement"]["job"]["uid"] == job["metadata"]["uid"]
    assert status["pendingObservation"]["applyJobUID"] == job["metadata"]["uid"]
    assert "RetiredJobAdopted" in rig.sink.reasons(key.name)
    finish_job(rig, job["metadata"]["name"])
    rig.settle(key)
    assert "pendingBindingRetirement" not in status_of(rig, key)
    assert len([j for j in rig.jobs() if "apply" in j["metadata"]["name"]]) == 1


def test_a_proof_completing_after_its_epoch_was_retired_sweeps_the_plans_approvals() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    plan = status_of(rig, key)["plan"]
    # An approval admitted before the Apply claim, committed after the rotation's sweep.
    late = rig.api.get(PTAHSCHEMAAPPROVALS, NS, f"{key.name}-approval")
    spec = dict(late["spec"])
    rig.api.create(
        PTAHSCHEMAAPPROVALS, NS, {"metadata": {"name": "late", "namespace": NS}, "spec": spec}
    )
    harvest_with(rig, key, "apply", APPLIED)
    rig.settle(key)
    rotate_binding(rig)
    rig.settle(key)
    assert status_of(rig, key)["pendingObservation"]["plan"]["name"] == plan["name"]
    # The proof's readings, whichever claim stands (the rotation retires the Observe
    # that was running and the proof claims it again under the new epoch).
    for _ in range(4):
        claim = rig.claim(key)
        if not claim:
            break
        fields = OBSERVED if claim["type"] == "Observe" else NO_CHANGES
        harvest_with(rig, key, claim["type"].lower(), fields)
        rig.settle(key)
    assert "pendingObservation" not in status_of(rig, key)
    approval = rig.api.get(PTAHSCHEMAAPPROVALS, NS, "late")
    assert {c["type"]: c["status"] for c in approval["status"]["conditions"]} == {"Stale": "True"}


# (id, what changes in the manager's configuration, whether a new epoch is installed)
COMPONENT_ROWS: list[tuple[str, dict[str, Any], bool]] = [
    ("control: a manager-only upgrade", {}, False),
    ("the executor image", {"executor_image": "registry.example/ptah@sha256:" + "d" * 64}, True),
    ("the Ptah version", {"ptah_version": "v9.9.9"}, True),
    ("the runner protocol", {"runner_protocol_version": 99}, True),
    ("the controller-state version", {"controller_state_version": 99}, True),
    (
        "a scratch image",
        {
            "scratch_images": ScratchImages(
                postgresql="registry.example/scratch-postgresql@sha256:" + "d" * 64
            )
        },
        True,
    ),
    ("the scratch images dropped", {"scratch_images": None}, True),
]


@pytest.mark.parametrize(
    ("row", "change", "rotates"), COMPONENT_ROWS, ids=[r[0] for r in COMPONENT_ROWS]
)
def test_each_binding_component_installs_a_new_epoch(
    row: str, change: dict[str, Any], rotates: bool
) -> None:
    for add in (add_schema, add_migration):
        rig = make_rig()
        key = add(rig)
        config = rig.env.config
        manager = config.manager.model_copy(update={"controller_revision": "r2"})
        rig.env.config = dataclasses.replace(
            config, manager=manager, binding=dataclasses.replace(config.binding, **change)
        )
        rig.env.epochs = lambda: NEW
        rig.reconcile(key)
        assert (epoch_of(rig, key) == NEW) is rotates
