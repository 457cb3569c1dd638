"""The real kube-apiserver + etcd of lab/controlplane as a session fixture, started once
per session (a cold start takes seconds; every test isolates itself in its own
namespace) and shared by tests/realapi, tests/apiconformance, tests/lifecycle and
tests/webhook. A plugin registered by tests/conftest.py, so there is one control plane
per session (per xdist worker) and a test imports nothing to get it. When the harness
cannot be built the fixture fails the tests rather than skip them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.localplane import ControlPlaneBuildError, LocalControlPlane, ensure_binary


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """A running kube-apiserver + etcd on loopback, shared by the whole session."""
    try:
        binary = ensure_binary()
    except ControlPlaneBuildError as exc:
        pytest.fail(f"the real-API tests need the control plane, which cannot be built: {exc}")
    workdir: Path = tmp_path_factory.mktemp("controlplane")
    with LocalControlPlane(workdir, binary=binary) as plane:
        yield plane
