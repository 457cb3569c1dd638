"""The CLI contract: bad input ends in exit 2 and one lower-case sentence, env twins apply
when the flag is absent and lose to it, and ``--auto-approve`` has no twin.

Table rows: a control row that passes, then one change per row that must be refused with
its message, and nothing applied.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psycopg
import pytest

from lab.executor.catalog import fingerprint
from lab.executor.db import SCHEMA_LOCK
from lab.executor.schema import Target, live_catalog
from tests.labexecutor.labkit import Lab, subprocess_argv, subprocess_env

pytestmark = pytest.mark.postgres

GOOD = "create table t (id bigint primary key, a text);"


def _plan_argv(lab: Lab, schema: str) -> list[str]:
    return [
        "schema",
        "plan",
        "--schema-file",
        schema,
        "--output",
        str(lab.work / "p.json"),
        "--json",
    ]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        (GOOD, None),
        ("create view v as select 1;", "outside the lab executor's scope"),
        ("create table t (id int check (id > 0));", "check constraint"),
        ("create table t (id serial primary key);", "sequence"),
        ("create table t (id int generated always as identity);", "identity or generated"),
        (
            "create type mood as enum ('a'); create table t (m mood);",
            "outside the lab executor's scope",
        ),
        ("create table t (id int) partition by range (id);", "partitioned table"),
        ("create unlogged table t (id int);", "outside the lab executor's scope"),
        ("create table public.t (id int);", "outside its own schema"),
        ("create table t (id int); commit;", "outside the lab executor's scope"),
        ("create table t (id int references nowhere(id));", "does not load on the dev database"),
        ('create table t (id int, a text collate "C");', "own collation"),
        ("create table t (id int); create index concurrently i on t (id);", "concurrently"),
        ("create table t (a text default 'never closes);", "never closes"),
        ("-- only a comment", "holds no statements"),
    ],
)
def test_desired_schema_scope(lab: Lab, ddl: str, message: str | None) -> None:
    result = lab.ptah(*_plan_argv(lab, lab.schema_file(ddl)))
    if message is None:
        assert (result.code, json.loads(result.stdout)["outcome"]) == (0, "changes")
        return
    assert result.code == 2, result
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr[0].islower()
    assert json.loads(result.stdout) == {
        "contract_version": 1,
        "outcome": "failed",
        "error": result.stderr.strip(),
    }
    # The dev database kept nothing of it, and the target was never touched.
    assert live_catalog(Target(lab.dev, 5), ()).tables == ()
    assert live_catalog(Target(lab.db, 5), ()).tables == ()


def test_bad_input_rows(lab: Lab) -> None:
    schema = lab.schema_file(GOOD)
    plan = lab.ptah(*_plan_argv(lab, schema))
    assert plan.code == 0
    plan_path = str(lab.work / "p.json")
    (lab.work / "bad.json").write_text('{"format_version": 1, "name": "x"}')
    apply = ["schema", "apply", "--plan", plan_path, "--auto-approve", "--json"]
    unreachable = lab.env(PTAH_DB_URL="postgresql://postgres@127.0.0.1:1/none")
    no_url = {k: v for k, v in lab.env().items() if k != "PTAH_DB_URL"}
    rows: list[tuple[list[str], dict[str, str], str]] = [
        (["schema", "plan", "--no-such-flag"], lab.env(), "unrecognized arguments: --no-such-flag"),
        (["schema", "explode"], lab.env(), "invalid choice"),
        (_plan_argv(lab, schema), no_url, "needs the target database: set --db-url or PTAH_DB_URL"),
        (
            _plan_argv(lab, schema),
            unreachable,
            "cannot connect to the database at 127.0.0.1:1/none",
        ),
        (
            ["schema", "apply", "--plan", plan_path, "--json"],
            lab.env(PTAH_AUTO_APPROVE="true"),
            "--auto-approve",
        ),
        (
            ["schema", "apply", "--plan", str(lab.work / "bad.json"), "--auto-approve", "--json"],
            lab.env(),
            "is not a ptah plan document",
        ),
        ([*apply, "--tx-mode", "each"], lab.env(), "is not one schema apply knows"),
        ([*apply, "--lock-timeout", "soon"], lab.env(), "is not a duration"),
        (apply, lab.env(PTAH_LOCK_TIMEOUT="12 seconds"), "is not a duration"),
        (
            ["schema", "drift", "--schema-file", schema, "--format", "yaml"],
            lab.env(),
            "neither text nor json",
        ),
        (["migrations", "status", "--json"], lab.env(), "needs --migrations-dir"),
        (
            ["oci", "resolve", "not a reference", "--format", "json"],
            lab.env(),
            "is not an oci reference",
        ),
    ]
    before = fingerprint(live_catalog(Target(lab.db, 5), ()))
    for argv, env, message in rows:
        result = lab.ptah(*argv, env=env)
        assert result.code == 2, (argv, result)
        assert message in result.stderr, (argv, result.stderr)
        assert result.stderr.count("\n") == 1 and not result.stderr[0].isupper(), result.stderr
    assert fingerprint(live_catalog(Target(lab.db, 5), ())) == before
    # The control row: the same apply with everything right.
    assert lab.ptah(*apply).code == 0


def test_flag_wins_over_its_env_twin(lab: Lab) -> None:
    env_schema = lab.schema_file("create table from_env (id int);", "env.sql")
    flag_schema = lab.schema_file("create table from_flag (id int);", "flag.sql")
    out = str(lab.work / "p.json")
    by_env = lab.ptah(
        "schema", "plan", "--output", out, "--json", env=lab.env(PTAH_SCHEMA_FILE=env_schema)
    )
    assert by_env.code == 0 and "from_env" in (lab.work / "p.json").read_text()
    both = lab.ptah(
        "schema",
        "plan",
        "--schema-file",
        flag_schema,
        "--output",
        out,
        "--json",
        env=lab.env(PTAH_SCHEMA_FILE=env_schema),
    )
    text = (lab.work / "p.json").read_text()
    assert both.code == 0 and "from_flag" in text and "from_env" not in text
    by_env_output = lab.ptah(
        "schema",
        "plan",
        "--json",
        env=lab.env(PTAH_SCHEMA_FILE=env_schema, PTAH_OUTPUT=out, PTAH_NAME="named"),
    )
    assert (
        by_env_output.code == 0 and json.loads((lab.work / "p.json").read_text())["name"] == "named"
    )


@pytest.mark.parametrize("spelling", [["version"], ["--version"]])
def test_version_says_what_it_is(spelling: list[str]) -> None:
    result = subprocess.run(
        [*subprocess_argv(), *spelling],
        env=subprocess_env({}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    # images/build.sh's smoke check matches the "PostgreSQL subset " prefix.
    assert result.stdout.startswith(
        "ptah-compatible lab executor, PostgreSQL subset and MySQL-family subset "
    )


def test_sigterm_during_apply_rolls_back_and_exits_143(lab: Lab) -> None:
    """An apply interrupted while a statement waits on a table lock: 143, canceled, nothing kept."""
    with psycopg.connect(lab.db, autocommit=True) as conn:
        conn.execute(GOOD)
    plan = lab.ptah(
        *_plan_argv(
            lab,
            lab.schema_file(
                "create table t (id bigint primary key, a text, b int); create table u (id int);"
            ),
        )
    )
    assert plan.code == 0
    before = fingerprint(live_catalog(Target(lab.db, 5), ()))
    argv = [
        *subprocess_argv(),
        "schema",
        "apply",
        "--plan",
        str(lab.work / "p.json"),
        "--auto-approve",
        "--json",
    ]
    with psycopg.connect(lab.db) as blocker:
        blocker.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        child = subprocess.Popen(
            argv, env=subprocess_env(lab.env()), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _wait_for(
            blocker, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation'"
        )
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=30)
        blocker.rollback()
    assert child.returncode == 128 + signal.SIGTERM
    assert json.loads(out)["outcome"] == "canceled"
    assert fingerprint(live_catalog(Target(lab.db, 5), ())) == before


def test_sigterm_while_waiting_for_the_lock_cancels_with_nothing_run(lab: Lab) -> None:
    plan = lab.ptah(*_plan_argv(lab, lab.schema_file(GOOD)))
    assert plan.code == 0
    argv = [*subprocess_argv(), "schema", "apply", "--plan", str(lab.work / "p.json")]
    argv += ["--auto-approve", "--json"]
    with psycopg.connect(lab.db, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        env = subprocess_env(lab.env())
        child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for(
            holder, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'advisory'"
        )
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=30)
    assert child.returncode == 128 + signal.SIGTERM
    assert json.loads(out)["outcome"] == "canceled"
    assert live_catalog(Target(lab.db, 5), ()).tables == ()


def _wait_for(conn: psycopg.Connection[tuple[object, ...]], query: str) -> None:
    # The child runs on its own time; poll the server's view of it with a deadline.
    deadline = time.monotonic() + 30
    with psycopg.connect(conn.info.dsn, autocommit=True) as probe:
        while time.monotonic() < deadline:
            row = probe.execute(query).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"never true: {query}")
