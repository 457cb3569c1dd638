"""Fixtures for tests against a real kube-apiserver (the lab/controlplane harness).

The control plane is started once per session: a cold start takes seconds and
every test isolates itself in its own namespace instead.

When the harness cannot be built these fixtures fail the tests rather than skip
them; a green run that quietly left out every real-API test would prove nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client, config

from lab.localplane import LocalControlPlane

ClientFor = Callable[[str], client.ApiClient]


@pytest.fixture(scope="session")
def client_for(control_plane: LocalControlPlane) -> Iterator[ClientFor]:
    """Return an API client authenticated as an identity: manager, person or admin.

    Clients are cached for the session and closed at its end, since each holds
    a connection pool and a thread pool.
    """
    clients: dict[str, client.ApiClient] = {}

    def get(identity: str) -> client.ApiClient:
        if identity not in clients:
            # The config loader has no annotations; it returns an ApiClient.
            clients[identity] = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(control_plane.kubeconfig(identity)),
                # The kubeconfig is ours and static; nothing should write back to it.
                persist_config=False,
            )
        return clients[identity]

    yield get
    for api_client in clients.values():
        api_client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
def namespace(client_for: ClientFor) -> str:
    """A fresh namespace, created by the admin, for one test.

    It is not deleted afterwards: the whole server is thrown away at the end of
    the session, and waiting for namespace deletion would only slow tests down.
    """
    name = f"t-{uuid.uuid4().hex[:10]}"
    client.CoreV1Api(client_for("admin")).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )
    return name
