"""``migrations status``, ``migrations up`` and ``migrations hash``.

A migration directory holds ``<version>_<description>.sql`` files (``.up.sql`` too;
``.down.sql`` files are ignored) and a ``ptah.sum`` that pins every file's bytes. The
database's history is the revision table ``ptah_lab.revisions``. A run holds the migration
advisory lock from before it reads the history until after it has written it, and the
``--expect-sequence`` guard compares the selection with the approved one under that lock:
a history that moved after approval (restored backwards, say) is refused before anything
runs, and the revision table is left untouched.

A MySQL-family target (``mysql://``, ``mariadb://``) runs the same engine with what
differs said in ``lab.executor.mysqldb``: ``GET_LOCK`` for the lock, the revision table
``ptah_lab_revisions`` in the target database, and every migration run statement by
statement with its row written dirty first, whatever ``--tx-mode`` says, because DDL
commits implicitly there and no transaction could take a failed migration back.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from pydantic import ValidationError

from lab.executor import mysqldb, sqltext
from lab.executor.db import (
    DB_ERRORS,
    MIGRATION_LOCK,
    ExecutorError,
    LockTimeout,
    advisory_lock,
    advisory_unlock,
    connect,
    connect_mysql,
    first_line,
    is_mysql,
)
from lab.executor.documents import (
    DirtyRevision,
    ExpectedSequence,
    MigrationRecord,
    MigrationRun,
    MigrationStatus,
)
from lab.executor.interrupt import Interrupted
from lab.executor.schema import FAILED, OK, Target

SUM_FILE = "ptah.sum"
_FILE = re.compile(r"^(\d+)_([A-Za-z0-9][A-Za-z0-9_.-]*?)(\.up)?\.sql$")
_TABLE = "ptah_lab.revisions"
# Either engine's connection: psycopg's, or PyMySQL's in the same shape.
Conn = psycopg.Connection[Any] | mysqldb.Connection


@dataclass(frozen=True)
class Migration:
    version: int
    key: str
    description: str
    checksum: str
    sql: str

    @property
    def identity(self) -> str:
        return identity(self.version, self.key)


@dataclass(frozen=True)
class Revision:
    version: int
    key: str
    checksum: str
    dirty: bool
    applied: int
    total: int
    error: str | None


def identity(version: int, key: str | None) -> str:
    """A migration as the guard compares it: its version, or version/key when they differ."""
    return str(version) if not key or key == str(version) else f"{version}/{key}"


def _h1(data: bytes) -> str:
    return "h1:" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def sum_text(files: dict[str, bytes]) -> str:
    """``ptah.sum``: a total hash line, then ``<file> h1:<hash>`` per file in name order."""
    lines = [f"{name} {_h1(files[name])}" for name in sorted(files)]
    return "\n".join([_h1("\n".join(lines).encode()), *lines]) + "\n"


def _sql_files(directory: Path) -> dict[str, bytes]:
    try:
        entries = sorted(directory.iterdir())
    except OSError as error:
        raise ExecutorError(
            f"cannot read the migration directory {directory}: {first_line(error)}"
        ) from error
    return {
        e.name: e.read_bytes()
        for e in entries
        if e.is_file() and e.name.endswith(".sql") and not e.name.endswith(".down.sql")
    }


def write_sum(directory: Path) -> None:
    (directory / SUM_FILE).write_text(sum_text(_sql_files(directory)))


def read_directory(directory: Path) -> list[Migration]:
    """The directory's migrations in version order, after its sum file has vouched for them.

    An empty directory needs no sum file: there is nothing for one to vouch for.
    """
    files = _sql_files(directory)
    if not files and not (directory / SUM_FILE).exists():
        return []
    try:
        recorded = (directory / SUM_FILE).read_text()
    except OSError as error:
        raise ExecutorError(
            f"the migration directory {directory} has no readable {SUM_FILE}"
        ) from error
    if recorded != sum_text(files):
        raise ExecutorError(
            f"the migration directory {directory} does not match its {SUM_FILE}: "
            "a file was added, removed or changed"
        )
    migrations: list[Migration] = []
    for name, data in files.items():
        match = _FILE.match(name)
        if match is None:
            raise ExecutorError(
                f"the migration file name {name} is not <version>_<description>.sql"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ExecutorError(f"the migration file {name} is not utf-8 text") from error
        version = int(match.group(1))
        if version <= 0:
            raise ExecutorError(f"the migration file {name} has version 0; versions start at 1")
        checksum = "sha256:" + hashlib.sha256(data).hexdigest()
        migrations.append(Migration(version, match.group(1), match.group(2), checksum, text))
    migrations.sort(key=lambda m: m.version)
    for first, second in itertools.pairwise(migrations):
        if first.version == second.version:
            raise ExecutorError(f"the migration directory holds version {first.version} twice")
    return migrations


# --- the pure core --------------------------------------------------------------------


def compute_status(migrations: list[Migration], revisions: list[Revision]) -> MigrationStatus:
    by_version = {r.version: r for r in revisions}
    highest = max((r.version for r in revisions), default=0)
    records: list[MigrationRecord] = []
    for m in migrations:
        row = by_version.get(m.version)
        applied_checksum = None
        if row is None:
            state = "out-of-order" if m.version < highest else "pending"
        elif row.dirty:
            state = "dirty"
        elif row.checksum != m.checksum:
            state, applied_checksum = "modified", row.checksum
        else:
            state = "applied"
        records.append(
            MigrationRecord(
                version=m.version,
                version_key=m.key,
                description=m.description,
                checksum=m.checksum,
                applied_checksum=applied_checksum,
                state=state,
            )
        )
    dirty = next((r for r in sorted(revisions, key=lambda r: r.version) if r.dirty), None)
    return MigrationStatus(
        current_version=max((r.version for r in revisions if not r.dirty), default=0),
        total_migrations=len(migrations),
        has_pending_changes=any(r.state in ("pending", "out-of-order") for r in records),
        migrations=records,
        dirty_revision=None
        if dirty is None
        else DirtyRevision(
            version=dirty.version, applied=dirty.applied, total=dirty.total, error=dirty.error
        ),
    )


def blocking_problem(
    migrations: list[Migration], revisions: list[Revision], status: MigrationStatus
) -> str | None:
    """Why nothing may run against this history, or None."""
    known = {m.version for m in migrations}
    unknown = sorted(r.version for r in revisions if r.version not in known)
    if unknown:
        return (
            f"the database has applied version {unknown[0]}, "
            "which the migration directory does not hold"
        )
    for state, sentence in (
        (
            "dirty",
            "version {} is dirty from a failed or interrupted run; repair it before running more",
        ),
        ("modified", "applied version {} no longer matches its file"),
        (
            "out-of-order",
            "version {} is older than the newest applied version and was never applied",
        ),
    ):
        versions = [r.version for r in status.migrations if r.state == state]
        if versions:
            return sentence.format(versions[0]) + "; nothing was run"
    return None


def guard_problem(expected: ExpectedSequence, selection: list[Migration]) -> str | None:
    approved = [identity(e.version, e.version_key) for e in expected.migrations]
    selected = [m.identity for m in selection]
    if approved == selected:
        return None
    return (
        f"the selected migrations are [{' '.join(selected)}], the approved sequence is "
        f"[{' '.join(approved)}]: the history moved after approval, so nothing was run"
    )


def read_expected(path: str) -> ExpectedSequence:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ExecutorError(
            f"cannot read the expected sequence {path}: {first_line(error)}"
        ) from error
    try:
        return ExpectedSequence.model_validate_json(data, strict=True)
    except ValidationError as error:
        raise ExecutorError(
            f"the expected sequence {path} is not "
            '{"migrations":[{"version":N,"version_key":"..."}]}'
        ) from error


# --- the shell -----------------------------------------------------------------------


def _table(conn: Conn) -> str:
    return mysqldb.REVISIONS if isinstance(conn, mysqldb.Connection) else _TABLE


def _revisions(conn: Conn) -> list[Revision]:
    if isinstance(conn, mysqldb.Connection):
        exists = conn.execute(
            "SELECT COUNT(*) = 1 FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_name = %s",
            (mysqldb.REVISIONS,),
        ).fetchone()
    else:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return []
    rows = conn.execute(
        "SELECT version, version_key, checksum, dirty, applied, total, error "
        f"FROM {_table(conn)} ORDER BY version"
    ).fetchall()
    # MySQL's BOOLEAN is a TINYINT: the row says 0 or 1.
    return [Revision(v, k, c, bool(d), a, t, e) for v, k, c, d, a, t, e in rows]


@contextlib.contextmanager
def _open(target: Target) -> Iterator[Conn]:
    """The target's connection, of whichever engine its URL names."""
    if is_mysql(target.url):
        with connect_mysql(target.url, target.connect_timeout, "the database") as mine:
            yield mine
    else:
        with connect(target.url, target.connect_timeout, "the database") as conn:
            yield conn


def status(*, target: Target, directory: str) -> tuple[MigrationStatus, int]:
    migrations = read_directory(Path(directory))
    with _open(target) as conn:
        return compute_status(migrations, _revisions(conn)), OK


def _lock(conn: Conn, target: Target, timeout: float) -> None:
    """The migration lock: PostgreSQL's advisory lock, or MySQL's GET_LOCK."""
    if not isinstance(conn, mysqldb.Connection):
        advisory_lock(conn, MIGRATION_LOCK, timeout, "migration")
        return
    # lock_wait_timeout bounds a statement's wait on a table's metadata lock afterwards,
    # as lock_timeout does on PostgreSQL.
    seconds = max(1, math.ceil(timeout)) if timeout else 31536000
    conn.execute(f"SET SESSION lock_wait_timeout = {seconds}")
    name = mysqldb.lock_name("migrations", mysqldb.database_of(target.url))
    if not mysqldb.get_lock(conn, name, timeout if timeout else -1):
        raise LockTimeout("the migration advisory lock was not granted within the lock timeout")


def _unlock(conn: Conn, target: Target) -> None:
    if isinstance(conn, mysqldb.Connection):
        mysqldb.release_lock(conn, mysqldb.lock_name("migrations", mysqldb.database_of(target.url)))
    else:
        advisory_unlock(conn, MIGRATION_LOCK)


def hash_directory(directory: str) -> str:
    write_sum(Path(directory))
    return f"wrote {Path(directory) / SUM_FILE}\n"


def up(
    *,
    target: Target,
    directory: str,
    expect_sequence: str | None,
    tx_mode: str,
    lock_timeout: float,
) -> tuple[MigrationRun, int]:
    if tx_mode not in ("all", "file", "none"):
        raise ExecutorError(
            f"--tx-mode {tx_mode!r} is not one migrations up knows; use all, file or none"
        )
    migrations = read_directory(Path(directory))
    expected = read_expected(expect_sequence) if expect_sequence else None
    with _open(target) as conn:
        try:
            _lock(conn, target, lock_timeout)
        except LockTimeout as error:
            return MigrationRun(outcome="failed", planned=[], applied=[], error=str(error)), FAILED
        try:
            revisions = _revisions(conn)
            before = compute_status(migrations, revisions)
            pending = {r.version for r in before.migrations if r.state == "pending"}
            selection = [m for m in migrations if m.version in pending]
            planned = [m.version for m in selection]
            problem = blocking_problem(migrations, revisions, before)
            if problem is None and expected is not None:
                problem = guard_problem(expected, selection)
            if problem is not None:
                return MigrationRun(
                    outcome="failed", planned=planned, applied=[], error=problem, status=before
                ), FAILED
            if not selection:
                return MigrationRun(outcome="up-to-date", planned=[], applied=[], status=before), OK
            _ensure_table(conn)
            applied, failure, code = _run(conn, selection, tx_mode)
            after = compute_status(migrations, _revisions(conn)) if not conn.closed else None
            if failure is None:
                return MigrationRun(
                    outcome="applied", planned=planned, applied=applied, status=after
                ), OK
            outcome = "unknown" if code == -1 else ("partial" if applied else "failed")
            exit_code = FAILED if code in (-1, FAILED) else code
            return MigrationRun(
                outcome=outcome, planned=planned, applied=applied, error=failure, status=after
            ), exit_code
        finally:
            # A session that ends releases its advisory locks; an unlock that cannot be
            # sent after a signal or a lost connection loses nothing.
            with contextlib.suppress(*DB_ERRORS):
                _unlock(conn, target)


def _ensure_table(conn: Conn) -> None:
    if isinstance(conn, mysqldb.Connection):
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {mysqldb.REVISIONS} (version BIGINT PRIMARY KEY, "
            "version_key VARCHAR(255) NOT NULL, description TEXT NOT NULL, "
            "checksum VARCHAR(80) NOT NULL, transaction_mode VARCHAR(8) NOT NULL, "
            "applied INT NOT NULL, total INT NOT NULL, dirty BOOLEAN NOT NULL, error TEXT, "
            "applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))"
        )
        return
    conn.execute("CREATE SCHEMA IF NOT EXISTS ptah_lab")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {_TABLE} (version bigint PRIMARY KEY, "
        "version_key text NOT NULL, "
        "description text NOT NULL, checksum text NOT NULL, transaction_mode text NOT NULL, "
        "applied integer NOT NULL, total integer NOT NULL, dirty boolean NOT NULL, error text, "
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )


_RECORD = (
    "INSERT INTO {} (version, version_key, description, checksum, "
    "transaction_mode, applied, total, dirty) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def _record(conn: Conn, m: Migration, mode: str, *, applied: int, total: int, dirty: bool) -> None:
    conn.execute(
        _RECORD.format(_table(conn)),
        (m.version, m.key, m.description, m.checksum, mode, applied, total, dirty),
    )


def _run(conn: Conn, selection: list[Migration], tx_mode: str) -> tuple[list[int], str | None, int]:
    """Run the selection; (versions applied, error or None, exit code; -1 = commit unknown)."""
    if isinstance(conn, mysqldb.Connection):
        # DDL commits implicitly: statement by statement, dirty first, in every mode.
        return _run_each_statement(conn, selection, tx_mode)
    if tx_mode == "none":
        return _run_each_statement(conn, selection, tx_mode)
    batches = [selection] if tx_mode == "all" else [[m] for m in selection]
    applied: list[int] = []
    for batch in batches:
        conn.execute("BEGIN")
        try:
            for m in batch:
                statements = sqltext.split_statements(m.sql)
                for statement in statements:
                    conn.execute(statement.encode())
                _record(
                    conn, m, tx_mode, applied=len(statements), total=len(statements), dirty=False
                )
        except Interrupted as stop:
            conn.close()  # the open transaction dies with the session: rolled back
            return (
                applied,
                f"interrupted while running version {m.version}; its transaction was rolled back",
                stop.exit_code,
            )
        except psycopg.Error as error:
            if not conn.broken:
                conn.execute("ROLLBACK")
            return (
                applied,
                f"version {m.version} failed and its transaction was rolled back: "
                f"{first_line(error)}",
                FAILED,
            )
        try:
            conn.execute("COMMIT")
        except (Interrupted, psycopg.Error) as error:
            return (
                applied,
                f"the commit of version {batch[-1].version} may or may not have happened: {error}",
                -1,
            )
        applied += [m.version for m in batch]
    return applied, None, OK


def _run_each_statement(
    conn: Conn, selection: list[Migration], tx_mode: str
) -> tuple[list[int], str | None, int]:
    """tx-mode none: the revision row is written dirty first, so a run that stops midway
    leaves a history that says so, and the next run refuses until someone repairs it."""
    applied: list[int] = []
    for m in selection:
        statements = sqltext.split_statements(m.sql)
        _record(conn, m, tx_mode, applied=0, total=len(statements), dirty=True)
        for number, statement in enumerate(statements, start=1):
            try:
                conn.execute(statement.encode())
            except Interrupted as stop:
                return (
                    applied,
                    f"interrupted in version {m.version} after {number - 1} statements; "
                    "it is left dirty",
                    stop.exit_code,
                )
            except DB_ERRORS as error:
                sentence = first_line(error)
                if not conn.broken:
                    conn.execute(
                        f"UPDATE {_table(conn)} SET error = %s WHERE version = %s",
                        (sentence, m.version),
                    )
                return (
                    applied,
                    f"version {m.version} failed at statement {number} "
                    f"and is left dirty: {sentence}",
                    FAILED,
                )
            conn.execute(
                f"UPDATE {_table(conn)} SET applied = %s WHERE version = %s", (number, m.version)
            )
        conn.execute(f"UPDATE {_table(conn)} SET dirty = false WHERE version = %s", (m.version,))
        applied.append(m.version)
    return applied, None, OK
