"""Harvest decisions: which Pod may speak for a Job, and what its account means."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobclaim import Claim
from jobclaim.envelope import ANN_OPERATION_ID, LABEL_OPERATION_ID
from runner.errors import (
    MalformedRecord,
    RecordError,
    RecordNotFound,
    SummaryRefused,
)
from runner.harvest import (
    REREAD_WINDOW,
    NoEvidence,
    Outcome,
    PodEvidence,
    judge,
    reread_at,
    select_pod,
    terminal_since,
)
from runner.protocol import sha256_of
from runner.result import RUNNER_PROTOCOL_VERSION, encode_json
from runner.summary import account_for
from tests.support.claimworld import World, migration_world, schema_world
from tests.support.harvestpods import Pod, pod_of, terminal
from tests.support.runnerrig import COORD, JOB_UID, TARGET, record_of, result, wire

T0 = datetime(2026, 12, 2, 12, 5, tzinfo=UTC)


def world_parts(world: World) -> tuple[dict[str, Any], Claim]:
    return terminal(world.stored), world.claim("rebuild-stored")


Change = Callable[[dict[str, Any], list[Pod]], None]


def on_pod(fn: Callable[[Pod], None]) -> Change:
    return lambda job, pods: fn(pods[0])


def _runner_status(pod: Pod) -> dict[str, Any]:
    status: dict[str, Any] = pod["status"]["containerStatuses"][0]
    return status


ROWS: list[tuple[str, Change, str | None, bool]] = [
    ("control", lambda job, pods: None, None, False),
    (
        "a foreign Pod beside it is ignored",
        lambda job, pods: pods.append(
            {"metadata": {"uid": "z", "ownerReferences": [{"uid": "q"}]}}
        ),
        None,
        False,
    ),
    ("the Job has not finished", lambda job, pods: job.update(status={}), "has not finished", True),
    ("no Pod", lambda job, pods: pods.clear(), "the Job has no Pod", False),
    ("two Pods", lambda job, pods: pods.append(pod_of(job, uid="pod-uid-2")), "2 Pods", False),
    (
        "two Pods, one running",
        lambda job, pods: pods.append(
            {**pod_of(job, uid="pod-uid-2"), "status": {"phase": "Running"}}
        ),
        "2 Pods",
        True,
    ),
    (
        "a second owner",
        on_pod(lambda p: p["metadata"]["ownerReferences"].append({"uid": "other"})),
        "without being exactly owned",
        False,
    ),
    (
        "owner not the controller",
        on_pod(lambda p: p["metadata"]["ownerReferences"][0].update(controller=False)),
        "without being exactly owned",
        False,
    ),
    (
        "another operation ID",
        on_pod(lambda p: p["metadata"]["annotations"].update({ANN_OPERATION_ID: "other"})),
        "operation ID",
        False,
    ),
    (
        "operation label missing",
        on_pod(lambda p: p["metadata"]["labels"].pop(LABEL_OPERATION_ID)),
        "not labelled",
        False,
    ),
    (
        "another service account",
        on_pod(lambda p: p["spec"].update(serviceAccountName="admin")),
        "another service account",
        False,
    ),
    (
        "another priority class",
        on_pod(lambda p: p["spec"].update(priorityClassName="system-node-critical")),
        "another priority class",
        False,
    ),
    (
        "another runner image",
        on_pod(lambda p: p["spec"]["containers"][0].update(image="evil@sha256:" + "0" * 64)),
        "runner is not the one",
        False,
    ),
    (
        "the runner still running",
        on_pod(
            lambda p: p["status"].update(
                phase="Running", containerStatuses=[{"name": "ptah", "state": {"running": {}}}]
            )
        ),
        "has not terminated",
        True,
    ),
    (
        "the runner restarted",
        on_pod(lambda p: _runner_status(p).update(restartCount=1)),
        "more than once",
        False,
    ),
    (
        "no runner status",
        on_pod(lambda p: p["status"].update(containerStatuses=[])),
        "no status for its runner",
        False,
    ),
]


@pytest.mark.parametrize("family", ["schema", "migration"])
@pytest.mark.parametrize(
    ("name", "change", "reason", "may_still_write"), ROWS, ids=[r[0] for r in ROWS]
)
def test_select_pod(
    family: str, name: str, change: Change, reason: str | None, may_still_write: bool
) -> None:
    job, claim = world_parts(schema_world() if family == "schema" else migration_world())
    pods = [pod_of(job)]
    change(job, pods)
    chosen = select_pod(job, pods, claim)
    if reason is None:
        assert chosen == PodEvidence(pods[0]["metadata"]["name"], "pod-uid-1", "summary")
        return
    assert isinstance(chosen, NoEvidence)
    assert reason in chosen.reason
    assert chosen.may_still_write is may_still_write


def test_the_pods_a_record_keeps_are_every_pod_of_the_job() -> None:
    job, claim = world_parts(migration_world())
    chosen = select_pod(job, [pod_of(job), pod_of(job, uid="pod-uid-2")], claim)
    assert isinstance(chosen, NoEvidence) and chosen.pod_uids == ("pod-uid-1", "pod-uid-2")


def test_terminal_since_reads_the_terminal_condition() -> None:
    job, _ = world_parts(migration_world())
    assert terminal_since(job) == T0
    assert terminal_since({**job, "status": {}}) is None
    failed = terminal(job, "Failed")
    assert terminal_since(failed) == T0


@pytest.mark.parametrize(
    ("error", "after", "expected"),
    [
        (RecordNotFound("x"), timedelta(0), T0 + timedelta(seconds=2)),
        (RecordNotFound("x"), timedelta(seconds=29), T0 + REREAD_WINDOW),
        (RecordNotFound("x"), REREAD_WINDOW, None),
        (MalformedRecord("x"), timedelta(0), None),
    ],
    ids=["not found", "capped at the window", "window over", "malformed never waits"],
)
def test_reread_at(error: Any, after: timedelta, expected: datetime | None) -> None:
    assert reread_at(error, terminal_at=T0, now=T0 + after) == expected
    assert reread_at(error, terminal_at=None, now=T0) is None


def test_an_account_about_the_claims_database_is_accounted() -> None:
    claim = world_parts(migration_world())[1]
    record = record_of(result("migration-apply", operationId=claim.operation_id))
    account = account_for(record, None, "migration-apply", claim.operation_id, job_uid=JOB_UID)
    judged = judge(
        claim,
        account,
        terminal_at=T0,
        now=T0,
        coordination_digest=COORD,
        target_identity_digest=TARGET,
    )
    assert judged.outcome is Outcome.ACCOUNTED and judged.account is account


@pytest.mark.parametrize(
    ("family", "expected"),
    [("migration", Outcome.UNCERTAIN), ("schema-plan", Outcome.UNUSABLE)],
)
def test_an_account_about_another_database_is_uncertain_never_failed(
    family: str, expected: Outcome
) -> None:
    world = migration_world() if family == "migration" else schema_world("Plan")
    claim = world_parts(world)[1]
    op = "migration-apply" if family == "migration" else "plan"
    record = record_of(result(op, operationId=claim.operation_id))
    account = account_for(record, None, op, claim.operation_id, job_uid=JOB_UID)
    other = "sha256:" + "9" * 64
    for digests in ({"target_identity_digest": other}, {"coordination_digest": other}):
        judged = judge(claim, account, terminal_at=T0, now=T0, **digests)
        assert judged.outcome is expected
        assert "another database" in judged.reason


@pytest.mark.parametrize(
    ("read", "now", "mutating_outcome", "read_only_outcome"),
    [
        (RecordNotFound("the Job has no result record"), T0, Outcome.WAIT, Outcome.WAIT),
        (RecordNotFound("gone"), T0 + REREAD_WINDOW, Outcome.UNCERTAIN, Outcome.UNUSABLE),
        (MalformedRecord("bad"), T0, Outcome.UNCERTAIN, Outcome.UNUSABLE),
        (SummaryRefused("foreign"), T0, Outcome.UNCERTAIN, Outcome.UNUSABLE),
    ],
    ids=["still arriving", "given up", "malformed", "summary refused"],
)
def test_what_cannot_be_read(
    read: Any, now: datetime, mutating_outcome: Outcome, read_only_outcome: Outcome
) -> None:
    mutating = world_parts(migration_world())[1]
    read_only = world_parts(migration_world("History"))[1]
    assert judge(mutating, read, terminal_at=T0, now=now).outcome is mutating_outcome
    assert judge(read_only, read, terminal_at=T0, now=now).outcome is read_only_outcome
    assert mutating.mutating and not read_only.mutating


def test_an_unknown_operation_type_is_never_judged_read_only() -> None:
    claim = replace(world_parts(migration_world())[1], operation="Rollback")
    assert not claim.mutating  # the table's zero value: neither mutating nor read-only
    judged = judge(claim, MalformedRecord("bad"), terminal_at=T0, now=T0)
    assert judged.outcome is Outcome.UNCERTAIN


def _previous_protocol_record(operation: str, operation_id: str) -> Any:
    """A record whose result is exactly what a protocol-6 runner (an older image) says."""
    record = record_of(result(operation, operationId=operation_id))
    payload = encode_json(wire(operation, operationId=operation_id, protocolVersion=6))
    spec = record.spec.model_copy(
        update={"result": payload.decode(), "result_digest": sha256_of(payload)}
    )
    return record.model_copy(update={"spec": spec})


@pytest.mark.parametrize(
    ("world", "operation", "expected"),
    [
        (migration_world, "migration-apply", Outcome.UNCERTAIN),
        (lambda: schema_world("Observe"), "observe", Outcome.UNUSABLE),
    ],
    ids=["migration Apply", "schema Observe"],
)
def test_a_result_of_the_previous_protocol_is_refused_by_name(
    world: Callable[[], World], operation: str, expected: Outcome
) -> None:
    # A Job whose runner speaks protocol 6 (results in the log) is not read half-way:
    # the controller says which protocol it met, and trusts none of it.
    assert RUNNER_PROTOCOL_VERSION == 7
    claim = world_parts(world())[1]
    record = _previous_protocol_record(operation, claim.operation_id)
    try:
        read: Any = account_for(record, None, operation, claim.operation_id, job_uid=JOB_UID)
    except RecordError as error:
        read = error
    judged = judge(claim, read, terminal_at=T0, now=T0 + REREAD_WINDOW)
    assert judged.outcome is expected
    assert "runner protocol 6 is not 7" in judged.reason, judged.reason
