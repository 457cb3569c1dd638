"""Fixtures for the chart tests: one helm for the session, and the two standard renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.support import (
    VALUES,
    Helm,
    HelmUnavailable,
    Object,
    ToolUnavailable,
    build_helm,
    build_kube_score,
    build_prometheus_tool,
)


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = build_helm()
    except HelmUnavailable as error:
        pytest.fail(f"the chart tests need helm, which cannot be built: {error}")
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def default_render(helm: Helm) -> list[Object]:
    """The chart's defaults plus the five values it cannot default."""
    return helm.render([VALUES / "required.yaml"])


@pytest.fixture(scope="session")
def custom_render(helm: Helm) -> list[Object]:
    """tests/chart/values/custom.yaml, released into the namespace db-ops."""
    return helm.render([VALUES / "custom.yaml"], namespace="db-ops")


@pytest.fixture(scope="session")
def promtool() -> Path:
    try:
        return build_prometheus_tool()
    except ToolUnavailable as error:
        pytest.fail(f"the alert rule tests need promtool, which cannot be built: {error}")


@pytest.fixture(scope="session")
def kube_score() -> Path:
    try:
        return build_kube_score()
    except ToolUnavailable as error:
        pytest.fail(f"the kube-score test needs kube-score, which cannot be built: {error}")
