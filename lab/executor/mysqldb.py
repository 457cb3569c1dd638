"""The MySQL family's connection for the executor: PyMySQL behind psycopg's shape.

``lab.executor.migrations`` speaks to a connection through four things psycopg's has:
``execute(sql, params)`` returning something to ``fetchone``/``fetchall``, ``closed``,
``broken`` and ``close``. ``Connection`` gives a PyMySQL connection the same four, so
the migration engine has one body for both engines and only what differs is here:

- **The migration lock is ``GET_LOCK``**, a named lock of the server held by the
  session (MySQL has no advisory lock keyed by a number). Its name carries the
  database, since one server holds every database's locks; ``GET_LOCK`` waits at most
  the lock timeout, and a session that ends releases it, as PostgreSQL's does.
- **DDL commits implicitly.** A ``CREATE TABLE`` inside ``BEGIN`` commits what came
  before it and cannot be rolled back, so no transaction mode can promise that a
  failed migration left nothing behind; ``migrations`` runs every MySQL migration
  statement by statement with its revision row written dirty first (what
  ``--tx-mode none`` does on PostgreSQL), and says so in ``lab/README.md``.
- **The revision table lives in the target database** (``ptah_lab_revisions``): a
  MySQL schema is a database, and a second one would need a grant the target's user
  need not have.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql
import pymysql.cursors

__all__ = ["REVISIONS", "SCHEMES", "Connection", "connect", "describe", "lock_name"]

SCHEMES = frozenset({"mysql", "mariadb"})
REVISIONS = "ptah_lab_revisions"
DEFAULT_PORT = 3306
# GET_LOCK names are at most 64 characters.
_LOCK_NAME_MAX = 64


class Connection:
    """A PyMySQL connection in autocommit, shaped like the psycopg one the engine uses."""

    def __init__(self, raw: pymysql.connections.Connection[Any]) -> None:
        self._raw = raw
        self.broken = False

    @property
    def closed(self) -> bool:
        return not self._raw.open

    def execute(
        self, statement: str | bytes, params: tuple[object, ...] | None = None
    ) -> pymysql.cursors.Cursor:
        text = statement.decode() if isinstance(statement, bytes) else statement
        cursor: pymysql.cursors.Cursor = self._raw.cursor()
        try:
            cursor.execute(text, params)
        except pymysql.err.OperationalError as error:
            # A lost connection (2006, 2013) or a killed session: nothing more can be
            # sent on it, as psycopg marks a connection broken.
            if error.args and error.args[0] in (2006, 2013, 1927):
                self.broken = True
            raise
        except pymysql.err.InterfaceError:
            self.broken = True
            raise
        return cursor

    def close(self) -> None:
        if self._raw.open:
            self._raw.close()


def _parts(url: str) -> tuple[str, int, str, str, str]:
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES or not parts.hostname:
        raise ValueError("not a mysql url with a host")
    return (
        parts.hostname,
        parts.port or DEFAULT_PORT,
        unquote(parts.path.lstrip("/")),
        unquote(parts.username or ""),
        unquote(parts.password or ""),
    )


def describe(url: str) -> str:
    """``host:port/database``, never the credentials."""
    host, port, database, _, _ = _parts(url)
    return f"{host}:{port}/{database or '?'}"


def connect(url: str, connect_timeout: float) -> Connection:
    """An autocommit connection; the URL's query was refused upstream (runner.dburl)."""
    host, port, database, user, password = _parts(url)
    raw = pymysql.connect(
        host=host,
        port=port,
        user=user,
        password=password,
        database=database or None,
        autocommit=True,
        connect_timeout=max(2, math.ceil(connect_timeout)) if connect_timeout else 10,
        charset="utf8mb4",
        program_name="ptah-lab-executor",
    )
    return Connection(raw)


def lock_name(purpose: str, database: str) -> str:
    """The GET_LOCK name of ``purpose`` on ``database`` (one server, many databases)."""
    name = f"ptah-lab/{purpose}/{database}"
    return name[:_LOCK_NAME_MAX]


def get_lock(conn: Connection, name: str, timeout: float) -> bool:
    """Whether ``GET_LOCK`` granted ``name`` within ``timeout`` seconds."""
    row = conn.execute("SELECT GET_LOCK(%s, %s)", (name, timeout)).fetchone()
    return bool(row and row[0] == 1)


def release_lock(conn: Connection, name: str) -> None:
    if not conn.closed and not conn.broken:
        conn.execute("SELECT RELEASE_LOCK(%s)", (name,))


def database_of(url: str) -> str:
    return _parts(url)[2]
