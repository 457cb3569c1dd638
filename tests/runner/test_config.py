"""What the runner reads from the Job's environment: bound, prepared, or refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.config import (
    Refusal,
    RunConfig,
    bind,
    executor_argv,
    parse_time,
    prepare,
    termination_log,
)
from runner.errors import ConfigurationError
from runner.result import RUNNER_OPERATIONS
from tests.runner.support import OP_ID, PLAN_DIGEST, SECRET_URL

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def env(operation: str = "apply", /, **changes: str | None) -> dict[str, str]:
    base = {
        "PTAH_DATABASE_URL": SECRET_URL,
        "PTAH_ENGINE": "PostgreSQL",
        "PTAH_EXECUTOR": "/var/run/ptah/bin/ptah",
        "PTAH_OPERATION": operation,
        "PTAH_OPERATION_ID": OP_ID,
        "PTAH_RUNNER_PROTOCOL": "5",
        "PTAH_EXECUTION_NOT_AFTER": "2026-05-01T12:10:00Z",
        "PTAH_PLAN_DIR": "/var/run/ptah/plan",
        "PTAH_PLAN_CONTENT_DIGEST": PLAN_DIGEST,
        "PTAH_EXPECT_SEQUENCE": "004,005",
    }
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    return base


@pytest.mark.parametrize(
    ("name", "changes", "problem"),
    [
        ("control", {}, None),
        ("no operation", {"PTAH_OPERATION": None}, "PTAH_OPERATION must name one of"),
        ("unknown operation", {"PTAH_OPERATION": "drop"}, "PTAH_OPERATION must name one of"),
        ("no operation ID", {"PTAH_OPERATION_ID": ""}, "PTAH_OPERATION_ID must be one line"),
        ("operation ID of two lines", {"PTAH_OPERATION_ID": "a\nb"}, "must be one line"),
        ("operation ID too long", {"PTAH_OPERATION_ID": "x" * 254}, "1 to 253 characters"),
    ],
)
def test_bind(name: str, changes: dict[str, str | None], problem: str | None) -> None:
    if problem is None:
        assert bind(env(**changes)) == ("apply", OP_ID)
        return
    with pytest.raises(ConfigurationError, match=problem):
        bind(env(**changes))


REFUSALS: list[tuple[str, str, dict[str, str | None], str | None, str]] = [
    ("control: apply", "apply", {}, None, ""),
    ("control: read-only without a deadline", "plan", {"PTAH_EXECUTION_NOT_AFTER": None}, None, ""),
    (
        "another protocol",
        "apply",
        {"PTAH_RUNNER_PROTOCOL": "4"},
        "runner_protocol_mismatch",
        "asked for '4'",
    ),
    ("no protocol", "plan", {"PTAH_RUNNER_PROTOCOL": None}, "runner_protocol_mismatch", "''"),
    (
        "relative executor",
        "plan",
        {"PTAH_EXECUTOR": "ptah"},
        "configuration_invalid",
        "absolute path",
    ),
    ("unknown engine", "plan", {"PTAH_ENGINE": "Oracle"}, "configuration_invalid", "PTAH_ENGINE"),
    ("no database URL", "plan", {"PTAH_DATABASE_URL": ""}, "configuration_invalid", "not set"),
    (
        "deadline not RFC 3339",
        "plan",
        {"PTAH_EXECUTION_NOT_AFTER": "2026-05-01 12:10"},
        "configuration_invalid",
        "RFC 3339",
    ),
    (
        "mutation without a deadline",
        "migration-apply",
        {"PTAH_EXECUTION_NOT_AFTER": None},
        "execution_deadline_missing",
        "needs a deadline",
    ),
    (
        "deadline passed",
        "apply",
        {"PTAH_EXECUTION_NOT_AFTER": "2026-05-01T11:59:59Z"},
        "execution_deadline_passed",
        "has passed",
    ),
    (
        "apply without its plan",
        "apply",
        {"PTAH_PLAN_DIR": None},
        "configuration_invalid",
        "PTAH_PLAN_DIR",
    ),
    (
        "apply with a bad digest",
        "apply",
        {"PTAH_PLAN_CONTENT_DIGEST": "md5:x"},
        "configuration_invalid",
        "not a sha256 digest",
    ),
    (
        "migration without its sequence",
        "migration-apply",
        {"PTAH_EXPECT_SEQUENCE": ""},
        "configuration_invalid",
        "distinct migration versions",
    ),
    (
        "a sequence that repeats",
        "migration-apply",
        {"PTAH_EXPECT_SEQUENCE": "1,1"},
        "configuration_invalid",
        "distinct",
    ),
    (
        "a kill grace out of range",
        "plan",
        {"PTAH_KILL_GRACE_SECONDS": "600"},
        "configuration_invalid",
        "PTAH_KILL_GRACE_SECONDS",
    ),
    (
        "a drain that is not a number",
        "plan",
        {"PTAH_DRAIN_SECONDS": "soon"},
        "configuration_invalid",
        "PTAH_DRAIN_SECONDS",
    ),
]


@pytest.mark.parametrize(
    ("name", "operation", "changes", "code", "sentence"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_prepare(
    name: str, operation: str, changes: dict[str, str | None], code: str | None, sentence: str
) -> None:
    prepared = prepare(env(operation, **changes), operation, OP_ID, now=NOW)
    if code is None:
        assert isinstance(prepared, RunConfig)
        return
    assert isinstance(prepared, Refusal)
    assert prepared.code == code
    assert sentence in prepared.message
    assert SECRET_URL not in prepared.message and "s3cret" not in prepared.message


def test_a_protocol_refusal_answers_in_the_version_the_job_asked_for() -> None:
    asked = prepare(env(PTAH_RUNNER_PROTOCOL="4"), "apply", OP_ID, now=NOW)
    unreadable = prepare(env(PTAH_RUNNER_PROTOCOL="four"), "apply", OP_ID, now=NOW)
    assert isinstance(asked, Refusal) and asked.protocol_version == 4
    assert isinstance(unreadable, Refusal) and unreadable.protocol_version == 5


@pytest.mark.parametrize("operation", RUNNER_OPERATIONS)
def test_the_executor_command_line_never_carries_the_database_url(operation: str) -> None:
    prepared = prepare(env(operation), operation, OP_ID, now=NOW)
    assert isinstance(prepared, RunConfig)
    argv = executor_argv(prepared)
    assert argv[0] == "/var/run/ptah/bin/ptah" and argv[-2:] == ["--output", "json"]
    assert not any("s3cret" in arg or "postgres://" in arg for arg in argv)
    assert "s3cret" not in repr(prepared)


def test_the_command_lines_of_the_two_mutations() -> None:
    apply = prepare(env("apply"), "apply", OP_ID, now=NOW)
    migrate = prepare(env("migration-apply"), "migration-apply", OP_ID, now=NOW)
    assert isinstance(apply, RunConfig) and isinstance(migrate, RunConfig)
    assert executor_argv(apply)[1:-2] == [
        "apply",
        "--plan-dir",
        "/var/run/ptah/plan",
        "--plan-content-digest",
        PLAN_DIGEST,
    ]
    assert executor_argv(migrate)[1:-2] == ["migrations", "up", "--expect-sequence", "004,005"]


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("2026-05-01T12:00:00Z", True),
        ("2026-05-01T12:00:00.123456789+02:00", True),
        ("2026-05-01T12:00:00", False),
        ("2026-05-01 12:00:00Z", False),
        ("2026-13-01T12:00:00Z", False),
    ],
)
def test_deadlines_are_rfc3339_with_a_zone(text: str, ok: bool) -> None:
    parsed = parse_time(text)
    assert (parsed is not None) is ok
    if parsed is not None:
        assert parsed > NOW - timedelta(days=1) and parsed.tzinfo is not None


def test_the_termination_log_is_the_kubelets_unless_configured() -> None:
    assert termination_log({}) == Path("/dev/termination-log")
    assert termination_log({"PTAH_TERMINATION_LOG": "/tmp/t"}) == Path("/tmp/t")
