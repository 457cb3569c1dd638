"""The adapter's errors for answers only a real API server gives: who may not write,
and an admission webhook that fails closed.

``classify`` is table-tested on recorded bodies; these tests make the server produce
the answers, so a change in its wording (the webhook sentence above all) fails here
rather than turning a refusal into an unknown outcome in production.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest

from jobclaim.apiserver import CONFIGMAPS, NAMESPACES, ApiError, NotFound, Refused
from kube.client import KubeApi
from lab.localplane import LocalControlPlane
from tests.support.kinds import WEBHOOKS, config_map

pytestmark = pytest.mark.controlplane

# Bounds a failure only; a webhook configuration takes effect within milliseconds.
_WEBHOOK_ACTIVE_WITHIN_SECONDS = 30.0


@pytest.fixture
def admin(real_admin: KubeApi) -> KubeApi:
    return real_admin


@pytest.fixture
def own_namespace(admin: KubeApi) -> str:
    name = f"a-{uuid.uuid4().hex[:10]}"
    admin.create(NAMESPACES, None, {"metadata": {"name": name}})
    return name


@pytest.fixture
def person(control_plane: LocalControlPlane) -> Iterator[KubeApi]:
    with KubeApi.from_kubeconfig(control_plane.kubeconfig("person")) as api:
        yield api


def test_an_unauthorized_write_is_refused(
    control_plane: LocalControlPlane, admin: KubeApi, own_namespace: str
) -> None:
    path = control_plane.kubeconfig("admin")
    stranger = KubeApi.from_kubeconfig(path, token="not-a-token")
    with stranger, pytest.raises(Refused) as caught:
        stranger.create(CONFIGMAPS, own_namespace, config_map("c"))
    assert caught.value.status == 401
    with pytest.raises(NotFound):
        admin.get(CONFIGMAPS, own_namespace, "c")


def test_a_forbidden_write_is_refused(person: KubeApi, admin: KubeApi, own_namespace: str) -> None:
    with pytest.raises(Refused) as caught:
        person.create(CONFIGMAPS, own_namespace, config_map("c"))
    assert caught.value.status == 403
    with pytest.raises(NotFound):
        admin.get(CONFIGMAPS, own_namespace, "c")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_fail_closed_webhook_that_cannot_be_called_is_a_refusal(
    admin: KubeApi, own_namespace: str
) -> None:
    hook = admin.create(
        WEBHOOKS,
        None,
        {
            "metadata": {"name": f"fail-closed-{own_namespace}"},
            "webhooks": [
                {
                    "name": "deny.conformance.ptah.example",
                    # Nothing listens there: the call fails with connection refused.
                    "clientConfig": {"url": f"https://127.0.0.1:{_closed_port()}/validate"},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": own_namespace}
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 2,
                }
            ],
        },
    )
    try:
        refusal = _first_refusal(admin, own_namespace)
    finally:
        admin.delete(WEBHOOKS, None, hook["metadata"]["name"])
    assert refusal.status == 500
    assert "failed calling webhook" in str(refusal)
    with pytest.raises(NotFound):
        admin.get(CONFIGMAPS, own_namespace, "refused")


def _first_refusal(admin: KubeApi, namespace: str) -> ApiError:
    """Create probes until the webhook is in force, then the create it refuses.

    The API server loads webhook configurations through an informer and says nothing
    when one is in force; a probe it still admits is stored and changes nothing else.
    """
    deadline = time.monotonic() + _WEBHOOK_ACTIVE_WITHIN_SECONDS
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        try:
            admin.create(CONFIGMAPS, namespace, config_map(f"probe-{attempt}"))
        except Refused:
            break
    with pytest.raises(Refused) as caught:
        admin.create(CONFIGMAPS, namespace, config_map("refused"))
    return caught.value
