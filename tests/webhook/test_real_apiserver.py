"""Behind a real kube-apiserver: the webhook registered with a ValidatingWebhookConfiguration
and called by the API server itself, so every review below is spelled exactly as a
real API server spells it (options, userInfo.extra, managedFields, ``status: {}``,
a merge patch as an UPDATE with its oldObject, a status write with the full object).
A webhook that refused those as malformed would block every write it is registered
for; here each reaches the rule it is meant for.

The webhook configuration selects only this module's namespace, so the other
real-API tests sharing the session's control plane never meet it, and it is deleted
at the end. Waiting for the API server to start calling it is the one poll: nothing
announces that a new configuration is in force, so a probe write is retried until
the webhook answers it, under a deadline; no test asserts on time.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Final

import pytest

import certs
from jobclaim import CLEANUP_TTL_SECONDS
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    NAMESPACES,
    PTAHSCHEMAS,
    AlreadyExists,
    ApiError,
    Object,
    Refused,
)
from jobclaim.crds import crd_for
from kube.client import KubeApi
from lab.localplane import LocalControlPlane
from lab.run import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, until, until_granted
from tests.support.claimedschema import Cluster, claimed_schema, refusal
from tests.support.kinds import CRDS, WEBHOOKS
from tests.support.webhookscenes import SETTINGS
from webhook import Engine
from webhook.app import create_app
from webhook.serving import local_certificates, readiness, uvicorn_server

pytestmark = pytest.mark.controlplane

MANAGER_USER: Final = "system:serviceaccount:ptah-system:ptah-operator"
RBAC: Final = "rbac.authorization.k8s.io"
DEADLINE: Final = 60.0  # bounds a failure; never waited out when things work


def install_crd(admin: KubeApi) -> None:
    with contextlib.suppress(AlreadyExists):
        admin.create(CRDS, None, crd_for("PtahSchema"))

    def served() -> bool:
        try:
            admin.list(PTAHSCHEMAS, "default")
        except ApiError:
            return False
        return True

    until(served, "the PtahSchema CRD to be served", deadline=DEADLINE)


def grant_manager(plane: LocalControlPlane, admin: KubeApi, name: str) -> None:
    """What the webhook reads and the tests write as the manager, once it is in force:
    RBAC's cache takes a grant a moment after its write (lab.run.until_granted)."""
    rules: list[Object] = [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "create", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]},
        {
            "apiGroups": ["operator.ptah.run"],
            "resources": ["ptahschemas", "ptahschemas/status", "ptahschemas/finalizers"],
            "verbs": ["get", "list", "update", "patch"],
        },
    ]
    admin.create(CLUSTER_ROLES, None, {"metadata": {"name": name}, "rules": rules})
    admin.create(
        CLUSTER_ROLE_BINDINGS,
        None,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": MANAGER_USER}
            ],
        },
    )
    until_granted(plane, "manager", rules)


def configuration(name: str, port: int, ca: bytes, selector: dict[str, str]) -> Object:
    def hook(hook_name: str, path: str, rules: list[Object]) -> Object:
        return {
            "name": hook_name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "matchPolicy": "Exact",
            "timeoutSeconds": 10,
            "namespaceSelector": {"matchLabels": selector},
            "clientConfig": {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca).decode(),
            },
            "rules": rules,
        }

    return {
        "metadata": {"name": name},
        "webhooks": [
            hook(
                "controller-write.test.operator.ptah.run",
                "/validate-controller-write",
                [
                    {
                        "apiGroups": ["batch"],
                        "apiVersions": ["v1"],
                        "resources": ["jobs"],
                        "operations": ["CREATE", "UPDATE"],
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                        "operations": ["CREATE"],
                    },
                ],
            ),
            hook(
                "status.manager-state.test.operator.ptah.run",
                "/validate-manager-state",
                [
                    {
                        "apiGroups": ["operator.ptah.run"],
                        "apiVersions": ["*"],
                        "resources": ["*/status"],
                        "operations": ["UPDATE"],
                    }
                ],
            ),
        ],
    }


@pytest.fixture(scope="module")
def cluster(
    control_plane: LocalControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    suffix = uuid.uuid4().hex[:8]
    admin = KubeApi.from_kubeconfig(control_plane.kubeconfig("admin"))
    manager = KubeApi.from_kubeconfig(control_plane.kubeconfig("manager"))
    install_crd(admin)
    grant_manager(control_plane, admin, f"ptah-webhook-test-{suffix}")
    label = {"ptah-webhook-test": suffix}
    namespace = f"w-{suffix}"
    admin.create(NAMESPACES, None, {"metadata": {"name": namespace, "labels": label}})

    local = local_certificates(tmp_path_factory.mktemp("webhook-certs"))
    tls = certs.ReloadingTLS(local.cert, local.key)
    engine = Engine(manager, SETTINGS)  # reads as the manager does; pins the world's images
    app = create_app(engine, readiness=readiness(tls, manager, namespace="ptah-system"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn_server(app, tls, host="127.0.0.1", port=sock.getsockname()[1])
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    webhook_name = f"ptah-webhook-test-{suffix}"
    admin.create(
        WEBHOOKS,
        None,
        configuration(webhook_name, sock.getsockname()[1], local.ca.read_bytes(), label),
    )
    probes = iter(range(10_000))

    def answering() -> bool:
        probe = {"metadata": {"name": f"probe-{next(probes)}"}, "data": {"k": "v"}}
        try:
            admin.create(CONFIGMAPS, namespace, probe)
        except Refused as refused:
            return "request username is not the configured operator manager" in str(refused)
        return False

    try:
        until(answering, "the API server to call the webhook", deadline=DEADLINE)
        yield Cluster(admin, manager, namespace)
    finally:
        admin.delete(WEBHOOKS, None, webhook_name)
        server.should_exit = True
        thread.join(timeout=30)
        engine.close()
        sock.close()
        admin.close()
        manager.close()


def test_a_person_creating_a_job_is_refused_by_the_webhook(cluster: Cluster) -> None:
    job = {
        "metadata": {"name": "by-hand"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.example.com/c:1"}],
                }
            }
        },
    }
    message = refusal(lambda: cluster.admin.create(JOBS, cluster.namespace, job))
    assert "request username is not the configured operator manager identity" in message


def test_the_manager_creates_exactly_the_job_its_claim_reserved(cluster: Cluster) -> None:
    """The builder's Job, as the API server hands it to admission (UID, generation,
    managedFields, generated selector and labels, the service-account alias), passes
    the same match the controller applies."""
    _, job = claimed_schema(cluster, "orders-exact")
    created = cluster.manager.create(JOBS, cluster.namespace, job)
    assert created["metadata"]["name"] == job["metadata"]["name"]
    # The status write in claimed_schema went through the manager-state endpoint too.


def test_a_forged_job_of_the_manager_is_refused_with_the_matchers_sentence(
    cluster: Cluster,
) -> None:
    _, job = claimed_schema(cluster, "orders-forged")
    # Valid to the API server (its own validation runs first), foreign to the claim.
    job["spec"]["template"]["spec"]["hostNetwork"] = True
    message = refusal(lambda: cluster.manager.create(JOBS, cluster.namespace, job))
    assert (
        "the Job is outside the active operation intent: "
        "the Job's spec is not the one its claim builds"
    ) in message


def test_a_merge_patch_reaches_the_cleanup_rule_as_an_update(cluster: Cluster) -> None:
    schema, job = claimed_schema(cluster, "orders-cleanup")
    created = cluster.manager.create(JOBS, cluster.namespace, job)
    assert schema.status and schema.status.active_operation
    recorded = schema.status.model_copy(
        update={
            "active_operation": schema.status.active_operation.model_copy(
                update={"job_uid": created["metadata"]["uid"]}
            )
        }
    )
    cluster.manager.patch_status(
        PTAHSCHEMAS,
        cluster.namespace,
        "orders-cleanup",
        recorded.to_wire(),
        resource_version=schema.metadata.resource_version or "",
    )
    # A reading's Job carries its cleanup TTL from its create, so a merge patch of it
    # reaches the cleanup rule (as an UPDATE) and is refused by that rule's own sentence.
    message = refusal(
        lambda: cluster.manager.patch_spec(
            JOBS,
            cluster.namespace,
            job["metadata"]["name"],
            {"ttlSecondsAfterFinished": 2 * CLEANUP_TTL_SECONDS},
        )
    )
    assert (
        f"the Job update is not the exact none-to-{CLEANUP_TTL_SECONDS} cleanup TTL transition"
    ) in message


def test_only_the_manager_writes_status(cluster: Cluster) -> None:
    schema, _ = claimed_schema(cluster, "orders-status")
    assert schema.status is not None
    forged = schema.status.model_copy(update={"phase": "InSync"}).to_wire()
    message = refusal(
        lambda: cluster.admin.patch_status(
            PTAHSCHEMAS,
            cluster.namespace,
            "orders-status",
            forged,
            resource_version=schema.metadata.resource_version or "",
        )
    )
    assert "only the configured operator manager may write the status of PtahSchema" in message
