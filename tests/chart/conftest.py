"""Fixtures for the chart tests: one helm for the session, and the two standard renders."""

from __future__ import annotations

import pytest

from tests.support.chartrender import (
    VALUES,
    Helm,
    Object,
)


@pytest.fixture(scope="session")
def default_render(helm: Helm) -> list[Object]:
    """The chart's defaults plus the five values it cannot default."""
    return helm.render([VALUES / "required.yaml"])


@pytest.fixture(scope="session")
def custom_render(helm: Helm) -> list[Object]:
    """tests/chart/values/custom.yaml, released into the namespace db-ops."""
    return helm.render([VALUES / "custom.yaml"], namespace="db-ops")
