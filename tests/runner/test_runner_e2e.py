"""The runner as the Job runs it: ``python -m runner`` with the stand-in
executor as a real subprocess. Each run is read back the way the controller reads it:
the frame from stdout, the summary from the termination log.

No test sleeps to synchronize: each waits for the runner to exit, or for a line the
runner relays. Deadlines are a couple of seconds ahead, and no test asserts on time.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.protocol import Frame, parse_result_for
from runner.result import RUNNER_OPERATIONS
from runner.summary import parse_summary_for
from tests.runner.support import (
    OP_ID,
    PLAN_DIGEST,
    SECRET_URL,
    RunnerRun,
    deadline_in,
    finish,
    run_runner,
    runner_env,
    start_runner,
)

PASSWORD = "s3cret-Pa55word"


def read_back(run: RunnerRun, operation: str, protocol: int = 5) -> Frame:
    """The frame and summary as the controller reads them; they must agree."""
    for text in (run.stdout, run.stderr, run.summary):
        assert SECRET_URL not in text and PASSWORD not in text
    assert run.returncode == 0, run.stderr
    frame = parse_result_for(run.stdout, operation, OP_ID, protocol_version=protocol)
    summary = parse_summary_for(run.summary, operation, OP_ID, protocol_version=protocol)
    assert summary.frame_digest == frame.digest
    assert summary.error_code == frame.result.error_code
    assert summary.uncertain == frame.result.uncertain
    return frame


def test_a_successful_apply(tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    script = {"report": "auto", "stderr": ["applying 1 statement"], "argv_file": str(argv_file)}
    run = run_runner(tmp_path, "apply", script)
    result = read_back(run, "apply").result
    assert result.succeeded and result.mutation_started is True and result.uncertain is False
    assert result.child_exit_code == 0
    assert "[executor] applying 1 statement\n" in run.stderr
    assert f"ptah-runner: apply {OP_ID} succeeded" in run.stderr
    argv = json.loads(argv_file.read_text())
    assert argv[1:] == [
        "apply",
        "--plan-dir",
        "/var/run/ptah/plan",
        "--plan-content-digest",
        PLAN_DIGEST,
        "--output",
        "json",
    ]


@pytest.mark.parametrize("operation", [op for op in RUNNER_OPERATIONS if op != "apply"])
def test_every_operation_succeeds_with_what_a_real_executor_prints(
    tmp_path: Path, operation: str
) -> None:
    result = read_back(run_runner(tmp_path, operation, {"report": "auto"}), operation).result
    assert result.succeeded, result.error


def test_a_refusal_reported_in_full_is_a_certain_failure(tmp_path: Path) -> None:
    report = {
        "targetIdentityDigest": "sha256:" + "a" * 64,
        "mutationStarted": False,
        "uncertain": False,
        "error": {"code": "history_moved", "message": "the history moved after approval"},
        "migrationRun": {"outcome": "Failed", "appliedVersions": []},
    }
    run = run_runner(tmp_path, "migration-apply", {"report": report, "exit": 3})
    result = read_back(run, "migration-apply").result
    assert (result.error_code, result.uncertain, result.mutation_started) == (
        "history_moved",
        False,
        False,
    )
    assert result.child_exit_code == 3


def test_a_nonzero_exit_without_a_report_is_uncertain_for_a_mutation(tmp_path: Path) -> None:
    run = run_runner(tmp_path, "apply", {"stderr": ["fatal: lost connection"], "exit": 1})
    result = read_back(run, "apply").result
    assert (result.error_code, result.uncertain, result.child_exit_code) == (
        "executor_report_invalid",
        True,
        1,
    )


@pytest.mark.parametrize(
    ("operation", "ignore_term", "uncertain", "exit_code"),
    [("apply", True, True, 137), ("plan", False, None, 143)],
    ids=["apply ignoring SIGTERM", "plan"],
)
def test_an_executor_hanging_past_the_deadline_is_killed(
    tmp_path: Path, operation: str, ignore_term: bool, uncertain: bool | None, exit_code: int
) -> None:
    script = {"report": "auto", "hang": True, "ignore_term": ignore_term}
    run = run_runner(tmp_path, operation, script, PTAH_EXECUTION_NOT_AFTER=deadline_in(2))
    result = read_back(run, operation).result
    assert result.error_code == "deadline_exceeded"
    assert result.uncertain is uncertain and result.mutation_started is uncertain
    assert result.child_exit_code == exit_code


@pytest.mark.parametrize(
    ("operation", "script", "code"),
    [
        ("migration-apply", {"stdout": "\x00garbage{{{\n"}, "executor_report_invalid"),
        ("migration-apply", {"report": "auto", "signal": int(signal.SIGSEGV)}, "executor_crashed"),
        ("verify", {"stdout": "[1,2,3]"}, "executor_report_invalid"),
    ],
    ids=["garbage", "crash", "garbage read-only"],
)
def test_output_that_cannot_be_believed(
    tmp_path: Path, operation: str, script: dict[str, Any], code: str
) -> None:
    result = read_back(run_runner(tmp_path, operation, script), operation).result
    assert result.error_code == code
    mutating = operation == "migration-apply"
    assert result.uncertain is (True if mutating else None)


def test_a_missing_executor_is_refused_before_anything_ran(tmp_path: Path) -> None:
    run = run_runner(tmp_path, "apply", {}, PTAH_EXECUTOR=str(tmp_path / "absent"))
    result = read_back(run, "apply").result
    assert (result.child_exit_code, result.mutation_started, result.uncertain) == (-1, False, False)
    assert result.error_code == "executor_unavailable"


def test_a_careless_executor_does_not_leak_the_database_url(tmp_path: Path) -> None:
    report = {"error": {"code": "connect", "message": f"cannot connect to {SECRET_URL}"}}
    run = run_runner(tmp_path, "observe", {"echo_url": True, "report": report, "exit": 2})
    result = read_back(run, "observe").result  # asserts the URL is nowhere
    assert "[executor] connecting to [redacted]\n" in run.stderr
    assert result.error is not None and "[redacted]" in result.error.message


def _state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return "gone"
    return next(line.split()[1] for line in status.splitlines() if line.startswith("State:"))


def test_a_helper_outliving_the_executor_is_killed_and_the_run_is_uncertain(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "helper.pid"
    run = run_runner(tmp_path, "apply", {"report": "auto", "holder": str(pid_file)})
    result = read_back(run, "apply").result
    assert (result.error_code, result.uncertain) == ("executor_output_unreadable", True)
    assert "still held its output" in (result.error.message if result.error else "")
    # Killed with the group: gone, or a zombie waiting for whoever inherited it.
    assert _state(int(pid_file.read_text())) in ("gone", "Z")


def test_a_helper_still_running_after_the_executor_exits_makes_the_run_uncertain(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "daemon.pid"
    run = run_runner(tmp_path, "migration-apply", {"report": "auto", "daemon": str(pid_file)})
    result = read_back(run, "migration-apply").result
    assert (result.error_code, result.uncertain) == ("executor_output_unreadable", True)
    assert "still running after it exited" in (result.error.message if result.error else "")
    assert _state(int(pid_file.read_text())) in ("gone", "Z")


def _await_line(proc: subprocess.Popen[str], wanted: str) -> None:
    assert proc.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while True:
            # The timeout only guards against a hang; the line arrives as soon as it can.
            assert selector.select(timeout=60), "the runner relayed nothing"
            line = proc.stderr.readline()
            assert line, "the runner exited before relaying the line"
            if line == wanted:
                return


def test_a_runner_told_to_stop_stops_its_executor_and_reports_uncertain(tmp_path: Path) -> None:
    env = runner_env(tmp_path, "migration-apply", {"hang": True, "ignore_term": True})
    proc = start_runner(env)
    _await_line(proc, "[executor] started\n")
    proc.send_signal(signal.SIGTERM)
    run = finish(proc, env)
    result = read_back(run, "migration-apply").result
    assert (result.error_code, result.uncertain, result.mutation_started) == (
        "runner_terminated",
        True,
        True,
    )


def test_a_protocol_mismatch_is_answered_in_the_jobs_version(tmp_path: Path) -> None:
    run = run_runner(tmp_path, "apply", {"report": "auto"}, PTAH_RUNNER_PROTOCOL="4")
    result = read_back(run, "apply", protocol=4).result
    assert (result.error_code, result.child_exit_code) == ("runner_protocol_mismatch", -1)


def test_without_an_operation_no_frame_is_written(tmp_path: Path) -> None:
    run = run_runner(tmp_path, "apply", {"report": "auto"}, PTAH_OPERATION=None)
    assert run.returncode == 2
    assert run.stdout == "" and run.summary == ""
    assert "no result frame can be written" in run.stderr


def test_a_missing_termination_log_is_not_created_and_the_frame_stands(tmp_path: Path) -> None:
    absent = tmp_path / "no-such-dir" / "termination-log"
    run = run_runner(tmp_path, "plan", {"report": "auto"}, PTAH_TERMINATION_LOG=str(absent))
    assert run.returncode == 0
    assert parse_result_for(run.stdout, "plan", OP_ID).result.succeeded
    assert "the termination summary could not be written" in run.stderr
    assert not absent.exists()


def test_the_runner_prints_no_environment_value(tmp_path: Path) -> None:
    script = {"report": "auto", "stderr": ["ok"]}
    env = runner_env(tmp_path, "migration-apply", script)
    run = finish(start_runner(env), env)
    read_back(run, "migration-apply")
    runner_lines = [line for line in run.stderr.splitlines() if line.startswith("ptah-runner:")]
    for line in runner_lines:
        for name, value in env.items():
            if name not in ("PTAH_OPERATION", "PTAH_OPERATION_ID") and len(value) > 3:
                assert value not in line, name
    assert os.environ.get("PTAH_DATABASE_URL") is None  # the test itself leaked nothing
