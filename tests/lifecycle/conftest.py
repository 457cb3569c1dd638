"""The real backend of the dispatch-order suite: the harness's kube-apiserver with the
operator's CRDs installed and the manager granted the chart's permissions, set up once
per session by ``tests.support.realapioperator`` (the set-up ``make run`` uses). Like every
real-API test it fails rather than skips when the harness cannot be built.
"""

from __future__ import annotations

from typing import Final

import pytest

from lab import run as localrun
from tests.lifecycle.backends import DOUBLE, MEMORY, REAL, Backend, RealServer

# The operator installed into the session's control plane (tests/support/controlplane.py,
# a plugin), imported so there is one way to install it.
from tests.support.realapioperator import Operator, operator  # noqa: F401


@pytest.fixture(scope="session")
def real_server(operator: Operator) -> RealServer:  # noqa: F811
    # ``operator`` grants the manager its Leases in the namespace ``make run`` uses.
    return RealServer(operator.admin, operator.manager, localrun.MANAGER_NAMESPACE)


# Both backends for every test that asks for ``backend``: the double, and the real API
# server marked ``controlplane``.
BACKENDS: Final = [MEMORY, pytest.param(REAL, marks=pytest.mark.controlplane)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == MEMORY:
        return DOUBLE
    real: RealServer = request.getfixturevalue("real_server")
    return real
