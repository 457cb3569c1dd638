"""The pure core of the schema engine: two catalogs in, ordered statements out.

The diff (what changes, in which order, how severe, under which drift category) is the
engines' shared part; the text of each statement is a ``Renderer``'s. PostgreSQL's is
here (``POSTGRES``); the MySQL family's is ``lab.executor.mysqlddl.MYSQL``.

Order matters because PostgreSQL (and MySQL) check every dependency as each statement runs:
foreign keys go first (they hold the keys and indexes they point at), then keys and
indexes that changed, then tables and columns; creation runs the other way round, with
foreign keys last so every table and key they name already exists. A key that changes is
dropped and re-created, and so is every foreign key leaning on its table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from lab.executor.catalog import Catalog, Column, Constraint, Index, Table, quote_ident

SEVERITIES = ("safe", "info", "warning", "error", "destructive")


@dataclass(frozen=True)
class Statement:
    sql: str
    severity: str
    reason: str
    table: str
    # The drift vocabulary's category this statement's change falls under.
    category: str


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity)


class Renderer(Protocol):
    """One engine's statement text for each change the diff decides on."""

    def drop_constraint(self, table: str, c: Constraint) -> str: ...
    def add_constraint(self, table: str, c: Constraint) -> str: ...
    def drop_index(self, table: str, i: Index) -> str: ...
    def unique_index(self, i: Index) -> bool: ...
    def drop_table(self, name: str) -> str: ...
    def create_table(self, table: Table) -> str: ...
    def drop_column(self, table: str, column: Column) -> str: ...
    def add_column(self, table: str, column: Column) -> str: ...
    def alter_column(self, table: str, old: Column, new: Column) -> list[Statement]: ...


def _q(name: str) -> str:
    return quote_ident(name)


def _column_sql(column: Column) -> str:
    sql = f"{_q(column.name)} {column.type}"
    if column.not_null:
        sql += " NOT NULL"
    if column.default is not None:
        sql += f" DEFAULT {column.default}"
    return sql


_INTS = ("smallint", "integer", "bigint")
_VARCHAR = re.compile(r"character varying(?:\((\d+)\))?$")
_NUMERIC = re.compile(r"numeric(?:\((\d+),(\d+)\))?$")


def widens(old: str, new: str) -> bool:
    """True when every value of type ``old`` is a value of ``new`` (no row can be lost)."""
    if old in _INTS and new in _INTS:
        return _INTS.index(new) >= _INTS.index(old)
    if (old, new) == ("real", "double precision"):
        return True
    old_char, new_char = _VARCHAR.match(old), _VARCHAR.match(new)
    if old_char and (new == "text" or new_char):
        if new == "text" or new_char is None or new_char.group(1) is None:
            return True
        return old_char.group(1) is not None and int(new_char.group(1)) >= int(old_char.group(1))
    old_num, new_num = _NUMERIC.match(old), _NUMERIC.match(new)
    if old_num and new_num:
        if new_num.group(1) is None:
            return True
        if old_num.group(1) is None:
            return False
        return new_num.group(2) == old_num.group(2) and int(new_num.group(1)) >= int(
            old_num.group(1)
        )
    return False


_NUMBERS = re.compile(r"(smallint|integer|bigint|real|double precision|numeric(\(.*\))?)$")
_TEXTS = re.compile(r"(text|character varying(\(\d+\))?|character(\(\d+\))?)$")


def conversion(column: str, old: str, new: str) -> str:
    """The USING expression of a type change.

    A direct cast where PostgreSQL has one for sure (number to number, anything to or
    from text, one base type with another modifier); otherwise through text, which is
    every type's input and output form: it converts the values that mean the same in
    both types and fails, rolled back, on any that do not, where a missing cast would
    fail the plan even on an empty table.
    """
    base_old, base_new = old.split("(", maxsplit=1)[0], new.split("(", maxsplit=1)[0]
    direct = (
        (_NUMBERS.match(old) and _NUMBERS.match(new))
        or _TEXTS.match(old)
        or _TEXTS.match(new)
        or base_old == base_new
    )
    if direct:
        return f"{_q(column)}::{new}"
    return f"{_q(column)}::text::{new}"


def _stmt(sql: str, severity: str, reason: str, table: str, category: str) -> Statement:
    return Statement(sql, severity, reason, table, category)


def plan_statements(
    live: Catalog, desired: Catalog, ddl: Renderer | None = None
) -> list[Statement]:
    """The statements that turn ``live`` into ``desired``, in an order the engine accepts;
    their text is ``ddl``'s (PostgreSQL's when none is given)."""
    ddl = ddl or POSTGRES
    live_tables = {t.name: t for t in live.tables}
    want_tables = {t.name: t for t in desired.tables}
    dropped_tables = [n for n in live_tables if n not in want_tables]
    added_tables = [n for n in want_tables if n not in live_tables]
    kept = [n for n in want_tables if n in live_tables]

    def wanted_constraint(table: str, constraint: Constraint) -> bool:
        target = want_tables.get(table)
        return target is not None and constraint in target.constraints

    def wanted_index(table: str, index: Index) -> bool:
        target = want_tables.get(table)
        return target is not None and index in target.indexes

    # Keys and indexes of a kept table that go away: foreign keys pointing at such a
    # table must be dropped first and re-created afterwards.
    shaken = set(dropped_tables)
    for name in kept:
        table = live_tables[name]
        if any(c.kind in "pu" and not wanted_constraint(name, c) for c in table.constraints):
            shaken.add(name)
        if any(not wanted_index(name, i) for i in table.indexes if ddl.unique_index(i)):
            shaken.add(name)

    out: list[Statement] = []
    dropped_fks: set[tuple[str, str]] = set()
    for table in live.tables:
        for c in table.constraints:
            if c.kind != "f":
                continue
            if wanted_constraint(table.name, c) and c.references not in shaken:
                continue
            dropped_fks.add((table.name, c.name))
            if table.name in dropped_tables:
                reason = f"table {table.name} is dropped"
            elif wanted_constraint(table.name, c):
                reason = f"the keys of {c.references} change, so the foreign key is re-created"
            else:
                reason = "the foreign key is not in the desired schema or differs from it"
            out.append(_drop_constraint(ddl, table.name, c, reason))
    for name in kept:
        table = live_tables[name]
        for c in table.constraints:
            if c.kind in "pu" and not wanted_constraint(name, c):
                out.append(
                    _drop_constraint(
                        ddl, name, c, "the key is not in the desired schema or differs from it"
                    )
                )
        for i in table.indexes:
            if not wanted_index(name, i):
                out.append(
                    _stmt(
                        ddl.drop_index(name, i),
                        "destructive",
                        "the index is not in the desired schema or differs from it",
                        name,
                        "indexes_removed",
                    )
                )
    for name in dropped_tables:
        out.append(
            _stmt(
                ddl.drop_table(name),
                "destructive",
                "the table is not in the desired schema",
                name,
                "tables_removed",
            )
        )
    for name in kept:
        out.extend(_column_changes(ddl, live_tables[name], want_tables[name]))
    for name in added_tables:
        out.append(_create_table(ddl, want_tables[name]))
    for name in kept:
        live_table = live_tables[name]
        for c in want_tables[name].constraints:
            if c.kind in "pu" and c not in live_table.constraints:
                out.append(
                    _add_constraint(
                        ddl, name, c, "the key is in the desired schema and not in the database"
                    )
                )
    for name, want in want_tables.items():
        existing = live_tables.get(name)
        for i in want.indexes:
            if existing is None or i not in existing.indexes:
                out.append(
                    _stmt(
                        i.definition,
                        "safe",
                        "the index is in the desired schema and not in the database",
                        name,
                        "indexes_added",
                    )
                )
    for table in desired.tables:
        before = live_tables.get(table.name)
        for c in table.constraints:
            if c.kind != "f":
                continue
            present = before is not None and c in before.constraints
            if present and (table.name, c.name) not in dropped_fks:
                continue
            out.append(
                _add_constraint(
                    ddl,
                    table.name,
                    c,
                    "the foreign key is in the desired schema and not in the database",
                )
            )
    return out


def _drop_constraint(ddl: Renderer, table: str, c: Constraint, reason: str) -> Statement:
    return _stmt(
        ddl.drop_constraint(table, c),
        "destructive",
        reason,
        table,
        "table_constraints_removed",
    )


def _add_constraint(ddl: Renderer, table: str, c: Constraint, reason: str) -> Statement:
    # Adding a key or a foreign key validates every existing row, so it can fail.
    return _stmt(
        ddl.add_constraint(table, c),
        "warning",
        reason + "; existing rows must satisfy it",
        table,
        "table_constraints_added",
    )


def _create_table(ddl: Renderer, table: Table) -> Statement:
    return _stmt(
        ddl.create_table(table),
        "safe",
        "the table is in the desired schema and not in the database",
        table.name,
        "tables_added",
    )


def _column_changes(ddl: Renderer, live: Table, want: Table) -> list[Statement]:
    out: list[Statement] = []
    for column in live.columns:
        if want.column(column.name) is None:
            out.append(
                _stmt(
                    ddl.drop_column(live.name, column),
                    "destructive",
                    "the column is not in the desired schema; its values are lost",
                    live.name,
                    "columns_removed",
                )
            )
    for column in want.columns:
        old = live.column(column.name)
        if old is None:
            severity, reason = "safe", "the column is in the desired schema and not in the database"
            if column.not_null and column.default is None:
                severity, reason = (
                    "warning",
                    reason + "; not null without a default fails on a table with rows",
                )
            out.append(
                _stmt(
                    ddl.add_column(live.name, column),
                    severity,
                    reason,
                    live.name,
                    "columns_added",
                )
            )
        elif old != column:
            out.extend(ddl.alter_column(live.name, old, column))
    return out


def _pg_alter_column(table: str, old: Column, new: Column) -> list[Statement]:
    out: list[Statement] = []
    prefix = f"ALTER TABLE {_q(table)} ALTER COLUMN {_q(new.name)}"
    retyped = old.type != new.type
    # A default is typed: it is dropped before the column's type changes and set again
    # after, or the conversion fails on a default the new type cannot hold.
    if old.default is not None and (retyped or old.default != new.default):
        out.append(
            _stmt(
                f"{prefix} DROP DEFAULT",
                "safe",
                "the column's default changes",
                table,
                "columns_modified",
            )
        )
    if retyped:
        if widens(old.type, new.type):
            severity, reason = "warning", f"the column widens from {old.type} to {new.type}"
        else:
            severity, reason = (
                "destructive",
                f"the column narrows or converts from {old.type} to {new.type}; "
                "values may be lost or refused",
            )
        out.append(
            _stmt(
                f"{prefix} TYPE {new.type} USING {conversion(new.name, old.type, new.type)}",
                severity,
                reason,
                table,
                "columns_modified",
            )
        )
    if new.default is not None and (retyped or old.default != new.default):
        out.append(
            _stmt(
                f"{prefix} SET DEFAULT {new.default}",
                "safe",
                "the column's default changes",
                table,
                "columns_modified",
            )
        )
    if new.not_null and not old.not_null:
        out.append(
            _stmt(
                f"{prefix} SET NOT NULL",
                "warning",
                "the column becomes not null; fails if a row holds null",
                table,
                "columns_modified",
            )
        )
    elif old.not_null and not new.not_null:
        out.append(
            _stmt(
                f"{prefix} DROP NOT NULL",
                "safe",
                "the column becomes nullable",
                table,
                "columns_modified",
            )
        )
    return out


class PostgresDDL:
    """PostgreSQL's statement text: double-quoted names, keys as named constraints, an
    index dropped by its (schema-wide) name, a column altered one property at a time."""

    def drop_constraint(self, table: str, c: Constraint) -> str:
        return f"ALTER TABLE {_q(table)} DROP CONSTRAINT {_q(c.name)}"

    def add_constraint(self, table: str, c: Constraint) -> str:
        return f"ALTER TABLE {_q(table)} ADD CONSTRAINT {_q(c.name)} {c.definition}"

    def drop_index(self, table: str, i: Index) -> str:
        return f"DROP INDEX {_q(i.name)}"

    def unique_index(self, i: Index) -> bool:
        return "UNIQUE" in i.definition

    def drop_table(self, name: str) -> str:
        return f"DROP TABLE {_q(name)}"

    def create_table(self, table: Table) -> str:
        parts = [_column_sql(c) for c in table.columns]
        parts += [
            f"CONSTRAINT {_q(c.name)} {c.definition}" for c in table.constraints if c.kind in "pu"
        ]
        return f"CREATE TABLE {_q(table.name)} ({', '.join(parts)})"

    def drop_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {_q(table)} DROP COLUMN {_q(column.name)}"

    def add_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {_q(table)} ADD COLUMN {_column_sql(column)}"

    def alter_column(self, table: str, old: Column, new: Column) -> list[Statement]:
        return _pg_alter_column(table, old, new)


POSTGRES = PostgresDDL()
