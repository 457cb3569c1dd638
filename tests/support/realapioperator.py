"""Fixtures for the real-API tests of the operator itself: its CRDs installed, the
manager granted the chart's permissions, and API clients per identity.

Everything is set up by ``lab.run``, the module ``make run`` uses, so
the tests exercise the same set-up the README tells a user to run. Import the
fixtures a test module needs (they are not in conftest.py, which belongs to the
harness).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from jobclaim.apiserver import JOBS, Object, Resource
from kube.client import KubeApi
from lab import run as localrun
from lab.localplane import LocalControlPlane

# The harness's session fixture; imported so there is one way to start a control plane.
from webhook import Settings


@dataclass(frozen=True)
class Operator:
    """The control plane with the operator's CRDs and the manager's permissions."""

    plane: LocalControlPlane
    admin: KubeApi
    manager: KubeApi
    crds: tuple[str, ...]


@pytest.fixture(scope="session")
def operator(control_plane: LocalControlPlane) -> Iterator[Operator]:
    with (
        KubeApi.from_kubeconfig(control_plane.kubeconfig("admin")) as admin,
        KubeApi.from_kubeconfig(control_plane.kubeconfig("manager")) as manager,
    ):
        crds = localrun.install_crds(control_plane, admin)
        localrun.grant_manager(control_plane)
        yield Operator(control_plane, admin, manager, tuple(crds))


@dataclass
class Webhooked:
    """A namespace of its own whose writes the test's webhook configurations judge."""

    operator: Operator
    namespace: str
    label: dict[str, str]
    prefix: str


def webhooked_namespace(operator: Operator) -> Webhooked:
    """A fresh labelled namespace, so webhook configurations selecting it judge no
    other test's writes on the shared control plane."""
    suffix = uuid.uuid4().hex[:10]
    label = {"ptah-realapi-test": suffix}
    namespace = f"o-{suffix}"
    localrun.prepare_namespace(operator.admin, namespace, label)
    return Webhooked(operator, namespace, label, f"ptah-test-{suffix}")


def register(
    staged: Webhooked,
    hook: localrun.LocalWebhook,
    *,
    jobs: localrun.LocalWebhook | None = None,
    stamp: bool = True,
) -> list[tuple[Resource, str]]:
    """Register the chart's configurations for ``staged``'s namespace alone and wait
    until the API server calls them; where each is stored and its name, for deletion."""
    configurations = localrun.webhook_configurations(
        staged.prefix,
        hook.url,
        hook.ca_bundle,
        jobs_url=jobs.url if jobs is not None else None,
        namespace_selector={"matchLabels": staged.label},
        stamp=stamp,
    )
    localrun.register_webhooks(
        staged.operator.plane, staged.operator.admin, configurations, staged.namespace
    )
    return [(localrun.configuration_resource(c), c["metadata"]["name"]) for c in configurations]


def unregister(operator: Operator, registered: list[tuple[Resource, str]]) -> None:
    for resource, name in registered:
        operator.admin.delete(resource, None, name)


@contextmanager
def registered_webhook(
    operator: Operator,
    certificates: Path,
    *,
    stamp: bool = True,
    settings: Settings = localrun.LOCAL_SETTINGS,
) -> Iterator[tuple[Webhooked, localrun.LocalWebhook]]:
    """A fresh namespace judged by a started webhook the API server already calls;
    the configurations are deleted and the webhook closed on the way out.
    ``stamp=False`` registers everything but the mutating stamp webhook; ``settings``
    are the webhook's (by default the images ``make run`` pins)."""
    staged = webhooked_namespace(operator)
    hook = localrun.LocalWebhook(operator.manager, certificates, settings=settings)
    hook.start()
    registered = register(staged, hook, stamp=stamp)
    try:
        yield staged, hook
    finally:
        unregister(operator, registered)
        hook.close()


def dry_run_job_create(plane: LocalControlPlane, namespace: str, identity: str) -> httpx.Response:
    """Ask the API server to admit a Job without storing it (``dryRun=All``).

    Validating webhooks with ``sideEffects: None`` are called for dry runs, so this
    shows whether, and how, the Job webhook answers, without leaving a Job behind.
    """
    job: Object = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"probe-{uuid.uuid4().hex[:8]}"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.example.com/c:1"}],
                }
            }
        },
    }
    with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
        return http.post(
            f"{plane.server_url}/apis/batch/v1/namespaces/{namespace}/{JOBS.plural}",
            params={"dryRun": "All"},
            content=json.dumps(job).encode(),
            headers={
                "Authorization": f"Bearer {plane.token(identity)}",
                "Content-Type": "application/json",
            },
        )
