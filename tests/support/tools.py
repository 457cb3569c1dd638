"""The built tools as session fixtures: helm, promtool and kube-score (each built from its
Go module once, `make helm` and kin). Plugins registered by tests/conftest.py, which also
marks every test that reaches one of them, so `make check` can leave them out until
built. A fixture fails, never skips, when its tool cannot be built."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chartrender import (
    Helm,
    HelmUnavailable,
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
