from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.postgres import LabPostgres
from tests.labexecutor.labkit import Lab


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


@pytest.fixture(scope="session")
def dev_url(cluster: LabPostgres) -> str:
    return cluster.create_database("dev")


@pytest.fixture
def lab(cluster: LabPostgres, dev_url: str, tmp_path: Path) -> Lab:
    return Lab(cluster, cluster.create_database(), dev_url, tmp_path)
