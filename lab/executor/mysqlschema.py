"""The MySQL family's schema reading: a database's catalog from ``information_schema``,
and the desired schema loaded into the dev database to be read the same way.

A MySQL schema is a database, and MySQL's DDL commits implicitly, so the PostgreSQL
side's scratch schema in a rolled-back transaction has no MySQL twin. The desired schema
is loaded into the dev database itself instead, which must hold nothing (no table, view,
sequence, routine or event; a leftover is refused, never dropped, since it may not be
ours), under a ``GET_LOCK`` named for that database so two readings sharing it take
turns, and every table it created is dropped again however the reading ends.

The subset read is the PostgreSQL side's (``lab.executor.catalog``): InnoDB tables with
columns (type as ``COLUMN_TYPE`` spells it, nullability, default as MariaDB's
``COLUMN_DEFAULT`` spells it: a quoted literal or an expression), primary and unique
keys (as constraints, kinds ``p`` and ``u``), plain B-tree indexes, and foreign keys
inside the database. Anything else on a managed table (auto_increment, generated or
on-update columns, a column's own collation, check constraints, fulltext or spatial
indexes, partitions, other engines) is refused, never left out of a plan.
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from typing import Any

import pymysql

from lab.executor import mysqldb, sqltext
from lab.executor.catalog import Catalog, Column, Constraint, Index, OutOfScope, Table, excluded
from lab.executor.db import ExecutorError, connect_mysql, first_line
from lab.executor.mysqlddl import DIALECT, key_definition, quote

# How long a reading waits for another reading of the same dev database to finish: the
# dev database is shared by every Observe and Plan that names it, and a load takes
# seconds.
DEV_LOCK_WAIT = 60

_TABLES = """
SELECT TABLE_NAME, TABLE_TYPE, ENGINE, TABLE_COLLATION, CREATE_OPTIONS
FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME
"""
_COLUMNS = """
SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA,
       COLLATION_NAME
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s
ORDER BY TABLE_NAME, ORDINAL_POSITION
"""
_INDEXES = """
SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART, COLLATION, INDEX_TYPE
FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s
ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX
"""
_FOREIGN_KEYS = """
SELECT k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA,
       k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE
FROM information_schema.KEY_COLUMN_USAGE k
JOIN information_schema.REFERENTIAL_CONSTRAINTS r
  ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME
 AND r.TABLE_NAME = k.TABLE_NAME
WHERE k.TABLE_SCHEMA = %s AND k.REFERENCED_TABLE_NAME IS NOT NULL
ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION
"""
_CHECKS = """
SELECT TABLE_NAME, CONSTRAINT_NAME FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = %s ORDER BY TABLE_NAME, CONSTRAINT_NAME
"""
# What else a database may hold; the dev database must hold none of it.
_OTHERS = """
SELECT CONCAT('routine ', ROUTINE_NAME) FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = %s
UNION ALL
SELECT CONCAT('event ', EVENT_NAME) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s
"""

Rows = list[tuple[Any, ...]]


def _query(conn: mysqldb.Connection, sql: str, *params: object) -> Rows:
    return list(conn.execute(sql, params).fetchall())


def read_catalog(conn: mysqldb.Connection, database: str, exclude: tuple[str, ...]) -> Catalog:
    """The catalog of ``database``'s managed tables; a managed table outside the subset is
    refused (``OutOfScope``), views and sequences beside them are left alone."""
    raw = {
        "tables": _query(conn, _TABLES, database),
        "columns": _query(conn, _COLUMNS, database),
        "indexes": _query(conn, _INDEXES, database),
        "foreign_keys": _query(conn, _FOREIGN_KEYS, database),
        "checks": _query(conn, _CHECKS, database),
    }
    return catalog_from_rows(raw, database, exclude)


def catalog_from_rows(raw: dict[str, Rows], database: str, exclude: tuple[str, ...]) -> Catalog:
    """The catalog ``information_schema``'s rows describe. Pure: the reader's rules live
    here, where a table test reaches each one without a server."""
    managed: dict[str, str] = {}
    for name, kind, engine, collation, options in raw["tables"]:
        if excluded(name, exclude) or kind != "BASE TABLE":
            continue
        if (engine or "").lower() != "innodb":
            raise OutOfScope(f"table {name} uses the {engine} engine; only InnoDB is in scope")
        if "partitioned" in (options or "").lower():
            raise OutOfScope(f"table {name} is partitioned, which is outside the scope")
        managed[name] = collation or ""
    for table, check in raw["checks"]:
        if table in managed:
            raise OutOfScope(
                f"table {table} has a check constraint {check}, which is outside the scope"
            )
    columns: dict[str, list[Column]] = defaultdict(list)
    for table, name, typ, nullable, default, extra, collation in raw["columns"]:
        if table not in managed:
            continue
        if extra and extra.strip().upper() != "DEFAULT_GENERATED":
            raise OutOfScope(
                f"column {table}.{name} is {extra.lower()}, which is outside the scope"
            )
        if collation and collation != managed[table]:
            raise OutOfScope(
                f"column {table}.{name} has its own collation, which is outside the scope"
            )
        # MariaDB spells "no default" on a nullable column as NULL; it means the same as
        # none (a string default is quoted, so 'NULL' the string stays itself).
        value = None if default is None or default == "NULL" else str(default)
        columns[table].append(Column(name, typ, nullable == "NO", value))
    keys = _keys_and_indexes(raw["indexes"], managed)
    foreign = _foreign_keys(raw["foreign_keys"], managed, database)
    tables = tuple(
        Table(
            name,
            tuple(columns[name]),
            tuple(keys[name][0] + foreign.get(name, [])),
            tuple(keys[name][1]),
        )
        for name in sorted(managed)
    )
    return Catalog(tables, DIALECT)


def _keys_and_indexes(
    rows: Rows, managed: dict[str, str]
) -> dict[str, tuple[list[Constraint], list[Index]]]:
    grouped: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        if row[0] in managed:
            grouped[(row[0], row[1])].append(row)
    out: dict[str, tuple[list[Constraint], list[Index]]] = {name: ([], []) for name in managed}
    for (table, index), parts in grouped.items():
        kind_of = parts[0][6]
        if kind_of != "BTREE":
            raise OutOfScope(
                f"index {index} of {table} is a {kind_of.lower()} index, which is outside the scope"
            )
        cols = []
        for _, _, _, column, sub_part, order, _ in parts:
            if column is None:
                raise OutOfScope(
                    f"index {index} of {table} is on an expression, which is outside the scope"
                )
            text = quote(column) + (f"({sub_part})" if sub_part else "")
            cols.append(text + (" DESC" if order == "D" else ""))
        unique = not int(parts[0][2])
        # A key is whole ascending columns; a unique index on prefixes or descending
        # columns stays an index (CREATE UNIQUE INDEX), as PostgreSQL's would.
        plain = all(p[4] is None and p[5] != "D" for p in parts)
        if unique and plain:
            kind = "p" if index == "PRIMARY" else "u"
            definition = key_definition(kind, [p[3] for p in parts])
            out[table][0].append(Constraint(index, kind, definition))
            continue
        if unique and index == "PRIMARY":
            raise OutOfScope(f"the primary key of {table} uses a prefix or a descending column")
        head = "CREATE UNIQUE INDEX" if unique else "CREATE INDEX"
        out[table][1].append(
            Index(index, f"{head} {quote(index)} ON {quote(table)} ({', '.join(cols)})")
        )
    return out


def _foreign_keys(
    rows: Rows, managed: dict[str, str], database: str
) -> dict[str, list[Constraint]]:
    grouped: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        if row[0] in managed:
            grouped[(row[0], row[1])].append(row)
    out: dict[str, list[Constraint]] = defaultdict(list)
    for (table, name), parts in grouped.items():
        target_schema, target = parts[0][3], parts[0][4]
        if target_schema != database:
            raise OutOfScope(
                f"foreign key {name} of {table} points outside the database, "
                "which is outside the scope"
            )
        local = ", ".join(quote(p[2]) for p in parts)
        remote = ", ".join(quote(p[5]) for p in parts)
        definition = (
            f"FOREIGN KEY ({local}) REFERENCES {quote(target)} ({remote}) "
            f"ON DELETE {parts[0][7]} ON UPDATE {parts[0][6]}"
        )
        out[table].append(Constraint(name, "f", definition, target))
    return out


# --- the desired schema ----------------------------------------------------------------

# A name qualified by a database (``other.t``, `` `other`.`t` ``) outside quoted text:
# such a statement would create or change something outside the dev database, which no
# plan would then describe.
_QUALIFIED = re.compile(r"(?:`[^`]*`|\b[A-Za-z_$][\w$]*)\s*\.\s*(?:`|[A-Za-z_$])")
_STRING = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"")


def qualified_name_problem(statement: str, number: int) -> str | None:
    if _QUALIFIED.search(_STRING.sub("''", statement)):
        return (
            f"the desired schema's statement {number} names a table in another database; "
            "write table names unqualified"
        )
    return None


def load_desired(url: str, connect_timeout: float, ddl: str, exclude: tuple[str, ...]) -> Catalog:
    """The catalog ``ddl`` describes, read from the (empty) dev database and dropped again."""
    problem = sqltext.desired_schema_problem(ddl)
    if problem:
        raise ExecutorError(problem)
    statements = sqltext.split_statements(ddl)
    for number, statement in enumerate(statements, start=1):
        problem = qualified_name_problem(statement, number)
        if problem:
            raise ExecutorError(problem)
    database = mysqldb.database_of(url)
    if not database:
        raise ExecutorError("the dev database url names no database")
    with connect_mysql(url, connect_timeout, "the dev database") as conn:
        name = mysqldb.lock_name("dev", database)
        if not mysqldb.get_lock(conn, name, DEV_LOCK_WAIT):
            raise ExecutorError(
                f"another reading held the dev database {database} for {DEV_LOCK_WAIT}s"
            )
        try:
            _require_empty(conn, database)
            try:
                return _load_and_read(conn, database, statements, exclude)
            finally:
                # A cleanup that cannot be sent (the session is gone, or a signal cut a
                # query short) must not replace the error or interruption that ended the
                # reading; whatever stays behind is refused by name by the next reading.
                with contextlib.suppress(pymysql.Error):
                    _drop_all(conn, database)
        finally:
            with contextlib.suppress(pymysql.Error):
                mysqldb.release_lock(conn, name)


def _require_empty(conn: mysqldb.Connection, database: str) -> None:
    tables = _query(conn, _TABLES, database)
    others = _query(conn, _OTHERS, database, database)
    found = [f"{row[1].lower()} {row[0]}" for row in tables] + [row[0] for row in others]
    if found:
        raise ExecutorError(
            f"the dev database {database} is not empty (it holds {found[0]}); a dev database "
            "is scratch space the executor fills and empties, so it must start empty"
        )


def _load_and_read(
    conn: mysqldb.Connection, database: str, statements: list[str], exclude: tuple[str, ...]
) -> Catalog:
    for number, statement in enumerate(statements, start=1):
        try:
            conn.execute(statement)
        except pymysql.Error as error:
            raise ExecutorError(
                f"the desired schema's statement {number} does not load on the dev "
                f"database: {first_line(error)}"
            ) from error
    try:
        return read_catalog(conn, database, exclude)
    except OutOfScope as error:
        raise ExecutorError(
            f"the desired schema is outside the lab executor's scope: {error}"
        ) from error


def _drop_all(conn: mysqldb.Connection, database: str) -> None:
    """Empty the dev database again: every table the load created, foreign keys or not."""
    if conn.closed or conn.broken:
        return
    names = [row[0] for row in _query(conn, _TABLES, database)]
    if not names:
        return
    conn.execute("SET SESSION foreign_key_checks = 0")
    try:
        conn.execute("DROP TABLE IF EXISTS " + ", ".join(quote(n) for n in names))
    finally:
        conn.execute("SET SESSION foreign_key_checks = 1")


# --- the live database -----------------------------------------------------------------


def read_live(conn: mysqldb.Connection, database: str, exclude: tuple[str, ...]) -> Catalog:
    try:
        return read_catalog(conn, database, exclude)
    except OutOfScope as error:
        raise ExecutorError(
            f"the database holds a managed table outside the lab executor's scope: {error}"
        ) from error


def live_catalog(url: str, connect_timeout: float, exclude: tuple[str, ...]) -> Catalog:
    database = mysqldb.database_of(url)
    if not database:
        raise ExecutorError("the database url names no database")
    with connect_mysql(url, connect_timeout, "the database") as conn:
        return read_live(conn, database, exclude)
