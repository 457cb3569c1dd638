"""The runner as the Job runs it: ``python -m runner`` driving a ptah process.

The ptah here is the test stand-in (``ptah_standin.py``), a real subprocess that
checks its argv and environment as ptah would and prints ptah's documents. Each run
is read back the way the controller reads it: the record the runner created (here
into a file, ``tests.runner.recording``), the summary from the termination log; and
its log is checked to carry the record's name and digest only.

Set ``PTAH_CONTRACT_EXECUTOR`` (and ``PTAH_CONTRACT_DB_URL``) to run the rows marked
"any executor" against another ptah-compatible binary (``tests/labexecutor/
test_runner_contract.py`` runs them with the lab's executor, PostgreSQL and registry);
the scripted rows always use the stand-in, which alone can be told to misbehave.

No test sleeps to synchronize: each waits for the runner to exit, or for a line the
runner relays. Deadlines are a couple of seconds ahead, and no test asserts on time.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.config import RunConfig, prepare
from runner.planfile import decode_plan
from runner.result import RUNNER_OPERATIONS
from runner.run import run_child
from runner.summary import parse_summary_for
from tests.support.contractrows import operation_row, read_back
from tests.support.runnerrig import (
    OP_ID,
    RunnerRun,
    deadline_in,
    finish,
    recorded_result,
    run_runner,
    runner_env,
    standin_plan,
    standin_wrapper,
    start_runner,
    write_plan_chunks,
)

# Every row starts `python -m runner` and a ptah subprocess: integration, left to `make test`.
pytestmark = pytest.mark.integration


def scripted(
    tmp_path: Path, operation: str, script: dict[str, Any], **overrides: str | None
) -> RunnerRun:
    """A run against the stand-in, whatever executor the suite was pointed at."""
    overrides.setdefault("PTAH_BINARY", str(standin_wrapper(tmp_path)))
    return run_runner(tmp_path, operation, script, **overrides)


@pytest.mark.parametrize("operation", RUNNER_OPERATIONS)
def test_any_executor_every_operation_succeeds(tmp_path: Path, operation: str) -> None:
    operation_row(tmp_path, operation)


def test_the_standin_says_what_it_is(tmp_path: Path) -> None:
    for argv in (["--help"], ["version"]):
        out = subprocess.run(
            [str(standin_wrapper(tmp_path)), *argv], capture_output=True, text=True, check=False
        )
        assert out.returncode == 0 and "TEST STAND-IN" in out.stdout and "not ptah" in out.stdout


def test_ptah_sees_only_its_own_variables(tmp_path: Path) -> None:
    log = tmp_path / "seen.jsonl"
    for operation in RUNNER_OPERATIONS:
        read_back(scripted(tmp_path, operation, {"log": str(log)}), operation)
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    names = {tuple(entry["argv"][:2]): set(entry["env"]) for entry in seen}
    database = {"PTAH_DB_URL", "PTAH_CONNECT_TIMEOUT", "PTAH_LOCK_TIMEOUT", "PTAH_TX_MODE"}
    assert names[("oci", "resolve")] == names[("oci", "verify")] == set()
    assert (
        names[("schema", "drift")] == names[("schema", "plan")] == database | {"PTAH_SCHEMA_FILE"}
    )
    # Apply and the plan's validation read the plan alone.
    assert names[("schema", "apply")] == database
    assert names[("migrations", "up")] == names[("migrations", "status")] == database


# -- the runner's own refusals: nothing ran -------------------------------------------


def _not_started(run: RunnerRun, operation: str, code: str) -> None:
    result = read_back(run, operation).result
    assert (result.error_code, result.child_exit_code) == (code, -1)
    flag = False if operation in ("apply", "migration-apply") else None
    assert (result.mutation_started, result.uncertain) == (flag, flag)
    assert f"{operation} {OP_ID} failed ({code})" in run.stderr


@pytest.mark.parametrize(
    ("name", "operation", "overrides", "code"),
    [
        (
            "plan digest mismatch",
            "apply",
            {"PTAH_EXPECTED_PLAN_CONTENT_DIGEST": "sha256:" + "9" * 64},
            "plan_digest_mismatch",
        ),
        (
            "deadline passed",
            "migration-apply",
            {"PTAH_EXECUTION_NOT_AFTER": "2026-01-01T00:00:00Z"},
            "execution_deadline_passed",
        ),
        (
            "credential in argv",
            "resolve",
            {"PTAH_REQUESTED_REFERENCE": "oci://robot:hunter22@registry.example/a:v1"},
            "credential_in_argv",
        ),
        (
            "wrong dialect",
            "apply",
            {"PTAH_DB_URL": "mysql://ptah:s3cret-Pa55word@db.internal:3306/orders"},
            "dialect_mismatch",
        ),
        ("ptah too old", "migration-apply", {"PTAH_VERSION": "v0.2.0"}, "ptah_build_unsupported"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else "",
)
def test_the_runners_own_refusals_start_nothing(
    tmp_path: Path, name: str, operation: str, overrides: dict[str, str], code: str
) -> None:
    log = tmp_path / "seen.jsonl"
    run = scripted(tmp_path, operation, {"log": str(log)}, **overrides)
    _not_started(run, operation, code)
    assert not log.exists(), "ptah ran"


CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("operation", ["resolve", "verify"])
def test_ptah_reads_the_checked_copy_of_the_pinned_ca_bundle(
    tmp_path: Path, operation: str
) -> None:
    bundle = tmp_path / "registry-ca.pem"
    bundle.write_text(CA_PEM)
    seen = tmp_path / "ca-seen.json"
    pinned = "sha256:" + hashlib.sha256(CA_PEM.encode()).hexdigest()
    run = scripted(
        tmp_path,
        operation,
        {"ca_seen": str(seen)},
        PTAH_OCI_CA_FILE=str(bundle),
        PTAH_EXPECTED_OCI_CA_DIGEST=pinned,
    )
    assert read_back(run, operation).result.error_code is None
    told = json.loads(seen.read_text())
    # The bytes that matched the pin, copied where the kubelet cannot swap them.
    assert told["content"] == CA_PEM and told["path"] != str(bundle)


@pytest.mark.parametrize(
    ("name", "pinned", "code"),
    [
        ("another bundle than the claim pinned", "sha256:" + "9" * 64, "registry_ca_mismatch"),
        ("a bundle the claim did not pin", None, "registry_ca_unpinned"),
    ],
)
def test_a_ca_bundle_that_is_not_the_pinned_one_starts_nothing(
    tmp_path: Path, name: str, pinned: str | None, code: str
) -> None:
    bundle = tmp_path / "registry-ca.pem"
    bundle.write_text(CA_PEM)
    log = tmp_path / "seen.jsonl"
    run = scripted(
        tmp_path,
        "resolve",
        {"log": str(log)},
        PTAH_OCI_CA_FILE=str(bundle),
        PTAH_EXPECTED_OCI_CA_DIGEST=pinned,
    )
    _not_started(run, "resolve", code)
    assert not log.exists(), "ptah ran"


@pytest.mark.parametrize(
    ("name", "content", "code"),
    [
        ("a MySQL plan", standin_plan("mysql"), "dialect_mismatch"),
        ("a plan that is not UTF-8", b"\xff\xfe" + standin_plan(), "plan_not_utf8"),
    ],
)
def test_a_plan_that_is_not_the_approved_one_starts_nothing(
    tmp_path: Path, name: str, content: bytes, code: str
) -> None:
    write_plan_chunks(tmp_path / "plan", content)
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    run = scripted(tmp_path, "apply", {}, PTAH_EXPECTED_PLAN_CONTENT_DIGEST=digest)
    _not_started(run, "apply", code)


def test_a_chunk_leading_out_of_the_plan_directory_starts_nothing(tmp_path: Path) -> None:
    plan = tmp_path / "plan"
    write_plan_chunks(plan, standin_plan())
    (tmp_path / "outside").write_bytes(b"{}")
    (plan / "002.plan").symlink_to(tmp_path / "outside")
    _not_started(scripted(tmp_path, "apply", {}), "apply", "plan_unreadable")


def test_a_deadline_that_passes_before_exec_starts_nothing(tmp_path: Path) -> None:
    env = runner_env(tmp_path, "apply", {})
    config = prepare(env, "apply", OP_ID, now=datetime.now(UTC))
    assert isinstance(config, RunConfig)
    # Preparation took longer than the claim had left: the check before exec refuses.
    late = datetime.now(UTC) - timedelta(seconds=1)
    with Path(os.devnull).open("w") as sink:
        result = run_child(replace(config, execution_not_after=late), env, sink.fileno())
    assert (
        result.error_code,
        result.child_exit_code,
        result.mutation_started,
        result.uncertain,
    ) == (
        "execution_deadline_passed",
        -1,
        False,
        False,
    )


# -- what ptah reports, end to end -------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "script", "expected"),
    [
        ("apply", {"outcome": "refused"}, ("apply_refused", False, False)),
        ("apply", {"outcome": "failed"}, ("apply_failed", False, False)),
        ("apply", {"outcome": "unknown"}, ("apply_outcome_unknown", True, True)),
        ("migration-apply", {"outcome": "failed"}, ("migration_failed", False, False)),
        ("migration-apply", {"outcome": "partial"}, ("migration_partial", True, False)),
        ("migration-apply", {"outcome": "unknown"}, ("migration_outcome_unknown", True, True)),
        ("plan", {"outcome": "refused"}, ("plan_refused", None, None)),
        ("plan", {"outcome": "no-changes"}, (None, None, None)),
        ("plan", {"plan_salt": " -- again"}, ("plan_unstable", None, None)),
        ("observe", {"drift": True}, (None, None, None)),
        (
            "verify",
            {"findings": [{"requirement": "provenance", "detail": "none"}]},
            ("verification_failed", None, None),
        ),
    ],
)
def test_what_ptah_reports_is_what_the_record_says(
    tmp_path: Path, operation: str, script: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    result = read_back(scripted(tmp_path, operation, script), operation).result
    assert (result.error_code, result.mutation_started, result.uncertain) == expected


def test_a_usage_error_on_apply_reads_as_not_started(tmp_path: Path) -> None:
    # A variable no flag has as its twin: ptah (the stand-in) refuses its command line.
    run = scripted(tmp_path, "apply", {}, PTAH_NOT_A_FLAG="1")
    result = read_back(run, "apply").result
    assert (result.error_code, result.child_exit_code) == ("executor_usage_error", 2)
    assert (result.mutation_started, result.uncertain) == (False, False)


def test_plan_and_apply_stderr_is_discarded_and_errors_are_echoed(tmp_path: Path) -> None:
    script = {"stderr": ["INSERT INTO cards VALUES ('4111111111111111')"], "outcome": "unknown"}
    run = scripted(tmp_path, "apply", script)
    read_back(run, "apply")
    assert "4111" not in run.stdout + run.stderr + run.summary
    assert "ptah-runner: apply" in run.stderr
    relayed = scripted(tmp_path, "observe", {"stderr": ["reading catalog"]})
    assert "[executor] reading catalog\n" in relayed.stderr


def test_a_nonzero_exit_without_a_report_is_uncertain_for_a_mutation(tmp_path: Path) -> None:
    run = scripted(tmp_path, "apply", {"stdout": "", "exit": 1, "stderr": ["lost connection"]})
    result = read_back(run, "apply").result
    assert (result.error_code, result.uncertain, result.child_exit_code) == (
        "executor_report_invalid",
        True,
        1,
    )


@pytest.mark.parametrize(
    ("operation", "ignore_term", "uncertain", "exit_code"),
    [("apply", True, True, 137), ("observe", False, None, 143)],
    ids=["apply ignoring SIGTERM", "observe"],
)
def test_an_executor_hanging_past_the_deadline_is_killed(
    tmp_path: Path, operation: str, ignore_term: bool, uncertain: bool | None, exit_code: int
) -> None:
    script = {"hang": True, "ignore_term": ignore_term}
    run = scripted(tmp_path, operation, script, PTAH_EXECUTION_NOT_AFTER=deadline_in(4))
    result = read_back(run, operation).result
    assert result.error_code == "deadline_exceeded"
    assert result.uncertain is uncertain and result.mutation_started is uncertain
    assert result.child_exit_code == exit_code


@pytest.mark.parametrize(
    ("operation", "script", "code"),
    [
        ("migration-apply", {"stdout": "\x00garbage{{{\n"}, "executor_report_invalid"),
        ("migration-apply", {"signal": int(signal.SIGSEGV)}, "executor_crashed"),
        ("verify", {"stdout": "[1,2,3]"}, "executor_report_invalid"),
    ],
    ids=["garbage", "crash", "garbage read-only"],
)
def test_output_that_cannot_be_believed(
    tmp_path: Path, operation: str, script: dict[str, Any], code: str
) -> None:
    result = read_back(scripted(tmp_path, operation, script), operation).result
    assert result.error_code == code
    mutating = operation == "migration-apply"
    assert result.uncertain is (True if mutating else None)


def test_a_missing_executor_is_refused_before_anything_ran(tmp_path: Path) -> None:
    run = run_runner(tmp_path, "apply", {}, PTAH_BINARY=str(tmp_path / "absent"))
    _not_started(run, "apply", "executor_unavailable")


def test_a_careless_executor_does_not_leak_the_database_url(tmp_path: Path) -> None:
    run = scripted(tmp_path, "observe", {"echo_url": True})
    read_back(run, "observe")  # asserts the URL is nowhere
    assert "[executor] connecting to [redacted]\n" in run.stderr


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
    run = scripted(tmp_path, "apply", {"holder": str(pid_file)})
    result = read_back(run, "apply").result
    assert (result.error_code, result.uncertain) == ("executor_output_unreadable", True)
    assert "still held its output" in (result.error.message if result.error else "")
    # Killed with the group: gone, or a zombie waiting for whoever inherited it.
    assert _state(int(pid_file.read_text())) in ("gone", "Z")


def test_a_helper_still_running_after_the_executor_exits_makes_the_run_uncertain(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "daemon.pid"
    run = scripted(tmp_path, "migration-apply", {"daemon": str(pid_file)})
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
    env["PTAH_BINARY"] = str(standin_wrapper(tmp_path))
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
    run = scripted(tmp_path, "apply", {}, PTAH_RUNNER_PROTOCOL_VERSION="4")
    result = read_back(run, "apply", protocol=4).result
    assert (result.error_code, result.child_exit_code) == ("runner_protocol_mismatch", -1)


def test_without_an_operation_no_result_is_recorded(tmp_path: Path) -> None:
    run = scripted(tmp_path, "apply", {}, PTAH_OPERATION=None)
    assert run.returncode == 2
    assert run.stdout == "" and run.summary == "" and run.record is None
    assert "no result can be bound to an attempt" in run.stderr


def test_a_record_that_cannot_be_written_leaves_the_summary_and_says_why(tmp_path: Path) -> None:
    run = scripted(tmp_path, "plan", {}, TEST_RECORD_FILE=str(tmp_path / "unwritable"))
    assert run.returncode == 3 and run.record is None and run.stdout == ""
    assert "no result record could be written: the API server refused the record" in run.stderr
    assert parse_summary_for(run.summary, "plan", OP_ID).error_code is None


def test_a_runner_outside_a_pod_writes_no_record_and_says_so(tmp_path: Path) -> None:
    run = scripted(tmp_path, "plan", {}, PTAH_POD_UID=None)
    assert run.returncode == 3 and run.record is None
    assert "does not name the Pod and its Job (PTAH_POD_UID unset)" in run.stderr


def test_a_plans_statements_reach_the_record_and_never_the_log(tmp_path: Path) -> None:
    run = scripted(tmp_path, "plan", {})
    plan = read_back(run, "plan").result.plan
    assert plan is not None
    statements = decode_plan(plan.stdout.encode(), "PostgreSQL").statements
    assert statements
    for statement in statements:
        assert statement.sql in json.dumps(run.record)
        assert statement.sql not in run.stdout + run.stderr + run.summary


def test_a_missing_termination_log_is_not_created_and_the_record_stands(tmp_path: Path) -> None:
    absent = tmp_path / "no-such-dir" / "termination-log"
    run = scripted(tmp_path, "plan", {}, PTAH_TERMINATION_LOG=str(absent))
    assert run.returncode == 0
    assert recorded_result(run, "plan").result.succeeded
    assert "the termination summary could not be written" in run.stderr
    assert not absent.exists()


def test_the_runner_prints_no_environment_value(tmp_path: Path) -> None:
    env = runner_env(tmp_path, "migration-apply", {"stderr": ["ok"]})
    env["PTAH_BINARY"] = str(standin_wrapper(tmp_path))
    run = finish(start_runner(env), env)
    read_back(run, "migration-apply")
    runner_lines = [line for line in run.stderr.splitlines() if line.startswith("ptah-runner:")]
    for line in runner_lines:
        for name, value in env.items():
            if name not in ("PTAH_OPERATION", "PTAH_OPERATION_ID") and len(value) > 3:
                assert value not in line, name
