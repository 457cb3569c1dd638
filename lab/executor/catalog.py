"""The catalog of one schema as the executor sees it, and its fingerprint.

The dataclasses and the fingerprint are both engines'; the reading here is PostgreSQL's
(the MySQL family's is ``lab.executor.mysqlschema``, and a catalog carries its dialect).

A catalog is read from PostgreSQL's own catalogs with ``search_path`` set to the schema
being read, so every rendered name (a foreign key's target, a default's cast) comes out
unqualified and the scratch copy of a desired schema reads byte-for-byte like the live
schema it describes. Index definitions are the one rendering PostgreSQL always qualifies;
the schema prefix is cut from them here, once.

The fingerprint is the SHA-256 of a canonical JSON document of the catalog: tables,
columns, constraints and indexes each sorted by name, so column order is not part of it
(a column added later lands last, and that is not drift).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import psycopg

DIALECT = "postgres"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool
    default: str | None


@dataclass(frozen=True)
class Constraint:
    """A primary key (``p``), unique (``u``) or foreign key (``f``) constraint."""

    name: str
    kind: str
    definition: str
    # The table a foreign key points at (empty for the other kinds): a constraint that
    # table's keys back must be dropped before those keys are.
    references: str = ""


@dataclass(frozen=True)
class Index:
    name: str
    definition: str


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    constraints: tuple[Constraint, ...]
    indexes: tuple[Index, ...]

    def column(self, name: str) -> Column | None:
        return next((column for column in self.columns if column.name == name), None)


@dataclass(frozen=True)
class Catalog:
    tables: tuple[Table, ...]
    # The engine it was read from: part of the fingerprint, so a plan made on one engine
    # never matches a database of the other.
    dialect: str = DIALECT

    def table(self, name: str) -> Table | None:
        return next((table for table in self.tables if table.name == name), None)


class OutOfScope(ValueError):
    """A schema object the lab executor does not cover."""


def excluded(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def without(catalog: Catalog, patterns: tuple[str, ...]) -> Catalog:
    return Catalog(
        tuple(t for t in catalog.tables if not excluded(t.name, patterns)), catalog.dialect
    )


def canonical_document(catalog: Catalog) -> dict[str, Any]:
    return {
        "dialect": catalog.dialect,
        "tables": [
            {
                "name": table.name,
                "columns": [
                    {
                        "name": c.name,
                        "type": c.type,
                        "not_null": c.not_null,
                        "default": c.default,
                    }
                    for c in sorted(table.columns, key=lambda c: c.name)
                ],
                "constraints": [
                    {"name": c.name, "kind": c.kind, "definition": c.definition}
                    for c in sorted(table.constraints, key=lambda c: c.name)
                ],
                "indexes": [
                    {"name": i.name, "definition": i.definition}
                    for i in sorted(table.indexes, key=lambda i: i.name)
                ],
            }
            for table in sorted(catalog.tables, key=lambda t: t.name)
        ],
    }


def canonical_bytes(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(catalog: Catalog) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(canonical_document(catalog))).hexdigest()


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- reading -------------------------------------------------------------------------

_RELATIONS = """
SELECT c.oid, c.relname, c.relkind, c.relpersistence, c.relispartition, c.relrowsecurity,
       EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid)
FROM pg_class c
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
ORDER BY c.relname
"""

_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated,
       a.attcollation <> t.typcollation
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_CONSTRAINTS = """
SELECT con.conname, con.contype, pg_get_constraintdef(con.oid),
       COALESCE(target.relname, ''), COALESCE(target.relnamespace = con.connamespace, true)
FROM pg_constraint con
LEFT JOIN pg_class target ON target.oid = con.confrelid
WHERE con.conrelid = %(oid)s
ORDER BY con.conname
"""

_INDEXES = """
SELECT ic.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = %(oid)s AND NOT EXISTS (
    SELECT 1 FROM pg_constraint con
    WHERE con.conindid = i.indexrelid AND con.conrelid = i.indrelid AND con.contype IN ('p', 'u')
)
ORDER BY ic.relname
"""

# Objects a desired schema must not bring along: they would load into the scratch schema
# and then be silently left out of every plan.
_EXTRAS = """
SELECT 'type ' || t.typname FROM pg_type t
WHERE t.typnamespace = %(schema)s::regnamespace AND t.typtype <> 'c' AND t.typelem = 0
  AND NOT EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid)
UNION ALL
SELECT 'function ' || p.proname FROM pg_proc p WHERE p.pronamespace = %(schema)s::regnamespace
UNION ALL
SELECT 'trigger ' || tg.tgname FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
WHERE c.relnamespace = %(schema)s::regnamespace AND NOT tg.tgisinternal
UNION ALL
SELECT 'policy ' || pol.polname FROM pg_policy pol JOIN pg_class c ON c.oid = pol.polrelid
WHERE c.relnamespace = %(schema)s::regnamespace
"""

_KIND_NAMES = {
    "p": "partitioned table",
    "v": "view",
    "m": "materialized view",
    "S": "sequence",
    "f": "foreign table",
}
_CONSTRAINT_NAMES = {"c": "check", "x": "exclusion", "t": "constraint trigger"}


def read_catalog(
    conn: psycopg.Connection[Any],
    schema: str,
    exclude: tuple[str, ...],
    *,
    strict_objects: bool,
) -> Catalog:
    """The catalog of ``schema``'s managed tables.

    ``strict_objects`` (the desired schema) refuses any view, sequence, type, function,
    trigger or policy; a live database may hold those beside the tables it lets the
    executor manage, and they are left alone. A managed table itself must be in scope on
    both sides: a plan computed over a table whose checks or identity columns it cannot
    see would be a wrong plan, so it is refused instead.
    """
    with conn.cursor() as cur:
        cur.execute(
            "SELECT set_config('search_path', %(path)s, true)", {"path": quote_ident(schema)}
        )
        cur.execute(_RELATIONS, {"schema": quote_ident(schema)})
        relations = cur.fetchall()
        if strict_objects:
            cur.execute(_EXTRAS, {"schema": quote_ident(schema)})
            extras = [row[0] for row in cur.fetchall()]
            if extras:
                raise OutOfScope(f"the schema defines a {extras[0]}, which is outside the scope")
        tables: list[Table] = []
        for oid, name, kind, persistence, partition, rls, inherits in relations:
            if excluded(name, exclude):
                continue
            if kind != "r":
                if strict_objects:
                    raise OutOfScope(f"{name} is a {_KIND_NAMES[kind]}, which is outside the scope")
                continue
            _check_table(name, persistence, partition, rls, inherits)
            tables.append(_read_table(cur, oid, name, schema))
    return Catalog(tuple(tables))


def _check_table(name: str, persistence: str, partition: bool, rls: bool, inherits: bool) -> None:
    if persistence != "p":
        raise OutOfScope(f"table {name} is unlogged or temporary, which is outside the scope")
    if partition or inherits:
        raise OutOfScope(f"table {name} uses inheritance or partitions, which is outside the scope")
    if rls:
        raise OutOfScope(f"table {name} enables row-level security, which is outside the scope")


def _read_table(cur: psycopg.Cursor[Any], oid: int, name: str, schema: str) -> Table:
    cur.execute(_COLUMNS, {"oid": oid})
    columns: list[Column] = []
    for col, typ, not_null, default, identity, generated, collated in cur.fetchall():
        if identity or generated:
            raise OutOfScope(
                f"column {name}.{col} is an identity or generated column, "
                "which is outside the scope"
            )
        if collated:
            raise OutOfScope(
                f"column {name}.{col} has its own collation, which is outside the scope"
            )
        if default is not None and "nextval(" in default:
            raise OutOfScope(
                f"column {name}.{col} draws from a sequence (serial), which is outside the scope"
            )
        columns.append(Column(col, typ, bool(not_null), default))
    cur.execute(_CONSTRAINTS, {"oid": oid})
    constraints: list[Constraint] = []
    for con, kind, definition, target, same_schema in cur.fetchall():
        if kind not in ("p", "u", "f"):
            raise OutOfScope(
                f"table {name} has a {_CONSTRAINT_NAMES.get(kind, kind)} constraint {con}, "
                "which is outside the scope"
            )
        if not same_schema:
            raise OutOfScope(
                f"foreign key {con} of {name} points outside the schema, which is outside the scope"
            )
        constraints.append(Constraint(con, kind, definition, target))
    cur.execute(_INDEXES, {"oid": oid})
    prefix = re.compile(
        r" ON (ONLY )?" + re.escape(quote_ident(schema) if not _plain(schema) else schema) + r"\."
    )
    indexes = [
        Index(idx, prefix.sub(r" ON \1", definition, count=1)) for idx, definition in cur.fetchall()
    ]
    return Table(name, tuple(columns), tuple(constraints), tuple(indexes))


def _plain(name: str) -> bool:
    return re.fullmatch(r"[a-z_][a-z0-9_$]*", name) is not None
