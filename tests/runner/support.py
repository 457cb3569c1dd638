"""Shared builders for the runner tests: valid results, frames, and a runner to run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runner.result import RunnerResult

ROOT = Path(__file__).resolve().parents[2]
FAKE_EXECUTOR = Path(__file__).with_name("fake_executor.py")
OP_ID = "sha256:" + "1" * 64
OTHER_ID = "sha256:" + "2" * 64
TARGET = "sha256:" + "a" * 64
COORD = "sha256:" + "b" * 64
DIGEST = "sha256:" + "c" * 64
PLAN_DIGEST = "sha256:" + "e" * 64
SECRET_URL = "postgres://ptah:s3cret-Pa55word@db.internal:5432/orders?sslmode=require"


def wire(operation: str, **changes: Any) -> dict[str, Any]:
    """The wire form of a valid, successful result of ``operation``, then ``changes``.

    A change whose value is None removes the field.
    """
    sections: dict[str, dict[str, Any]] = {
        "resolve": {
            "resolve": {
                "resolvedDigest": DIGEST,
                "resolvedReference": "registry.example/schema@" + DIGEST,
                "resolvedMediaType": "application/vnd.ptah.schema.v1",
                "resolvedSize": 10,
            }
        },
        "verify": {"verify": {"verificationPolicyDigest": DIGEST}},
        "observe": {
            "observe": {
                "observedDialect": "postgresql-16",
                "observedDrift": False,
                "driftFindingCount": 0,
                "driftReportDigest": DIGEST,
            }
        },
        "plan": {
            "plan": {
                "planOutcome": "Changes",
                "planContentDigest": PLAN_DIGEST,
                "statementCount": 2,
                "stdout": "CREATE TABLE a ();\nCREATE TABLE b ();\n",
            }
        },
        "apply": {
            "mutationStarted": True,
            "uncertain": False,
            "apply": {"planContentDigest": PLAN_DIGEST, "statementCount": 2},
        },
        "migration-history": {
            "migrationHistory": {
                "contractVersion": 1,
                "appliedCount": 3,
                "pendingCount": 1,
                "pending": [{"version": "004", "digest": DIGEST}],
                "fingerprint": DIGEST,
            }
        },
        "migration-apply": {
            "mutationStarted": True,
            "uncertain": False,
            "migrationRun": {"outcome": "Applied", "appliedVersions": ["004", "005"]},
        },
    }
    data: dict[str, Any] = {
        "protocolVersion": 5,
        "operation": operation,
        "operationId": OP_ID,
        "childExitCode": 0,
        **sections[operation],
    }
    if operation not in ("resolve", "verify"):
        data["targetIdentityDigest"] = TARGET
        data["coordinationDigest"] = COORD
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def result(operation: str, **changes: Any) -> RunnerResult:
    return RunnerResult.from_wire(wire(operation, **changes))


def failed_wire(operation: str, **changes: Any) -> dict[str, Any]:
    """A certain failure of ``operation`` (nothing started)."""
    base = wire(operation)
    for section in ("resolve", "verify", "observe", "plan", "apply", "migrationHistory"):
        base.pop(section, None)
    base.pop("migrationRun", None)
    base.update(childExitCode=1, error={"code": "boom", "message": "it broke"})
    if operation in ("apply", "migration-apply"):
        base.update(mutationStarted=False, uncertain=False)
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


@dataclass
class RunnerRun:
    returncode: int
    stdout: str
    stderr: str
    summary: str


def executor_wrapper(tmp_path: Path) -> Path:
    """An executable that runs the stand-in executor under this interpreter."""
    wrapper = tmp_path / "ptah"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_EXECUTOR}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def deadline_in(seconds: float) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def runner_env(
    tmp_path: Path, operation: str, script: dict[str, Any], **overrides: str | None
) -> dict[str, str]:
    summary = tmp_path / "termination-log"
    summary.touch()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PTAH_DATABASE_URL": SECRET_URL,
        "PTAH_ENGINE": "PostgreSQL",
        "PTAH_EXECUTOR": str(executor_wrapper(tmp_path)),
        "PTAH_OPERATION": operation,
        "PTAH_OPERATION_ID": OP_ID,
        "PTAH_RUNNER_PROTOCOL": "5",
        "PTAH_EXECUTION_NOT_AFTER": deadline_in(120),
        "PTAH_TERMINATION_LOG": str(summary),
        "PTAH_KILL_GRACE_SECONDS": "0.5",
        "PTAH_DRAIN_SECONDS": "0.5",
        "FAKE_EXECUTOR_SCRIPT": json.dumps(script),
    }
    if operation == "apply":
        env["PTAH_PLAN_DIR"] = "/var/run/ptah/plan"
        env["PTAH_PLAN_CONTENT_DIGEST"] = PLAN_DIGEST
    if operation == "migration-apply":
        env["PTAH_EXPECT_SEQUENCE"] = "004,005"
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def start_runner(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner"],
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], env: dict[str, str]) -> RunnerRun:
    # Waiting for the runner to exit is the synchronization; 60 s only guards a hang.
    stdout, stderr = proc.communicate(timeout=60)
    summary_path = env.get("PTAH_TERMINATION_LOG")
    summary = ""
    if summary_path and Path(summary_path).exists():
        summary = Path(summary_path).read_text()
    return RunnerRun(proc.returncode, stdout, stderr, summary)


def run_runner(
    tmp_path: Path, operation: str, script: dict[str, Any], **overrides: str | None
) -> RunnerRun:
    env = runner_env(tmp_path, operation, script, **overrides)
    return finish(start_runner(env), env)
