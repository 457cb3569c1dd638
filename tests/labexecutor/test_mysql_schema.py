"""The schema engine's MySQL dialect against a real MariaDB (lab.mariadb).

The PostgreSQL side's contract (``test_schema_engine.py``): plan, apply of exactly the
plan, drift, a plan that went stale refused before anything runs. What differs is
MySQL's own: the desired schema loads into the (empty) dev database and is dropped again;
DDL commits implicitly, so an apply runs statement by statement and a failure after the
first is ``unknown`` with exactly the statements that ran. What ran is read from the
server's own general log, never from the executor's report.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.mariadb import LabMariaDB
from tests.labexecutor.mariadblab import MariaDBLab
from tests.support.mariadb import running_mariadb

pytestmark = pytest.mark.mariadb

SCHEMA = """
create table users (
  id bigint primary key, email varchar(80) not null, unique key users_email (email)
);
create table orders (
  id bigint primary key,
  user_id bigint,
  note varchar(40) default 'none',
  key orders_user (user_id),
  constraint orders_user_fk foreign key (user_id) references users (id) on delete cascade
);
"""


@pytest.fixture(scope="module")
def server() -> Iterator[LabMariaDB]:
    with running_mariadb() as db:
        yield db


class MyLab(MariaDBLab):
    def schema(self, ddl: str) -> str:
        path = self.work / "schema.sql"
        path.write_text(ddl)
        return str(path)

    def plan(self, ddl: str) -> tuple[int, dict[str, Any]]:
        out = str(self.work / "plan.json")
        code, stdout, err = self.ptah(
            "schema", "plan", "--schema-file", self.schema(ddl), "--output", out, "--json"
        )
        assert stdout, err
        return code, json.loads(stdout)

    def plan_file(self) -> dict[str, Any]:
        return dict(json.loads((self.work / "plan.json").read_text()))

    def apply(self, *extra: str) -> tuple[int, dict[str, Any]]:
        plan = str(self.work / "plan.json")
        code, stdout, err = self.ptah(
            "schema", "apply", "--plan", plan, "--auto-approve", "--json", *extra
        )
        assert stdout, err
        return code, json.loads(stdout)

    def drift(self, ddl: str, *extra: str) -> tuple[int, dict[str, Any]]:
        code, stdout, _ = self.ptah(
            "schema", "drift", "--schema-file", self.schema(ddl), "--format", "json", *extra
        )
        return code, json.loads(stdout)

    def tables(self, database: str) -> list[str]:
        return [str(row[0]) for row in self.server.query(database, "SHOW TABLES")]


@pytest.fixture
def lab(server: LabMariaDB, tmp_path: Path) -> MyLab:
    return MyLab(server, server.create_database("sch"), tmp_path, dev=server.create_database("dev"))


def test_plan_apply_converges_and_leaves_the_dev_database_empty(lab: MyLab) -> None:
    code, report = lab.plan(SCHEMA)
    assert (code, report["outcome"]) == (0, "changes")
    document = lab.plan_file()
    assert document["dialect"] == "mysql" and document["destructive"] is False
    sqls = [s["sql"] for s in document["statements"]]
    assert sqls[0].startswith("CREATE TABLE `orders` (`id` bigint(20) NOT NULL")
    assert "ALTER TABLE `orders` ADD CONSTRAINT `orders_user_fk` FOREIGN KEY" in sqls[-1]
    assert lab.tables(lab.dev_database) == []
    code, applied = lab.apply()
    assert (code, applied["outcome"], applied["statements"]) == (0, "applied", sqls)
    # Each statement ran once, by the server's own account.
    ran = lab.server.queries(lab.database)
    assert [q for q in ran if q in sqls] == sqls
    code, again = lab.plan(SCHEMA)
    assert (code, again["outcome"]) == (0, "no-changes")
    code, drift = lab.drift(SCHEMA)
    assert (code, drift["drift"], drift["dialect"]) == (0, False, "mysql")


# examples/ptahschema-mysql.yaml's desired schema, which make run converges on the lab
# cluster: planned from nothing, applied, and nothing left to plan or to drift.
EXAMPLE = Path(__file__).resolve().parents[2] / "examples/artifacts/inventory-schema/schema.sql"


def test_the_mysql_schema_example_converges(lab: MyLab) -> None:
    ddl = EXAMPLE.read_text()
    code, report = lab.plan(ddl)
    assert (code, report["outcome"]) == (0, "changes")
    code, applied = lab.apply()
    assert (code, applied["outcome"]) == (0, "applied")
    assert sorted(lab.tables(lab.database)) == ["stock", "warehouses"]
    assert lab.tables(lab.dev_database) == []
    code, again = lab.plan(ddl)
    assert (code, again["outcome"]) == (0, "no-changes")
    code, drift = lab.drift(ddl)
    assert (code, drift["drift"]) == (0, False)


CONVERGES = {
    "a foreign key with no index of its own": (
        "create table users (id bigint primary key);\n"
        "create table orders (id bigint primary key, user_id bigint,"
        " constraint orders_user_fk foreign key (user_id) references users (id));"
    ),
    "a column widened and made not null with a default": (
        "create table users (id bigint primary key, email varchar(200) not null default '');"
    ),
    "a prefix and a descending index": (
        "create table users (id bigint primary key, email varchar(80),"
        " key by_email (email(10)), key newest (id desc));"
    ),
}


@pytest.mark.parametrize("name", CONVERGES)
def test_an_applied_plan_leaves_nothing_to_plan(lab: MyLab, name: str) -> None:
    lab.server.query(lab.database, "CREATE TABLE users (id bigint primary key, email varchar(80))")
    code, report = lab.plan(CONVERGES[name])
    assert (code, report["outcome"]) == (0, "changes")
    code, applied = lab.apply()
    assert (code, applied["outcome"]) == (0, "applied"), applied
    code, again = lab.plan(CONVERGES[name])
    assert (code, again["outcome"]) == (0, "no-changes"), lab.plan_file()


def test_drift_and_a_destructive_change_are_reported_as_on_postgresql(lab: MyLab) -> None:
    lab.server.query(lab.database, "CREATE TABLE users (id bigint primary key, old int)")
    code, drift = lab.drift("create table users (id bigint primary key, email text);")
    assert (code, drift["drift"], drift["failed"], drift["highest_severity"]) == (
        1,
        True,
        True,
        "destructive",
    )
    assert drift["diff"] == {
        "columns_added": ["ALTER TABLE `users` ADD COLUMN `email` text"],
        "columns_removed": ["ALTER TABLE `users` DROP COLUMN `old`"],
    }
    code, under = lab.drift("create table users (id bigint primary key, old int);")
    assert (code, under["drift"]) == (0, False)


def test_a_plan_that_went_stale_runs_nothing(lab: MyLab) -> None:
    code, _ = lab.plan(SCHEMA)
    assert code == 0
    lab.server.query(lab.database, "CREATE TABLE intruder (id int)")
    code, report = lab.apply()
    assert (code, report["outcome"], report["refusal"]["code"]) == (2, "refused", "stale-plan")
    assert [q for q in lab.server.queries(lab.database) if q.startswith("CREATE TABLE `")] == []


# MySQL's DDL commits implicitly: whatever --tx-mode asks, a failure after the first
# statement leaves the ones before it applied, and the report names exactly those.
@pytest.mark.parametrize("mode", ["all", "none"])
def test_a_failure_mid_plan_is_unknown_with_what_ran(lab: MyLab, mode: str) -> None:
    lab.server.query(lab.database, "CREATE TABLE users (id bigint primary key, email text)")
    lab.server.query(lab.database, "INSERT INTO users VALUES (1, NULL)")
    code, _ = lab.plan(
        "create table users (id bigint primary key, n int, email varchar(9) not null);"
    )
    assert code == 0
    sqls = [s["sql"] for s in lab.plan_file()["statements"]]
    assert sqls[0] == "ALTER TABLE `users` ADD COLUMN `n` int(11)"
    code, report = lab.apply("--tx-mode", mode)
    assert (code, report["outcome"], report["statements"]) == (2, "unknown", sqls[:1])
    assert "statement 2 of 2 failed after 1 ran (mysql ddl commits itself)" in report["error"]


def test_a_dev_database_that_is_not_empty_is_refused_and_kept(lab: MyLab) -> None:
    dev = lab.dev_database
    lab.server.query(dev, "CREATE TABLE mine (id int)")
    code, report = lab.plan(SCHEMA)
    assert (code, report["outcome"]) == (2, "failed")
    assert f"the dev database {dev} is not empty (it holds base table mine)" in report["error"]
    assert lab.tables(dev) == ["mine"]


REFUSED = {
    "auto_increment": (
        "create table t (id bigint auto_increment primary key);",
        "column t.id is auto_increment, which is outside the scope",
    ),
    "check": (
        "create table t (id int, constraint positive check (id > 0));",
        "table t has a check constraint positive",
    ),
    "another database": (
        "create table mysql.t (id int);",
        "statement 1 names a table in another database",
    ),
    "a view": (
        "create view v as select 1;",
        "statement 1 (CREATE VIEW V ...) is outside the lab executor's scope",
    ),
    "does not load": ("create table t (id nosuchtype);", "statement 1 does not load"),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_desired_schema_outside_the_subset_is_refused(lab: MyLab, name: str) -> None:
    ddl, message = REFUSED[name]
    code, report = lab.plan(ddl)
    assert (code, report["outcome"]) == (2, "failed")
    assert message in report["error"]
    assert lab.tables(lab.dev_database) == []


def test_a_dev_database_of_the_other_engine_is_refused(lab: MyLab) -> None:
    lab.dev = "postgresql://nobody@127.0.0.1:1/dev"
    code, report = lab.plan(SCHEMA)
    assert (code, report["outcome"]) == (2, "failed")
    assert "the dev database and the database are different engines" in report["error"]
