"""The migrations engine's MySQL dialect against a real MariaDB (lab.mariadb).

The same contract as PostgreSQL's (``test_migrations.py``): status, up under an approved
sequence, a history that moved refused before anything runs, a failure left dirty and
blocking, the lock. What differs is MySQL's own: DDL commits implicitly, so every
migration runs statement by statement with its revision row written dirty first; the
lock is ``GET_LOCK``. What ran is read from the server's own general log, never from
the executor's report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from lab.executor.migrations import write_sum
from lab.executor.mysqldb import lock_name
from lab.mariadb import LabMariaDB
from tests.labexecutor.mariadblab import MariaDBLab
from tests.support.mariadb import running_mariadb

pytestmark = pytest.mark.mariadb

FILES = {
    "1_users.sql": "create table users (id bigint primary key, email text not null);",
    "2_orders.sql": "create table orders (id bigint primary key, user_id bigint,"
    " foreign key (user_id) references users (id));",
    "3_seed.sql": "insert into users values (1, 'a');\n"
    "create index orders_user on orders (user_id);",
}


@pytest.fixture(scope="module")
def server() -> Iterator[LabMariaDB]:
    with running_mariadb() as db:
        yield db


class MyLab(MariaDBLab):
    def directory(self, files: dict[str, str]) -> str:
        path = self.work / "migrations"
        path.mkdir(exist_ok=True)
        for file in path.iterdir():
            file.unlink()
        for name, text in files.items():
            (path / name).write_text(text)
        write_sum(path)
        return str(path)

    def sequence(self, versions: list[int]) -> str:
        path = self.work / "expected.json"
        path.write_text(
            json.dumps({"migrations": [{"version": v, "version_key": str(v)} for v in versions]})
        )
        return str(path)

    def up(self, migrations: str, *extra: str) -> tuple[int, dict[str, object]]:
        code, out, _ = self.ptah(
            "migrations", "up", "--migrations-dir", migrations, "--json", *extra
        )
        return code, json.loads(out)

    def revisions(self) -> list[tuple[object, ...]]:
        tables = self.server.query(self.database, "SHOW TABLES LIKE 'ptah_lab_revisions'")
        if not tables:
            return []
        rows = self.server.query(
            self.database, "SELECT version, dirty FROM ptah_lab_revisions ORDER BY version"
        )
        return [(version, bool(dirty)) for version, dirty in rows]

    def ran(self, statement: str) -> int:
        """How often the server ran ``statement`` in this database (its general log)."""
        return self.server.queries(self.database).count(statement)


@pytest.fixture
def lab(server: LabMariaDB, tmp_path: Path) -> MyLab:
    return MyLab(server, server.create_database("mig"), tmp_path)


def test_up_runs_the_approved_sequence_once_and_status_follows(lab: MyLab) -> None:
    migrations = lab.directory(FILES)
    code, out, _ = lab.ptah("migrations", "status", "--migrations-dir", migrations, "--json")
    assert code == 0 and json.loads(out)["has_pending_changes"] is True
    code, run = lab.up(migrations, "--expect-sequence", lab.sequence([1, 2, 3]))
    assert (code, run["outcome"], run["applied"]) == (0, "applied", [1, 2, 3])
    assert lab.revisions() == [(1, False), (2, False), (3, False)]
    # Again: nothing pending, the empty approval matches, and no DDL runs a second time.
    code, again = lab.up(migrations, "--expect-sequence", lab.sequence([]))
    assert (code, again["outcome"]) == (0, "up-to-date")
    assert lab.ran(FILES["1_users.sql"].rstrip(";")) == 1
    assert lab.ran("create index orders_user on orders (user_id)") == 1


def test_a_history_that_moved_after_approval_runs_nothing(lab: MyLab) -> None:
    migrations = lab.directory(FILES)
    code, run = lab.up(migrations, "--expect-sequence", lab.sequence([2, 3]))
    assert (code, run["outcome"], run["applied"]) == (2, "failed", [])
    assert run["error"] == (
        "the selected migrations are [1 2 3], the approved sequence is [2 3]: "
        "the history moved after approval, so nothing was run"
    )
    assert lab.revisions() == []
    assert lab.ran(FILES["1_users.sql"].rstrip(";")) == 0


# MySQL's DDL commits implicitly: whatever --tx-mode asks, a failed migration keeps the
# statements before the failure and is left dirty, blocking the next run until repaired.
@pytest.mark.parametrize("mode", ["all", "file", "none"])
def test_a_failure_is_left_dirty_in_every_mode_and_blocks(lab: MyLab, mode: str) -> None:
    files = dict(FILES)
    files["2_orders.sql"] = (
        "create table orders (id bigint primary key);\ninsert into nowhere values (1);"
    )
    migrations = lab.directory(files)
    code, run = lab.up(migrations, "--tx-mode", mode)
    assert (code, run["outcome"], run["applied"]) == (2, "partial", [1])
    assert "version 2 failed at statement 2 and is left dirty" in str(run["error"])
    assert lab.revisions() == [(1, False), (2, True)]
    assert lab.ran("create table orders (id bigint primary key)") == 1
    code, again = lab.up(migrations)
    assert (code, again["outcome"], again["applied"]) == (2, "failed", [])
    assert "dirty" in str(again["error"])
    assert lab.ran("create table orders (id bigint primary key)") == 1


def test_the_migration_lock_is_get_lock_and_a_held_one_runs_nothing(lab: MyLab) -> None:
    migrations = lab.directory(FILES)
    holder = pymysql.connect(unix_socket=str(lab.server.socket), user="root", autocommit=True)
    try:
        with holder.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 0)", (lock_name("migrations", lab.database),))
            assert cur.fetchone() == (1,)
        code, run = lab.up(migrations)
        assert (code, run["outcome"], run["applied"]) == (2, "failed", [])
        assert "lock was not granted within the lock timeout" in str(run["error"])
        assert lab.revisions() == []
    finally:
        holder.close()
    code, run = lab.up(migrations)
    assert (code, run["outcome"]) == (0, "applied")


def test_a_lock_name_is_per_database_and_within_mysqls_limit() -> None:
    assert lock_name("migrations", "orders") != lock_name("migrations", "billing")
    assert len(lock_name("migrations", "x" * 64)) == 64
