"""The MySQL dialect's pure parts, as tables: the catalog reader's rules over
``information_schema`` rows, the DDL renderer through the shared diff, and the widening
rule. Each table has a control row and rows that change one thing each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from lab.executor.catalog import Catalog, Column, Constraint, Index, OutOfScope, Table
from lab.executor.diff import plan_statements
from lab.executor.mysqlddl import MYSQL, widens
from lab.executor.mysqlschema import catalog_from_rows, qualified_name_problem

DB = "shop"


Rows = dict[str, list[tuple[Any, ...]]]
Change = Callable[[Rows], None]


def _rows() -> Rows:
    """A users/orders pair as MariaDB 10.11's information_schema reports it."""
    return {
        "tables": [
            ("orders", "BASE TABLE", "InnoDB", "utf8mb4_general_ci", ""),
            ("users", "BASE TABLE", "InnoDB", "utf8mb4_general_ci", ""),
        ],
        "columns": [
            ("orders", "id", "bigint(20)", "NO", None, "", None),
            ("orders", "user_id", "bigint(20)", "YES", "NULL", "", None),
            ("orders", "note", "varchar(40)", "NO", "'none'", "", "utf8mb4_general_ci"),
            ("users", "id", "bigint(20)", "NO", None, "", None),
            ("users", "email", "varchar(80)", "NO", None, "", "utf8mb4_general_ci"),
        ],
        "indexes": [
            ("orders", "PRIMARY", 0, "id", None, "A", "BTREE"),
            ("orders", "orders_user", 1, "user_id", None, "A", "BTREE"),
            ("users", "PRIMARY", 0, "id", None, "A", "BTREE"),
            ("users", "users_email", 0, "email", None, "A", "BTREE"),
        ],
        "foreign_keys": [
            ("orders", "orders_user_fk", "user_id", DB, "users", "id", "RESTRICT", "CASCADE"),
        ],
        "checks": [],
    }


def test_the_control_rows_read_as_the_subset() -> None:
    catalog = catalog_from_rows(_rows(), DB, ())
    assert catalog.dialect == "mysql"
    orders = catalog.table("orders")
    assert orders is not None
    assert orders.columns == (
        Column("id", "bigint(20)", True, None),
        Column("user_id", "bigint(20)", False, None),
        Column("note", "varchar(40)", True, "'none'"),
    )
    assert orders.constraints == (
        Constraint("PRIMARY", "p", "PRIMARY KEY (`id`)"),
        Constraint(
            "orders_user_fk",
            "f",
            "FOREIGN KEY (`user_id`) REFERENCES `users` (`id`) ON DELETE CASCADE "
            "ON UPDATE RESTRICT",
            "users",
        ),
    )
    assert orders.indexes == (
        Index("orders_user", "CREATE INDEX `orders_user` ON `orders` (`user_id`)"),
    )
    users = catalog.table("users")
    assert users is not None and Constraint("users_email", "u", "UNIQUE (`email`)") in (
        users.constraints
    )


def _set(section: str, index: int, position: int, value: object) -> Change:
    def change(rows: Rows) -> None:
        row = list(rows[section][index])
        row[position] = value
        rows[section][index] = tuple(row)

    return change


def _add(section: str, row: tuple[Any, ...]) -> Change:
    return lambda rows: rows[section].append(row)


REFUSED: dict[str, tuple[Change, str]] = {
    "another engine": (_set("tables", 0, 2, "MyISAM"), "uses the MyISAM engine"),
    "partitioned": (_set("tables", 0, 4, "partitioned"), "table orders is partitioned"),
    "auto_increment": (
        _set("columns", 0, 5, "auto_increment"),
        "column orders.id is auto_increment",
    ),
    "generated": (
        _set("columns", 2, 5, "STORED GENERATED"),
        "column orders.note is stored generated",
    ),
    "own collation": (
        _set("columns", 2, 6, "utf8mb4_bin"),
        "column orders.note has its own collation",
    ),
    "check": (_add("checks", ("orders", "note_len")), "has a check constraint note_len"),
    "fulltext": (_set("indexes", 1, 6, "FULLTEXT"), "orders_user of orders is a fulltext"),
    "expression index": (_set("indexes", 1, 3, None), "is on an expression"),
    "foreign key elsewhere": (
        _set("foreign_keys", 0, 3, "billing"),
        "foreign key orders_user_fk of orders points outside the database",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_a_managed_table_outside_the_subset_is_refused(name: str) -> None:
    change, message = REFUSED[name]
    rows = _rows()
    change(rows)
    with pytest.raises(OutOfScope, match=message):
        catalog_from_rows(rows, DB, ())


def test_an_excluded_table_and_a_view_are_left_alone() -> None:
    rows = _rows()
    _set("tables", 0, 2, "MyISAM")(rows)
    rows["tables"].append(("recent", "VIEW", None, None, None))
    catalog = catalog_from_rows(rows, DB, ("ord*",))
    assert [t.name for t in catalog.tables] == ["users"]


def test_a_prefix_or_descending_unique_key_stays_an_index() -> None:
    rows = _rows()
    _set("indexes", 3, 4, 10)(rows)
    users = catalog_from_rows(rows, DB, ()).table("users")
    assert users is not None
    assert users.indexes == (
        Index("users_email", "CREATE UNIQUE INDEX `users_email` ON `users` (`email`(10))"),
    )
    assert MYSQL.unique_index(users.indexes[0])


# --- the renderer through the shared diff ----------------------------------------------

ID = Column("id", "bigint(20)", True, None)
NOTE = Column("note", "varchar(40)", False, None)
PK = Constraint("PRIMARY", "p", "PRIMARY KEY (`id`)")
BASE = Catalog((Table("orders", (ID, NOTE), (PK,), ()),), "mysql")


def _with(**change: object) -> Catalog:
    table = replace(BASE.tables[0], **change)  # type: ignore[arg-type]
    return Catalog((table,), "mysql")


def _plan(live: Catalog, desired: Catalog) -> list[tuple[str, str]]:
    return [(s.sql, s.severity) for s in plan_statements(live, desired, MYSQL)]


RENDERED = {
    "control": (BASE, []),
    "column added": (
        _with(columns=(ID, NOTE, Column("qty", "int(11)", True, "0"))),
        [("ALTER TABLE `orders` ADD COLUMN `qty` int(11) NOT NULL DEFAULT 0", "safe")],
    ),
    "column dropped": (
        _with(columns=(ID,)),
        [("ALTER TABLE `orders` DROP COLUMN `note`", "destructive")],
    ),
    "column widened": (
        _with(columns=(ID, replace(NOTE, type="varchar(80)"))),
        [("ALTER TABLE `orders` MODIFY COLUMN `note` varchar(80)", "warning")],
    ),
    "column narrowed": (
        _with(columns=(ID, replace(NOTE, type="varchar(10)"))),
        [("ALTER TABLE `orders` MODIFY COLUMN `note` varchar(10)", "destructive")],
    ),
    "column made not null with a default": (
        _with(columns=(ID, replace(NOTE, not_null=True, default="''"))),
        [("ALTER TABLE `orders` MODIFY COLUMN `note` varchar(40) NOT NULL DEFAULT ''", "warning")],
    ),
    "index added": (
        _with(indexes=(Index("n", "CREATE INDEX `n` ON `orders` (`note`)"),)),
        [("CREATE INDEX `n` ON `orders` (`note`)", "safe")],
    ),
    "unique key added": (
        _with(constraints=(PK, Constraint("u", "u", "UNIQUE (`note`)"))),
        [("ALTER TABLE `orders` ADD CONSTRAINT `u` UNIQUE (`note`)", "warning")],
    ),
    "primary key dropped": (
        _with(constraints=()),
        [("ALTER TABLE `orders` DROP PRIMARY KEY", "destructive")],
    ),
    "table dropped": (
        Catalog((), "mysql"),
        [("DROP TABLE `orders`", "destructive")],
    ),
}


@pytest.mark.parametrize("name", RENDERED)
def test_each_change_renders_as_mysql_ddl(name: str) -> None:
    desired, expected = RENDERED[name]
    assert _plan(BASE, desired) == expected


def test_a_new_table_and_a_dropped_index_and_foreign_key_render_as_mysql_ddl() -> None:
    fk = Constraint("fk", "f", "FOREIGN KEY (`id`) REFERENCES `users` (`id`)", "users")
    index = Index("n", "CREATE INDEX `n` ON `orders` (`note`)")
    live = _with(constraints=(PK, fk), indexes=(index,))
    assert _plan(live, BASE) == [
        ("ALTER TABLE `orders` DROP FOREIGN KEY `fk`", "destructive"),
        ("DROP INDEX `n` ON `orders`", "destructive"),
    ]
    assert _plan(Catalog((), "mysql"), BASE) == [
        (
            "CREATE TABLE `orders` (`id` bigint(20) NOT NULL, `note` varchar(40), "
            "PRIMARY KEY (`id`))",
            "safe",
        )
    ]


WIDENS = [
    ("int(11)", "bigint(20)", True),
    ("bigint(20)", "int(11)", False),
    ("int(10) unsigned", "bigint(20)", True),
    ("int(11)", "int(10) unsigned", False),
    ("varchar(40)", "varchar(80)", True),
    ("varchar(80)", "varchar(40)", False),
    ("varchar(40)", "text", True),
    ("varchar(20000)", "text", False),
    ("text", "longtext", True),
    ("decimal(10,2)", "decimal(12,2)", True),
    ("decimal(10,2)", "decimal(10,3)", False),
    ("float", "double", True),
    ("varchar(10)", "int(11)", False),
]


@pytest.mark.parametrize(("old", "new", "expected"), WIDENS)
def test_widening_is_judged_per_mysql_type(old: str, new: str, expected: bool) -> None:
    assert widens(old, new) is expected


QUALIFIED = [
    ("create table t (id int)", False),
    ("create table other.t (id int)", True),
    ("create table `other`.`t` (id int)", True),
    ("alter table t add foreign key (id) references other.u (id)", True),
    ("create table t (note varchar(9) default 'a.b', price decimal(5,2) default 1.5)", False),
]


@pytest.mark.parametrize(("statement", "refused"), QUALIFIED)
def test_a_name_in_another_database_is_refused(statement: str, refused: bool) -> None:
    assert (qualified_name_problem(statement, 1) is not None) is refused
