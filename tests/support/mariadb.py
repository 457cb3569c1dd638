"""One started lab MariaDB for a test module: the fixtures of the executor, contract and
lab tests all need the same start-or-fail and the same stop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lab.mariadb import MARIADBD, LabMariaDB


@contextmanager
def running_mariadb(**options: Any) -> Iterator[LabMariaDB]:
    """A started ``LabMariaDB(**options)``, stopped on the way out. Fails (never skips)
    when MariaDB is not installed: a skip would count a missing engine as a pass. A
    server that fails half-way through its start is stopped before the error goes on,
    so its directory and processes never outlive the test."""
    if not MARIADBD.exists():
        pytest.fail(f"{MARIADBD} is missing: run `make mariadb`")
    server = LabMariaDB(**options)
    try:
        server.start()
        yield server
    finally:
        server.stop()
