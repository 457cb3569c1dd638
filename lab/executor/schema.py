"""``schema plan``, ``schema apply`` and ``schema drift``: the imperative shell of the engine.

The desired catalog comes from loading the desired DDL into a scratch schema of the dev
database inside a transaction that is always rolled back, so nothing of it outlives the
read. The live catalog is read in one repeatable-read transaction, so its fingerprint is
of one moment.

A ``mysql://`` or ``mariadb://`` URL takes the MySQL family's reading
(``lab.executor.mysqlschema``) and statement text (``lab.executor.mysqlddl``) through the
same diff, documents and exit codes; what MySQL makes different for an apply is said at
``_apply_mysql``.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from pydantic import ValidationError

from lab.executor import mysqldb, mysqlschema, sqltext
from lab.executor.catalog import (
    DIALECT,
    Catalog,
    OutOfScope,
    excluded,
    fingerprint,
    quote_ident,
    read_catalog,
)
from lab.executor.db import (
    DB_ERRORS,
    MANAGED_SCHEMA,
    SCHEMA_LOCK,
    ExecutorError,
    LockTimeout,
    advisory_lock,
    advisory_unlock,
    connect,
    connect_mysql,
    first_line,
    is_mysql,
)
from lab.executor.diff import SEVERITIES, Renderer, Statement, plan_statements, severity_rank
from lab.executor.documents import (
    ApplyReport,
    DriftFinding,
    DriftReport,
    PlanFile,
    PlanReport,
    PlanStatement,
    Refusal,
)
from lab.executor.interrupt import Interrupted
from lab.executor.mysqlddl import DIALECT as MYSQL_DIALECT
from lab.executor.mysqlddl import MYSQL

# Exit codes of the contract.
OK, NEGATIVE, FAILED = 0, 1, 2


@dataclass(frozen=True)
class Target:
    url: str
    connect_timeout: float


def read_desired(schema_files: tuple[str, ...]) -> str:
    if not schema_files:
        raise ExecutorError("no desired schema: set --schema-file or PTAH_SCHEMA_FILE")
    parts: list[str] = []
    for name in schema_files:
        try:
            parts.append(Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as error:
            raise ExecutorError(
                f"cannot read the schema file {name}: {first_line(error)}"
            ) from error
    return "\n;\n".join(parts)


def load_desired(dev: Target, ddl: str, exclude: tuple[str, ...]) -> Catalog:
    """The catalog ``ddl`` describes, read from a scratch schema that is rolled back."""
    if is_mysql(dev.url):
        return mysqlschema.load_desired(dev.url, dev.connect_timeout, ddl, exclude)
    problem = sqltext.desired_schema_problem(ddl)
    if problem:
        raise ExecutorError(problem)
    scratch = "ptah_scratch_" + secrets.token_hex(6)
    with connect(dev.url, dev.connect_timeout, "the dev database") as conn:
        try:
            with conn.transaction(force_rollback=True), conn.cursor() as cur:
                cur.execute(f"CREATE SCHEMA {quote_ident(scratch)}")
                cur.execute("SELECT set_config('search_path', %s, true)", (quote_ident(scratch),))
                for number, statement in enumerate(sqltext.split_statements(ddl), start=1):
                    try:
                        cur.execute(statement.encode())
                    except psycopg.Error as error:
                        raise ExecutorError(
                            f"the desired schema's statement {number} does not load on the dev "
                            f"database: {first_line(error)}"
                        ) from error
                # A qualified name would have created or changed something outside the
                # scratch schema, which no plan would then describe.
                cur.execute(
                    "SELECT n.nspname || '.' || c.relname FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE c.xmin = xid(pg_current_xact_id()) AND n.nspname <> %s "
                    "AND n.nspname NOT LIKE 'pg_toast%%' LIMIT 1",
                    (scratch,),
                )
                outside = cur.fetchone()
                if outside:
                    raise ExecutorError(
                        f"the desired schema touches {outside[0]} outside its own schema; "
                        "write table names unqualified"
                    )
                return read_catalog(conn, scratch, exclude, strict_objects=True)
        except OutOfScope as error:
            raise ExecutorError(
                f"the desired schema is outside the lab executor's scope: {error}"
            ) from error


def read_live(
    conn: psycopg.Connection[Any], exclude: tuple[str, ...], *, own_transaction: bool = True
) -> Catalog:
    """The managed catalog; in a repeatable-read transaction of its own, or in the one the
    caller has open (an apply reads the fingerprint in the transaction it then writes in)."""
    try:
        if not own_transaction:
            return read_catalog(conn, MANAGED_SCHEMA, exclude, strict_objects=False)
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return read_catalog(conn, MANAGED_SCHEMA, exclude, strict_objects=False)
    except OutOfScope as error:
        raise ExecutorError(
            f"the database holds a managed table outside the lab executor's scope: {error}"
        ) from error


def live_catalog(target: Target, exclude: tuple[str, ...]) -> Catalog:
    if is_mysql(target.url):
        return mysqlschema.live_catalog(target.url, target.connect_timeout, exclude)
    with connect(target.url, target.connect_timeout, "the database") as conn:
        return read_live(conn, exclude)


def renderer(target: Target, dev: Target) -> Renderer | None:
    """The target's engine's statement text; the dev database must be the same engine,
    or the desired catalog would be read in another engine's types."""
    if is_mysql(target.url) != is_mysql(dev.url):
        raise ExecutorError(
            "the dev database and the database are different engines; "
            "a desired schema is read on a dev database of the target's engine"
        )
    return MYSQL if is_mysql(target.url) else None


def dialect_of(target: Target) -> str:
    return MYSQL_DIALECT if is_mysql(target.url) else DIALECT


# --- plan ----------------------------------------------------------------------------


def plan(
    *,
    target: Target,
    dev: Target,
    schema_files: tuple[str, ...],
    exclude: tuple[str, ...],
    protected: tuple[str, ...],
    name: str,
    output: str | None,
) -> tuple[PlanReport, int]:
    ddl = read_desired(schema_files)
    text = renderer(target, dev)
    desired = load_desired(dev, ddl, exclude)
    live = live_catalog(target, exclude)
    statements = plan_statements(live, desired, text)
    if not statements:
        return PlanReport(outcome="no-changes"), OK
    fenced = sorted({s.table for s in statements if excluded(s.table, protected)})
    if fenced:
        return (
            PlanReport(
                outcome="refused",
                refusal=Refusal(code="protected-table", tables=fenced),
                error=f"the plan would change protected tables: {', '.join(fenced)}",
            ),
            FAILED,
        )
    if not output:
        raise ExecutorError("schema plan needs --output to save the plan it computes")
    document = plan_document(name, live, desired, exclude, statements)
    data = document.model_dump_json(exclude_none=True, indent=2).encode() + b"\n"
    _write_atomically(Path(output), data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return PlanReport(outcome="changes", plan_digest=digest, plan_path=output), OK


def plan_document(
    name: str,
    live: Catalog,
    desired: Catalog,
    exclude: tuple[str, ...],
    statements: list[Statement],
) -> PlanFile:
    return PlanFile(
        format_version=1,
        name=name,
        dialect=live.dialect,
        from_fingerprint=fingerprint(live),
        to_fingerprint=fingerprint(desired),
        exclude=list(exclude) or None,
        destructive=any(s.severity == "destructive" for s in statements),
        statements=[
            PlanStatement(sql=s.sql, severity=s.severity, reason=s.reason) for s in statements
        ],
    )


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        temporary.write_bytes(data)
        temporary.replace(path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise ExecutorError(f"cannot write the plan to {path}: {first_line(error)}") from error


# --- apply ---------------------------------------------------------------------------


def read_plan(path: str) -> tuple[PlanFile, str]:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ExecutorError(f"cannot read the plan {path}: {first_line(error)}") from error
    try:
        document = PlanFile.model_validate_json(data, strict=True)
    except ValidationError as error:
        detail = error.errors()[0]
        where = ".".join(str(part) for part in detail["loc"]) or "the document"
        raise ExecutorError(
            f"the plan {path} is not a ptah plan document: {where}: {detail['msg'].lower()}"
        ) from error
    return document, "sha256:" + hashlib.sha256(data).hexdigest()


def apply(
    *, target: Target, plan_path: str, dry_run: bool, tx_mode: str, lock_timeout: float
) -> tuple[ApplyReport, int]:
    document, digest = read_plan(plan_path)
    if tx_mode not in ("all", "file", "none"):
        raise ExecutorError(
            f"--tx-mode {tx_mode!r} is not one schema apply knows; use all, file or none"
        )
    base = {"plan_name": document.name, "plan_digest": digest}
    if document.dialect != dialect_of(target):
        raise ExecutorError(
            f"the plan is for a {document.dialect} database and --db-url names a "
            f"{dialect_of(target)} one"
        )
    if is_mysql(target.url):
        return _apply_mysql(target, document, base, dry_run, lock_timeout)
    sqls = [s.sql for s in document.statements]
    with connect(target.url, target.connect_timeout, "the database") as conn:
        try:
            advisory_lock(conn, SCHEMA_LOCK, lock_timeout, "schema apply")
        except LockTimeout as error:
            return ApplyReport(outcome="failed", error=str(error), **base), FAILED
        try:
            conn.execute(f"SET search_path TO {quote_ident(MANAGED_SCHEMA)}")
            # In mode all the fingerprint is read inside the transaction the statements run
            # in, so nothing but a writer ignoring the lock fits between check and write.
            one_transaction = tx_mode == "all" and bool(sqls) and not dry_run
            if one_transaction:
                conn.execute("BEGIN")
            exclude = tuple(document.exclude or ())
            live = fingerprint(read_live(conn, exclude, own_transaction=not one_transaction))
            if live != document.from_fingerprint:
                if one_transaction:
                    conn.execute("ROLLBACK")
                return _stale(document, live, base), FAILED
            if not sqls:
                return ApplyReport(outcome="no-changes", **base), OK
            if dry_run:
                return ApplyReport(outcome="dry-run", statements=sqls, **base), OK
            if one_transaction:
                return _execute_all(conn, sqls, base)
            if tx_mode == "file":
                # ptah's file mode: each file in a transaction of its own, and a plan is
                # one file, so its statements commit or roll back together as in all;
                # only the check above ran before the transaction, as ptah checks it.
                conn.execute("BEGIN")
                return _execute_all(conn, sqls, base)
            return _execute_each(conn, sqls, base)
        finally:
            # A session that ends releases its advisory locks, so an unlock that cannot be
            # sent (the connection is gone or mid-query after a signal) loses nothing.
            with contextlib.suppress(psycopg.Error):
                advisory_unlock(conn, SCHEMA_LOCK)


def _stale(document: PlanFile, live: str, base: dict[str, str]) -> ApplyReport:
    refusal = Refusal(
        code="stale-plan",
        changed="schema",
        plan_fingerprint=document.from_fingerprint,
        database_fingerprint=live,
    )
    return ApplyReport(
        outcome="refused",
        refusal=refusal,
        error="the database moved since the plan was made; nothing was run",
        **base,
    )


def _execute_all(
    conn: psycopg.Connection[Any], sqls: list[str], base: dict[str, str]
) -> tuple[ApplyReport, int]:
    """One transaction. Until COMMIT is sent, any ending is a rollback: nothing reached
    the target. Once it is sent, only the server's answer says whether it committed.
    The caller has sent BEGIN and checked the fingerprint in this transaction."""
    try:
        for sql in sqls:
            conn.execute(sql.encode())
    except Interrupted as stop:
        conn.close()  # a closed session's open transaction is rolled back by the server
        report = ApplyReport(
            outcome="canceled",
            error="interrupted before commit; the transaction was rolled back",
            **base,
        )
        return report, stop.exit_code
    except psycopg.Error as error:
        if not conn.broken:
            conn.execute("ROLLBACK")
        return (
            ApplyReport(
                outcome="failed",
                error="a statement failed and the transaction was rolled back: "
                f"{first_line(error)}",
                **base,
            ),
            FAILED,
        )
    try:
        conn.execute("COMMIT")
    except Interrupted as stop:
        report = ApplyReport(outcome="unknown", error="interrupted while committing", **base)
        return report, stop.exit_code
    except psycopg.Error as error:
        if conn.broken:
            return (
                ApplyReport(
                    outcome="unknown",
                    error=f"the connection was lost while committing: {first_line(error)}",
                    **base,
                ),
                FAILED,
            )
        return (
            ApplyReport(
                outcome="failed",
                error=f"the commit failed and was rolled back: {first_line(error)}",
                **base,
            ),
            FAILED,
        )
    return ApplyReport(outcome="applied", statements=sqls, **base), OK


def _execute_each(
    conn: psycopg.Connection[Any] | mysqldb.Connection, sqls: list[str], base: dict[str, str]
) -> tuple[ApplyReport, int]:
    """tx-mode none: each statement commits alone, and the report lists exactly those that
    did. Once one has, a failure is ``unknown``: the database is between two states."""
    mode = "tx-mode none" if isinstance(conn, psycopg.Connection) else "mysql ddl commits itself"
    ran: list[str] = []
    for sql in sqls:
        try:
            conn.execute(sql.encode())
        except Interrupted as stop:
            outcome = "unknown" if ran else "canceled"
            error = f"interrupted after {len(ran)} of {len(sqls)} statements ({mode})"
            return ApplyReport(outcome=outcome, statements=ran, error=error, **base), stop.exit_code
        except DB_ERRORS as error:
            outcome = "unknown" if ran or conn.broken else "failed"
            sentence = (
                f"statement {len(ran) + 1} of {len(sqls)} failed after {len(ran)} ran "
                f"({mode}): {first_line(error)}"
            )
            return ApplyReport(outcome=outcome, statements=ran, error=sentence, **base), FAILED
        ran.append(sql)
    return ApplyReport(outcome="applied", statements=ran, **base), OK


def _apply_mysql(
    target: Target, document: PlanFile, base: dict[str, str], dry_run: bool, lock_timeout: float
) -> tuple[ApplyReport, int]:
    """A MySQL-family apply: every tx-mode runs statement by statement.

    MySQL commits each DDL statement implicitly (a ``BEGIN`` before it commits nothing
    it could later roll back), so no transaction mode can promise all or nothing. The
    statements run one by one, as ``--tx-mode none`` does on PostgreSQL: the report lists
    exactly those that ran, and a failure after the first is ``unknown`` (the database
    is between the plan's two states; a new plan from there is the way forward). The
    lock is ``GET_LOCK`` on the target database's name, and ``lock_wait_timeout`` bounds
    a statement waiting on a table's metadata lock by the same budget.
    """
    sqls = [s.sql for s in document.statements]
    database = mysqldb.database_of(target.url)
    with connect_mysql(target.url, target.connect_timeout, "the database") as conn:
        name = mysqldb.lock_name("schema-apply", database)
        if not mysqldb.get_lock(conn, name, lock_timeout if lock_timeout else -1):
            error = "the schema apply lock (GET_LOCK) was not granted within the lock timeout"
            return ApplyReport(outcome="failed", error=error, **base), FAILED
        try:
            if lock_timeout:
                conn.execute(f"SET SESSION lock_wait_timeout = {max(1, round(lock_timeout))}")
            exclude = tuple(document.exclude or ())
            live = fingerprint(mysqlschema.read_live(conn, database, exclude))
            if live != document.from_fingerprint:
                return _stale(document, live, base), FAILED
            if not sqls:
                return ApplyReport(outcome="no-changes", **base), OK
            if dry_run:
                return ApplyReport(outcome="dry-run", statements=sqls, **base), OK
            return _execute_each(conn, sqls, base)
        finally:
            with contextlib.suppress(*DB_ERRORS):
                mysqldb.release_lock(conn, name)


# --- drift ---------------------------------------------------------------------------


def drift(
    *,
    target: Target,
    dev: Target,
    schema_files: tuple[str, ...],
    exclude: tuple[str, ...],
    threshold: str,
) -> tuple[DriftReport, int]:
    if threshold not in SEVERITIES:
        raise ExecutorError(f"--severity {threshold!r} is not one of {', '.join(SEVERITIES)}")
    try:
        text = renderer(target, dev)
        desired = load_desired(dev, read_desired(schema_files), exclude)
        live = live_catalog(target, exclude)
    except ExecutorError as error:
        report = DriftReport(
            drift=False,
            failed=False,
            failure_threshold=threshold,
            highest_severity="none",
            dialect=dialect_of(target),
            findings=[],
            diff={},
            error=str(error),
        )
        return report, FAILED
    statements = plan_statements(live, desired, text)
    findings: dict[str, list[Statement]] = {}
    for statement in statements:
        findings.setdefault(statement.category, []).append(statement)
    highest = max((s.severity for s in statements), key=severity_rank, default="none")
    failed = bool(statements) and severity_rank(highest) >= severity_rank(threshold)
    report = DriftReport(
        drift=bool(statements),
        failed=failed,
        failure_threshold=threshold,
        highest_severity=highest,
        dialect=live.dialect,
        findings=[
            DriftFinding(
                category=category,
                count=len(items),
                severity=max((s.severity for s in items), key=severity_rank),
            )
            for category, items in sorted(findings.items())
        ],
        diff={category: [s.sql for s in items] for category, items in sorted(findings.items())},
    )
    return report, NEGATIVE if failed else OK
