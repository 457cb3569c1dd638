"""The lab executor run in-process against one database of the lab's MariaDB: what the
MySQL-family schema and migration tests share (each adds the commands it drives)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from lab.executor.cli import main
from lab.mariadb import LabMariaDB


@dataclass
class MariaDBLab:
    server: LabMariaDB
    url: str
    work: Path
    # The dev database a schema reading loads into; migrations need none.
    dev: str | None = None

    @property
    def database(self) -> str:
        return self.url.rsplit("/", 1)[1]

    @property
    def dev_database(self) -> str:
        assert self.dev is not None, "this lab has no dev database"
        return self.dev.rsplit("/", 1)[1]

    def ptah(self, *argv: str) -> tuple[int, str, str]:
        """``ptah argv`` with short lock and connect timeouts: exit code, stdout, stderr."""
        out, err = io.StringIO(), io.StringIO()
        env = {"PTAH_DB_URL": self.url, "PTAH_LOCK_TIMEOUT": "2s", "PTAH_CONNECT_TIMEOUT": "7s"}
        if self.dev is not None:
            env["PTAH_DEV_URL"] = self.dev
        code = main(list(argv), env, out, err)
        return code, out.getvalue(), err.getvalue()
