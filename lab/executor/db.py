"""Connections, timeouts and advisory locks: the thin adapter around psycopg (and, for
a ``mysql://`` or ``mariadb://`` URL, around PyMySQL through ``lab.executor.mysqldb``).

Every failure here becomes an ``ExecutorError`` carrying one lower-case sentence that
names the target by host, port and database only: a URL can carry a password, and the
runner quotes these sentences into frames.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pymysql
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict

from lab.executor import mysqldb

# The schema ptah manages in the lab: desired tables are unqualified and land here.
MANAGED_SCHEMA = "public"


# What a failed statement raises, in either engine.
DB_ERRORS: tuple[type[Exception], ...] = (psycopg.Error, pymysql.Error)


def is_mysql(url: str) -> bool:
    """Whether ``url`` names a MySQL-family database (its scheme; ptah reads it so too)."""
    return url.split("://", 1)[0].lower() in mysqldb.SCHEMES if "://" in url else False


class ExecutorError(Exception):
    """A usage or runtime failure: exit 2 with this one sentence on stderr."""


class LockTimeout(ExecutorError):
    """The advisory lock was not granted within ``--lock-timeout``."""


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


# One key per engine: two schema applies on one database serialize, and so do two
# migration runs. The two engines do not share a key; the operator's target lease keeps a
# schema apply and a migration run on one database apart.
SCHEMA_LOCK = _lock_key("ptah-lab/schema-apply")
MIGRATION_LOCK = _lock_key("ptah-lab/migrations")

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str) -> float:
    """Seconds in a Go duration (``7s``, ``1m30s``, ``500ms``; ``0`` alone)."""
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(text):
        match = _DURATION.match(text, position)
        if match is None:
            raise ExecutorError(f"--{flag} {text!r} is not a duration such as 7s, 500ms or 1m30s")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not text:
        raise ExecutorError(f"--{flag} is empty; give a duration such as 7s")
    return total


def describe(url: str) -> str:
    """The target as ``host:port/dbname``, never with its credentials."""
    if is_mysql(url):
        try:
            return mysqldb.describe(url)
        except ValueError as error:
            raise ExecutorError("the database url is not a mysql url that names a host") from error
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:
        raise ExecutorError(
            "the database url is not a valid postgresql connection string"
        ) from error
    host = str(params.get("host") or "localhost")
    port = str(params.get("port") or "5432")
    return f"{host}:{port}/{params.get('dbname') or '?'}"


@contextmanager
def connect_mysql(url: str, connect_timeout: float, role: str) -> Iterator[mysqldb.Connection]:
    """A MySQL-family autocommit connection; ``role`` names it in a failure."""
    target = describe(url)
    try:
        conn = mysqldb.connect(url, connect_timeout)
    except pymysql.Error as error:
        raise ExecutorError(f"cannot connect to {role} at {target}: {first_line(error)}") from error
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def connect(url: str, connect_timeout: float, role: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection; ``role`` names it in a failure ("the dev database")."""
    if is_mysql(url):
        # Every MySQL path goes through connect_mysql; a MySQL URL here is a wiring
        # mistake, refused rather than handed to libpq.
        raise ExecutorError(
            f"{role} is a MySQL-family database, and this path speaks PostgreSQL only"
        )
    target = describe(url)
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=max(2, math.ceil(connect_timeout)) if connect_timeout else None,
            application_name="ptah-lab-executor",
        )
    except psycopg.Error as error:
        raise ExecutorError(f"cannot connect to {role} at {target}: {first_line(error)}") from error
    try:
        yield conn
    finally:
        conn.close()


def first_line(error: BaseException) -> str:
    if isinstance(error, psycopg.Error) and error.diag.message_primary:
        text = error.diag.message_primary
    elif isinstance(error, pymysql.Error) and len(error.args) == 2:
        # PyMySQL's (code, message): the server's sentence, as psycopg's primary message.
        text = str(error.args[1]).strip()
    else:
        text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line[:1].lower() + line[1:]


def advisory_lock(conn: psycopg.Connection[Any], key: int, timeout: float, what: str) -> None:
    """Take the session advisory lock ``key``, waiting at most ``timeout`` seconds.

    ``lock_timeout`` stays set for the session, so a statement that waits on a table lock
    afterwards is bounded by the same budget instead of hanging the Job.
    """
    milliseconds = max(1, round(timeout * 1000)) if timeout else 0
    conn.execute(f"SET lock_timeout = {milliseconds}")
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except pgerrors.LockNotAvailable as error:
        raise LockTimeout(
            f"the {what} advisory lock was not granted within the lock timeout"
        ) from error


def advisory_unlock(conn: psycopg.Connection[Any], key: int) -> None:
    if not conn.closed:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
