"""The MySQL family's statement text for the shared diff (``lab.executor.diff``). Pure.

What differs from PostgreSQL's text, because MySQL differs:

- Names are quoted with backticks.
- A primary key has no name of its own (MySQL calls every one ``PRIMARY``): it is added
  with ``ADD PRIMARY KEY`` and dropped with ``DROP PRIMARY KEY``. A unique key is an
  index, dropped with ``DROP INDEX``; a foreign key with ``DROP FOREIGN KEY``.
- An index's name is unique per table, not per schema: ``DROP INDEX name ON table``.
- A column is changed whole: ``MODIFY COLUMN`` restates its type, nullability and
  default in one statement, so the statement's severity is the highest of what changes
  (a narrowing is destructive, a widening or a new NOT NULL a warning, a new default or
  a dropped NOT NULL safe). MySQL converts the values itself (there is no ``USING``); in
  strict mode a value the new type cannot hold fails the statement.
"""

from __future__ import annotations

import re

from lab.executor.catalog import Column, Constraint, Index, Table
from lab.executor.diff import Statement, severity_rank

DIALECT = "mysql"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def column_sql(column: Column) -> str:
    sql = f"{quote(column.name)} {column.type}"
    if column.not_null:
        sql += " NOT NULL"
    if column.default is not None:
        sql += f" DEFAULT {column.default}"
    return sql


_INTS = ("tinyint", "smallint", "mediumint", "int", "bigint")
_TEXTS = ("tinytext", "text", "mediumtext", "longtext")
# The most bytes each TEXT type holds; a varchar(n) of utf8mb4 needs up to 4n.
_TEXT_BYTES = {"tinytext": 255, "text": 65_535, "mediumtext": 16_777_215, "longtext": 2**32 - 1}
_INT = re.compile(r"(tinyint|smallint|mediumint|int|bigint)(?:\(\d+\))?( unsigned)?$")
_VARCHAR = re.compile(r"varchar\((\d+)\)$")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)( unsigned)?$")


def widens(old: str, new: str) -> bool:
    """True when every value of MySQL type ``old`` is a value of ``new`` (no row is lost).

    Types are compared as ``information_schema.COLUMNS.COLUMN_TYPE`` spells them
    (``bigint(20)``, ``varchar(40)``, ``decimal(10,2)``); an integer's display width is
    not part of its range.
    """
    old_int, new_int = _INT.match(old), _INT.match(new)
    if old_int and new_int:
        if old_int.group(2) != new_int.group(2):
            # Signed to unsigned loses the negatives; unsigned to signed fits only in a
            # strictly larger type.
            return bool(old_int.group(2)) and _INTS.index(new_int.group(1)) > _INTS.index(
                old_int.group(1)
            )
        return _INTS.index(new_int.group(1)) >= _INTS.index(old_int.group(1))
    if (old, new) == ("float", "double"):
        return True
    old_char, new_char = _VARCHAR.match(old), _VARCHAR.match(new)
    if old_char and new_char:
        return int(new_char.group(1)) >= int(old_char.group(1))
    if old_char and new in _TEXT_BYTES:
        return 4 * int(old_char.group(1)) <= _TEXT_BYTES[new]
    if old in _TEXTS and new in _TEXTS:
        return _TEXTS.index(new) >= _TEXTS.index(old)
    old_dec, new_dec = _DECIMAL.match(old), _DECIMAL.match(new)
    if old_dec and new_dec:
        # The integer digits (precision minus scale) and the scale both must not shrink.
        old_p, old_s = int(old_dec.group(1)), int(old_dec.group(2))
        new_p, new_s = int(new_dec.group(1)), int(new_dec.group(2))
        return (
            old_dec.group(3) == new_dec.group(3)
            and new_s >= old_s
            and new_p - new_s >= old_p - old_s
        )
    return False


class MySQLDDL:
    """The MySQL family's statement text (see the module's docstring)."""

    def drop_constraint(self, table: str, c: Constraint) -> str:
        if c.kind == "p":
            return f"ALTER TABLE {quote(table)} DROP PRIMARY KEY"
        if c.kind == "u":
            return f"ALTER TABLE {quote(table)} DROP INDEX {quote(c.name)}"
        return f"ALTER TABLE {quote(table)} DROP FOREIGN KEY {quote(c.name)}"

    def add_constraint(self, table: str, c: Constraint) -> str:
        if c.kind == "p":
            return f"ALTER TABLE {quote(table)} ADD {c.definition}"
        return f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(c.name)} {c.definition}"

    def drop_index(self, table: str, i: Index) -> str:
        return f"DROP INDEX {quote(i.name)} ON {quote(table)}"

    def unique_index(self, i: Index) -> bool:
        # Unique keys on whole columns are read as constraints (kind ``u``); a unique
        # index on prefixes or descending columns stays an index.
        return i.definition.startswith("CREATE UNIQUE INDEX")

    def drop_table(self, name: str) -> str:
        return f"DROP TABLE {quote(name)}"

    def create_table(self, table: Table) -> str:
        parts = [column_sql(c) for c in table.columns]
        for c in table.constraints:
            if c.kind == "p":
                parts.append(c.definition)
            elif c.kind == "u":
                parts.append(f"CONSTRAINT {quote(c.name)} {c.definition}")
        return f"CREATE TABLE {quote(table.name)} ({', '.join(parts)})"

    def drop_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {quote(table)} DROP COLUMN {quote(column.name)}"

    def add_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {quote(table)} ADD COLUMN {column_sql(column)}"

    def alter_column(self, table: str, old: Column, new: Column) -> list[Statement]:
        changes: list[tuple[str, str]] = []
        if old.type != new.type:
            if widens(old.type, new.type):
                changes.append(("warning", f"the column widens from {old.type} to {new.type}"))
            else:
                changes.append(
                    (
                        "destructive",
                        f"the column narrows or converts from {old.type} to {new.type}; "
                        "values may be lost or refused",
                    )
                )
        if new.not_null and not old.not_null:
            changes.append(("warning", "the column becomes not null; fails if a row holds null"))
        elif old.not_null and not new.not_null:
            changes.append(("safe", "the column becomes nullable"))
        if old.default != new.default:
            changes.append(("safe", "the column's default changes"))
        severity = max((s for s, _ in changes), key=severity_rank, default="safe")
        return [
            Statement(
                f"ALTER TABLE {quote(table)} MODIFY COLUMN {column_sql(new)}",
                severity,
                "; ".join(reason for _, reason in changes),
                table,
                "columns_modified",
            )
        ]


MYSQL = MySQLDDL()


def key_definition(kind: str, columns: list[str]) -> str:
    """A key's definition as the catalog reader writes it (and ``MySQLDDL`` renders it)."""
    names = ", ".join(quote(c) for c in columns)
    return f"PRIMARY KEY ({names})" if kind == "p" else f"UNIQUE ({names})"


__all__ = ["DIALECT", "MYSQL", "MySQLDDL", "column_sql", "key_definition", "quote", "widens"]
