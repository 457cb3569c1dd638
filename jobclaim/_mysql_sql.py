"""MySQL-family statements read by sqlglot's MySQL dialect.

No MySQL parser of MySQL's own ships for Python; sqlglot is a pure-Python SQL parser
with a MySQL dialect (backtick names, backslash escapes in strings, ``#`` comments,
``ON DUPLICATE KEY UPDATE``), pinned in pyproject.toml. It reads far less than the
server does, and that is the point of the fail-closed reading: what sqlglot cannot
read, or reads only as an opaque ``Command`` (``GRANT``, ``RENAME TABLE``,
``REPLACE``, ``CREATE USER``), is destructive and privileged, and so needs a person
whatever ``policy.apply`` says.

The text is cut into statements by sqlglot's MySQL tokenizer, so a ``;`` inside a
string or comment never ends one. MySQL also *runs* what sits in an executable
comment (``/*! ... */``, MariaDB's ``/*M! ... */``), which every parser reads as a
comment: a statement holding one is therefore never additive.

Imported lazily by ``jobclaim.statements`` (the runner ships ``jobclaim`` without it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType

from jobclaim._sqlverdict import Finding, Verdict, destroys, grants, unknown, unreadable

__all__ = ["ENGINE", "SqlUnreadable", "classify_one", "read"]

ENGINE: Final = "MySQL"
DIALECT: Final = "mysql"
# sqlglot warns on every statement it reads only as a Command; here that is an
# expected, fully handled reading (not additive), not something to log per request.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


class SqlUnreadable(Exception):
    """The text as a whole cannot be cut into MySQL statements."""


def _classes(*names: str) -> tuple[type[exp.Expr], ...]:
    # getattr: a name sqlglot does not have is simply not safe.
    found = (getattr(exp, n, None) for n in names)
    return tuple(c for c in found if isinstance(c, type))


# Built-in functions an additive statement may call: defaults and plain value helpers.
SAFE_FUNCTIONS: Final = _classes(
    "CurrentTimestamp",
    "CurrentDate",
    "CurrentTime",
    "Lower",
    "Upper",
    "Length",
    "Coalesce",
    "Cast",
    "Concat",
    "ConcatWs",
    "Substring",
    "Trim",
    "Abs",
    "Round",
    "Uuid",
)
_EXECUTABLE_COMMENTS: Final = ("/*!", "/*M!")


def read(text: str) -> list[tuple[str, Verdict]]:
    """Each statement of ``text`` (its own words, ``;`` kept) with its verdict."""
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)
    except SqlglotError as error:
        raise SqlUnreadable(str(error)) from error
    out: list[tuple[str, Verdict]] = []
    start = 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            _piece(text[start : token.end + 1], out)
            start = token.end + 1
    _piece(text[start:], out)
    return out


def _piece(sql: str, out: list[tuple[str, Verdict]]) -> None:
    sql = sql.strip()
    if sql and sql != ";":
        out.append((sql, classify_one(sql)))


def classify_one(sql: str) -> Verdict:
    """One statement's verdict (unreadable: destructive and privileged)."""
    findings: list[Finding] = []
    if any(marker in sql for marker in _EXECUTABLE_COMMENTS):
        findings.append(unknown("holds an executable comment (/*! ... */), which MySQL runs"))
    try:
        parsed = sqlglot.parse(sql, read=DIALECT, error_level=sqlglot.ErrorLevel.RAISE)
    except SqlglotError as error:
        return Verdict((*findings, *unreadable(ENGINE, str(error)).findings))
    for statement in parsed:
        # A piece that is only a comment parses as an empty statement.
        if statement is not None and not isinstance(statement, exp.Semicolon):
            findings.extend(_findings(statement))
    return Verdict(tuple(findings))


def _findings(statement: exp.Expr) -> Iterator[Finding]:
    nested = [f for node in statement.walk() for f in _node(node)]
    yield from nested
    top = list(_top(statement))
    if top and top[0] is _NOT_KNOWN:
        if not nested:
            yield unknown(f"a {type(statement).__name__} statement is not known to be additive")
    else:
        yield from top


_NOT_KNOWN: Final = unknown("not known")


def _top(statement: exp.Expr) -> Iterator[Finding]:
    """The checks a statement that can be additive needs; ``_NOT_KNOWN`` otherwise."""
    if isinstance(statement, exp.Create):
        kind = str(statement.args.get("kind") or "").upper()
        if kind not in ("TABLE", "INDEX", "VIEW", "SCHEMA", "DATABASE"):
            yield unknown(f"creates stored code or an object not known to be additive ({kind})")
        elif statement.args.get("replace"):
            yield destroys(f"replaces a {kind.lower()}")
    elif isinstance(statement, exp.Alter):
        yield from _alter(statement)
    elif isinstance(statement, exp.Insert):
        if statement.args.get("conflict") is not None:
            yield destroys("updates rows on a duplicate key")
        if statement.args.get("overwrite"):
            yield destroys("overwrites rows")
    elif isinstance(statement, exp.Set):
        yield from _set(statement)
    elif not isinstance(statement, exp.Transaction | exp.Commit | exp.Rollback):
        yield _NOT_KNOWN


def _alter(statement: exp.Alter) -> Iterator[Finding]:
    if str(statement.args.get("kind") or "").upper() != "TABLE":
        yield _NOT_KNOWN
        return
    if statement.args.get("options"):
        yield destroys("changes a table's options")
    for action in statement.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef | exp.AddConstraint | exp.Drop):
            continue  # a Drop is found by the walk
        if isinstance(action, exp.RenameColumn):
            yield destroys("renames a column")
        else:
            yield destroys(f"alters a table in a way not known to be additive ({action.key})")


def _set(statement: exp.Set) -> Iterator[Finding]:
    for item in statement.expressions:
        kind = str(item.args.get("kind") or "").upper()
        if kind in ("NAMES", "CHARACTER SET"):
            continue
        text = item.sql(dialect=DIALECT).lower()
        if any(word in text for word in ("role", "password", "sql_log_bin", "authorization")):
            yield grants("changes the session's identity or logging")
        else:
            yield destroys("changes a session setting, which can change what later statements mean")


def _node(node: exp.Expr) -> Iterator[Finding]:
    """What a node shows wherever it stands in the tree."""
    if isinstance(node, exp.Drop):
        kind = str(node.args.get("kind") or "object").lower()
        yield destroys(f"drops a {kind}")
    elif isinstance(node, exp.Delete):
        yield destroys("deletes rows")
    elif isinstance(node, exp.Update):
        yield destroys("updates rows")
    elif isinstance(node, exp.TruncateTable):
        yield destroys("truncates a table")
    elif isinstance(node, exp.Merge):
        yield destroys("merges rows (may update or delete)")
    elif isinstance(node, exp.Command):
        word = str(node.this or "").upper()
        yield unknown(
            f"{word or 'a statement'} is read by no parser here (not known to be additive)"
        )
    elif isinstance(node, _PRIVILEGE_NODES):
        yield grants("grants or revokes privileges")
    elif isinstance(node, exp.Into):
        yield unknown("writes a query's rows to a file or variable (INTO)")
    elif isinstance(node, exp.Func) and not isinstance(node, SAFE_FUNCTIONS):
        name = node.name if isinstance(node, exp.Anonymous) else node.key
        yield unknown(f"calls {name}(), which may run any code")


_PRIVILEGE_NODES: Final = _classes("Grant", "Revoke")
