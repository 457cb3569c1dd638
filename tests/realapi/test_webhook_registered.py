"""The webhook, registered with a real API server by url and caBundle, on the rows of
issue 8's test 4 that tests/webhook/test_real_apiserver.py does not already cover.

Covered there (and not repeated here): a person's Job refused, the exact Job of a
claim admitted, a forged Job of the manager refused with the matcher's sentence, the
cleanup TTL on a recorded but still running Job refused, and a status write by the
system:masters admin refused.

Here, with the chart's two configurations as ``lab.run`` registers them
(manager-only match condition included):

- the cleanup TTL on a Job no record names is refused, and on the recorded terminal
  Job admitted;
- a plan projection created after ``dispatchStarted`` is refused;
- a status write by a person RBAC allows is refused, and by the manager admitted.

There is no kubelet, so a Job only becomes terminal when its status says so: the
admin writes the Failed condition the Job controller would write.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jobclaim import CLEANUP_TTL_SECONDS
from jobclaim.api import PtahSchema
from jobclaim.apiserver import CONFIGMAPS, JOBS, PTAHSCHEMAS, Conflict, Object
from kube.client import KubeApi
from lab import run as localrun
from lab.localplane import LocalControlPlane
from tests.support.claimedschema import Cluster, claimed_schema, refusal
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    Webhooked,
    operator,
    registered_webhook,
)
from tests.support.webhookscenes import SETTINGS

pytestmark = pytest.mark.controlplane

TTL = {"ttlSecondsAfterFinished": CLEANUP_TTL_SECONDS}
NOW = "2026-12-02T12:00:00Z"


@dataclass
class Hooked:
    staged: Webhooked
    cluster: Cluster
    hook: localrun.LocalWebhook
    plane: LocalControlPlane


@pytest.fixture
def hooked(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Hooked]:
    # The Jobs here are built with the test world's images, so the webhook pins those;
    # a test that runs the real controller (``make run``'s images) asks for those.
    settings = localrun.LOCAL_SETTINGS if "run_images" in request.keywords else SETTINGS
    certificates = tmp_path_factory.mktemp("webhook-certs")
    with registered_webhook(operator, certificates, settings=settings) as (staged, hook):
        yield Hooked(
            staged,
            Cluster(operator.admin, operator.manager, staged.namespace),
            hook,
            operator.plane,
        )


def run_images(test: Any) -> Any:
    """Mark a test whose Jobs the real controller builds with ``make run``'s images."""
    test.run_images = True
    return test


def _record(cluster: Cluster, schema: PtahSchema, job_uid: str) -> None:
    """The manager records the created Job's UID in its claim, as a pass would."""
    assert schema.status is not None and schema.status.active_operation is not None
    recorded = schema.status.model_copy(
        update={
            "active_operation": schema.status.active_operation.model_copy(
                update={"job_uid": job_uid}
            )
        }
    )
    current = cluster.manager.get(PTAHSCHEMAS, cluster.namespace, schema.metadata.name or "")
    cluster.manager.patch_status(
        PTAHSCHEMAS,
        cluster.namespace,
        schema.metadata.name or "",
        recorded.to_wire(),
        resource_version=current["metadata"]["resourceVersion"],
    )


def _fail(cluster: Cluster, name: str) -> None:
    """Stand in for the Job controller: mark the Job Failed (no Pod can run here).

    The real Job controller writes this status too (it starts the Job, counts its
    Pending Pod), so a write that lost to it is read again and retried.
    """
    condition = {"status": "True", "reason": "DeadlineExceeded", "message": "deadline exceeded"}
    condition |= {"lastProbeTime": NOW, "lastTransitionTime": NOW}
    for _ in range(10):
        current = cluster.admin.get(JOBS, cluster.namespace, name)
        status = {
            # A start the Job controller already recorded is immutable; it stays.
            "startTime": NOW,
            **(current.get("status") or {}),
            # A finished Job has no active Pod (the Pending one is the Job
            # controller's to remove once it sees the Job finished).
            "active": 0,
            "ready": 0,
            "conditions": [{"type": "FailureTarget", **condition}, {"type": "Failed", **condition}],
        }
        try:
            cluster.admin.patch_status(
                JOBS,
                cluster.namespace,
                name,
                status,
                resource_version=current["metadata"]["resourceVersion"],
            )
        except Conflict:
            continue
        return
    raise AssertionError(f"Job {name} could not be marked Failed: every write lost a race")


def test_the_cleanup_ttl_on_a_job_no_record_names_is_refused(hooked: Hooked) -> None:
    cluster = hooked.cluster
    # A Plan's Job gets its cleanup TTL only after its harvest (a Resolve's is born with it).
    _, job = claimed_schema(cluster, "orders-unrecorded", operation="Plan", plane=hooked.plane)
    created = cluster.manager.create(JOBS, cluster.namespace, job)
    # Terminal, so the only thing wrong is that the claim never recorded its UID.
    _fail(cluster, created["metadata"]["name"])
    message = refusal(
        lambda: cluster.manager.patch_spec(JOBS, cluster.namespace, job["metadata"]["name"], TTL)
    )
    assert "the Job is not the exact instance its PtahSchema's record names" in message


def test_the_cleanup_ttl_on_the_recorded_terminal_job_is_admitted(hooked: Hooked) -> None:
    cluster = hooked.cluster
    schema, job = claimed_schema(cluster, "orders-recorded", operation="Plan", plane=hooked.plane)
    created = cluster.manager.create(JOBS, cluster.namespace, job)
    _record(cluster, schema, created["metadata"]["uid"])
    _fail(cluster, created["metadata"]["name"])
    patched = cluster.manager.patch_spec(JOBS, cluster.namespace, job["metadata"]["name"], TTL)
    assert patched["spec"]["ttlSecondsAfterFinished"] == CLEANUP_TTL_SECONDS


def _grant_status_writes(operator: Operator, namespace: str, identity: str) -> None:  # noqa: F811
    """RBAC lets ``identity`` write PtahSchema status, so only the webhook stands between;
    returns once the grant is in force, so a 403 after it is the webhook's and not RBAC's
    cache lagging the write (until_granted)."""
    rules: list[Object] = [
        {
            "apiGroups": ["operator.ptah.run"],
            "resources": ["ptahschemas/status"],
            "verbs": ["get", "patch"],
        }
    ]
    user = operator.plane.identities[identity].user
    localrun.apply(
        operator.plane,
        localrun.ROLES,
        {
            "metadata": {"name": "status-writer", "namespace": namespace},
            "rules": rules,
        },
        identity="admin",
    )
    localrun.apply(
        operator.plane,
        localrun.ROLE_BINDINGS,
        {
            "metadata": {"name": "status-writer", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "status-writer",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
        identity="admin",
    )
    localrun.until_granted(operator.plane, identity, rules, namespace)


@pytest.mark.parametrize(
    ("identity", "admitted"),
    [("manager", True), ("person", False)],
    ids=["manager-admitted", "person-refused"],
)
def test_only_the_manager_writes_status_whatever_rbac_grants(
    operator: Operator,  # noqa: F811
    hooked: Hooked,
    identity: str,
    admitted: bool,
) -> None:
    cluster = hooked.cluster
    _grant_status_writes(operator, cluster.namespace, "person")
    schema, _ = claimed_schema(cluster, f"orders-status-{identity}")
    assert schema.status is not None
    written = schema.status.model_copy(update={"phase": "InSync"}).to_wire()
    name = schema.metadata.name or ""
    with KubeApi.from_kubeconfig(operator.plane.kubeconfig(identity)) as writer:

        def write() -> Object:
            current = cluster.admin.get(PTAHSCHEMAS, cluster.namespace, name)
            return writer.patch_status(
                PTAHSCHEMAS,
                cluster.namespace,
                name,
                written,
                resource_version=current["metadata"]["resourceVersion"],
            )

        if admitted:
            assert write()["status"]["phase"] == "InSync"
        else:
            message = refusal(write)
            assert (
                "only the configured operator manager may write the status of PtahSchema" in message
            )


def _as_submitted(stored: Object) -> Object:
    """A stored ConfigMap as its creator submitted it: without what the server added."""
    meta = stored["metadata"]
    kept = ("name", "namespace", "labels", "annotations", "ownerReferences")
    submitted: dict[str, Any] = {k: v for k, v in stored.items() if k != "metadata"}
    submitted["metadata"] = {k: meta[k] for k in kept if k in meta}
    return submitted


@run_images
def test_a_projection_after_dispatch_started_is_refused(
    operator: Operator,  # noqa: F811
    hooked: Hooked,
) -> None:
    cluster = hooked.cluster
    namespace = cluster.namespace
    controller = localrun.LocalController(operator.manager, namespace)
    controller.start()
    try:
        operator.admin.create(PTAHSCHEMAS, namespace, localrun.example_schema(namespace))
        localrun.wait_for(
            operator.admin,
            namespace,
            "orders",
            lambda s: bool((s.get("status") or {}).get("executionBinding")),
        )
        plan = localrun.seed_plan(
            operator.admin, operator.manager, namespace, "orders", plane=operator.plane
        )
        localrun.approve(operator.admin, namespace, "orders")
        localrun.wait_for(
            operator.admin, namespace, "orders", lambda s: localrun.recorded_job(s) is not None
        )
    finally:
        # Not waited for: the loop only ends once every watch stream does, which the
        # API server decides; its threads are daemons and the Job is recorded.
        controller.stop(wait=0)
    # The controller's own projections were admitted before the mark (the control
    # row); the same projection offered again after it is not.
    projections = [
        c
        for c in operator.admin.list(CONFIGMAPS, namespace)
        if c["metadata"]["name"].startswith(plan.name)
    ]
    assert projections, "the controller projected no plan chunk"
    message = refusal(
        lambda: operator.manager.create(CONFIGMAPS, namespace, _as_submitted(projections[0]))
    )
    assert "the plan projection does not belong to an Apply that can still be dispatched" in message
