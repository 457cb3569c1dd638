"""A throwaway PostgreSQL 15 server for the lab: the executor's tests and ``make run``.

initdb runs in a fresh temporary directory owned by the ``postgres`` user (the server
never runs as root). It always listens on 127.0.0.1 and on a unix socket inside that
directory, where the ``postgres`` superuser connects without a password (only this
machine's own processes reach those). ``make run`` also gives it the lab bridge's
address (``listen``) and the pod subnet (``clients``): Pods reach it there, and only
with a role's password (scram-sha-256), since anything on the bridge may try.
``stop`` ends the server, removes the directory and checks that the postmaster is gone.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql

__all__ = ["BIN", "LabPostgres", "PostgresError", "free_port"]

BIN = Path("/usr/lib/postgresql/15/bin")
# pg_ctl -w waits for this long; a loaded 2-core machine needs more than the default.
_START_SECONDS = 60


class PostgresError(Exception):
    """The lab's PostgreSQL could not be started or stopped."""


def _as_postgres(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def free_port(addresses: Sequence[str]) -> int:
    """A port free on the first address (and checked free on the others)."""
    with socket.socket() as probe:
        probe.bind((addresses[0], 0))
        port = int(probe.getsockname()[1])
    for address in addresses[1:]:
        with socket.socket() as probe:
            probe.bind((address, port))
    return port


def hba_lines(clients: Sequence[ipaddress.IPv4Network]) -> str:
    """pg_hba.conf: trust on the socket and loopback, passwords from ``clients`` only."""
    lines = [
        "# written by lab.postgres: the socket and loopback are this machine's own",
        "local all all trust",
        "host all all 127.0.0.1/32 trust",
    ]
    lines += [f"host all all {network} scram-sha-256" for network in clients]
    return "\n".join(lines) + "\n"


class LabPostgres:
    """One PostgreSQL server in its own temporary directory."""

    def __init__(
        self,
        *,
        listen: Sequence[str] = (),
        clients: Sequence[ipaddress.IPv4Network] = (),
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ptah-lab-pg-"))
        self.data = self.root / "data"
        self.addresses = ("127.0.0.1", *listen)
        self.clients = tuple(clients)
        self.port = free_port(self.addresses)
        self.pid: int | None = None
        self._serial = 0

    @property
    def log_path(self) -> Path:
        return self.root / "log"

    def start(self) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            [
                str(BIN / "initdb"),
                *("-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync"),
                *("-E", "UTF8"),
            ],
        )
        (self.data / "pg_hba.conf").write_text(hba_lines(self.clients))
        options = (
            f"-c listen_addresses={','.join(self.addresses)} -p {self.port} -k {self.root} "
            "-c fsync=off -c max_connections=60 -c password_encryption=scram-sha-256"
        )
        self._run(
            "pg_ctl start",
            [
                str(BIN / "pg_ctl"),
                *("-D", str(self.data), "-o", options, "-l", str(self.log_path)),
                *("-w", "-t", str(_START_SECONDS), "start"),
            ],
        )
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def _run(self, what: str, argv: list[str]) -> None:
        done = subprocess.run(_as_postgres(argv), check=False, capture_output=True, text=True)
        if done.returncode != 0:
            log = self.log_path.read_text()[-2000:] if self.log_path.exists() else ""
            raise PostgresError(
                f"{what} failed with exit code {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()}\n{log}".rstrip()
            )

    def url(
        self,
        dbname: str = "postgres",
        *,
        user: str = "postgres",
        password: str | None = None,
        host: str = "127.0.0.1",
    ) -> str:
        credential = quote(user, safe="")
        if password is not None:
            credential += ":" + quote(password, safe="")
        return f"postgresql://{credential}@{host}:{self.port}/{dbname}"

    def create_database(self, prefix: str = "t") -> str:
        """A new database ``<prefix>_<n>``; its superuser URL on loopback."""
        self._serial += 1
        name = f"{prefix}_{self._serial}"
        self.create_database_named(name)
        return self.url(name)

    def create_database_named(self, name: str, *, owner: str | None = None) -> None:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if owner is not None:
            statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)

    def query(self, database: str, text: str) -> list[tuple[object, ...]]:
        """Rows of one read, as the superuser over loopback."""
        with psycopg.connect(self.url(database)) as conn:
            return list(conn.execute(text.encode()).fetchall())

    def create_role(self, name: str, password: str) -> None:
        """A login role that may create databases (what ptah's dev database needs)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN CREATEDB PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                _as_postgres(
                    [str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
                ),
                check=False,
                capture_output=True,
            )
        if self.pid is not None:
            # pg_ctl -w returns once the pid file is gone; the process itself may take
            # a moment more to be reaped, so poll it with a deadline.
            deadline = time.monotonic() + 30
            while _alive(self.pid):
                if time.monotonic() > deadline:
                    raise PostgresError(f"postgres {self.pid} is still running after stop")
                time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"
