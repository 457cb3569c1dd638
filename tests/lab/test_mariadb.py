"""lab.mariadb: Debian's MariaDB started like the lab's PostgreSQL, on a real server.

One server for the module (a cold start is ~2 s): it runs as ``mysql``, listens on
loopback and on the address it is given, hands out per-test databases, lets the
bridge's clients in only with a password, reads back what it ran from its own general
log, and is gone (process and directory) after ``stop``. The general-log reader is
also a pure function, held by a table.
"""

from __future__ import annotations

import ipaddress
import pwd
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from lab.mariadb import LabMariaDB, MariaDBError, client_hosts, statements_in
from tests.support.mariadb import running_mariadb

pytestmark = pytest.mark.mariadb

# A second loopback address stands in for the lab bridge: the server listens there
# too, and a client that binds to it arrives from an address "in the pod subnet".
BRIDGE = "127.0.0.2"
SUBNET = ipaddress.IPv4Network("127.0.0.2/32")


@pytest.fixture(scope="module")
def server() -> Iterator[LabMariaDB]:
    """Fails (never skips) when MariaDB is not installed or cannot start."""
    with running_mariadb(listen=[BRIDGE], clients=[SUBNET]) as db:
        yield db


def _uid_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def test_the_server_runs_as_mysql_never_as_root(server: LabMariaDB) -> None:
    assert server.pid is not None
    # The server itself (runuser's child when the tests run as root) is mysql's.
    pids = [server.pid, *_children(server.pid)]
    names = {pid: Path(f"/proc/{pid}/comm").read_text().strip() for pid in pids}
    mariadbd = [pid for pid, name in names.items() if name == "mariadbd"]
    assert mariadbd, names
    assert {_uid_of(pid) for pid in mariadbd} == {pwd.getpwnam("mysql").pw_uid}


def test_each_database_is_new_and_reachable_by_its_url(server: LabMariaDB) -> None:
    first, second = server.create_database("pertest"), server.create_database("pertest")
    assert first != second
    assert first.startswith(f"mysql://root@127.0.0.1:{server.port}/pertest_")
    name = first.rsplit("/", 1)[1]
    assert server.query(name, "SELECT DATABASE()") == [(name,)]


# Who may log in over the "bridge": an account of create_user with its password.
# Control row first; each other row changes one thing and must be refused.
ACCESS_ROWS = [
    ("control: the account, its password, from the subnet", "app", "s3cret", None),
    ("wrong password", "app", "wrong", "Access denied"),
    ("no password", "app", None, "Access denied"),
    ("root is loopback's and the socket's only", "root", None, "Access denied"),
    ("an account that does not exist", "nobody", "s3cret", "Access denied"),
]


@pytest.fixture(scope="module")
def app_database(server: LabMariaDB) -> str:
    server.create_user("app", "s3cret")
    server.create_database_named("app_db", owner="app")
    return "app_db"


@pytest.mark.parametrize(("row", "user", "password", "refused"), ACCESS_ROWS)
def test_the_bridge_lets_in_only_an_account_with_its_password(
    server: LabMariaDB,
    app_database: str,
    row: str,
    user: str,
    password: str | None,
    refused: str | None,
) -> None:
    def login() -> object:
        conn = pymysql.connect(
            host=BRIDGE,
            port=server.port,
            bind_address=BRIDGE,
            user=user,
            password=password or "",
            database=app_database,
            connect_timeout=10,
        )
        with conn, conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            return cur.fetchone()

    if refused is None:
        assert login() == (f"app@{client_hosts([SUBNET])[0]}",), row
        return
    with pytest.raises(pymysql.err.OperationalError, match=refused):
        login()


def test_the_general_log_counts_a_statement_the_server_ran(server: LabMariaDB) -> None:
    url = server.create_database("ddl")
    name = url.rsplit("/", 1)[1]
    conn = pymysql.connect(
        host="127.0.0.1", port=server.port, user="root", database=name, autocommit=True
    )
    with conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE widgets (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO widgets VALUES (1)")
    ran = server.queries(name)
    assert ran.count("CREATE TABLE widgets (id INT PRIMARY KEY)") == 1
    assert "INSERT INTO widgets VALUES (1)" in ran
    # Another database's log is its own.
    assert "CREATE TABLE widgets (id INT PRIMARY KEY)" not in server.queries("pertest_1")


# statements_in: (thread, command, argument) rows of mysql.general_log. Control row
# first; every other row changes one thing and the DDL is no longer counted in "app".
LOG_ROWS = [
    ("control: connected to app", [(1, "Connect", "root@localhost on app using TCP/IP")], 1),
    ("connected to another database", [(1, "Connect", "root@localhost on other using Socket")], 0),
    ("connected to none", [(1, "Connect", "root@localhost as anonymous on  using TCP/IP")], 0),
    (
        "moved away by Init DB",
        [(1, "Connect", "root@localhost on app using TCP/IP"), (1, "Init DB", "other")],
        0,
    ),
    (
        "moved away by USE",
        [(1, "Connect", "root@localhost on app using TCP/IP"), (1, "Query", "use `other`")],
        0,
    ),
    ("another thread's database", [(2, "Connect", "root@localhost on app using TCP/IP")], 0),
]


@pytest.mark.parametrize(("row", "before", "counted"), LOG_ROWS)
def test_a_statement_counts_for_the_database_its_session_was_in(
    row: str, before: list[tuple[object, ...]], counted: int
) -> None:
    rows = [*before, (1, "Query", "CREATE TABLE t (id INT)")]
    assert statements_in(rows, "app").count("CREATE TABLE t (id INT)") == counted, row


def test_an_account_host_is_mariadbs_address_and_netmask() -> None:
    assert client_hosts([ipaddress.IPv4Network("10.77.0.0/24")]) == ["10.77.0.0/255.255.255.0"]


def test_a_name_the_lab_would_have_to_quote_is_refused(server: LabMariaDB) -> None:
    with pytest.raises(MariaDBError, match="not a lab database or account name"):
        server.create_database_named("x`; DROP DATABASE mysql; --")


def test_stop_leaves_no_process_and_no_directory() -> None:
    db = LabMariaDB()
    db.start()
    assert db.pid is not None
    root, pid = db.root, db.pid
    children = _children(pid)
    db.stop()
    assert not root.exists()
    for gone in [pid, *children]:
        assert not Path(f"/proc/{gone}").exists() or (
            Path(f"/proc/{gone}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        )
