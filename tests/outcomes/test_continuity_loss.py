"""A run whose realm changed hands under it is unreadable, never retried as itself.

Spec: "after dispatch it latches continuity loss, and the run becomes unreadable
rather than retryable". Each row dispatches a claim, then changes the realm's Lease
under its running Job one way (deleted; taken by another holder; its epoch changed
under the same holder), then leaves the Job succeeded, failed or still running, and
says what the next passes record. The Job's Pod always wrote a good record: a row
that reads it would record a success, so a row passing proves the record was not read.

- a mutating claim (both families' Apply): a schema records an unknown outcome as its
  pending observation, with no Apply attributed; a migration records an unresolved
  run, Unknown;
- a read-only claim that holds the realm (a schema proof's Observe, under the Apply's
  own tenure): its reading is discarded unread and the proof restarts as an unknown
  outcome, so the Observe runs again under a new claim once the realm is back.

A control row per family and Job state changes nothing about the Lease.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.pieces.targetlock import ANN_LEASE_EPOCH
from controller.stages.claimsupervision import LEASE_CHANGED_HANDS
from jobclaim.apiserver import LEASES
from tests.support.dispatchworld import LEASE_NS, Rig, add_schema, make_rig
from tests.support.faultrig import Contender
from tests.support.outcomeworld import FAMILIES, FamilyCase, account, status_of
from tests.support.podworld import (
    APPLIED,
    OBSERVED,
    finish_job,
    harvest_with,
    job_of,
    result_for,
    start_pod,
)

OTHER_EPOCH = "v1-" + "e" * 32

Loss = Callable[[Rig, Any], None]
JobState = Callable[[Rig, Any, str, dict[str, Any]], None]


def _lease(rig: Rig) -> dict[str, Any]:
    (lease,) = rig.leases()
    return lease


def unchanged(rig: Rig, key: Any) -> None:
    del rig, key


def lease_deleted(rig: Rig, key: Any) -> None:
    rig.api.delete(LEASES, LEASE_NS, _lease(rig)["metadata"]["name"])


def lease_taken(rig: Rig, key: Any) -> None:
    """Another resource's claim takes the realm after watching it unrenewed."""
    claim = rig.claim(key)
    contender = Contender.on(rig.api, LEASE_NS, rig.clocks.wall)
    assert contender.take(claim["coordinationDigest"], claim["leaseDurationSeconds"])


def epoch_changed(rig: Rig, key: Any) -> None:
    """Same holder, another tenure: what a stop between a Lease write and its epoch
    status write leaves behind."""
    lease = _lease(rig)
    lease["metadata"]["annotations"][ANN_LEASE_EPOCH] = OTHER_EPOCH
    rig.api.replace(LEASES, LEASE_NS, lease)


def _ended(kind: str) -> JobState:
    def end(rig: Rig, key: Any, runner_op: str, fields: dict[str, Any]) -> None:
        job = job_of(rig, key)
        start_pod(rig, job, result=(result_for(rig, key, runner_op, **fields)))
        finish_job(rig, job["metadata"]["name"], kind=kind)

    return end


def running(rig: Rig, key: Any, runner_op: str, fields: dict[str, Any]) -> None:
    del runner_op, fields
    start_pod(rig, job_of(rig, key), terminated=False)


LOSSES: list[tuple[str, Loss]] = [
    ("Lease deleted", lease_deleted),
    ("Lease taken by another holder", lease_taken),
    ("epoch changed", epoch_changed),
]
JOB_STATES: list[tuple[str, JobState]] = [
    ("Job succeeded", _ended("Complete")),
    ("Job failed", _ended("Failed")),
    ("Job still running", running),
]

# (id, loss, Job state, what the account is: succeeded, live or unknown)
ROWS: list[tuple[str, Loss, JobState, str]] = [
    ("control: Job succeeded", unchanged, _ended("Complete"), "succeeded"),
    ("control: Job failed, record good", unchanged, _ended("Failed"), "succeeded"),
    ("control: Job still running", unchanged, running, "live"),
] + [
    (f"{loss_id}, {state_id}", loss, state, "unknown")
    for loss_id, loss in LOSSES
    for state_id, state in JOB_STATES
]


def _record_reads(rig: Rig) -> int:
    return sum(
        1
        for call in rig.api.calls
        if call.verb == "get" and call.resource.plural == "ptahresultrecords"
    )


@pytest.mark.parametrize("family", FAMILIES, ids=str)
@pytest.mark.parametrize(("row", "loss", "state", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_a_mutating_run_whose_realm_changed_hands_is_never_read(
    family: FamilyCase, row: str, loss: Loss, state: JobState, expected: str
) -> None:
    rig = make_rig()
    key = family.add(rig)
    rig.settle(key)
    claim = rig.claim(key)
    assert claim["jobUID"] and claim["leaseContinuityLost"] is False
    loss(rig, key)
    state(rig, key, family.apply_op, family.applied)
    rig.api.clear_calls()
    rig.settle(key)
    assert account(rig, key) == expected, row
    status = status_of(rig, key)
    if expected != "unknown":
        return
    assert _record_reads(rig) == 0, "the run's result was read"
    notes = [record.note for regarding, record in rig.sink.records if regarding.name == key.name]
    assert any(LEASE_CHANGED_HANDS in note for note in notes)
    if family.name == "schema":
        assert status["pendingObservation"]["outcome"] == "OutcomeUnknown"
        assert status["pendingObservation"]["applyJobName"] == claim["jobName"]
        assert "applied" not in status  # no Apply attributed
    else:
        assert status["unresolvedRun"]["outcome"] == "Unknown"
        assert status["unresolvedRun"]["jobName"] == claim["jobName"]
        assert status["lastRun"]["outcome"] == "Unknown"
    # Never a second executor of the Apply.
    applies = [j["metadata"]["name"] for j in rig.jobs() if "apply" in j["metadata"]["name"]]
    assert applies == [claim["jobName"]]


# (id, loss, Job state, whether the proof's Observe runs again in these passes: a realm
# another holder took is waited for)
READ_ONLY_ROWS: list[tuple[str, Loss, JobState, bool | None]] = [
    ("control: Job succeeded", unchanged, _ended("Complete"), None),
] + [
    (f"{loss_id}, {state_id}", loss, state, loss is not lease_taken)
    for loss_id, loss in LOSSES
    for state_id, state in JOB_STATES
]


@pytest.mark.parametrize(
    ("row", "loss", "state", "again"), READ_ONLY_ROWS, ids=[r[0] for r in READ_ONLY_ROWS]
)
def test_a_read_only_reading_whose_realm_changed_hands_runs_again(
    row: str, loss: Loss, state: JobState, again: bool | None
) -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    harvest_with(rig, key, "apply", APPLIED)
    rig.settle(key)
    observe = rig.claim(key)
    assert observe["type"] == "Observe" and observe["jobUID"]
    assert status_of(rig, key)["pendingObservation"]["outcome"] == "ApplySucceeded"
    loss(rig, key)
    state(rig, key, "observe", OBSERVED)
    rig.api.clear_calls()
    rig.settle(key)
    pending = status_of(rig, key)["pendingObservation"]
    if again is None:
        # The control row: the Observe was read, and the scoped Plan is next.
        assert pending["outcome"] == "ApplySucceeded" and pending["planRequired"] is True
        assert rig.claim(key)["type"] == "Plan"
        return
    assert _record_reads(rig) == 0, "the reading's result was read"
    # Someone else may have written since the Apply: it is no longer attributed.
    assert pending["outcome"] == "OutcomeUnknown", row
    assert pending.get("planRequired") is not True
    now = rig.claim(key)
    if again:
        assert now["type"] == "Observe" and now["jobName"] != observe["jobName"]
        assert now["leaseContinuityLost"] is False
    else:
        assert now == {}  # the proof waits for the realm
