"""Shared builders for the runner tests: valid results, records, and a runner to run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobclaim.api import PtahResultRecord
from lab.executor.migrations import sum_text
from runner import (
    RUNNER_PROTOCOL_VERSION,
    DigestedResult,
    PodIdentity,
    encode_result,
    record_for,
    result_of_record,
)
from runner.result import RunnerResult
from tests.support.ptah_standin import plan_file

ROOT = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("ptah_standin.py")
OP_ID = "sha256:" + "1" * 64
OTHER_ID = "sha256:" + "2" * 64
TARGET = "sha256:" + "a" * 64
COORD = "sha256:" + "b" * 64
DIGEST = "sha256:" + "c" * 64
PLAN_DIGEST = "sha256:" + "e" * 64
JOB_UID = "0b1c2d3e-0000-4000-8000-00000000a10b"
POD_UID = "0b1c2d3e-0000-4000-8000-00000000b0d0"
# What the downward API gives the runner in a Job's Pod.
POD_IDENTITY_ENV = {
    "PTAH_POD_NAMESPACE": "shop",
    "PTAH_POD_NAME": "ptah-op-1-abcde",
    "PTAH_POD_UID": POD_UID,
    "PTAH_JOB_NAME": "ptah-op-1",
    "PTAH_JOB_UID": JOB_UID,
}
SECRET_URL = "postgres://ptah:s3cret-Pa55word@db.internal:5432/orders?sslmode=require"
DEV_SECRET_URL = "postgres://dev:devpass-1@dev.internal:5432/scratch"


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
        "protocolVersion": RUNNER_PROTOCOL_VERSION,
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
    record: dict[str, Any] | None = None


FAMILIES = ("schema", "migrations")


@dataclass
class Contract:
    """What the "any executor" rows run against.

    Unset (the default), the stand-in, which opens no database and reaches no registry.
    ``PTAH_CONTRACT_EXECUTOR`` names another ptah-compatible binary (the lab's),
    ``PTAH_CONTRACT_DB_URL`` the database it opens and ``PTAH_CONTRACT_DEV_URL`` a dev
    database for an executor that plans in one; ``tests/labexecutor`` fills the same
    fields with its own PostgreSQL and loopback registry.
    """

    executor: str
    db_url: str
    dev_url: str
    # The engine the claim names (PTAH_EXPECTED_DATABASE_ENGINE): ``PTAH_CONTRACT_ENGINE``,
    # PostgreSQL by default; MySQL for a mysql:// or mariadb:// database.
    engine: str = "PostgreSQL"
    # The registry Resolve and Verify read, and the digest each family's artifact
    # (``<registry>/shop/<family>:v1``) resolves to there.
    registry: str = "registry.example"
    digests: dict[str, str] = field(
        default_factory=lambda: dict.fromkeys(FAMILIES, "sha256:" + "5" * 64)
    )

    def requested(self, family: str) -> str:
        return f"{self.registry}/shop/{family}:v1"

    def resolved(self, family: str) -> str:
        return f"{self.registry}/shop/{family}@{self.digests[family]}"


CONTRACT = Contract(
    executor=os.environ.get("PTAH_CONTRACT_EXECUTOR", ""),
    db_url=os.environ.get("PTAH_CONTRACT_DB_URL", ""),
    dev_url=os.environ.get("PTAH_CONTRACT_DEV_URL", ""),
    engine=os.environ.get("PTAH_CONTRACT_ENGINE") or "PostgreSQL",
)
SEQUENCE_DOCUMENT = json.dumps(
    {"migrations": [{"version": 4, "version_key": "004"}, {"version": 5, "version_key": "005"}]},
    separators=(",", ":"),
)
SEQUENCE_DIGEST = "sha256:" + hashlib.sha256(SEQUENCE_DOCUMENT.encode()).hexdigest()
# Inputs both the stand-in and the lab's executor accept, all within ptah's contract:
# SQL DDL is a valid ``--schema-file`` (the runner's init container names it
# schema.hcl whatever its language), a digest pin is a policy ptah's YAML states, and
# migrations are versioned ``.sql`` files with their ``ptah.sum``.
SCHEMA_SQL = "create table orders (id bigint primary key, note text);\n"
VERIFICATION_POLICY = "version: 1\nrequire_digest_pin: true\n"
SCHEMA_TYPE = "application/vnd.stokaro.ptah.schema.v1"


def contract_db_url() -> str:
    return CONTRACT.db_url or SECRET_URL


def contract_dev_url() -> str:
    return CONTRACT.dev_url or DEV_SECRET_URL


def write_migrations(directory: Path, keys: list[str]) -> None:
    """One migration per version key, ``<key>_step.sql``, and its ``ptah.sum``."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {f"{key}_step.sql": f"create table step_{key} (id int);\n".encode() for key in keys}
    files["ptah.sum"] = sum_text(files).encode()
    for name, data in files.items():
        (directory / name).write_bytes(data)


def approved_plan(tmp_path: Path) -> bytes:
    """The plan an Apply is given, as the controller would have approved it.

    The stand-in's fixed plan, or the plan the contract executor makes for SCHEMA_SQL
    against the contract database (an executor applies only its own plan for the
    database as it is: its ``from_fingerprint`` is checked).
    """
    if not CONTRACT.executor:
        return standin_plan()
    schema = tmp_path / "approved-schema.sql"
    schema.write_text(SCHEMA_SQL)
    output = tmp_path / "approved.plan.json"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PTAH_DB_URL": contract_db_url(),
        "PTAH_DEV_URL": CONTRACT.dev_url,
        "PTAH_SCHEMA_FILE": str(schema),
    }
    argv = [CONTRACT.executor, "schema", "plan", "--output", str(output), "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return output.read_bytes()


def executor_wrapper(tmp_path: Path) -> Path:
    """The ptah the suite runs: ``PTAH_CONTRACT_EXECUTOR``, or the stand-in."""
    return Path(CONTRACT.executor) if CONTRACT.executor else standin_wrapper(tmp_path)


def standin_wrapper(tmp_path: Path) -> Path:
    """An executable that runs the stand-in ptah under this interpreter."""
    wrapper = tmp_path / "bin" / "ptah"
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def content_digest(content: bytes) -> str:
    return "sha256:" + hashlib.sha256(content).hexdigest()


def deadline_in(seconds: float) -> str:
    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_plan_chunks(directory: Path, content: bytes, *, parts: int = 2) -> None:
    """The approved plan as a projected volume lays it out: chunks behind ..data."""
    data = directory / "..2026_05_01_12_00_00.000000001"
    data.mkdir(parents=True)
    size = -(-len(content) // parts)
    for index in range(parts):
        (data / f"{index:03d}.plan").write_bytes(content[index * size : (index + 1) * size])
    (directory / "..data").symlink_to(data.name)
    for index in range(parts):
        (directory / f"{index:03d}.plan").symlink_to(f"..data/{index:03d}.plan")


def standin_plan(dialect: str = "postgres") -> bytes:
    """The plan the stand-in writes, as the controller would have approved it."""
    return plan_file(dialect, "")


def runner_env(
    tmp_path: Path, operation: str, script: dict[str, Any], **overrides: str | None
) -> dict[str, str]:
    """The environment the Job builder gives the runner for ``operation``, then overrides."""
    summary = tmp_path / "termination-log"
    summary.touch()
    source = tmp_path / "source"
    write_migrations(source / "migrations", ["004", "005"])
    (source / "schema.hcl").write_text(SCHEMA_SQL)
    policy = tmp_path / "policy.yaml"
    policy.write_text(VERIFICATION_POLICY)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PTAH_BINARY": str(executor_wrapper(tmp_path)),
        "PTAH_VERSION": "v0.4.0",
        "PTAH_EXPECTED_DATABASE_ENGINE": CONTRACT.engine,
        "PTAH_OPERATION": operation,
        "PTAH_OPERATION_ID": OP_ID,
        "PTAH_RUNNER_PROTOCOL_VERSION": str(RUNNER_PROTOCOL_VERSION),
        "PTAH_EXECUTION_NOT_AFTER": deadline_in(120),
        "PTAH_RUNNER_WORK_DIR": str(work),
        "PTAH_TERMINATION_LOG": str(summary),
        "PTAH_KILL_GRACE_SECONDS": "0.5",
        "PTAH_DRAIN_SECONDS": "0.5",
        "STANDIN_SCRIPT": json.dumps(script),
        "TEST_RECORD_FILE": str(tmp_path / "record.json"),
        **POD_IDENTITY_ENV,
    }
    if operation == "resolve":
        env["PTAH_REQUESTED_REFERENCE"] = CONTRACT.requested("schema")
    elif operation == "verify":
        env["PTAH_RESOLVED_REFERENCE"] = CONTRACT.resolved("schema")
        env["PTAH_VERIFICATION_POLICY"] = str(policy)
        env["PTAH_EXPECTED_ARTIFACT_TYPE"] = SCHEMA_TYPE
    else:
        env.update(
            PTAH_DB_URL=contract_db_url(),
            PTAH_COORDINATION_DIGEST=COORD,
            PTAH_CONNECT_TIMEOUT="7s",
            PTAH_LOCK_TIMEOUT="12s",
            PTAH_TX_MODE="all",
        )
        if CONTRACT.dev_url:
            env["PTAH_DEV_URL"] = CONTRACT.dev_url
    if operation in ("observe", "plan"):
        env["PTAH_SCHEMA_FILE"] = str(source / "schema.hcl")
    if operation == "apply":
        plan_dir = tmp_path / "plan"
        if not plan_dir.exists():
            write_plan_chunks(plan_dir, standin_plan())
        env["PTAH_PLAN_DIR"] = str(plan_dir)
        env["PTAH_EXPECTED_PLAN_CONTENT_DIGEST"] = content_digest(standin_plan())
    if operation in ("migration-history", "migration-apply"):
        env["PTAH_MIGRATIONS_DIR"] = str(source / "migrations")
    if operation == "migration-apply":
        env["PTAH_EXPECTED_MIGRATION_SEQUENCE"] = SEQUENCE_DOCUMENT
        env["PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST"] = SEQUENCE_DIGEST
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def start_runner(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.runner.recording"],
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
    record_path = Path(env.get("TEST_RECORD_FILE") or "/nonexistent")
    record = json.loads(record_path.read_text()) if record_path.is_file() else None
    return RunnerRun(proc.returncode, stdout, stderr, summary, record)


IDENTITY = PodIdentity(
    namespace=POD_IDENTITY_ENV["PTAH_POD_NAMESPACE"],
    pod_name=POD_IDENTITY_ENV["PTAH_POD_NAME"],
    pod_uid=POD_UID,
    job_name=POD_IDENTITY_ENV["PTAH_JOB_NAME"],
    job_uid=JOB_UID,
)


def record_of(result: RunnerResult, identity: PodIdentity = IDENTITY) -> PtahResultRecord:
    """The record the runner of ``identity``'s Pod would create for ``result``."""
    wire = record_for(identity, result, encode_result(result))
    return PtahResultRecord.model_validate(wire)


def recorded_result(
    run: RunnerRun,
    operation: str,
    operation_id: str = OP_ID,
    *,
    protocol_version: int = RUNNER_PROTOCOL_VERSION,
) -> DigestedResult:
    """The result the run recorded, read as the controller reads a record."""
    assert run.record is not None, f"the runner wrote no record: {run.stderr}"
    record = PtahResultRecord.model_validate(run.record)
    return result_of_record(
        record, operation, operation_id, job_uid=JOB_UID, protocol_version=protocol_version
    )


def run_runner(
    tmp_path: Path, operation: str, script: dict[str, Any], **overrides: str | None
) -> RunnerRun:
    env = runner_env(tmp_path, operation, script, **overrides)
    return finish(start_runner(env), env)
