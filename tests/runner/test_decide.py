"""From a child's outcome to the account: a control row, then each way a run can go.

The rule under test: whatever the runner cannot establish about a mutating child is
uncertain, never failed; only a child that never started, or that reported in full
that it refused before changing anything, failed for certain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.config import Redactor, RunConfig, secrets_of
from runner.decide import (
    RUNNER_FIELDS,
    ChildOutcome,
    Stop,
    decide,
    exit_code,
    one_line,
    too_large,
)
from runner.result import RunnerResult
from tests.runner.support import PLAN_DIGEST, SECRET_URL, failed_wire, wire


def report(operation: str, **changes: Any) -> dict[str, Any]:
    """What the executor prints: a result without the fields only the runner states."""
    return {k: v for k, v in wire(operation, **changes).items() if k not in RUNNER_FIELDS}


def failure_report(operation: str, **changes: Any) -> dict[str, Any]:
    data = failed_wire(operation, **changes)
    return {k: v for k, v in data.items() if k not in RUNNER_FIELDS}


def exited(data: object, returncode: int = 0) -> ChildOutcome:
    text = data if isinstance(data, bytes) else json.dumps(data).encode()
    return ChildOutcome(started=True, returncode=returncode, stdout=text)


def config(operation: str) -> RunConfig:
    return RunConfig(
        operation=operation,
        operation_id="op",
        executor="/bin/ptah",
        plan_content_digest=PLAN_DIGEST,
        expect_sequence=("004", "005", "006"),
        redactor=Redactor(secrets_of(SECRET_URL)),
    )


@dataclass(frozen=True)
class Row:
    name: str
    operation: str
    child: ChildOutcome
    code: str | None  # the error code, None for success
    uncertain: bool | None = None
    started: bool | None = None
    exit: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


NOT_STARTED = ChildOutcome(started=False, start_error="no such file or directory")
KILLED = ChildOutcome(started=True, stop=Stop.DEADLINE, returncode=-9)
ROWS = [
    Row("control: a successful apply", "apply", exited(report("apply")), None, False, True),
    Row("control: a successful plan", "plan", exited(report("plan")), None),
    Row("executor missing", "apply", NOT_STARTED, "executor_unavailable", False, False, -1),
    Row("executor missing, read-only", "plan", NOT_STARTED, "executor_unavailable", exit=-1),
    Row("killed at the deadline", "apply", KILLED, "deadline_exceeded", True, True, 137),
    Row("killed at the deadline, read-only", "plan", KILLED, "deadline_exceeded", exit=137),
    Row(
        "killed at the deadline after a complete report",
        "migration-apply",
        ChildOutcome(
            started=True,
            stop=Stop.DEADLINE,
            returncode=0,
            stdout=json.dumps(report("migration-apply")).encode(),
        ),
        "deadline_exceeded",
        True,
        True,
    ),
    Row(
        "runner told to stop",
        "migration-apply",
        ChildOutcome(started=True, stop=Stop.TERMINATED, returncode=-15),
        "runner_terminated",
        True,
        True,
        143,
    ),
    Row(
        "output cut off",
        "apply",
        ChildOutcome(started=True, returncode=0, output_problem="the pipes stayed open"),
        "executor_output_unreadable",
        True,
        True,
    ),
    Row(
        "crashed by a signal",
        "apply",
        ChildOutcome(started=True, returncode=-11),
        "executor_crashed",
        True,
        True,
        139,
    ),
    Row(
        "garbage on stdout",
        "apply",
        exited(b"panic: \x00\xff"),
        "executor_report_invalid",
        True,
        True,
    ),
    Row("garbage on stdout, read-only", "verify", exited(b"oops"), "executor_report_invalid"),
    Row("a JSON array", "apply", exited([1, 2]), "executor_report_invalid", True, True),
    Row("an empty stdout", "apply", exited(b""), "executor_report_invalid", True, True),
    Row(
        "a report that names the operation ID",
        "apply",
        exited({**report("apply"), "operationId": "op"}),
        "executor_report_invalid",
        True,
        True,
    ),
    Row(
        "a report that forgets whether it started",
        "apply",
        exited(report("apply", mutationStarted=None)),
        "executor_report_invalid",
        True,
        True,
    ),
    Row(
        "success reported with exit 1",
        "apply",
        exited(report("apply"), 1),
        "executor_inconsistent",
        True,
        True,
        1,
    ),
    Row(
        "an error reported with exit 0",
        "migration-apply",
        exited(failure_report("migration-apply"), 0),
        "executor_inconsistent",
        True,
        True,
    ),
    Row(
        "a refusal before any change, reported in full",
        "migration-apply",
        exited(
            failure_report(
                "migration-apply", migrationRun={"outcome": "Failed", "appliedVersions": []}
            ),
            3,
        ),
        "boom",
        False,
        False,
        3,
    ),
    Row(
        "a partial run inside the approved sequence",
        "migration-apply",
        exited(
            failure_report(
                "migration-apply",
                mutationStarted=True,
                migrationRun={"outcome": "Partial", "appliedVersions": ["004"]},
            ),
            1,
        ),
        "boom",
        False,
        True,
        1,
    ),
    Row(
        "versions outside the approved sequence",
        "migration-apply",
        exited(
            report(
                "migration-apply", migrationRun={"outcome": "Applied", "appliedVersions": ["005"]}
            )
        ),
        "executor_inconsistent",
        True,
        True,
    ),
    Row(
        "another plan applied",
        "apply",
        exited(
            report("apply", apply={"planContentDigest": "sha256:" + "0" * 64, "statementCount": 1})
        ),
        "executor_inconsistent",
        True,
        True,
    ),
    Row("a read-only failure", "observe", exited(failure_report("observe"), 2), "boom", exit=2),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_decide(row: Row) -> None:
    result = decide(config(row.operation), row.child)
    assert isinstance(result, RunnerResult)
    assert (result.operation, result.operation_id) == (row.operation, "op")
    assert result.error_code == row.code
    assert result.uncertain is row.uncertain
    assert result.mutation_started is row.started
    assert result.child_exit_code == row.exit
    if result.error is not None:
        assert result.error.message[:1] == result.error.message[:1].lower()


def test_nothing_the_child_wrote_reaches_the_account_with_the_url_in_it() -> None:
    leaky = failure_report(
        "plan",
        error={"code": "connect", "message": f"could not reach {SECRET_URL}\nretrying"},
    )
    result = decide(config("plan"), exited(leaky, 1))
    assert result.error is not None
    assert SECRET_URL not in result.error.message
    assert "s3cret-Pa55word" not in result.error.message
    assert result.error.message == "could not reach [redacted] retrying"
    plan = report("plan")
    plan["plan"]["stdout"] = f"-- planned against {SECRET_URL}\nCREATE TABLE a ();\n"
    planned = decide(config("plan"), exited(plan))
    assert planned.plan is not None
    assert "s3cret" not in planned.plan.stdout


@pytest.mark.parametrize(
    ("url", "hidden"),
    [
        (SECRET_URL, ["s3cret-Pa55word"]),
        ("mysql://u:p%40ss-word1@h/db", ["p%40ss-word1", "p@ss-word1"]),
        ("u:dsn-password@tcp(db:3306)/orders", ["dsn-password"]),
        ("postgres://h/db", []),
    ],
)
def test_the_redactor_finds_the_password_in_each_spelling(url: str, hidden: list[str]) -> None:
    redactor = Redactor(secrets_of(url))
    for secret in [url, *hidden]:
        assert secret not in redactor.text(f"x {secret} y")
        assert secret.encode() not in redactor.data(f"x {secret} y".encode())
    assert "u" in redactor.text("u")  # a short user name is not a secret
    assert "secrets" in repr(redactor) and url not in repr(redactor)


def test_one_line_is_bounded_and_never_empty() -> None:
    redactor = Redactor(())
    assert one_line("\t\n", redactor) == "no message"
    assert len(one_line("word " * 1000, redactor)) <= 1024


def test_exit_codes_are_spelled_as_a_shell_spells_them() -> None:
    assert [exit_code(None), exit_code(0), exit_code(3), exit_code(-9)] == [-1, 0, 3, 137]


def test_a_result_too_large_for_a_frame_becomes_uncertain_for_a_mutation() -> None:
    big = decide(config("apply"), exited(report("apply")))
    replaced = too_large(config("apply"), big)
    assert (replaced.error_code, replaced.uncertain, replaced.mutation_started) == (
        "result_too_large",
        True,
        True,
    )
    assert replaced.apply is None
