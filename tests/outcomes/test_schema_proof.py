"""A schema's pending observation: the proof that settles an Apply's account.

The record keeps the realm. The proof renews the Apply's Lease, waits until no Apply
Pod can run, then claims Observe and the scoped Plan under that same Lease; only a
Plan whose target matches and reports no changes settles it, and only that write
stages the release. Convergence after an unknown outcome attributes no Apply.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim.apiserver import PTAHSCHEMAS
from tests.support.dispatchworld import NS, Rig, add_schema, make_rig
from tests.support.outcomeworld import lease_holder_of, status_of
from tests.support.podworld import (
    APPLIED,
    NO_CHANGES,
    OBSERVED,
    finish_job,
    harvest_with,
    job_of,
    result_for,
    start_pod,
    stop_pod,
)

LOST = {"code": "lost", "message": "the connection dropped"}
CHANGES = {
    "plan": {
        "planOutcome": "Changes",
        "planContentDigest": "sha256:" + "e" * 64,
        "statementCount": 1,
        "stdout": "CREATE TABLE orders ();\n",
    }
}


def recorded(rig: Rig, fields: dict[str, Any] = APPLIED) -> Any:
    key = add_schema(rig)
    rig.settle(key)
    harvest_with(rig, key, "apply", fields)
    rig.settle(key)
    return key


def prove(rig: Rig, key: Any, plan: dict[str, Any] = NO_CHANGES) -> None:
    assert rig.claim(key)["type"] == "Observe"
    harvest_with(rig, key, "observe", OBSERVED)
    rig.settle(key)
    assert rig.claim(key)["type"] == "Plan"
    harvest_with(rig, key, "plan", plan)
    rig.settle(key)


def test_the_proof_runs_under_the_applys_own_lease_and_settles_with_its_release() -> None:
    rig = make_rig()
    key = recorded(rig)
    pending = status_of(rig, key)["pendingObservation"]
    assert pending["outcome"] == "ApplySucceeded"
    holder = lease_holder_of(rig)
    # The proof's claims hold the realm as the Apply did: same holder, same epoch.
    assert rig.claim(key)["leaseEpoch"] == pending["leaseEpoch"]
    prove(rig, key)
    status = status_of(rig, key)
    assert "pendingObservation" not in status and "activeOperation" not in status
    assert status["applied"]["name"] == pending["plan"]["name"]  # attributed
    assert lease_holder_of(rig) == "" and holder != ""
    assert rig.resource(key)["metadata"].get("finalizers") is None


# (id, the Apply's frame, the proof's Plan, what is recorded)
PROOF_ROWS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("control: read Apply, converged", APPLIED, NO_CHANGES, "attributed"),
    (
        "unknown Apply, converged",
        {"mutationStarted": True, "uncertain": True, "childExitCode": 1, "error": LOST},
        NO_CHANGES,
        "converged",
    ),
    ("read Apply, changes remain", APPLIED, CHANGES, "owed"),
]


@pytest.mark.parametrize(
    ("row", "apply", "plan", "expected"), PROOF_ROWS, ids=[r[0] for r in PROOF_ROWS]
)
def test_only_a_plan_with_no_changes_settles_and_convergence_attributes_nothing(
    row: str, apply: dict[str, Any], plan: dict[str, Any], expected: str
) -> None:
    rig = make_rig()
    key = recorded(rig, apply)
    if expected == "converged":
        assert status_of(rig, key)["pendingObservation"]["outcome"] == "OutcomeUnknown"
    prove(rig, key, plan)
    status = status_of(rig, key)
    if expected == "owed":
        assert status["pendingObservation"]["planRequired"] is True
        assert lease_holder_of(rig) != ""  # the realm stays with the proof
        return
    assert "pendingObservation" not in status
    assert ("applied" in status) is (expected == "attributed")
    assert ("ConvergedAfterUnknownOutcome" in rig.sink.reasons(key.name)) is (
        expected == "converged"
    )


def test_the_proof_waits_while_an_apply_pod_runs_and_two_pods_force_unknown() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    job = job_of(rig, key)
    start_pod(rig, job, suffix="a", result=(result_for(rig, key, "apply", **APPLIED)))
    late = start_pod(rig, job, suffix="b", terminated=False)
    finish_job(rig, job["metadata"]["name"])
    rig.settle(key)
    status = status_of(rig, key)
    pending = status["pendingObservation"]
    assert pending["applyPodCount"] == 2 and pending["outcome"] == "OutcomeUnknown"
    assert "activeOperation" not in status  # no proof is claimed while a Pod runs
    assert lease_holder_of(rig) != ""
    stop_pod(rig, late["metadata"]["name"])
    rig.settle(key)
    assert rig.claim(key)["type"] == "Observe"


def test_the_proof_runs_before_suspension() -> None:
    rig = make_rig()
    key = recorded(rig)
    rig.api.patch_spec(PTAHSCHEMAS, NS, key.name, {"suspend": True})
    # The running Observe's inputs moved with the spec: its reading is discarded, and
    # the proof claims again, suspended or not.
    harvest_with(rig, key, "observe", OBSERVED)
    rig.settle(key)
    prove(rig, key)
    assert "pendingObservation" not in status_of(rig, key)


def test_the_finalizer_stays_while_proof_is_owed() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    job = job_of(rig, key)
    pod = start_pod(rig, job, terminated=False)
    rig.api.patch_spec(PTAHSCHEMAS, NS, key.name, {"interval": "1h"})  # inputs move
    finish_job(rig, job["metadata"]["name"])
    rig.settle(key)
    assert status_of(rig, key)["pendingObservation"]["outcome"] == "OutcomeUnknown"
    rig.api.delete(PTAHSCHEMAS, NS, key.name)
    rig.settle(key)
    assert rig.api.peek(PTAHSCHEMAS, NS, key.name) is not None  # an Apply Pod still runs
    assert lease_holder_of(rig) != ""
    stop_pod(rig, pod["metadata"]["name"])
    rig.settle(key)
    assert rig.api.peek(PTAHSCHEMAS, NS, key.name) is None
    assert lease_holder_of(rig) == ""
