"""A throwaway PostgreSQL 15 cluster for the lab executor's tests.

initdb runs in a fresh temporary directory owned by the ``postgres`` user (the server
never runs as root), the server listens on 127.0.0.1 at a free port and on a unix
socket inside that directory, and ``stop`` ends it and removes the directory, then
checks that the postmaster is gone.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

BIN = Path("/usr/lib/postgresql/15/bin")


def _as_postgres(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ptah-lab-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.pid: int | None = None
        self._serial = 0

    def start(self) -> None:
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        run = subprocess.run
        run(
            _as_postgres(
                [
                    str(BIN / "initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
            "-c fsync=off -c max_connections=60"
        )
        run(
            _as_postgres(
                [
                    str(BIN / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-o",
                    options,
                    "-l",
                    str(self.root / "log"),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, prefix: str = "t") -> str:
        self._serial += 1
        name = f"{prefix}_{self._serial}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

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
                    raise AssertionError(f"postgres {self.pid} is still running after stop")
                time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split()[2] != "Z"
