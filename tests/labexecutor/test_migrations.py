"""The migrations engine against a real PostgreSQL: status, up under an approved sequence,
a history restored backwards (refused, nothing run), and the dirty/modified/out-of-order
states."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from lab.executor.migrations import write_sum
from tests.labexecutor.labkit import Lab

pytestmark = pytest.mark.postgres

FILES = {
    "1_users.sql": "create table users (id bigint primary key, email text not null);",
    "2_orders.sql": "create table orders (id bigint primary key,"
    " user_id bigint references users(id));",
    "3_index.sql": "create index orders_user on orders (user_id);\n"
    "insert into users values (1, 'a');",
    "4_note.sql": "alter table orders add column note text;\n"
    "alter table users add column name text;",
}


def directory(lab: Lab, files: dict[str, str], name: str = "migrations") -> str:
    path = lab.work / name
    path.mkdir(exist_ok=True)
    for file in path.iterdir():
        file.unlink()
    for file, text in files.items():
        (path / file).write_text(text)
    write_sum(path)
    return str(path)


def sequence(lab: Lab, versions: list[int]) -> str:
    path = lab.work / "expected.json"
    path.write_text(
        json.dumps({"migrations": [{"version": v, "version_key": str(v)} for v in versions]})
    )
    return str(path)


def up(lab: Lab, migrations: str, *extra: str) -> tuple[int, dict[str, object]]:
    result = lab.ptah("migrations", "up", "--migrations-dir", migrations, "--json", *extra)
    return result.code, json.loads(result.stdout)


def status(lab: Lab, migrations: str) -> dict[str, object]:
    result = lab.ptah("migrations", "status", "--migrations-dir", migrations, "--json")
    assert result.code == 0, result
    return dict(json.loads(result.stdout))


def states(report: dict[str, object]) -> list[tuple[int, str]]:
    return [(m["version"], m["state"]) for m in report["migrations"]]  # type: ignore[attr-defined,index]


def revisions(lab: Lab) -> list[tuple[object, ...]]:
    with psycopg.connect(lab.db) as conn:
        if conn.execute("SELECT to_regclass('ptah_lab.revisions')").fetchone() == (None,):
            return []
        return conn.execute(
            "SELECT version, dirty FROM ptah_lab.revisions ORDER BY version"
        ).fetchall()


def test_up_runs_the_approved_sequence_and_status_follows(lab: Lab) -> None:
    migrations = directory(lab, FILES)
    first = status(lab, migrations)
    assert first["current_version"] == 0 and first["has_pending_changes"] is True
    assert states(first) == [(1, "pending"), (2, "pending"), (3, "pending"), (4, "pending")]
    code, run = up(lab, migrations, "--expect-sequence", sequence(lab, [1, 2, 3, 4]))
    assert (code, run["outcome"], run["planned"], run["applied"]) == (
        0,
        "applied",
        [1, 2, 3, 4],
        [1, 2, 3, 4],
    )
    assert run["direction"] == "up" and run["contract_version"] == 1
    after = status(lab, migrations)
    assert after["current_version"] == 4 and after["has_pending_changes"] is False
    assert states(after) == [(v, "applied") for v in (1, 2, 3, 4)]
    # Nothing pending: the guard still runs, and an empty approval matches.
    code, again = up(lab, migrations, "--expect-sequence", sequence(lab, []))
    assert (code, again["outcome"], again["applied"]) == (0, "up-to-date", [])


def test_a_history_restored_backwards_is_refused_before_anything_runs(lab: Lab) -> None:
    migrations = directory(lab, FILES)
    assert (
        up(lab, migrations, "--expect-sequence", sequence(lab, [1, 2, 3]), "--tx-mode", "file")[0]
        == 2
    )
    # The approval was [4] against a database at 3; the database is then restored to 1.
    directory(lab, {k: v for k, v in FILES.items() if not k.startswith("4")}, "first3")
    code, _ = up(lab, str(lab.work / "first3"))
    assert code == 0 and revisions(lab) == [(1, False), (2, False), (3, False)]
    with psycopg.connect(lab.db, autocommit=True) as conn:
        conn.execute("DROP TABLE orders; DELETE FROM ptah_lab.revisions WHERE version > 1")
    code, run = up(lab, migrations, "--expect-sequence", sequence(lab, [4]))
    assert code == 2
    assert (run["outcome"], run["planned"], run["applied"]) == ("failed", [2, 3, 4], [])
    assert run["error"] == (
        "the selected migrations are [2 3 4], the approved sequence is [4]: "
        "the history moved after approval, so nothing was run"
    )
    assert revisions(lab) == [(1, False)]
    with psycopg.connect(lab.db) as conn:
        assert conn.execute("SELECT to_regclass('public.orders')").fetchone() == (None,)


def test_the_guard_refuses_a_first_run_whose_selection_differs(lab: Lab) -> None:
    migrations = directory(lab, FILES)
    code, run = up(lab, migrations, "--expect-sequence", sequence(lab, [1, 2, 3]))
    assert (code, run["outcome"], run["applied"]) == (2, "failed", [])
    assert revisions(lab) == []  # the revision table was never even created


def test_a_failing_file_rolls_back_and_reports_partial(lab: Lab) -> None:
    files = dict(FILES)
    files["3_index.sql"] = (
        "create index orders_user on orders (user_id);\ninsert into nowhere values (1);"
    )
    migrations = directory(lab, files)
    code, run = up(lab, migrations)
    assert code == 2
    assert (run["outcome"], run["planned"], run["applied"]) == ("partial", [1, 2, 3, 4], [1, 2])
    assert "version 3 failed" in str(run["error"])
    assert revisions(lab) == [(1, False), (2, False)]
    with psycopg.connect(lab.db) as conn:
        assert conn.execute("SELECT to_regclass('public.orders_user')").fetchone() == (None,)


def test_mode_all_rolls_back_every_file(lab: Lab) -> None:
    files = dict(FILES)
    files["4_note.sql"] = "alter table nowhere add column x int;"
    migrations = directory(lab, files)
    code, run = up(lab, migrations, "--tx-mode", "all")
    assert (code, run["outcome"], run["applied"]) == (2, "failed", [])
    assert revisions(lab) == []
    with psycopg.connect(lab.db) as conn:
        assert conn.execute("SELECT to_regclass('public.users')").fetchone() == (None,)


def test_mode_none_leaves_a_dirty_revision_that_blocks_the_next_run(lab: Lab) -> None:
    files = dict(FILES)
    files["2_orders.sql"] = "create table orders (id bigint primary key);\nselect 1/0;"
    migrations = directory(lab, files)
    code, run = up(lab, migrations, "--tx-mode", "none")
    assert (code, run["outcome"], run["applied"]) == (2, "partial", [1])
    report = status(lab, migrations)
    assert report["dirty_revision"] == {
        "version": 2,
        "applied": 1,
        "total": 2,
        "error": "division by zero",
    }
    assert states(report)[:2] == [(1, "applied"), (2, "dirty")]
    code, again = up(lab, migrations)
    assert (code, again["outcome"], again["applied"]) == (2, "failed", [])
    assert "dirty" in str(again["error"])


def test_modified_and_out_of_order_are_reported_and_block(lab: Lab) -> None:
    first = {"1_users.sql": FILES["1_users.sql"], "3_other.sql": "create table other (id int);"}
    migrations = directory(lab, first)
    assert up(lab, migrations)[0] == 0
    changed = {
        **first,
        "1_users.sql": FILES["1_users.sql"] + "\n-- edited after it ran",
        "2_orders.sql": FILES["2_orders.sql"],
        "4_name.sql": "alter table users add column name text;",
    }
    migrations = directory(lab, changed)
    report = status(lab, migrations)
    assert states(report) == [(1, "modified"), (2, "out-of-order"), (3, "applied"), (4, "pending")]
    code, run = up(lab, migrations)
    assert (code, run["outcome"], run["applied"]) == (2, "failed", [])
    assert "no longer matches its file" in str(run["error"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"migrations": [{"version": 1}]}', None),
        ('{"migrations": [{"version": 0}]}', "is not"),
        ('{"migrations": [{"version": 1, "extra": true}]}', "is not"),
        ("{}", "is not"),
        ('{"migrations": []} {"migrations": []}', "is not"),
        ('{"migrations": [{"version": "1"}]}', "is not"),
    ],
)
def test_expected_sequence_is_parsed_strictly(lab: Lab, content: str, message: str | None) -> None:
    migrations = directory(lab, {"1_users.sql": FILES["1_users.sql"]})
    path = lab.work / "expected.json"
    path.write_text(content)
    result = lab.ptah(
        "migrations", "up", "--migrations-dir", migrations, "--json", "--expect-sequence", str(path)
    )
    if message is None:
        assert result.code == 0 and json.loads(result.stdout)["applied"] == [1]
        return
    assert result.code == 2 and message in result.stderr
    assert revisions(lab) == []


def test_a_directory_that_does_not_match_its_sum_is_refused(lab: Lab) -> None:
    migrations = directory(lab, FILES)
    Path(migrations, "2_orders.sql").write_text("drop table users;")
    result = lab.ptah("migrations", "up", "--migrations-dir", migrations, "--json")
    assert result.code == 2 and "does not match its ptah.sum" in result.stderr
    assert json.loads(result.stdout)["outcome"] == "failed"
    assert revisions(lab) == []


def test_an_empty_directory_is_up_to_date(lab: Lab) -> None:
    empty = lab.work / "empty"
    empty.mkdir()
    report = status(lab, str(empty))
    assert (report["total_migrations"], report["has_pending_changes"]) == (0, False)
    code, run = up(lab, str(empty), "--expect-sequence", sequence(lab, []))
    assert (code, run["outcome"]) == (0, "up-to-date")
    code, run = up(lab, str(empty), "--expect-sequence", sequence(lab, [4]))
    assert (code, run["outcome"]) == (2, "failed")
