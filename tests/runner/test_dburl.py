"""runner.dburl: what a database URL may ask of its client, for both engines, asked by the runner.

A table of URLs (a control row that is opened, then one change per row that is
refused with its one sentence naming the parameter); the runner refusing them before
ptah starts, for the target and the dev database; the aliases ``mysql://`` and
``mariadb://`` naming one target; and docs/security.md's table of refused
parameters held to the module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from jobclaim.naming import coordination_digest
from runner.config import RunConfig, StartRefusal, prepare, target_identity_digest
from runner.dburl import (
    MYSQL_ALLOWED,
    MYSQL_ANY_OTHER,
    MYSQL_REFUSED,
    POSTGRES_ALLOWED,
    POSTGRES_ANY_OTHER,
    POSTGRES_REFUSED,
    normalized,
    url_problem,
)
from tests.runner.runnerenv import NOW, environment
from tests.support.runnerrig import OP_ID

ROOT = Path(__file__).resolve().parents[2]
BASE = "mysql://app:s3cret-Pa55word@db.internal:3306/orders"

# Control row first; each other row changes one thing and must be refused with a
# sentence holding the text given.
URL_ROWS: list[tuple[str, str, str | None]] = [
    ("control: no parameters", BASE, None),
    ("control: the allowed settings", BASE + "?tls=true&timeout=5s&parseTime=true", None),
    ("control: the mariadb alias", BASE.replace("mysql://", "mariadb://"), None),
    ("multiStatements", BASE + "?multiStatements=true", "may not set multiStatements"),
    ("multiStatements off is still refused", BASE + "?multiStatements=false", "multiStatements"),
    ("another spelling", BASE + "?multi_statements=1", "may not set multi_statements"),
    ("another case", BASE + "?MULTISTATEMENTS=true", "MULTISTATEMENTS (multiStatements)"),
    ("allowAllFiles", BASE + "?tls=true&allowAllFiles=true", "may not set allowAllFiles"),
    ("allowLoadLocalInfile", BASE + "?allowLoadLocalInfile=true", "allowLoadLocalInfile"),
    ("initSQL", BASE + "?initSQL=DROP%20TABLE%20t", "may not set initSQL: it runs SQL"),
    ("init_command", BASE + "?init_command=SET%20x%3D1", "init_command (initCommand)"),
    ("a session variable", BASE + "?sql_mode=%27%27", "may not set sql_mode: "),
    ("another session variable", BASE + "?foreign_key_checks=0", "session variable"),
    ("a password parameter", BASE + "?password=x", "may not set password"),
    ("a setting given twice", BASE + "?tls=true&tls=false", "sets tls twice"),
    ("a fragment", BASE + "#DROP TABLE t", "may not have a fragment"),
    ("an empty fragment", BASE + "#", "may not have a fragment"),
    ("a path under the database", BASE + "/extra", "must name one database"),
    ("an unreadable query", BASE + "?tls", "cannot be read as name=value pairs"),
]


def _env(engine: str, operation: str, **changes: str) -> dict[str, str]:
    env = environment(operation)
    env.update(PTAH_EXPECTED_DATABASE_ENGINE=engine, PTAH_DB_URL=RULES[engine].base)
    if engine == "MySQL":
        env.update(PTAH_DEV_URL="mysql://dev:devpass-1@dev.internal/scratch")
    env.update(changes)
    return env


# The runner asks before it starts ptah: control row, then one change per row.
RUNNER_ROWS: list[tuple[str, str, dict[str, str], str | None]] = [
    ("control: a MySQL plan", "plan", {}, None),
    ("control: a MySQL migration apply", "migration-apply", {}, None),
    (
        "the target's URL",
        "apply",
        {"PTAH_DB_URL": BASE + "?multiStatements=true"},
        "the database URL may not set multiStatements",
    ),
    (
        "the dev database's URL",
        "plan",
        {"PTAH_DEV_URL": "mariadb://dev:devpass-1@dev.internal/scratch?allowAllFiles=true"},
        "the dev database URL may not set allowAllFiles",
    ),
    (
        "a migration apply",
        "migration-apply",
        {"PTAH_DB_URL": BASE + "?time_zone=%27%2B00:00%27"},
        "the database URL may not set time_zone",
    ),
]


# The target identity is host, port and database (and user): the alias, the default
# port and the host's case change nothing; each other row names another database.
IDENTITY = target_identity_digest("MySQL", "mysql://app:pw-one@db.internal:3306/orders")
IDENTITY_ROWS: list[tuple[str, str, bool]] = [
    ("control: the same URL", "mysql://app:pw-one@db.internal:3306/orders", True),
    ("the mariadb alias", "mariadb://app:pw-one@db.internal:3306/orders", True),
    ("the default port left out", "mariadb://app:pw-one@db.internal/orders", True),
    ("the host in capitals, another password", "mysql://app:pw-two@DB.INTERNAL/orders", True),
    ("an allowed setting", "mysql://app:pw-one@db.internal/orders?tls=true", True),
    ("another host", "mysql://app:pw-one@db2.internal:3306/orders", False),
    ("another port", "mysql://app:pw-one@db.internal:3307/orders", False),
    ("another database", "mysql://app:pw-one@db.internal:3306/billing", False),
    ("another user", "mysql://admin:pw-one@db.internal:3306/orders", False),
]


@pytest.mark.parametrize(("row", "url", "same"), IDENTITY_ROWS, ids=[r[0] for r in IDENTITY_ROWS])
def test_the_aliases_name_one_target(row: str, url: str, same: bool) -> None:
    assert IDENTITY is not None
    assert (target_identity_digest("MySQL", url) == IDENTITY) is same, row


def test_the_coordination_of_a_mysql_target_is_the_engines_not_the_urls() -> None:
    # The Lease is named from the engine and the coordination key, never the URL's
    # scheme: a Secret rewritten from mysql:// to mariadb:// keeps its Lease.
    one = coordination_digest(
        engine="MySQL", namespace="shop", coordination_key="orders", realm=None
    )
    assert one == coordination_digest(
        engine="mysql", namespace="shop", coordination_key=" Orders ", realm=None
    )
    assert one != coordination_digest(
        engine="PostgreSQL", namespace="shop", coordination_key="orders", realm=None
    )


SECTION = "## Database URL parameters the runner refuses"
ROW = re.compile(r"^\| `([^`]+)` \| (.+) \|$")


def _doc_table(engine: str) -> dict[str, str]:
    """The rows of the section's table for ``engine`` (its ``### <engine>`` heading)."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    (part,) = [p for p in section.split("\n### ")[1:] if p.startswith(engine)]
    return {m.group(1): m.group(2) for m in map(ROW.match, part.splitlines()) if m}


# -- PostgreSQL: the same rule, pgx's names ------------------------------------------------

PG = "postgresql://app:s3cret-Pa55word@db.internal:5432/orders"

# Control rows first; each other row changes one thing and must be refused with a
# sentence holding the text given.
PG_ROWS: list[tuple[str, str, str | None]] = [
    ("control: no parameters", PG, None),
    ("control: the allowed settings", PG + "?sslmode=verify-full&connect_timeout=5", None),
    ("control: the postgres alias", PG.replace("postgresql://", "postgres://"), None),
    ("options", PG + "?options=-c%20search_path%3Devil", "may not set options: it sets server"),
    ("search_path", PG + "?sslmode=require&search_path=evil", "may not set search_path"),
    ("another spelling", PG + "?search-path=evil", "may not set search-path (search_path)"),
    ("a session setting", PG + "?statement_timeout=0", "may not set statement_timeout: the "),
    ("replication role", PG + "?session_replication_role=replica", "turns off triggers"),
    ("the simple protocol", PG + "?default_query_exec_mode=simple_protocol", "splice values"),
    ("a file of the Pod", PG + "?sslkey=/var/run/secrets/token", "read a file of the Pod"),
    ("a password file", PG + "?passfile=/etc/passwd", "may not set passfile"),
    ("a service file", PG + "?service=prod", "may not set service"),
    ("another host", PG + "?host=db2.internal", "may not set host: it routes"),
    ("another database", PG + "?dbname=billing", "may not set dbname: it routes"),
    ("a host list", PG.replace("db.internal", "db.internal,db2.internal"), "must name one host"),
    ("a password parameter", PG + "?password=x", "may not set password"),
    ("a setting given twice", PG + "?sslmode=require&sslmode=disable", "sets sslmode twice"),
    ("a path under the database", PG + "/extra", "must name one database"),
    ("an unreadable query", PG + "?sslmode", "cannot be read as name=value pairs"),
]


# The runner asks before it starts ptah, for a PostgreSQL target too.
PG_RUNNER_ROWS: list[tuple[str, str, dict[str, str], str | None]] = [
    ("control: a plan", "plan", {}, None),
    ("the target's URL", "apply", {"PTAH_DB_URL": PG + "?options=-c%20x%3D1"},
     "the database URL may not set options"),
    ("the dev database's URL", "plan",
     {"PTAH_DEV_URL": "postgres://dev:devpass-1@dev.internal/scratch?search_path=x"},
     "the dev database URL may not set search_path"),
    ("a migration apply", "migration-apply", {"PTAH_DB_URL": PG + "?host=elsewhere"},
     "the database URL may not set host"),
]  # fmt: skip


# -- Both engines: one rule (runner.dburl.url_problem), each engine's names ---------------


@dataclass(frozen=True)
class Engine:
    base: str
    allowed: tuple[str, ...]
    refused: dict[str, str]
    any_other: str
    # The document's rows beside the parameters: what each engine's table also says.
    doc_rows: frozenset[str]


MYSQL_DOC_ROWS = frozenset({"(allowed)", "(any other)", "#..."})
POSTGRES_DOC_ROWS = frozenset({"(allowed)", "(any other)", "h1,h2"})
RULES: dict[str, Engine] = {
    "MySQL": Engine(BASE, MYSQL_ALLOWED, MYSQL_REFUSED, MYSQL_ANY_OTHER, MYSQL_DOC_ROWS),
    "PostgreSQL": Engine(
        PG, POSTGRES_ALLOWED, POSTGRES_REFUSED, POSTGRES_ANY_OTHER, POSTGRES_DOC_ROWS
    ),
}
ALL_URL_ROWS = [("MySQL", *row) for row in URL_ROWS] + [("PostgreSQL", *row) for row in PG_ROWS]
ALL_RUNNER_ROWS = [("MySQL", *row) for row in RUNNER_ROWS] + [
    ("PostgreSQL", *row) for row in PG_RUNNER_ROWS
]


@pytest.mark.parametrize(
    ("engine", "row", "url", "refused"), ALL_URL_ROWS, ids=[f"{r[0]}: {r[1]}" for r in ALL_URL_ROWS]
)
def test_a_url_may_carry_only_settings_that_run_no_sql_and_change_no_session(
    engine: str, row: str, url: str, refused: str | None
) -> None:
    problem = url_problem(engine, url)
    if refused is None:
        assert problem is None, row
        return
    assert problem is not None and refused in problem, (row, problem)
    # One lower-case sentence, with no credential in it.
    assert problem[0].islower() and ". " not in problem and not problem.endswith(".")
    assert "s3cret-Pa55word" not in problem


@pytest.mark.parametrize(
    ("engine", "name"), [(e, n) for e, rule in RULES.items() for n in sorted(rule.refused)]
)
def test_every_refused_parameter_is_refused_naming_itself(engine: str, name: str) -> None:
    rule = RULES[engine]
    problem = url_problem(engine, f"{rule.base}?{name}=1")
    assert problem == f"the database URL may not set {name}: {rule.refused[name]}"


@pytest.mark.parametrize("engine", sorted(RULES))
def test_no_parameter_is_both_allowed_and_refused(engine: str) -> None:
    rule = RULES[engine]
    assert {normalized(n) for n in rule.allowed}.isdisjoint(normalized(n) for n in rule.refused)
    assert all(url_problem(engine, f"{rule.base}?{name}=1") is None for name in rule.allowed)


@pytest.mark.parametrize("engine", sorted(RULES))
def test_the_security_document_lists_every_refused_parameter_with_its_sentence(
    engine: str,
) -> None:
    rule, table = RULES[engine], _doc_table(engine)
    assert {name: text for name, text in table.items() if name in rule.refused} == rule.refused
    assert sorted(re.findall(r"`(\w+)`", table.get("(allowed)", ""))) == sorted(rule.allowed)
    assert table["(any other)"] == rule.any_other
    assert set(table) == {*rule.refused, *rule.doc_rows}


@pytest.mark.parametrize(
    ("engine", "row", "operation", "changes", "refused"),
    ALL_RUNNER_ROWS,
    ids=[f"{r[0]}: {r[1]}" for r in ALL_RUNNER_ROWS],
)
def test_the_runner_refuses_such_a_url_before_ptah_starts(
    engine: str, row: str, operation: str, changes: dict[str, str], refused: str | None
) -> None:
    prepared = prepare(_env(engine, operation, **changes), operation, OP_ID, now=NOW)
    if refused is None:
        assert isinstance(prepared, RunConfig), (row, prepared)
        return
    assert isinstance(prepared, StartRefusal), row
    assert prepared.code == "database_url_refused"
    assert prepared.message.startswith(refused), prepared.message
