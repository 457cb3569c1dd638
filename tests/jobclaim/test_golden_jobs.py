"""The built Job, pinned byte for byte, per family and operation.

A changed Pod template changes every in-flight Job's match: a Job the old controller
created would no longer equal its rebuild after an upgrade, and its claim would treat
it as foreign. So any change to what the builder writes (the runner's command, an env
var, a default) must show up here as a changed golden file, reviewed in its own commit.
Regenerate on purpose with ``PTAH_REGENERATE_GOLDEN=1 .venv/bin/pytest
tests/jobclaim/test_golden_jobs.py`` (see ``golden/README.md``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from jobclaim import canonical_json
from jobclaim.operations import known_operations
from tests.jobclaim.jobcommands import INSTALL_COMMAND, RUNNER_COMMAND
from tests.support.claimworld import DEV_PROVIDED, World, migration_world, schema_world

GOLDEN = Path(__file__).resolve().parent / "golden"
REGENERATE = os.environ.get("PTAH_REGENERATE_GOLDEN") == "1"

WORLDS = {"schema": schema_world, "migration": migration_world}
CASES = [(family, op) for family in ("schema", "migration") for op in known_operations(family)]


def rendered(job: dict[str, Any]) -> str:
    """The golden file's text: sorted keys, indented so a review reads the diff."""
    return json.dumps(job, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def built(family: str, operation: str) -> World:
    return WORLDS[family](operation)


# The schema readings whose spec.dev is provided (jobclaim.scratch): their Pods carry the
# scratch database beside ptah, one per engine. Pinned apart, so the Jobs of a dev the
# schema names stay byte for byte what they were before provided existed.
PROVIDED: dict[str, tuple[str, str]] = {
    "schema-Observe-provided-postgresql": ("Observe", "PostgreSQL"),
    "schema-Plan-provided-postgresql": ("Plan", "PostgreSQL"),
    "schema-Plan-provided-mysql": ("Plan", "MySQL"),
}


def test_every_operation_the_tables_define_is_pinned() -> None:
    # A new operation added to a table without a golden fails here, not silently.
    assert {f"{f}-{o}" for f, o in CASES} | set(PROVIDED) == {p.stem for p in GOLDEN.glob("*.json")}
    assert len(CASES) == 9


@pytest.mark.parametrize("name", list(PROVIDED))
def test_a_provided_dev_job_equals_its_golden(name: str) -> None:
    operation, engine = PROVIDED[name]
    job = schema_world(operation, dev=DEV_PROVIDED, engine=engine).built
    path = GOLDEN / f"{name}.json"
    if REGENERATE:
        path.write_text(rendered(job))
    assert rendered(job) == path.read_text()


@pytest.mark.parametrize(("family", "operation"), CASES)
def test_the_built_job_equals_its_golden(family: str, operation: str) -> None:
    job = built(family, operation).built
    path = GOLDEN / f"{family}-{operation}.json"
    if REGENERATE:
        path.write_text(rendered(job))
    golden = path.read_text()
    assert rendered(job) == golden
    # And the bytes every digest is computed from.
    assert canonical_json(job) == canonical_json(json.loads(golden))


@pytest.mark.parametrize(("family", "operation"), CASES)
def test_the_runner_command_is_pinned(family: str, operation: str) -> None:
    pod = built(family, operation).built["spec"]["template"]["spec"]
    assert [c["command"] for c in pod["containers"]] == [RUNNER_COMMAND]
    assert pod["initContainers"][0]["command"] == INSTALL_COMMAND
