"""The schema engine against a real PostgreSQL: plan, apply, plan again.

Each corpus row starts a fresh database at ``before``, plans towards ``after``, applies,
and then requires the second plan to find nothing, the live fingerprint to equal the
plan's ``to_fingerprint``, and drift to report none.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from lab.executor.catalog import fingerprint
from lab.executor.db import SCHEMA_LOCK
from lab.executor.schema import Target, live_catalog
from tests.labexecutor.labkit import Lab, subprocess_argv, subprocess_env

pytestmark = pytest.mark.postgres

USERS = "create table users (id bigint primary key, email varchar(200) not null unique, name text);"
ORDERS = (
    USERS
    + "create table orders (id bigint primary key, user_id bigint not null references users(id),"
    " total numeric(10,2) not null default 0, note text);"
    "create index orders_user on orders (user_id);"
)

# (id, before, after, destructive)
CORPUS = [
    ("create-from-nothing", "", ORDERS, False),
    (
        "add-columns",
        USERS,
        USERS.replace("name text", "name text, age integer, active boolean not null default true"),
        False,
    ),
    ("drop-column-and-table", ORDERS, USERS.replace(", name text", ""), True),
    (
        "widen-and-narrow",
        "create table t (id integer primary key, a varchar(50), b varchar(200), c smallint);",
        "create table t (id bigint primary key, a varchar(200), b varchar(20), c integer);",
        True,
    ),
    (
        "defaults-and-nullability",
        "create table t (id bigint primary key, a integer default 1, b text not null, c text);",
        "create table t (id bigint primary key, a integer default 2, b text,"
        " c text not null default 'x');",
        False,
    ),
    (
        "primary-key-change-under-a-foreign-key",
        "create table a (x integer not null, y integer not null,"
        " constraint a_pkey primary key (x));"
        "create table b (id integer primary key, ax integer references a(x));",
        "create table a (x integer not null, y integer not null,"
        " constraint a_pkey primary key (x, y));"
        "create table b (id integer primary key, ax integer, ay integer,"
        " foreign key (ax, ay) references a(x, y) on delete cascade);",
        True,
    ),
    (
        "unique-and-index-changes",
        "create table t (id bigint primary key, a text unique, b text, c text);"
        "create index t_b on t (b);",
        "create table t (id bigint primary key, a text, b text unique, c text);"
        "create index t_b on t (b, c); create unique index t_c on t (lower(c));",
        True,
    ),
    (
        "circular-foreign-keys",
        "",
        "create table p (id integer primary key, child integer);"
        "create table c (id integer primary key, parent integer references p(id));"
        "alter table p add constraint p_child_fk foreign key (child) references c(id) deferrable;",
        False,
    ),
    (
        "types-and-arrays",
        "create table t (id uuid primary key);",
        "create table t (id uuid primary key, tags text[] not null default '{}', doc jsonb,"
        " at timestamptz default now(), d date, amount double precision, raw bytea);",
        False,
    ),
]


def setup_live(url: str, ddl: str) -> None:
    if ddl:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ddl.encode())


def plan(lab: Lab, schema: str, *extra: str) -> tuple[int, dict[str, object], Path]:
    out = lab.work / "plan.json"
    result = lab.ptah(
        "schema", "plan", "--schema-file", schema, "--output", str(out), "--json", *extra
    )
    return result.code, json.loads(result.stdout), out


@pytest.mark.parametrize(
    ("before", "after", "destructive"), [row[1:] for row in CORPUS], ids=[row[0] for row in CORPUS]
)
def test_plan_apply_plan_converges(lab: Lab, before: str, after: str, destructive: bool) -> None:
    setup_live(lab.db, before)
    schema = lab.schema_file(after)
    code, report, path = plan(lab, schema)
    assert (code, report["outcome"]) == (0, "changes"), report
    document = json.loads(path.read_text())
    assert document["destructive"] is destructive
    assert document["statements"] and all(s["severity"] for s in document["statements"])

    applied = lab.ptah("schema", "apply", "--plan", str(path), "--auto-approve", "--json")
    assert applied.code == 0, applied.stdout
    assert json.loads(applied.stdout)["statements"] == [s["sql"] for s in document["statements"]]

    code, again, _ = plan(lab, schema)
    assert (code, again) == (0, {"contract_version": 1, "outcome": "no-changes"})
    live = fingerprint(live_catalog(Target(lab.db, 5), ()))
    assert live == document["to_fingerprint"]
    drift = lab.ptah("schema", "drift", "--schema-file", schema, "--format", "json")
    assert drift.code == 0 and json.loads(drift.stdout)["drift"] is False


def test_plan_is_byte_identical_across_runs(lab: Lab) -> None:
    """The runner runs plan twice and compares the bytes."""
    schema = lab.schema_file(ORDERS)
    first = lab.ptah(
        "schema", "plan", "--schema-file", schema, "--output", str(lab.work / "a"), "--json"
    )
    second = lab.ptah(
        "schema", "plan", "--schema-file", schema, "--output", str(lab.work / "a"), "--json"
    )
    assert first.stdout == second.stdout and first.code == 0


def test_drift_reports_findings_and_exits_one(lab: Lab) -> None:
    setup_live(lab.db, USERS)
    schema = lab.schema_file(
        USERS.replace(", name text", ", age integer") + "create table extra (id int);"
    )
    result = lab.ptah("schema", "drift", "--schema-file", schema, "--format", "json")
    report = json.loads(result.stdout)
    assert result.code == 1
    assert (report["drift"], report["failed"], report["highest_severity"]) == (
        True,
        True,
        "destructive",
    )
    assert {f["category"]: f["count"] for f in report["findings"]} == {
        "columns_added": 1,
        "columns_removed": 1,
        "tables_added": 1,
    }
    below = lab.ptah(
        "schema", "drift", "--schema-file", schema, "--format", "json", "--severity", "error"
    )
    assert below.code == 1
    # A threshold above what was found: drift is reported and the command does not fail.
    lab.schema_file(USERS + "create table extra (id int);", "additive.sql")
    additive = lab.ptah(
        "schema",
        "drift",
        "--schema-file",
        str(lab.work / "additive.sql"),
        "--format",
        "json",
        "--severity",
        "warning",
    )
    assert additive.code == 0 and json.loads(additive.stdout)["drift"] is True


def test_exclude_and_protected_tables(lab: Lab) -> None:
    setup_live(lab.db, ORDERS + "create table audit_log (id int);")
    schema = lab.schema_file(USERS)
    code, report, _ = plan(lab, schema, "--exclude", "audit_*", "--protected-table", "orders")
    assert code == 2
    assert report["outcome"] == "refused"
    assert report["refusal"] == {"code": "protected-table", "tables": ["orders"]}
    code, report, path = plan(lab, schema, "--exclude", "audit_*,orders")
    assert (code, report["outcome"]) == (0, "no-changes")
    env = lab.env(PTAH_EXCLUDE="audit_*")
    result = lab.ptah(
        "schema", "plan", "--schema-file", schema, "--output", str(path), "--json", env=env
    )
    document = json.loads(path.read_text())
    assert result.code == 0 and document["exclude"] == ["audit_*"]
    assert [s["sql"] for s in document["statements"]] == [
        'ALTER TABLE "orders" DROP CONSTRAINT "orders_user_id_fkey"',
        'DROP TABLE "orders"',
    ]


def test_a_writer_between_plan_and_apply_is_refused_as_stale(lab: Lab) -> None:
    setup_live(lab.db, USERS)
    code, _, path = plan(lab, lab.schema_file(ORDERS))
    assert code == 0
    setup_live(lab.db, "alter table users add column moved integer;")
    moved = fingerprint(live_catalog(Target(lab.db, 5), ()))
    result = lab.ptah("schema", "apply", "--plan", str(path), "--auto-approve", "--json")
    report = json.loads(result.stdout)
    assert result.code == 2
    assert report["outcome"] == "refused" and report["refusal"]["code"] == "stale-plan"
    assert report["refusal"]["changed"] == "schema"
    assert report["refusal"]["database_fingerprint"] == moved
    assert "statements" not in report
    assert fingerprint(live_catalog(Target(lab.db, 5), ())) == moved  # nothing ran


def test_two_applies_at_once_are_serialized_by_the_lock(lab: Lab) -> None:
    setup_live(lab.db, USERS)
    code, _, path = plan(lab, lab.schema_file(ORDERS))
    assert code == 0
    argv = [*subprocess_argv(), "schema", "apply", "--plan", str(path), "--auto-approve", "--json"]
    env = subprocess_env(lab.env())
    # Hold the lock so both children are queued on it before either runs.
    with psycopg.connect(lab.db, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        children = [
            subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        _wait_for_lock_waiters(holder, 2)
        holder.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
    reports = []
    for child in children:
        out, _ = child.communicate(timeout=60)
        reports.append((child.returncode, json.loads(out)))
    outcomes = sorted((code, r["outcome"]) for code, r in reports)
    assert outcomes == [(0, "applied"), (2, "refused")]
    refused = next(r for _, r in reports if r["outcome"] == "refused")
    assert refused["refusal"]["code"] == "stale-plan"


def _wait_for_lock_waiters(conn: psycopg.Connection[tuple[object, ...]], count: int) -> None:
    # The children connect on their own time; poll pg_locks with a deadline until both wait.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
        if row and row[0] >= count:
            return
        time.sleep(0.05)
    raise AssertionError("the applies never queued on the advisory lock")


def test_lock_timeout_bounds_the_wait_and_nothing_runs(lab: Lab) -> None:
    setup_live(lab.db, USERS)
    code, _, path = plan(lab, lab.schema_file(ORDERS))
    assert code == 0
    before = fingerprint(live_catalog(Target(lab.db, 5), ()))
    with psycopg.connect(lab.db, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        result = lab.ptah(
            "schema",
            "apply",
            "--plan",
            str(path),
            "--auto-approve",
            "--json",
            "--lock-timeout",
            "300ms",
        )
    report = json.loads(result.stdout)
    assert result.code == 2 and report["outcome"] == "failed"
    assert "lock" in report["error"]
    assert fingerprint(live_catalog(Target(lab.db, 5), ())) == before


def test_a_failing_statement_rolls_back_in_mode_all(lab: Lab) -> None:
    setup_live(lab.db, USERS + "insert into users values (1, 'a@example.org', 'a');")
    schema = lab.schema_file(
        USERS.replace("name text", "name text, age integer not null") + "create table x (id int);"
    )
    code, _, path = plan(lab, schema)
    assert code == 0
    before = fingerprint(live_catalog(Target(lab.db, 5), ()))
    result = lab.ptah("schema", "apply", "--plan", str(path), "--auto-approve", "--json")
    report = json.loads(result.stdout)
    assert result.code == 2 and report["outcome"] == "failed"
    assert "rolled back" in report["error"] and "statements" not in report
    assert fingerprint(live_catalog(Target(lab.db, 5), ())) == before


def test_mode_none_says_exactly_which_statements_ran(lab: Lab) -> None:
    setup_live(
        lab.db,
        USERS + "create index users_name on users (name); insert into users values (1, 'a', 'a');",
    )
    schema = lab.schema_file(USERS.replace("name text", "name text, age integer not null"))
    code, _, path = plan(lab, schema)
    assert code == 0
    document = json.loads(path.read_text())
    sqls = [s["sql"] for s in document["statements"]]
    assert sqls[0] == 'DROP INDEX "users_name"' and len(sqls) == 2
    result = lab.ptah(
        "schema", "apply", "--plan", str(path), "--auto-approve", "--json", "--tx-mode", "none"
    )
    report = json.loads(result.stdout)
    assert result.code == 2
    assert (report["outcome"], report["statements"]) == ("unknown", sqls[:1])


# The policy's transactionMode, as `schema apply --tx-mode` runs one plan whose second
# statement fails (a NOT NULL column added to a table that has a row). Rows: the mode,
# the outcome, whether the first statement (the index drop) stays committed. all is
# the control; none differs from it (the drop is committed, the outcome unknown);
# file is ptah's one transaction per file, and a plan is one file, so it commits or
# rolls back with all (ptah's internal/atlasschema applyStatements treats file and all
# alike) and differs only in where the fingerprint is read: before its transaction.
TX_MODES = [("all", "failed", False), ("file", "failed", False), ("none", "unknown", True)]


@pytest.mark.parametrize(("mode", "outcome", "first_stays"), TX_MODES, ids=[r[0] for r in TX_MODES])
def test_each_transaction_mode_runs_a_failing_plan_as_ptah_does(
    lab: Lab, mode: str, outcome: str, first_stays: bool
) -> None:
    setup_live(
        lab.db,
        USERS + "create index users_name on users (name); insert into users values (1, 'a', 'a');",
    )
    code, _, path = plan(
        lab, lab.schema_file(USERS.replace("name text", "name text, age integer not null"))
    )
    assert code == 0
    sqls = [s["sql"] for s in json.loads(path.read_text())["statements"]]
    assert sqls[0] == 'DROP INDEX "users_name"' and len(sqls) == 2
    before = fingerprint(live_catalog(Target(lab.db, 5), ()))
    result = lab.ptah(
        "schema", "apply", "--plan", str(path), "--auto-approve", "--json", "--tx-mode", mode
    )
    report = json.loads(result.stdout)
    assert (result.code, report["outcome"]) == (2, outcome), report
    with psycopg.connect(lab.db, autocommit=True) as conn:
        indexed = conn.execute("select count(*) from pg_indexes where indexname = 'users_name'")
        index_left = indexed.fetchone() == (1,)
    assert index_left != first_stays
    assert (fingerprint(live_catalog(Target(lab.db, 5), ())) == before) != first_stays
    if first_stays:
        assert report["statements"] == sqls[:1]
    else:
        assert "rolled back" in report["error"] and "statements" not in report


@pytest.mark.parametrize("mode", ["all", "file", "none"])
def test_each_transaction_mode_applies_a_plan_that_succeeds(lab: Lab, mode: str) -> None:
    # The control for the rows above: every mode applies a plan that can run.
    code, _, path = plan(lab, lab.schema_file(ORDERS))
    assert code == 0
    result = lab.ptah(
        "schema", "apply", "--plan", str(path), "--auto-approve", "--json", "--tx-mode", mode
    )
    assert (result.code, json.loads(result.stdout)["outcome"]) == (0, "applied")
    assert plan(lab, lab.schema_file(ORDERS))[1]["outcome"] == "no-changes"


def test_dry_run_checks_and_runs_nothing(lab: Lab) -> None:
    code, _, path = plan(lab, lab.schema_file(USERS))
    assert code == 0
    before = fingerprint(live_catalog(Target(lab.db, 5), ()))
    result = lab.ptah(
        "schema", "apply", "--plan", str(path), "--auto-approve", "--json", "--dry-run"
    )
    report = json.loads(result.stdout)
    assert (result.code, report["outcome"]) == (0, "dry-run")
    assert fingerprint(live_catalog(Target(lab.db, 5), ())) == before
