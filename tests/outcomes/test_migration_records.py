"""A migration's unresolved run: its annotation copy, its restore, and its settlement.

The copy is written before the status patch that stores the record and removed after
the patch that settles it; ``resolvedRun`` tells a copy an interrupted removal left
from one a restore brought back. Only a History reading of the same database with
nothing pending, or an acknowledgment naming the attempt, settles the record, and no
Apply is claimed while it stands.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.families.migration.records import run_outcome
from jobclaim.api import UNRESOLVED_RUN_ANNOTATION
from jobclaim.apiserver import (
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHMIGRATIONS,
)
from jobclaim.stamps import stamp_time
from kube.fake.inmemory import matching
from runner import RUNNER_PROTOCOL_VERSION, DigestedResult, encode_result, summary_of
from runner.result import RunnerResult
from runner.summary import Account
from tests.support.dispatchworld import NS, Rig, add_migration, make_rig
from tests.support.outcomeworld import UNKNOWN_RUN, status_of
from tests.support.podworld import MIGRATED, TARGET, harvest_with, history


def unresolved(rig: Rig) -> tuple[Rig, Any]:
    """A migration whose Apply ended Unknown and is recorded unresolved."""
    key = add_migration(rig)
    rig.settle(key)
    harvest_with(rig, key, "migration-apply", UNKNOWN_RUN)
    rig.settle(key)
    assert "unresolvedRun" in status_of(rig, key)
    return rig, key


def copy_of(rig: Rig, key: Any) -> dict[str, Any] | None:
    annotations = rig.resource(key)["metadata"].get("annotations") or {}
    text = annotations.get(UNRESOLVED_RUN_ANNOTATION)
    return json.loads(text) if text else None


def read_history(rig: Rig, key: Any, pending: int = 0, **extra: Any) -> None:
    rig.reconciler.claim(key, "History")
    rig.settle(key)
    harvest_with(rig, key, "migration-history", {**history(pending), **extra})
    rig.settle(key)


def test_the_copy_is_written_before_the_record_and_removed_after_its_settlement() -> None:
    rig = make_rig()
    key = add_migration(rig)
    rig.settle(key)
    harvest_with(rig, key, "migration-apply", UNKNOWN_RUN)
    rig.api.clear_calls()
    rig.settle(key)
    writes = [(c.verb, c.resource.plural) for c in rig.api.writes() if c.resource == PTAHMIGRATIONS]
    assert writes[:2] == [("patch_metadata", "ptahmigrations"), ("patch_status", "ptahmigrations")]
    assert copy_of(rig, key) == status_of(rig, key)["unresolvedRun"]
    rig.reconciler.claim(key, "History")
    rig.settle(key)
    harvest_with(rig, key, "migration-history", history(0))
    rig.api.clear_calls()
    rig.settle(key)
    writes = [(c.verb, c.resource.plural) for c in rig.api.writes() if c.resource == PTAHMIGRATIONS]
    settle = writes.index(("patch_status", "ptahmigrations"))
    assert ("patch_metadata", "ptahmigrations") in writes[settle + 1 :]
    assert copy_of(rig, key) is None
    assert status_of(rig, key)["resolvedRun"]["resolution"] == "HistoryRead"


def test_a_stop_after_the_copy_leaves_a_live_claim_that_records_the_same_run() -> None:
    rig = make_rig()
    key = add_migration(rig)
    rig.settle(key)
    harvest_with(rig, key, "migration-apply", UNKNOWN_RUN)
    rig.api.stop_after_write(matching("patch_metadata", PTAHMIGRATIONS))
    rig.settle(key)
    assert rig.api.stopped
    status = status_of(rig, key)
    assert "activeOperation" in status and "unresolvedRun" not in status
    assert copy_of(rig, key) is not None
    rig.api.restart()
    rig.reconcile(key)
    # The copy is not restored beside the live claim it was written ahead of.
    status = status_of(rig, key)
    assert "activeOperation" not in status or "unresolvedRun" not in status
    rig.settle(key)
    record = status_of(rig, key)["unresolvedRun"]
    assert copy_of(rig, key) == record


# (id, what happened to the resource, whether the record is back afterwards)
RESTORE_ROWS = [
    ("control: status and copy agree", "nothing", True),
    ("status restored without the record", "drop-status", True),
    ("the annotation dropped", "drop-copy", True),
    ("a settled run's copy left by an interrupted removal", "interrupted", False),
]


@pytest.mark.parametrize(("row", "what", "record"), RESTORE_ROWS, ids=[r[0] for r in RESTORE_ROWS])
def test_the_copy_and_status_are_made_to_agree(row: str, what: str, record: bool) -> None:
    rig, key = unresolved(make_rig())
    original = status_of(rig, key)["unresolvedRun"]
    if what == "drop-status":
        obj = rig.api.get(PTAHMIGRATIONS, NS, key.name)
        status = {k: v for k, v in obj["status"].items() if k != "unresolvedRun"}
        rig.api.patch_status(
            PTAHMIGRATIONS,
            NS,
            key.name,
            status,
            resource_version=obj["metadata"]["resourceVersion"],
        )
    if what == "drop-copy":
        rig.api.patch_metadata(
            PTAHMIGRATIONS, NS, key.name, {"annotations": {UNRESOLVED_RUN_ANNOTATION: None}}
        )
    if what == "interrupted":
        rig.reconciler.claim(key, "History")
        rig.settle(key)
        harvest_with(rig, key, "migration-history", history(0))
        rig.api.stop_after_write(
            matching("patch_status", PTAHMIGRATIONS, body=lambda b: "resolvedRun" in b)
        )
        rig.settle(key)
        assert rig.api.stopped and copy_of(rig, key) == original
        rig.api.restart()
    rig.settle(key)
    status = status_of(rig, key)
    if record:
        assert status["unresolvedRun"] == original == copy_of(rig, key)
    else:
        assert "unresolvedRun" not in status and copy_of(rig, key) is None


def test_an_unreadable_copy_blocks_the_migration() -> None:
    rig, key = unresolved(make_rig())
    rig.api.patch_metadata(
        PTAHMIGRATIONS, NS, key.name, {"annotations": {UNRESOLVED_RUN_ANNOTATION: "{not json"}}
    )
    stop = rig.reconcile(key)
    assert "cannot be read" in stop.reason
    assert "UnresolvedRunCopyUnreadable" in rig.sink.reasons(key.name)


# (id, the History reading's fields, whether it settles the record)
HISTORY_ROWS: list[tuple[str, dict[str, Any], bool]] = [
    ("control: same database, nothing pending", {}, True),
    ("migrations still pending", {"pending": 1}, False),
    ("another database", {"targetIdentityDigest": "sha256:" + "7" * 64}, False),
    ("a dirty history", {"dirty": True}, False),
]


@pytest.mark.parametrize(
    ("row", "fields", "settles"), HISTORY_ROWS, ids=[r[0] for r in HISTORY_ROWS]
)
def test_only_a_reading_of_the_same_database_with_nothing_pending_settles(
    row: str, fields: dict[str, Any], settles: bool
) -> None:
    rig, key = unresolved(make_rig())
    pending = fields.pop("pending", 0)
    section = history(pending, **({"dirty": True} if fields.pop("dirty", False) else {}))
    rig.reconciler.claim(key, "History")
    rig.settle(key)
    harvest_with(rig, key, "migration-history", {**section, **fields})
    rig.settle(key)
    assert ("unresolvedRun" not in status_of(rig, key)) is settles
    assert status_of(rig, key)["history"]["targetIdentityDigest"] == fields.get(
        "targetIdentityDigest", TARGET
    )


def test_an_apply_is_refused_while_the_record_stands() -> None:
    rig, key = unresolved(make_rig())
    stop = rig.reconciler.claim(key, "Apply")
    assert "not authorized" in stop.reason or "unresolved" in stop.reason
    assert "activeOperation" not in status_of(rig, key)


def acknowledge(rig: Rig, key: Any, operation_id: str, *, stamped: bool = True) -> None:
    uid = rig.resource(key)["metadata"]["uid"]
    spec: dict[str, Any] = {
        "migrationRef": {"name": key.name, "uid": uid},
        "operationID": operation_id,
    }
    if stamped:
        spec.update(
            acknowledgedBy={"username": "bob", "uid": "bob-uid", "groups": ["dba"]},
            acknowledgedAt=stamp_time(rig.clocks.wall()),
            mutationRequestUID="admission-request-9",
        )
    rig.api.create(
        PTAHMIGRATIONRUNACKNOWLEDGMENTS,
        NS,
        {
            "metadata": {"name": f"ack-{operation_id[-6:]}-{int(stamped)}", "namespace": NS},
            "spec": spec,
        },
    )


# (id, which attempt it names, stamped by admission, whether it settles)
ACK_ROWS = [
    ("control: names the attempt, stamped", "own", True, True),
    ("names another attempt", "other", True, False),
    ("not stamped by admission", "own", False, False),
]


@pytest.mark.parametrize(
    ("row", "names", "stamped", "settles"), ACK_ROWS, ids=[r[0] for r in ACK_ROWS]
)
def test_an_acknowledgment_naming_the_attempt_settles_it(
    row: str, names: str, stamped: bool, settles: bool
) -> None:
    rig, key = unresolved(make_rig())
    record = status_of(rig, key)["unresolvedRun"]
    operation_id = record["operationID"] if names == "own" else "sha256:" + "5" * 64
    acknowledge(rig, key, operation_id, stamped=stamped)
    rig.settle(key)
    status = status_of(rig, key)
    assert ("unresolvedRun" not in status) is settles
    if settles:
        resolved = status["resolvedRun"]
        assert resolved["resolution"] == "Acknowledged"
        assert resolved["acknowledgedBy"]["username"] == "bob"
        # A fresh reading comes before anything is planned: no history, no plan stands.
        assert "history" not in status and "plan" not in status
        assert copy_of(rig, key) is None
        (ack,) = rig.api.list(PTAHMIGRATIONRUNACKNOWLEDGMENTS, NS)
        assert {c["type"]: c["status"] for c in ack["status"]["conditions"]} == {"Consumed": "True"}


def test_deleting_a_migration_with_a_record_warns() -> None:
    for with_record in (False, True):
        rig = make_rig()
        if with_record:
            rig, key = unresolved(rig)
        else:
            key = add_migration(rig)
            rig.settle(key)
            harvest_with(rig, key, "migration-apply", {
                "mutationStarted": True, "uncertain": False,
                "migrationRun": {"outcome": "Applied", "appliedVersions": ["20260101000000"]},
            })  # fmt: skip
            rig.settle(key)
            read_history(rig, key)  # VerifyingHistory settles the account
        rig.api.delete(PTAHMIGRATIONS, NS, key.name)
        rig.settle(key)
        warned = [e for e in rig.sink.records if e[1].reason == "UnresolvedRunDeleted"]
        assert bool(warned) is with_record
        assert all(e[1].type == "Warning" for e in warned)
        # Deletion is not held for the record: the pass that announces it lets go.
        assert rig.api.peek(PTAHMIGRATIONS, NS, key.name) is None


def test_a_suspended_migration_keeps_its_record() -> None:
    rig, key = unresolved(make_rig())
    rig.api.patch_spec(PTAHMIGRATIONS, NS, key.name, {"suspend": True})
    for _ in range(3):
        rig.settle(key)
    assert "unresolvedRun" in status_of(rig, key)


def test_an_undispatched_apply_is_retired_when_a_record_comes_back_under_it() -> None:
    rig = make_rig()
    key = add_migration(rig)
    rig.reconcile(key)  # an Apply claim, not dispatched
    record = {
        "outcome": "Unknown",
        "operationID": "sha256:" + "4" * 64,
        "jobName": "ptah-m-apply-billing-0000000000000000",
        "recordedAt": "2026-12-02T11:00:00Z",
    }
    # A restore brings back a record of an earlier run beside the claim.
    rig.api.patch_metadata(
        PTAHMIGRATIONS,
        NS,
        key.name,
        {"annotations": {UNRESOLVED_RUN_ANNOTATION: json.dumps(record)}},
    )
    rig.settle(key)
    status = status_of(rig, key)
    assert status["unresolvedRun"]["operationID"] == record["operationID"]
    # The Apply is gone; the record, an hour old, is read by a History claim instead.
    assert status.get("activeOperation", {}).get("type") in (None, "History")
    assert [j for j in rig.jobs() if "-apply-" in j["metadata"]["name"]] == []


# (id, the run's record fields, the outcome read, the versions recorded)
RUN_ROWS: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("control: applied", MIGRATED, "Applied", ["20260101000000"]),
    (
        "partial",
        {
            "childExitCode": 1,
            "mutationStarted": True,
            "uncertain": False,
            "error": {"code": "broke", "message": "the second version failed"},
            "migrationRun": {"outcome": "Partial", "appliedVersions": ["20260101000000"]},
        },
        "Partial",
        ["20260101000000"],
    ),
    ("uncertain", UNKNOWN_RUN, "Unknown", []),
    (
        "refused before the child ran",
        {
            "childExitCode": -1,
            "mutationStarted": False,
            "uncertain": False,
            "error": {"code": "refused", "message": "the plan's sequence moved"},
        },
        "Failed",
        [],
    ),
]


@pytest.mark.parametrize(
    ("row", "fields", "outcome", "versions"), RUN_ROWS, ids=[r[0] for r in RUN_ROWS]
)
def test_what_a_read_migration_run_did(
    row: str, fields: dict[str, Any], outcome: str, versions: list[str]
) -> None:
    result = RunnerResult.from_wire(
        {
            "protocolVersion": RUNNER_PROTOCOL_VERSION,
            "operation": "migration-apply",
            "operationId": "sha256:" + "1" * 64,
            "childExitCode": 0,
            "coordinationDigest": "sha256:" + "b" * 64,
            "targetIdentityDigest": TARGET,
            **fields,
        }
    )
    recorded = DigestedResult(result, encode_result(result).digest)
    assert run_outcome(Account("record", summary_of(recorded), recorded)) == (outcome, versions)
