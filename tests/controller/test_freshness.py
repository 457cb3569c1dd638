"""Freshness decisions (``controller.pieces.freshness``) and the conditions every
status write carries (``controller.pieces.statusconditions.aligned``): tables, a control
row that passes and one change per row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.families.schema.dispatch import SCHEMA
from controller.pieces.freshness import (
    digest_pinned,
    history_refusal,
    observation_moved,
    source_due,
)
from controller.pieces.phasemachine import ROWS, Decision, Event, Wait
from controller.pieces.statusconditions import aligned
from controller.stages.conditions import conditions_for
from jobclaim import requested_reference
from jobclaim.api import DriftObservationStatus, MigrationHistoryStatus, PtahSchemaStatus
from runner.decide import history_ahead
from runner.documents import StatusDocument

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
TAG = "registry.example/orders-schema:stable"
PINNED = "registry.example/orders-schema@sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("reference", "checked", "expected"),
    [
        (TAG, NOW - timedelta(seconds=600), True),  # control: a tag an interval old
        (PINNED, NOW - timedelta(seconds=600), False),  # a digest cannot move
        (TAG, NOW - timedelta(seconds=599), False),  # read within the interval
        (TAG, None, False),  # nothing to count from: the ladder's Resolve reads it
        (TAG + "@sha256:" + "b" * 64, NOW - timedelta(seconds=600), False),  # tag and digest
    ],
    ids=["tag-due", "digest-pinned", "not-yet", "never-read", "tag-with-digest"],
)
def test_a_tag_is_resolved_again_each_interval(
    reference: str, checked: datetime | None, expected: bool
) -> None:
    assert source_due(reference, checked, NOW, 600.0) is expected
    assert digest_pinned(reference) is ("@sha256:" in reference)


HISTORY = MigrationHistoryStatus(observed_at="2026-12-05T08:00:00Z", pending_count=1)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, None),
        ({"dirty": True}, "HistoryDirty"),
        ({"modified_versions": ["3"]}, "HistoryModified"),
        ({"out_of_order_versions": ["2"]}, "HistoryOutOfOrder"),
        ({"ahead": True}, "HistoryAhead"),
    ],
    ids=["clean", "dirty", "modified", "out-of-order", "ahead"],
)
def test_a_history_refuses_planning_with_its_reason(
    change: dict[str, Any], expected: str | None
) -> None:
    assert history_refusal(HISTORY.model_copy(update=change)) == expected


def _status_doc(current: int, versions: list[int]) -> StatusDocument:
    return StatusDocument.model_validate(
        {
            "contract_version": 1,
            "current_version": current,
            "total_migrations": len(versions),
            "has_pending_changes": False,
            "migrations": [{"version": v, "state": "applied"} for v in versions],
        }
    )


@pytest.mark.parametrize(
    ("current", "versions", "expected"),
    [
        (3, [1, 2, 3], False),  # control: the database at the artifact's last version
        (4, [1, 2, 3], True),  # the database has a version the artifact does not
        (0, [], False),  # an empty database, an empty artifact
        (1, [], True),  # a migrated database, an artifact with nothing
        (2, [1, 2, 3], False),  # behind: pending, not ahead
    ],
    ids=["at-last", "ahead", "empty", "artifact-empty", "behind"],
)
def test_the_runner_says_when_the_history_is_ahead(
    current: int, versions: list[int], expected: bool
) -> None:
    assert history_ahead(_status_doc(current, versions)) is expected


READ = DriftObservationStatus(
    observed_at="2026-12-05T08:00:00Z",
    artifact_digest="sha256:" + "a" * 64,
    drift=True,
    highest_severity="warning",
    finding_count=2,
    report_digest="sha256:" + "c" * 64,
    target_identity_digest="sha256:" + "d" * 64,
)


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        ({"observed_at": "2026-12-05T08:10:00Z"}, False),  # control: read again, the same
        ({"report_digest": "sha256:" + "e" * 64}, True),
        ({"finding_count": 3}, True),
        ({"drift": False}, True),
        ({"highest_severity": "destructive"}, True),
        ({"target_identity_digest": "sha256:" + "f" * 64}, True),
        ({"artifact_digest": "sha256:" + "b" * 64}, True),
    ],
    ids=["same", "report", "findings", "no-drift", "severity", "identity", "artifact"],
)
def test_a_refresh_retires_the_plan_only_when_the_database_moved(
    change: dict[str, Any], moved: bool
) -> None:
    assert observation_moved(READ, READ.model_copy(update=change)) is moved
    assert observation_moved(None, READ) is True  # nothing to compare with: plan again


# -- every status write carries conditions that describe its phase -------------------

PHASE_TIED = ("Ready", "Reconciling", "Progressing", "Stalled", "Blocked", "InSync")


def _schema() -> Any:
    raw = yaml.safe_load((ROOT / "examples" / "ptahschema.yaml").read_text())
    raw["metadata"].update(generation=2, uid="00000000-0000-0000-0000-000000000002")
    return SCHEMA.parse(raw)


def _pinned(schema: Any) -> bool:
    """What the status write reads with the clock and hands to ``aligned``."""
    return digest_pinned(requested_reference(schema))


def _held(status: PtahSchemaStatus) -> dict[str, tuple[str, str | None]]:
    return {c.type: (c.status, c.reason) for c in status.conditions}


def _agrees(phase: str, held: dict[str, tuple[str, str | None]]) -> list[str]:
    """Why the conditions do not describe ``phase`` (empty when they do)."""
    expected = {
        "Ready": phase == "InSync",
        "InSync": phase == "InSync",
        "Stalled": phase in ("Failed", "Blocked"),
        "Blocked": phase == "Blocked",
        "ApprovalRequired": phase == "AwaitingApproval",
    }
    wrong = [
        f"{kind}={held[kind][0]} under {phase}"
        for kind, true in expected.items()
        if held[kind][0] != ("True" if true else "False")
    ]
    for kind in ("Ready", "Reconciling", "Progressing"):
        if held[kind][1] != phase:
            wrong.append(f"{kind} says {held[kind][1]} under {phase}")
    return wrong


def test_a_write_that_moves_the_phase_moves_its_conditions() -> None:
    # Every phase the machine publishes, written over the conditions every other
    # phase left (a retirement sets a phase and copies the old conditions): the write
    # must carry conditions describing the phase it stores.
    schema = _schema()
    pinned = _pinned(schema)
    phases = sorted(
        {row.after for row in ROWS if row.facts.family == "schema"}
        | {"VerifyingConvergence", "Applying", "ReadyToApply", "Pending", "Blocked"}
    )
    for before in phases:
        old = PtahSchemaStatus(phase=before)
        old = old.model_copy(update={"conditions": aligned(schema, old, now="t0", pinned=pinned)})
        for after in phases:
            moved = old.model_copy(update={"phase": after})
            written = moved.model_copy(
                update={"conditions": aligned(schema, moved, now="t1", pinned=pinned)}
            )
            assert _agrees(after, _held(written)) == [], (before, after)
    # The check bites: the conditions the old phase left do not describe the new one.
    stale = PtahSchemaStatus(phase="Applying")
    stale = stale.model_copy(update={"conditions": aligned(schema, stale, now="t0", pinned=pinned)})
    assert _agrees("VerifyingConvergence", _held(stale)) != []


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (None, {"SourceFreshnessUnknown": "False", "RefreshFailed": "False"}),
        ("Resolve", {"SourceFreshnessUnknown": "True", "RefreshFailed": "True"}),
        ("Observe", {"SourceFreshnessUnknown": "False", "RefreshFailed": "True"}),
        ("Verify", {"SourceFreshnessUnknown": "False", "RefreshFailed": "False"}),
    ],
    ids=["fresh", "registry-down", "database-down", "verify-failed"],
)
def test_a_failed_refresh_says_freshness_is_unknown(
    failure: str | None, expected: dict[str, str]
) -> None:
    schema = _schema()
    status = PtahSchemaStatus.model_validate(
        {
            "phase": "Failed",
            "source": {"reference": PINNED, "digest": "sha256:" + "a" * 64},
            "readingFailure": {
                "operation": failure,
                "message": "registry unreachable",
                "failures": 1,
                "failedAt": "2026-12-05T08:00:00Z",
                "retryNotBefore": "2026-12-05T08:00:30Z",
            }
            if failure
            else None,
        }
    )
    held = {c.type: c.status for c in aligned(schema, status, now="t", pinned=_pinned(schema))}
    assert {kind: held[kind] for kind in expected} == expected
    reachable = held["DatabaseReachable"]
    assert reachable == ("False" if failure == "Observe" else "Unknown")


def test_the_realm_gates_refusal_is_kept_by_a_write_and_ended_by_a_publication() -> None:
    # The gate writes its refusal through write_status (aligned must keep it); a
    # publication is a pass past the gate, so the refusal is over (it is dropped).
    schema = _schema()
    realm = {"type": "RealmAdmitted", "status": "False", "reason": "RealmNotFound", "message": "x"}
    status = PtahSchemaStatus.model_validate({"phase": "Pending", "conditions": [realm]})
    assert "RealmAdmitted" in {
        c.type for c in aligned(schema, status, now="t", pinned=_pinned(schema))
    }
    decision = Decision(Event.NOT_RESOLVED, "Resolving", "Resolve", Wait.NONE)
    published = conditions_for(SCHEMA, schema, status, decision, now="t")
    assert "RealmAdmitted" not in {c.type for c in published}
