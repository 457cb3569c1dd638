"""``-o json|yaml|sql``: one document in two spellings, and a plan's statements as stored."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
import yaml

from jobclaim.apiserver import PTAHSCHEMAAPPROVALS, PTAHSCHEMAS, ApiClient
from kubectl_ptah import main
from tests.kubectl_ptah.plans import DESTRUCTIVE_PLAN
from tests.support.dispatchworld import NS, Rig, add_migration, add_schema, make_rig

SAVED_PLAN = json.dumps(
    {
        "format_version": 1,
        "statements": [
            {"sql": 'CREATE TABLE "invoices" ("id" bigint);', "severity": "safe"},
            {"sql": 'ALTER TABLE "orders"\n  DROP COLUMN "note";', "severity": "destructive"},
        ],
    }
).encode()


def run(api: ApiClient, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["-n", NS, *argv], connector=lambda _args: api, stdin=io.StringIO(), stdout=out)
    return code, out.getvalue()


@pytest.fixture
def rig() -> Rig:
    world = make_rig()
    add_schema(world, approve=False, chunks=DESTRUCTIVE_PLAN)
    add_migration(world)
    return world


@pytest.mark.parametrize(
    "argv",
    [
        ("plan", "schema", "orders"),
        ("plan", "migration", "billing"),
        ("status", "schema", "orders"),
        ("status", "migration", "billing"),
    ],
)
def test_yaml_is_the_json_document_with_its_keys_in_the_same_order(
    rig: Rig, argv: tuple[str, ...]
) -> None:
    code_json, as_json = run(rig.api, *argv, "-o", "json")
    code_yaml, as_yaml = run(rig.api, *argv, "-o", "yaml")
    assert (code_json, code_yaml) == (0, 0)
    document, read = json.loads(as_json), yaml.safe_load(as_yaml)
    assert read == document
    assert list(read) == list(document)
    assert not as_yaml.startswith("{")  # block style, for people too


def test_sql_is_the_plans_bytes_exactly(rig: Rig) -> None:
    code, sql = run(rig.api, "plan", "schema", "orders", "-o", "sql")
    assert (code, sql) == (0, b"".join(DESTRUCTIVE_PLAN).decode())
    # The bytes the plan binds: their digest is the one status.plan records.
    plan = rig.api.get(PTAHSCHEMAS, NS, "orders")["status"]["plan"]
    assert "sha256:" + hashlib.sha256(sql.encode()).hexdigest() == plan["contentDigest"]


def test_sql_of_a_saved_plan_document_is_its_statements_as_stored() -> None:
    world = make_rig()
    add_schema(world, approve=False, chunks=(SAVED_PLAN,))
    code, sql = run(world.api, "plan", "schema", "orders", "-o", "sql")
    assert (code, sql) == (
        0,
        'CREATE TABLE "invoices" ("id" bigint);\nALTER TABLE "orders"\n  DROP COLUMN "note";\n',
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("plan", "migration", "billing"),
            "-o sql prints a schema plan's statements; a PtahMigration's plan records "
            "migration versions and digests, not SQL (use -o text, json or yaml)",
        ),
        (
            ("status", "schema", "orders"),
            "-o sql prints a plan's statements; status has none to print",
        ),
        (
            ("approve", "schema", "orders", "--yes"),
            "-o sql prints a plan's statements; approve has none to print",
        ),
    ],
)
def test_sql_of_anything_but_a_schema_plan_is_a_usage_error(
    rig: Rig, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, text = run(rig.api, *argv, "-o", "sql")
    assert (code, text) == (2, "")
    assert capsys.readouterr().err == f"kubectl ptah: {message}\n"
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []
