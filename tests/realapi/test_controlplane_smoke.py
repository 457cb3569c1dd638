"""The control-plane harness is a real API server with the semantics we rely on.

Each test pins down one property the operator's real-API tests depend on: that
the server is up, that tokens map to the identities we think they do, that RBAC
is actually enforced, and that optimistic concurrency produces real conflicts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.localplane import LocalControlPlane
from lab.run import until_granted

pytestmark = pytest.mark.controlplane

# Matches the client_for fixture in conftest.py.
ClientFor = Callable[[str], client.ApiClient]

T = TypeVar("T")


def _eventually(check: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Poll check until it returns something other than None or False.

    Controllers act asynchronously, so their effects can only be waited for.
    """
    deadline = time.monotonic() + timeout
    interval = 0.05
    while True:
        result = check()
        if result is not None and result is not False:
            return result
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(interval)
        interval = min(interval * 2, 1.0)


def _job(name: str) -> client.V1Job:
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="migrate", image="busybox:1.37")],
                )
            )
        ),
    )


def test_readyz_is_ok(control_plane: LocalControlPlane) -> None:
    with httpx.Client(verify=control_plane.ssl_context()) as http:
        response = http.get(
            f"{control_plane.server_url}/readyz",
            headers={"Authorization": f"Bearer {control_plane.token('admin')}"},
        )
    assert response.status_code == 200
    assert response.text == "ok"


def test_server_listens_on_loopback_only(control_plane: LocalControlPlane) -> None:
    assert control_plane.server_url.startswith("https://127.0.0.1:")


@pytest.mark.parametrize(
    ("identity", "username", "groups"),
    [
        (
            "manager",
            "system:serviceaccount:ptah-system:ptah-operator",
            {"system:serviceaccounts", "system:serviceaccounts:ptah-system"},
        ),
        ("person", "jane@example.com", set()),
        ("admin", "admin", {"system:masters"}),
    ],
)
def test_token_authenticates_as_identity(
    client_for: ClientFor, identity: str, username: str, groups: set[str]
) -> None:
    review = client.AuthenticationV1Api(client_for(identity)).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert review.status is not None
    user = review.status.user_info
    assert user is not None
    assert user.username == username
    # The API server adds system:authenticated to every authenticated caller.
    assert set(user.groups or []) == groups | {"system:authenticated"}


def test_person_without_grants_is_forbidden_to_create_a_job(
    client_for: ClientFor, namespace: str
) -> None:
    with pytest.raises(ApiException) as caught:
        client.BatchV1Api(client_for("person")).create_namespaced_job(namespace, _job("denied"))
    assert caught.value.status == 403
    # The same request from the admin succeeds, so the 403 is RBAC's verdict on
    # jane and not a malformed Job.
    created = client.BatchV1Api(client_for("admin")).create_namespaced_job(
        namespace, _job("allowed")
    )
    assert created.metadata is not None
    assert created.metadata.name == "allowed"


def test_rbac_grant_lets_person_create_a_job(
    control_plane: LocalControlPlane, client_for: ClientFor, namespace: str
) -> None:
    admin = client_for("admin")
    rbac = client.RbacAuthorizationV1Api(admin)
    rules = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="job-creator"),
            rules=[
                client.V1PolicyRule(
                    api_groups=rule["apiGroups"], resources=rule["resources"], verbs=rule["verbs"]
                )
                for rule in rules
            ],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="jane-creates-jobs"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="job-creator"
            ),
            subjects=[
                client.RbacV1Subject(
                    kind="User", api_group="rbac.authorization.k8s.io", name="jane@example.com"
                )
            ],
        ),
    )
    # The authorizer reads the binding from its informer cache, so jane's create right
    # after the write was sometimes refused with 403: wait until RBAC answers yes for
    # her, then create once (a retried create would hide a grant that never worked).
    until_granted(control_plane, "person", rules, namespace)
    created = client.BatchV1Api(client_for("person")).create_namespaced_job(
        namespace, _job("granted")
    )
    assert created.metadata is not None
    assert created.metadata.name == "granted"


def test_admin_can_create_a_namespace(client_for: ClientFor) -> None:
    core = client.CoreV1Api(client_for("admin"))
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="smoke-admin-ns")))
    status = core.read_namespace("smoke-admin-ns").status
    assert status is not None
    assert status.phase == "Active"


def test_configmap_create_then_get_roundtrips(client_for: ClientFor, namespace: str) -> None:
    core = client.CoreV1Api(client_for("admin"))
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="roundtrip"), data={"schema": "v42", "empty": ""}
        ),
    )
    fetched = core.read_namespaced_config_map("roundtrip", namespace)
    assert fetched.data == {"schema": "v42", "empty": ""}
    assert fetched.metadata is not None
    assert fetched.metadata.resource_version


def test_stale_resource_version_is_a_conflict(client_for: ClientFor, namespace: str) -> None:
    core = client.CoreV1Api(client_for("admin"))
    created = core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="contended"), data={"n": "0"}),
    )
    assert created.metadata is not None
    stale_version = created.metadata.resource_version

    first = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="contended", resource_version=stale_version),
        data={"n": "1"},
    )
    updated = core.replace_namespaced_config_map("contended", namespace, first)
    assert updated.metadata is not None
    assert updated.metadata.resource_version != stale_version

    second = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="contended", resource_version=stale_version),
        data={"n": "2"},
    )
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_config_map("contended", namespace, second)
    assert caught.value.status == 409
    assert core.read_namespaced_config_map("contended", namespace).data == {"n": "1"}


def test_job_controller_creates_pods_that_garbage_collection_removes(
    client_for: ClientFor, namespace: str
) -> None:
    admin = client_for("admin")
    batch, core = client.BatchV1Api(admin), client.CoreV1Api(admin)
    job = batch.create_namespaced_job(namespace, _job("runs"))
    assert job.metadata is not None
    selector = "batch.kubernetes.io/job-name=runs"

    pods = _eventually(
        lambda: core.list_namespaced_pod(namespace, label_selector=selector).items or None,
        "the job controller creating a pod",
    )
    assert pods[0].metadata is not None
    owners = pods[0].metadata.owner_references or []
    assert [(o.kind, o.uid) for o in owners] == [("Job", job.metadata.uid)]

    batch.delete_namespaced_job("runs", namespace, propagation_policy="Background")
    _eventually(
        lambda: not core.list_namespaced_pod(namespace, label_selector=selector).items,
        "the garbage collector deleting the job's pods",
    )


def test_deleted_namespace_goes_away(client_for: ClientFor) -> None:
    core = client.CoreV1Api(client_for("admin"))
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="smoke-doomed")))
    core.create_namespaced_config_map(
        "smoke-doomed", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="content"))
    )
    core.delete_namespace("smoke-doomed")

    def gone() -> bool:
        try:
            core.read_namespace("smoke-doomed")
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    _eventually(gone, "the namespace controller finishing the namespace's deletion")
