"""The runner's contract rows with the lab's executor as its child.

The same "any executor" rows ``tests/runner`` runs against the stand-in
(``test_any_executor_*``: every runner operation, then every operation of both
families from the Job the builder wrote to the controller's harvest) run here through
``python -m runner`` with ``ptah`` being ``python -m lab.executor``, against a real
PostgreSQL (a fresh database per row, a shared dev database, which the built Job
names through the schema's ``spec.dev``) and a loopback registry holding the schema
and migrations artifacts the rows resolve and verify. The operation rows run again
against a real MariaDB (a fresh target and empty dev database per row): every
operation, schema and migration, for the MySQL family too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from jobclaim.api import PtahResultRecord, PtahSchema
from jobclaim.operations import operation_info
from lab.executor.documents import MIGRATIONS_ARTIFACT_TYPE, SCHEMA_ARTIFACT_TYPE
from lab.executor.migrations import sum_text
from lab.executor.oci import push_artifact
from lab.mariadb import LabMariaDB
from runner.decide import NO_DEV_DATABASE
from runner.result import RUNNER_OPERATIONS
from runner.summary import account_for
from tests.labexecutor.labkit import REPO, Lab
from tests.support.contractrows import (
    WORLDS,
    built_job,
    built_job_row,
    family_of,
    kubelet_env,
    operation_row,
)
from tests.support.mariadb import running_mariadb
from tests.support.runnerrig import CONTRACT, JOB_UID, SCHEMA_SQL, finish, start_runner

pytestmark = [pytest.mark.postgres, pytest.mark.registry]


@pytest.fixture(scope="module")
def artifacts(registry: str) -> dict[str, str]:
    """Each family's artifact pushed as ``<registry>/shop/<family>:v1``; its digest."""
    schema = SCHEMA_SQL.encode()
    files = {"001_orders.sql": schema}
    files["ptah.sum"] = sum_text(files).encode()
    return {
        "schema": push_artifact(
            f"{registry}/shop/schema:v1", SCHEMA_ARTIFACT_TYPE, [("schema.sql", schema)]
        ),
        "migrations": push_artifact(
            f"{registry}/shop/migrations:v1", MIGRATIONS_ARTIFACT_TYPE, sorted(files.items())
        ),
    }


def _lab_executor(work: Path) -> str:
    wrapper = work / "bin" / "ptah"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    # The runner runs a binary; this one is the lab executor under this interpreter.
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m lab.executor "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture
def lab_contract(
    lab: Lab, registry: str, artifacts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """The contract the rows read, pointed at the lab executor, its databases and registry."""
    monkeypatch.setattr(CONTRACT, "executor", _lab_executor(lab.work))
    monkeypatch.setattr(CONTRACT, "db_url", lab.db)
    monkeypatch.setattr(CONTRACT, "dev_url", lab.dev)
    monkeypatch.setattr(CONTRACT, "registry", registry)
    monkeypatch.setattr(CONTRACT, "digests", artifacts)
    yield


@pytest.mark.parametrize("operation", RUNNER_OPERATIONS)
def test_every_operation_succeeds_with_the_lab_executor(
    lab_contract: None, tmp_path: Path, operation: str
) -> None:
    operation_row(tmp_path, operation)


@pytest.mark.parametrize("name", WORLDS)
def test_the_built_job_with_the_lab_executor_yields_a_record_the_harvest_accepts(
    lab_contract: None, tmp_path: Path, name: str
) -> None:
    built_job_row(tmp_path, name)


# The lab executor compares only in a dev database, so a schema whose spec names none
# cannot be read; the account has to say where one is named, not just "exited 2".
@pytest.mark.parametrize("name", ["schema Observe", "schema Plan"])
def test_a_schema_without_a_dev_database_is_told_where_to_name_one(
    lab_contract: None, tmp_path: Path, name: str
) -> None:
    world = WORLDS[name]()
    assert isinstance(world.resource, PtahSchema)
    spec = world.resource.spec.model_copy(update={"dev": None})
    world = replace(world, resource=world.resource.model_copy(update={"spec": spec}))
    env = kubelet_env(built_job(world), family_of(world), tmp_path, {})
    assert "PTAH_DEV_URL" not in env
    run = finish(start_runner(env), env)
    assert run.returncode == 0, run.stderr
    operation = operation_info(world.family, world.operation).runner_operation
    assert run.record is not None, run.stderr
    record = PtahResultRecord.model_validate(run.record)
    account = account_for(record, run.summary, operation, env["PTAH_OPERATION_ID"], job_uid=JOB_UID)
    assert account.recorded is not None
    result = account.recorded.result
    assert result.child_exit_code == 2 and result.error is not None
    assert result.error.message.endswith(NO_DEV_DATABASE), result.error


# The MySQL family: the same rows, every operation, against a real MariaDB: a fresh
# target and a fresh (empty) dev database per row, the same registry and artifacts.
@pytest.fixture(scope="module")
def mariadb() -> Iterator[LabMariaDB]:
    with running_mariadb() as server:
        yield server


@pytest.fixture
def mysql_contract(
    mariadb: LabMariaDB,
    registry: str,
    artifacts: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[str]:
    url = mariadb.create_database("contract")
    monkeypatch.setattr(CONTRACT, "executor", _lab_executor(tmp_path / "lab"))
    monkeypatch.setattr(CONTRACT, "db_url", url)
    monkeypatch.setattr(CONTRACT, "dev_url", mariadb.create_database("dev"))
    monkeypatch.setattr(CONTRACT, "engine", "MySQL")
    monkeypatch.setattr(CONTRACT, "registry", registry)
    monkeypatch.setattr(CONTRACT, "digests", artifacts)
    yield url.rsplit("/", 1)[1]


@pytest.mark.mariadb
@pytest.mark.parametrize("operation", RUNNER_OPERATIONS)
def test_every_operation_succeeds_on_mysql_with_the_lab_executor(
    mariadb: LabMariaDB, mysql_contract: str, tmp_path: Path, operation: str
) -> None:
    operation_row(tmp_path, operation)
    ran = mariadb.queries(mysql_contract)
    if operation == "migration-apply":
        # The approved sequence ran once, by the server's own account.
        assert [q for q in ran if q.startswith("create table step_")] == [
            "create table step_004 (id int)",
            "create table step_005 (id int)",
        ]
    if operation == "apply":
        # The approved plan's one statement ran once, by the server's own account.
        assert [q for q in ran if q.startswith("CREATE TABLE `orders`")] == [
            "CREATE TABLE `orders` (`id` bigint(20) NOT NULL, `note` text, PRIMARY KEY (`id`))"
        ]
