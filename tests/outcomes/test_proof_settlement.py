"""A person's settlement ends a proof no read can finish (controller.pieces.settlements).

"Only deletion and a person's settlement end a proof that no read can finish": a
stamped PtahSchemaProofSettlement naming the pending attempt clears the proof in the
name admission stamped, attributes no Apply, and stages the Lease release in the same
status patch; one that is unstamped, names another attempt or another schema, or
comes while an Apply Pod may still write, settles nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jobclaim.apiserver import PTAHSCHEMAPROOFSETTLEMENTS, PTAHSCHEMAS
from jobclaim.stamps import stamp_time
from tests.support.dispatchworld import NS, Rig, add_schema, make_rig
from tests.support.outcomeworld import lease_holder_of, status_of
from tests.support.podworld import finish_job, harvest_with, job_of, start_pod, stop_pod

LOST = {"code": "lost", "message": "the connection dropped"}
UNKNOWN = {"mutationStarted": True, "uncertain": True, "childExitCode": 1, "error": LOST}


def owing(rig: Rig) -> Any:
    """A schema whose Apply's outcome is unknown: it owes proof, and its Observe runs."""
    key = add_schema(rig)
    rig.settle(key)
    harvest_with(rig, key, "apply", UNKNOWN)
    rig.settle(key)
    assert status_of(rig, key)["pendingObservation"]["outcome"] == "OutcomeUnknown"
    return key


def settlement(rig: Rig, key: Any, **changes: Any) -> dict[str, Any]:
    pending = status_of(rig, key)["pendingObservation"]
    spec: dict[str, Any] = {
        "schemaRef": {"name": key.name, "uid": rig.resource(key)["metadata"]["uid"]},
        "applyOperationID": pending["applyOperationID"],
        "reason": "the database was restored from a backup elsewhere",
        "settledBy": {"username": "bob@example.com", "uid": "bob-uid", "groups": ["dba"]},
        "settledAt": stamp_time(rig.clocks.wall()),
        "mutationRequestUID": "3f1c2b7a-0000-4000-8000-0000000000aa",
    }
    spec.update(changes)
    spec = {k: v for k, v in spec.items() if v is not None}
    return rig.api.create(
        PTAHSCHEMAPROOFSETTLEMENTS, NS, {"metadata": {"name": "settle-1"}, "spec": spec}
    )


def reading_fails(rig: Rig, key: Any) -> None:
    """The proof's reading cannot finish: its Observe fails and is retired."""
    harvest_with(rig, key, "observe", {"childExitCode": 1, "error": LOST})
    rig.settle(key)


def test_a_persons_settlement_ends_the_proof_in_the_stamped_name() -> None:
    rig = make_rig()
    key = owing(rig)
    pending = status_of(rig, key)["pendingObservation"]
    holder = lease_holder_of(rig)
    made = settlement(rig, key)
    reading_fails(rig, key)
    status = status_of(rig, key)
    assert "pendingObservation" not in status and "pendingLockRelease" not in status
    settled = status["settledProof"]
    assert settled["settledBy"]["username"] == "bob@example.com"
    assert settled["applyOperationID"] == pending["applyOperationID"]
    assert settled["settlementRef"] == {"name": "settle-1", "uid": made["metadata"]["uid"]}
    assert settled["outcome"] == "OutcomeUnknown"
    assert "applied" not in status  # no Apply attributed
    assert "plan" not in status  # nothing is applied again before a fresh reading
    # The Apply's Lease was released; the next reading may hold a tenure of its own.
    assert holder != "" and lease_holder_of(rig) != holder
    assert "RealmReleased" in rig.sink.reasons()
    assert "ProofSettled" in rig.sink.reasons()
    conditions = rig.api.get(PTAHSCHEMAPROOFSETTLEMENTS, NS, "settle-1")["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [("Consumed", "True")]


def _unstamped(rig: Rig, key: Any) -> dict[str, Any]:
    return settlement(rig, key, settledBy=None)


def _copied(rig: Rig, key: Any) -> dict[str, Any]:
    return settlement(rig, key, settledAt="2026-11-01T00:00:00Z")


def _other_attempt(rig: Rig, key: Any) -> dict[str, Any]:
    return settlement(rig, key, applyOperationID="another-attempt")


def _other_schema(rig: Rig, key: Any) -> dict[str, Any]:
    return settlement(rig, key, schemaRef={"name": key.name, "uid": "another-uid"})


ROWS: list[tuple[str, Callable[[Rig, Any], dict[str, Any]], str | None]] = [
    ("unstamped", _unstamped, "SettlementUnstamped"),
    ("stamp copied from before", _copied, "SettlementUnstamped"),
    ("another attempt", _other_attempt, None),
    ("another schema", _other_schema, None),
]


@pytest.mark.parametrize(("row", "make", "event"), ROWS, ids=[r[0] for r in ROWS])
def test_what_does_not_settle(row: str, make: Any, event: str | None) -> None:
    rig = make_rig()
    key = owing(rig)
    make(rig, key)
    reading_fails(rig, key)
    status = status_of(rig, key)
    assert "pendingObservation" in status and "settledProof" not in status, row
    assert lease_holder_of(rig) != ""
    if event is not None:
        assert event in rig.sink.reasons()
    # The proof goes on trying to read.
    assert rig.claim(key)["type"] in ("Observe", "Plan")


def test_a_settlement_waits_until_no_apply_pod_can_write() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    job = job_of(rig, key)
    pod = start_pod(rig, job, terminated=False)
    rig.api.patch_spec(PTAHSCHEMAS, NS, key.name, {"interval": "1h"})  # inputs move
    finish_job(rig, job["metadata"]["name"])
    rig.settle(key)
    assert status_of(rig, key)["pendingObservation"]["outcome"] == "OutcomeUnknown"
    settlement(rig, key)
    rig.settle(key)
    assert "pendingObservation" in status_of(rig, key)  # a Pod may still write
    holder = lease_holder_of(rig)
    assert holder != ""
    stop_pod(rig, pod["metadata"]["name"])
    rig.settle(key)
    status = status_of(rig, key)
    assert "pendingObservation" not in status and status["settledProof"]
    assert lease_holder_of(rig) != holder
