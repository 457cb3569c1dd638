"""What the executor tests share besides fixtures: the Lab (a database pair on the
session's PostgreSQL and the executor called in-process), and how to run the executor as
a subprocess. Fixtures stay in conftest.py, which nothing imports."""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from lab.executor.cli import main
from lab.postgres import LabPostgres

REPO = Path(__file__).resolve().parents[2]


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


def subprocess_argv() -> list[str]:
    return [sys.executable, "-m", "lab.executor"]


def subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTAH_")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env
