"""The runner's contract rows any ptah-compatible executor must pass: every runner
operation, and every operation of both families from the Job the builder wrote to the
controller's harvest.

``tests/runner`` runs them against the stand-in (``test_any_executor_*``), and
``tests/labexecutor/test_runner_contract.py`` runs the same rows with the lab's
executor, a real PostgreSQL or MariaDB and a loopback registry, by pointing
``runnerrig.CONTRACT`` at them. The runner is started with the environment the
builder wrote into the Job's main container (its Secret and paths filled in the way
the kubelet would), and what it records is read the way the controller reads it.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.families.migration.records import run_outcome
from jobclaim.api import PtahResultRecord
from jobclaim.api.common import OCIArtifactAccessBinding
from jobclaim.builder import (
    PTAH_BINARY,
    build_job,
)
from jobclaim.operations import operation_info
from runner.config import authority_of, target_identity_digest
from runner.harvest import Outcome, judge
from runner.protocol import RECORD_MARKER, DigestedResult
from runner.result import RUNNER_PROTOCOL_VERSION
from runner.summary import account_for, parse_summary_for
from tests.support.claimworld import EVERY_OPERATION, SEQUENCE, World, job_inputs
from tests.support.runnerrig import (
    CONTRACT,
    JOB_UID,
    OP_ID,
    POD_IDENTITY_ENV,
    SCHEMA_SQL,
    SECRET_URL,
    VERIFICATION_POLICY,
    RunnerRun,
    approved_plan,
    content_digest,
    contract_db_url,
    contract_dev_url,
    deadline_in,
    executor_wrapper,
    finish,
    recorded_result,
    run_runner,
    start_runner,
    write_migrations,
    write_plan_chunks,
)

# The password SECRET_URL holds: no output of a run may carry it, nor the URL.
PASSWORD = "s3cret-Pa55word"

WORLDS = EVERY_OPERATION
T0 = datetime(2026, 12, 2, 12, 5, tzinfo=UTC)


def family_of(world: World) -> str:
    return "schema" if world.family == "schema" else "migrations"


def built_job(world: World) -> dict[str, Any]:
    """The world's Job, built for a claim that recorded its artifact's resolution."""
    inputs = job_inputs(world)
    reference = inputs.source.oci_ref if inputs.source else ""
    digest = CONTRACT.digests[family_of(world)]
    resolved = OCIArtifactAccessBinding(reference=reference, digest=digest)
    return build_job(inputs._replace(resolved=resolved))


def secret_value(name: str) -> str | None:
    """What the kubelet gives a variable from a Secret here (None: an optional key the
    Secret does not hold, which the kubelet leaves unset)."""
    values = {
        "PTAH_DB_URL": contract_db_url(),
        "PTAH_DEV_URL": contract_dev_url(),
        # The registry Secret: granted for the contract's registry, a password, no token.
        "PTAH_OCI_REGISTRY": authority_of(CONTRACT.registry),
        "PTAH_OCI_USERNAME": "robot",
        "PTAH_OCI_PASSWORD": "registry-token-1",
    }
    return values.get(name)


def kubelet_env(
    job: dict[str, Any], family: str, tmp_path: Path, script: dict[str, Any]
) -> dict[str, str]:
    """The main container's environment as the kubelet would give it, paths in tmp_path."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for item in container["env"]:
        if "fieldRef" in item.get("valueFrom", {}):
            # The downward API: the Pod and the Job the Job controller made it for.
            env[item["name"]] = POD_IDENTITY_ENV[item["name"]]
        elif "valueFrom" in item:
            value = secret_value(item["name"])
            if value is not None:
                env[item["name"]] = value
        else:
            env[item["name"]] = item["value"]
    assert env["PTAH_BINARY"] == PTAH_BINARY
    env["PTAH_BINARY"] = str(executor_wrapper(tmp_path))
    # Where the volumes are mounted, here.
    work = tmp_path / "tmp"
    work.mkdir()
    env["PTAH_RUNNER_WORK_DIR"] = str(work)
    # The world's artifact lives in no registry; the contract's does (same digest).
    if "PTAH_REQUESTED_REFERENCE" in env:
        env["PTAH_REQUESTED_REFERENCE"] = CONTRACT.requested(family)
    if "PTAH_RESOLVED_REFERENCE" in env:
        env["PTAH_RESOLVED_REFERENCE"] = CONTRACT.resolved(family)
    if "PTAH_SCHEMA_FILE" in env:
        (tmp_path / "schema.hcl").write_text(SCHEMA_SQL)
        env["PTAH_SCHEMA_FILE"] = str(tmp_path / "schema.hcl")
    if "PTAH_MIGRATIONS_DIR" in env:
        # The files the approved sequence names (an empty directory for History).
        keys = []
        if "PTAH_EXPECTED_MIGRATION_SEQUENCE" in env:
            document = json.loads(env["PTAH_EXPECTED_MIGRATION_SEQUENCE"])
            keys = [entry["version_key"] for entry in document["migrations"]]
        write_migrations(tmp_path / "migrations", keys)
        env["PTAH_MIGRATIONS_DIR"] = str(tmp_path / "migrations")
    if "PTAH_VERIFICATION_POLICY" in env:
        (tmp_path / "policy").write_text(VERIFICATION_POLICY)
        env["PTAH_VERIFICATION_POLICY"] = str(tmp_path / "policy")
    if "PTAH_PLAN_DIR" in env:
        # The world's plan is a record with no bytes behind it; the projected plan
        # here is the executor's own, so its digests replace the record's.
        content = approved_plan(tmp_path)
        write_plan_chunks(tmp_path / "plan", content)
        env["PTAH_PLAN_DIR"] = str(tmp_path / "plan")
        env["PTAH_EXPECTED_PLAN_CONTENT_DIGEST"] = content_digest(content)
        env.pop("PTAH_EXPECTED_TARGET_IDENTITY_DIGEST", None)
    if "PTAH_EXECUTION_NOT_AFTER" in env:
        env["PTAH_EXECUTION_NOT_AFTER"] = deadline_in(120)  # the world's is in the past
    summary = tmp_path / "termination-log"
    summary.touch()
    env.update(
        PATH=os.environ.get("PATH", "/usr/bin:/bin"),
        PTAH_TERMINATION_LOG=str(summary),
        STANDIN_SCRIPT=json.dumps(script),
        TEST_RECORD_FILE=str(tmp_path / "record.json"),
    )
    return env


def read_back(
    run: RunnerRun, operation: str, protocol: int = RUNNER_PROTOCOL_VERSION
) -> DigestedResult:
    """The record and summary as the controller reads them; they must agree, and the
    log names the record and its digest, and says nothing of the result."""
    for text in (run.stdout, run.stderr, run.summary, json.dumps(run.record)):
        assert SECRET_URL not in text and PASSWORD not in text
    assert run.returncode == 0, run.stderr
    recorded = recorded_result(run, operation, protocol_version=protocol)
    summary = parse_summary_for(run.summary, operation, OP_ID, protocol_version=protocol)
    assert summary.result_digest == recorded.digest
    assert summary.error_code == recorded.result.error_code
    assert summary.uncertain == recorded.result.uncertain
    assert run.stdout == f"{RECORD_MARKER} shop/ptah-op-1 {recorded.digest}\n"
    return recorded


def operation_row(tmp_path: Path, operation: str) -> None:
    """One runner operation run against the contract's executor, read back as the
    controller reads it: it succeeded, on the contract's database."""
    overrides: dict[str, str | None] = {}
    if operation == "apply":
        content = approved_plan(tmp_path)
        write_plan_chunks(tmp_path / "plan", content)
        overrides["PTAH_EXPECTED_PLAN_CONTENT_DIGEST"] = content_digest(content)
    result = read_back(run_runner(tmp_path, operation, {}, **overrides), operation).result
    assert result.succeeded, result.error
    if operation not in ("resolve", "verify"):
        url = contract_db_url()
        assert result.target_identity_digest == target_identity_digest(CONTRACT.engine, url)


def built_job_row(tmp_path: Path, name: str) -> None:
    """The world ``name``'s built Job run by the runner and its executor, then judged by
    the controller's harvest: accounted, and what each operation must leave."""
    world = WORLDS[name]()
    claim = world.claim("rebuild-stored")
    operation = operation_info(world.family, world.operation).runner_operation
    artifact = (
        f"application/vnd.stokaro.ptah.{'schema' if world.family == 'schema' else 'migrations'}.v1"
    )
    env = kubelet_env(built_job(world), family_of(world), tmp_path, {"artifact_type": artifact})
    run = finish(start_runner(env), env)
    assert run.returncode == 0, run.stderr
    assert run.record is not None, run.stderr
    record = PtahResultRecord.model_validate(run.record)
    account = account_for(record, run.summary, operation, claim.operation_id, job_uid=JOB_UID)
    assert account.source == "record" and account.recorded is not None
    result = account.recorded.result
    assert result.succeeded, result.error
    url = contract_db_url()
    target = (
        target_identity_digest("PostgreSQL", url)
        if operation not in ("resolve", "verify")
        else None
    )
    judged = judge(
        claim,
        account,
        terminal_at=T0,
        now=T0,
        coordination_digest=result.coordination_digest,
        target_identity_digest=target,
    )
    assert judged.outcome is Outcome.ACCOUNTED, judged.reason
    assert result.target_identity_digest == target
    if name == "migration Apply":
        assert run_outcome(account) == ("Applied", list(SEQUENCE))
    if name == "schema Apply":
        assert (result.mutation_started, result.uncertain) == (True, False)
    if name == "schema Plan":
        assert result.plan is not None and result.plan.plan_outcome == "Changes"
