#!/usr/bin/python3 -IB
"""/usr/local/bin/ptah-scratch: the entry point of the operator-provided scratch databases.

The Observe and Plan Pods of a PtahSchema whose ``spec.dev`` says ``provided`` carry
this image as a native sidecar (an init container with ``restartPolicy: Always``):

- uid 65532, its data on an in-memory emptyDir at /var/lib/scratch that is empty when
  the container starts, so the server is initialized here on every start (initdb /
  mariadb-install-db), then run in the foreground;
- listening on 127.0.0.1 only (PostgreSQL 5432, MariaDB 3306), database ``scratch``,
  user ``scratch``, no password: only the Pod's own containers can reach it, and it
  holds nothing but what ptah puts there to normalize a desired state;
- SIGTERM (the kubelet stopping the sidecar once the runner is done) shuts the server
  down at once and this process exits 0. PostgreSQL reads SIGTERM as a *smart*
  shutdown, which waits for every session to end; a scratch database has nothing worth
  waiting for, so SIGTERM is passed on to it as SIGINT, its fast shutdown.

``ptah-scratch postgresql`` or ``ptah-scratch mariadb`` (the image's ENTRYPOINT).
Started by the kernel through the line above, as the other images' entry points:
-I keeps the Pod's environment from choosing the code, -B because the root
filesystem is read-only (the bytecode is not needed: this file is the program).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

DATA = Path("/var/lib/scratch")
NAME = "scratch"  # the database and the user, the runner's PTAH_DEV_URL names both

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_DATA = DATA / "postgresql"
# A throw-away database on a memory volume: durability settings buy nothing, and
# shared_buffers stays small because the volume and the buffers share the Pod's memory.
PG_SETTINGS = (
    "listen_addresses=127.0.0.1",
    "port=5432",
    "unix_socket_directories=",  # loopback TCP only: no socket file to find or guard
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "shared_buffers=16MB",
    "max_connections=20",
    "jit=off",
)

MARIADB_DATA = DATA / "mariadb"
MARIADB_INIT = Path("/usr/local/share/ptah-scratch/mariadb-init.sql")
MARIADB_SETTINGS = (
    f"--datadir={MARIADB_DATA}",
    "--bind-address=127.0.0.1",
    "--port=3306",
    f"--socket={DATA / 'mariadbd.sock'}",
    f"--pid-file={DATA / 'mariadbd.pid'}",
    f"--tmpdir={DATA}",
    f"--init-file={MARIADB_INIT}",
    "--skip-name-resolve",
    "--skip-log-bin",
    # What the lab's MariaDB serves (lab/mariadb.py), so a desired state normalizes
    # here as it reads on a lab target.
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_bin",
    # Memory, not a disk: no doublewrite, no flush per commit, a small pool and log
    # (the log file is allocated whole on the memory volume), and no O_DIRECT or
    # native AIO, which tmpfs does not offer.
    "--innodb-doublewrite=0",
    "--innodb-flush-log-at-trx-commit=0",
    "--innodb-flush-method=fsync",
    "--innodb-use-native-aio=0",
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=8M",
    "--max-connections=20",
)


def initialize_postgresql() -> None:
    if (PG_DATA / "PG_VERSION").exists():
        return  # a restarted sidecar on the same volume keeps what it made
    subprocess.run(
        [
            str(PG_BIN / "initdb"),
            f"--pgdata={PG_DATA}",
            f"--username={NAME}",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # The database, created before the server listens: nothing can connect to a
    # half-made one. Single-user mode reads its statements from stdin.
    subprocess.run(
        [str(PG_BIN / "postgres"), "--single", "-D", str(PG_DATA), "-j", "template1"],
        input=f"CREATE DATABASE {NAME};\n".encode(),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def initialize_mariadb() -> None:
    if (MARIADB_DATA / "mysql").is_dir():
        return
    subprocess.run(
        [
            "/usr/bin/mariadb-install-db",
            "--no-defaults",
            f"--datadir={MARIADB_DATA}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            # The Pod's hostname may not resolve (a runtime's /etc/hosts is its own);
            # without --force the script refuses rather than write IP-only accounts,
            # which is all a server that resolves no names needs.
            "--force",
            # The bootstrap's temporary files, as the server's: the root is read-only.
            f"--tmpdir={DATA}",
            # The bootstrap's own redo log is made at this size, not the default 96 MiB
            # the volume's memory would hold until the first start shrinks it.
            "--innodb-log-file-size=8M",
            "--innodb-buffer-pool-size=16M",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # The database and the user are made by --init-file, which the server runs before it
    # accepts a connection (MARIADB_INIT).


def server(engine: str) -> tuple[list[str], signal.Signals]:
    """Initialize engine's data and return its server argv and the signal that stops it."""
    if engine == "postgresql":
        initialize_postgresql()
        settings = [item for s in PG_SETTINGS for item in ("-c", s)]
        return [str(PG_BIN / "postgres"), "-D", str(PG_DATA), *settings], signal.SIGINT
    if engine == "mariadb":
        initialize_mariadb()
        return ["/usr/sbin/mariadbd", "--no-defaults", *MARIADB_SETTINGS], signal.SIGTERM
    raise SystemExit(f"ptah-scratch: no engine {engine!r} (postgresql or mariadb)")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: ptah-scratch postgresql|mariadb", file=sys.stderr)
        return 2
    command, stop = server(argv[0])
    child = subprocess.Popen(command)

    def forward(_signum: int, _frame: FrameType | None) -> None:
        child.send_signal(stop)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    code = child.wait()
    # A server stopped by its signal exits 0; anything else is the server's own failure.
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
