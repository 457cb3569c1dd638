from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from lab.executor.cli import main
from lab.postgres import LabPostgres

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster() -> Iterator[LabPostgres]:
    """One cluster for the session; it fails (never skips) when PostgreSQL cannot start."""
    pg = LabPostgres()
    try:
        pg.start()
    except Exception:
        pg.stop()
        raise
    yield pg
    pg.stop()
    assert not pg.root.exists()


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


@dataclass
class Lab:
    cluster: LabPostgres
    db: str
    dev: str
    work: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "PTAH_DB_URL": self.db,
            "PTAH_DEV_URL": self.dev,
            "PTAH_CONNECT_TIMEOUT": "7s",
            "PTAH_LOCK_TIMEOUT": "12s",
        }
        env.update(extra)
        return env

    def ptah(self, *argv: str, env: dict[str, str] | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), self.env() if env is None else env, out, err)
        return Result(code, out.getvalue(), err.getvalue())

    def schema_file(self, ddl: str, name: str = "schema.sql") -> str:
        path = self.work / name
        path.write_text(ddl)
        return str(path)


@pytest.fixture(scope="session")
def dev_url(cluster: LabPostgres) -> str:
    return cluster.create_database("dev")


@pytest.fixture
def lab(cluster: LabPostgres, dev_url: str, tmp_path: Path) -> Lab:
    return Lab(cluster, cluster.create_database(), dev_url, tmp_path)


def subprocess_argv() -> list[str]:
    return [sys.executable, "-m", "lab.executor"]


def subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTAH_")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


CRANE = REPO / ".tools" / "bin" / "crane"


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    """A registry on 127.0.0.1; it fails (never skips) when crane was not built."""
    assert CRANE.exists(), "crane is missing: run `make crane`"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="ptah-lab-registry-") as disk:
        server = subprocess.Popen(
            [str(CRANE), "registry", "serve", "--address", f"127.0.0.1:{port}", "--disk", disk],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # The registry listens on its own time; poll /v2/ with a deadline.
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline, (
                    "the registry never came up"
                )
                time.sleep(0.05)
            yield f"127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert server.returncode is not None
