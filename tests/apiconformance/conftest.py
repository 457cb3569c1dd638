"""The ``api`` fixture: every conformance test runs against the double and the real server.

``memory`` is ``kube.fake.inmemory.InMemoryApi``; ``real`` is ``kube.client``
talking to the kube-apiserver of the lab/controlplane harness (as its admin, so RBAC
never decides a semantic test). The real backend is marked ``controlplane`` and, like
every real-API test, fails rather than skips when the harness cannot be built.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from jobclaim.apiserver import NAMESPACES, ApiClient
from kube.client import KubeApi
from kube.fake.inmemory import InMemoryApi
from lab.localplane import LocalControlPlane
from tests.support.kinds import GADGETS, WIDGETS, install

BACKENDS = ["memory", pytest.param("real", marks=pytest.mark.controlplane)]


@pytest.fixture(scope="session")
def real_admin(control_plane: LocalControlPlane) -> Iterator[KubeApi]:
    with KubeApi.from_kubeconfig(control_plane.kubeconfig("admin")) as api:
        install(api, WIDGETS, GADGETS)
        yield api


@pytest.fixture(params=BACKENDS)
def api(request: pytest.FixtureRequest) -> ApiClient:
    if request.param == "memory":
        return InMemoryApi()
    real: KubeApi = request.getfixturevalue("real_admin")
    return real


@pytest.fixture
def namespace(api: ApiClient) -> str:
    """A namespace of the test's own: fresh on the real server, shared by nothing."""
    if isinstance(api, InMemoryApi):
        return "conformance"
    name = f"c-{uuid.uuid4().hex[:10]}"
    api.create(NAMESPACES, None, {"metadata": {"name": name}})
    return name
