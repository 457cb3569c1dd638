"""``migrations status``, ``migrations up`` and ``migrations hash``.

A migration directory holds ``<version>_<description>.sql`` files (``.up.sql`` too;
``.down.sql`` files are ignored) and a ``ptah.sum`` that pins every file's bytes. The
database's history is the revision table ``ptah_lab.revisions``. A run holds the migration
advisory lock from before it reads the history until after it has written it, and the
``--expect-sequence`` guard compares the selection with the approved one under that lock:
a history that moved after approval (restored backwards, say) is refused before anything
runs, and the revision table is left untouched.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from pydantic import ValidationError

from lab.executor import sqltext
from lab.executor.db import (
    MIGRATION_LOCK,
    ExecutorError,
    LockTimeout,
    advisory_lock,
    advisory_unlock,
    connect,
    first_line,
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


def _revisions(conn: psycopg.Connection[Any]) -> list[Revision]:
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (_TABLE,)).fetchone()
    if not exists or not exists[0]:
        return []
    rows = conn.execute(
        "SELECT version, version_key, checksum, dirty, applied, total, error "
        f"FROM {_TABLE} ORDER BY version"
    ).fetchall()
    return [Revision(*row) for row in rows]


def status(*, target: Target, directory: str) -> tuple[MigrationStatus, int]:
    migrations = read_directory(Path(directory))
    with connect(target.url, target.connect_timeout, "the database") as conn:
        return compute_status(migrations, _revisions(conn)), OK


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
    with connect(target.url, target.connect_timeout, "the database") as conn:
        try:
            advisory_lock(conn, MIGRATION_LOCK, lock_timeout, "migration")
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
            with contextlib.suppress(psycopg.Error):
                advisory_unlock(conn, MIGRATION_LOCK)


def _ensure_table(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS ptah_lab")
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {_TABLE} (version bigint PRIMARY KEY, "
        "version_key text NOT NULL, "
        "description text NOT NULL, checksum text NOT NULL, transaction_mode text NOT NULL, "
        "applied integer NOT NULL, total integer NOT NULL, dirty boolean NOT NULL, error text, "
        "applied_at timestamptz NOT NULL DEFAULT now())"
    )


_RECORD = (
    f"INSERT INTO {_TABLE} (version, version_key, description, checksum, "
    "transaction_mode, applied, total, dirty) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def _record(
    conn: psycopg.Connection[Any], m: Migration, mode: str, *, applied: int, total: int, dirty: bool
) -> None:
    conn.execute(
        _RECORD, (m.version, m.key, m.description, m.checksum, mode, applied, total, dirty)
    )


def _run(
    conn: psycopg.Connection[Any], selection: list[Migration], tx_mode: str
) -> tuple[list[int], str | None, int]:
    """Run the selection; (versions applied, error or None, exit code; -1 = commit unknown)."""
    if tx_mode == "none":
        return _run_each_statement(conn, selection)
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
    conn: psycopg.Connection[Any], selection: list[Migration]
) -> tuple[list[int], str | None, int]:
    """tx-mode none: the revision row is written dirty first, so a run that stops midway
    leaves a history that says so, and the next run refuses until someone repairs it."""
    applied: list[int] = []
    for m in selection:
        statements = sqltext.split_statements(m.sql)
        _record(conn, m, "none", applied=0, total=len(statements), dirty=True)
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
            except psycopg.Error as error:
                sentence = first_line(error)
                if not conn.broken:
                    conn.execute(
                        f"UPDATE {_TABLE} SET error = %s WHERE version = %s", (sentence, m.version)
                    )
                return (
                    applied,
                    f"version {m.version} failed at statement {number} "
                    f"and is left dirty: {sentence}",
                    FAILED,
                )
            conn.execute(
                f"UPDATE {_TABLE} SET applied = %s WHERE version = %s", (number, m.version)
            )
        conn.execute(f"UPDATE {_TABLE} SET dirty = false WHERE version = %s", (m.version,))
        applied.append(m.version)
    return applied, None, OK
