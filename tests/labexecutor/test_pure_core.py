"""The executor's pure core, without a database: SQL splitting, type widening, conversions,
durations, flag and env-twin resolution."""

from __future__ import annotations

import pytest

from lab.executor.cli import COMMANDS, UsageError, _parser, resolve_flags
from lab.executor.db import ExecutorError, parse_duration
from lab.executor.diff import conversion, widens
from lab.executor.documents import ExpectedMigration, ExpectedSequence
from lab.executor.migrations import Migration, guard_problem, identity
from lab.executor.sqltext import SqlTextError, desired_schema_problem, split_statements


@pytest.mark.parametrize(
    ("text", "statements"),
    [
        (
            "create table a (id int); create table b (id int)",
            ["create table a (id int)", "create table b (id int)"],
        ),
        ("select ';'; select 2", ["select ';'", "select 2"]),
        ('create table "a;b" (id int);', ['create table "a;b" (id int)']),
        ("select $$ ; $$; select $x$ $$ ; $x$;", ["select $$ ; $$", "select $x$ $$ ; $x$"]),
        (
            "-- a; comment\nselect 1; /* a; /* nested; */ */ select 2;",
            ["-- a; comment\nselect 1", "/* a; /* nested; */ */ select 2"],
        ),
        ("select E'it\\'s;'; select 'it''s;'", ["select E'it\\'s;'", "select 'it''s;'"]),
        ("-- nothing\n;;", []),
    ],
)
def test_split_statements(text: str, statements: list[str]) -> None:
    assert split_statements(text) == statements


def test_unclosed_text_is_refused() -> None:
    for text in ("select 'x", 'select "x', "select $$ x", "/* x"):
        with pytest.raises(SqlTextError):
            split_statements(text)


@pytest.mark.parametrize(
    ("ddl", "problem"),
    [
        (
            "create table a (id int); create unique index i on a (id);"
            " alter table a add column b int;",
            None,
        ),
        ("create or replace view v as select 1", "outside the lab executor's scope"),
        ("create table a (id int); drop table a;", "statement 2 (DROP TABLE A ...)"),
        ("set search_path = x; create table a (id int)", "statement 1"),
        ("begin; create table a (id int); commit;", "statement 1"),
    ],
)
def test_desired_schema_scope_by_statement(ddl: str, problem: str | None) -> None:
    found = desired_schema_problem(ddl)
    assert found is None if problem is None else problem in (found or "")


@pytest.mark.parametrize(
    ("old", "new", "wider"),
    [
        ("integer", "bigint", True),
        ("bigint", "integer", False),
        ("smallint", "integer", True),
        ("character varying(20)", "character varying(40)", True),
        ("character varying(40)", "character varying(20)", False),
        ("character varying(40)", "text", True),
        ("character varying(40)", "character varying", True),
        ("text", "character varying(40)", False),
        ("numeric(8,2)", "numeric(10,2)", True),
        ("numeric(8,2)", "numeric(10,3)", False),
        ("numeric(8,2)", "numeric", True),
        ("numeric", "numeric(8,2)", False),
        ("real", "double precision", True),
        ("integer", "text", False),
        ("date", "timestamp with time zone", False),
    ],
)
def test_widens(old: str, new: str, wider: bool) -> None:
    assert widens(old, new) is wider


@pytest.mark.parametrize(
    ("old", "new", "using"),
    [
        ("integer", "bigint", '"c"::bigint'),
        ("bigint", "numeric(8,2)", '"c"::numeric(8,2)'),
        ("bigint", "boolean", '"c"::text::boolean'),
        ("text", "boolean", '"c"::boolean'),
        ("boolean", "character varying(20)", '"c"::character varying(20)'),
        ("date", "uuid", '"c"::text::uuid'),
    ],
)
def test_conversion(old: str, new: str, using: str) -> None:
    assert conversion("c", old, new) == using


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("7s", 7.0), ("500ms", 0.5), ("1m30s", 90.0), ("0", 0.0), ("1.5h", 5400.0), ("2us", 2e-6)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text, "lock-timeout") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "7", "7 s", "s", "-1s", "1d"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ExecutorError):
        parse_duration(text, "lock-timeout")


def _values(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    parsed = _parser().parse_args(argv)
    return resolve_flags(COMMANDS[(parsed.noun, parsed.verb)][0], parsed, env)


def test_env_twins() -> None:
    apply = ["schema", "apply", "--plan", "p"]
    assert _values(apply, {"PTAH_TX_MODE": "none"})["tx_mode"] == "none"
    assert _values([*apply, "--tx-mode", "all"], {"PTAH_TX_MODE": "none"})["tx_mode"] == "all"
    assert _values(apply, {})["tx_mode"] == "all"
    assert _values(apply, {"PTAH_AUTO_APPROVE": "true"})["auto_approve"] is False
    assert _values([*apply, "--auto-approve"], {})["auto_approve"] is True
    assert _values(apply, {"PTAH_DRY_RUN": "true"})["dry_run"] is True
    plan = ["schema", "plan"]
    assert _values(plan, {"PTAH_EXCLUDE": "a, b,,c"})["exclude"] == ("a", "b", "c")
    assert _values([*plan, "--exclude=x", "--exclude", "y,z"], {"PTAH_EXCLUDE": "a"})[
        "exclude"
    ] == ("x", "y", "z")
    assert _values(["migrations", "up"], {})["tx_mode"] == "file"
    assert _values([*plan, "--save", "f"], {"PTAH_OUTPUT": "g"})["output"] == "f"
    assert _values(plan, {"PTAH_OUTPUT": "g"})["output"] == "g"
    with pytest.raises(UsageError):
        _values(apply, {"PTAH_DRY_RUN": "maybe"})


def _migration(version: int, key: str) -> Migration:
    return Migration(version, key, "d", "sha256:" + "0" * 64, "")


def test_guard_identities() -> None:
    assert identity(4, "4") == "4" and identity(4, "0004") == "4/0004" and identity(4, None) == "4"
    approved = ExpectedSequence(migrations=[ExpectedMigration(version=4, version_key="0004")])
    assert guard_problem(approved, [_migration(4, "0004")]) is None
    assert guard_problem(approved, [_migration(4, "4")]) is not None
    moved = guard_problem(approved, [_migration(2, "0002"), _migration(4, "0004")])
    assert moved == (
        "the selected migrations are [2/0002 4/0004], the approved sequence is [4/0004]: "
        "the history moved after approval, so nothing was run"
    )
