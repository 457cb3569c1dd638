"""A throwaway MariaDB server for the lab: the MySQL family beside ``lab.postgres``.

MySQL 8.4 is not in the package registries these machines reach; Debian's
``mariadb-server`` (10.11, ``make mariadb``) is, and it speaks the same protocol and,
for what ptah does, the same SQL (README's support table says what differs).

``mariadb-install-db`` writes a fresh data directory inside a temporary directory owned
by the ``mysql`` user, and ``mariadbd`` runs as that user in the foreground (never as
root). Like the lab's PostgreSQL it always listens on 127.0.0.1 and on a unix socket
inside that directory, where ``root`` connects without a password (only this machine's
own processes reach those); ``make run`` also gives it the bridge's address
(``listen``) and the pod subnet (``clients``), whose users need a password.

The general log goes to the ``mysql.general_log`` table: ``queries(database)`` reads
from it what the server itself ran in one database, which is how a test proves a DDL
statement ran once without trusting the executor that sent it. ``stop`` shuts the
server down, checks that ``mariadbd`` is gone and removes the directory.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pymysql

from lab.postgres import free_port

__all__ = ["INSTALL_DB", "MARIADBD", "LabMariaDB", "MariaDBError", "client_hosts"]

MARIADBD = Path("/usr/sbin/mariadbd")
INSTALL_DB = Path("/usr/bin/mariadb-install-db")
# mariadbd needs a few seconds cold; a loaded 2-core machine needs more.
_START_SECONDS = 60
_STOP_SECONDS = 30
# A database name the lab creates: identifiers it never has to quote.
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
# "user[user] @ host [ip] on DB using TCP/IP": the Connect row of the general log.
_CONNECT_DB = re.compile(r" on (\S+) using ")


class MariaDBError(Exception):
    """The lab's MariaDB could not be started, used or stopped."""


def _as_mysql(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "mysql", "--", *argv]


def client_hosts(clients: Sequence[ipaddress.IPv4Network]) -> list[str]:
    """The account hosts for ``clients``: MariaDB's ``address/netmask`` form.

    MariaDB has no CIDR suffix for an account's host; ``10.77.0.0/255.255.255.0`` is
    its way of saying ``10.77.0.0/24``.
    """
    return [f"{network.network_address}/{network.netmask}" for network in clients]


class LabMariaDB:
    """One MariaDB server in its own temporary directory."""

    def __init__(
        self,
        *,
        listen: Sequence[str] = (),
        clients: Sequence[ipaddress.IPv4Network] = (),
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ptah-lab-mariadb-"))
        self.data = self.root / "data"
        self.socket = self.root / "mariadb.sock"
        self.addresses = ("127.0.0.1", *listen)
        self.clients = tuple(clients)
        self.port = free_port(self.addresses)
        self.process: subprocess.Popen[bytes] | None = None
        self._serial = 0

    @property
    def log_path(self) -> Path:
        return self.root / "error.log"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam("mysql")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        done = subprocess.run(
            _as_mysql(
                [
                    str(INSTALL_DB),
                    "--no-defaults",
                    f"--datadir={self.data}",
                    # root over the socket and loopback without a password, as the lab's
                    # PostgreSQL trusts its socket and loopback; the bridge never gets it.
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                ]
            ),
            check=False,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise MariaDBError(
                f"mariadb-install-db failed with exit code {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )
        argv = [
            str(MARIADBD),
            "--no-defaults",
            f"--datadir={self.data}",
            f"--socket={self.socket}",
            f"--pid-file={self.root / 'mariadbd.pid'}",
            f"--log-error={self.log_path}",
            f"--port={self.port}",
            # A list since 10.11: loopback always, the bridge when make run asks.
            f"--bind-address={','.join(self.addresses)}",
            "--skip-name-resolve",
            "--skip-log-bin",
            # The general log, as a table: what the server ran, read back by queries().
            "--general-log=1",
            "--log-output=TABLE",
            # A throwaway server: no durability across a machine crash is wanted.
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--innodb-buffer-pool-size=64M",
            "--max-connections=60",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_bin",
        ]
        # Its own session: a Ctrl-C meant for the test run reaches the server only
        # through stop(), which waits for it.
        self.process = subprocess.Popen(
            _as_mysql(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_ready()
        # root from loopback TCP as well as the socket: the executor and the runner
        # reach a database by URL, and a URL names a host.
        with self._root() as conn, conn.cursor() as cur:
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")

    def _wait_ready(self) -> None:
        # A bounded poll of the error log: mariadbd writes "ready for connections" once
        # it listens on every address. Polling by logging in instead would leave the
        # half-open sockets of the attempts made before that.
        deadline = time.monotonic() + _START_SECONDS
        while "ready for connections" not in self._log_tail():
            assert self.process is not None
            if self.process.poll() is not None:
                raise MariaDBError(
                    f"mariadbd exited with code {self.process.returncode}\n{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise MariaDBError(
                    f"mariadbd did not answer within {_START_SECONDS} s\n{self._log_tail()}"
                )
            time.sleep(0.1)

    def _log_tail(self) -> str:
        return self.log_path.read_text()[-2000:] if self.log_path.exists() else ""

    def _root(self, database: str | None = None) -> pymysql.connections.Connection[Any]:
        return pymysql.connect(
            unix_socket=str(self.socket), user="root", database=database, autocommit=True
        )

    def url(
        self,
        dbname: str = "mysql",
        *,
        user: str = "root",
        password: str | None = None,
        host: str = "127.0.0.1",
    ) -> str:
        credential = quote(user, safe="")
        if password is not None:
            credential += ":" + quote(password, safe="")
        return f"mysql://{credential}@{host}:{self.port}/{dbname}"

    def create_database(self, prefix: str = "t") -> str:
        """A new database ``<prefix>_<n>``; root's URL for it on loopback."""
        self._serial += 1
        name = f"{prefix}_{self._serial}"
        self.create_database_named(name)
        return self.url(name)

    def create_database_named(self, name: str, *, owner: str | None = None) -> None:
        """A database; ``owner`` (an account of ``create_user``) gets every right on it."""
        _check_name(name)
        with self._root() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            if owner is not None:
                _check_name(owner)
                for host in self._user_hosts():
                    cur.execute(f"GRANT ALL PRIVILEGES ON `{name}`.* TO %s@%s", (owner, host))

    def create_user(self, name: str, password: str) -> None:
        """An account for the bridge's clients (and loopback), with a password.

        It may create databases (what ptah's dev database needs) and holds every right
        on the ones it is given by ``create_database_named(owner=...)``.
        """
        _check_name(name)
        with self._root() as conn, conn.cursor() as cur:
            for host in self._user_hosts():
                cur.execute("CREATE USER %s@%s IDENTIFIED BY %s", (name, host, password))
                cur.execute("GRANT CREATE ON *.* TO %s@%s", (name, host))

    def _user_hosts(self) -> list[str]:
        return ["127.0.0.1", *client_hosts(self.clients)]

    def query(self, database: str, text: str) -> list[tuple[object, ...]]:
        """Rows of one read, as root over the socket."""
        with self._root(database) as conn, conn.cursor() as cur:
            cur.execute(text)
            return list(cur.fetchall())

    def queries(self, database: str) -> list[str]:
        """Every statement the server ran while a session's database was ``database``.

        Read from the server's own general log: a session's database is the one its
        Connect row names, changed by ``Init DB`` (a client's ``select_db``). A ``USE``
        statement is followed too. The lab's own reads of the log are left out.
        """
        with self._root() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT thread_id, command_type, CONVERT(argument USING utf8mb4)"
                " FROM mysql.general_log ORDER BY event_time, thread_id"
            )
            rows = list(cur.fetchall())
        return statements_in(rows, database)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # SIGTERM is mariadbd's orderly shutdown; runuser passes it on.
            self.process.terminate()
            try:
                self.process.wait(timeout=_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=_STOP_SECONDS)
        leftover = _mariadbd_using(self.root)
        if leftover:
            raise MariaDBError(f"mariadbd {leftover} is still running after stop")
        shutil.rmtree(self.root, ignore_errors=True)


def statements_in(rows: Sequence[tuple[object, ...]], database: str) -> list[str]:
    """The Query rows of a general log (thread, command, argument) run in ``database``."""
    current: dict[object, str | None] = {}
    found: list[str] = []
    for thread, command, argument in rows:
        text = str(argument)
        if command == "Connect":
            match = _CONNECT_DB.search(text)
            current[thread] = match.group(1) if match else None
        elif command == "Init DB":
            current[thread] = text
        elif command == "Query":
            use = re.fullmatch(r"\s*use\s+`?([^`\s;]+)`?\s*;?\s*", text, re.IGNORECASE)
            if use:
                current[thread] = use.group(1)
            elif current.get(thread) == database:
                found.append(text)
    return found


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise MariaDBError(f"{name!r} is not a lab database or account name")


def _mariadbd_using(root: Path) -> list[int]:
    """Pids of any mariadbd whose command line names ``root`` (this server's leftovers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (
            state != "Z"
            and argv
            and argv[0].endswith(b"mariadbd")
            and any(str(root).encode() in arg for arg in argv)
        ):
            found.append(int(entry.name))
    return found
