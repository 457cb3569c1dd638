"""The chart's manager replicas as the fault scenarios handle them: upgraded, scaled,
found, paused.

A Pod's containers are host processes here (containerd and runc on this machine), so a
manager is paused the way an overloaded or descheduled process is: SIGSTOP to every
process in its container's cgroup, found from the container ID the kubelet reports.
``paused`` always resumes them, whatever the scenario raised.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final

import yaml

from jobclaim.apiserver import LEASES, PODS, Object
from lab import install
from lab.clusterrun import MANAGER_NAMESPACE, LabRun
from lab.install import DEPLOYMENTS, MANAGER_PODS, RELEASE, deployment_ready
from tests.cluster.clusterkit import Api, poll

LEADER_LEASE: Final = "ptah-operator-leader"
SELECTOR: Final = {"app.kubernetes.io/name": RELEASE}
# Starting a replica means pulling nothing (the image is on the node) but starting
# Python and passing the startup probe on a loaded 2-core node.
READY_DEADLINE: Final = 300.0


def chart_upgraded(run: LabRun, values: dict[str, Any]) -> None:
    """``helm upgrade --reuse-values`` with ``values`` layered on the release's own;
    returns once the new manager is Ready and the old manager Pod is gone, its grace
    period over (Ready counts the new Pod only, and the old one may lead until it has
    stopped)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as layer:
        layer.write(yaml.safe_dump(values))
        layer.flush()
        argv = [
            str(install.HELM),
            "upgrade",
            RELEASE,
            str(install.CHART),
            "--kubeconfig",
            str(run.lab.kubeconfig("admin")),
            "--namespace",
            MANAGER_NAMESPACE,
            "--reuse-values",
            "--values",
            layer.name,
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    admin = run.lab.kubeconfig("admin")
    install.wait_ready(
        run.admin,
        MANAGER_NAMESPACE,
        kubeconfig=admin,
        report=print,
        timeout=READY_DEADLINE,
        check=run.lab.check,
    )
    # Gone, not only being deleted: a deleted Pod stays Running through its grace period
    # (30 s), and what comes next (make run's tests count Running manager Pods, a fault
    # scenario's leader) must not see it.
    poll(
        "the old manager Pod gone",
        lambda: (
            len(run.admin.list(PODS, MANAGER_NAMESPACE, label_selector=MANAGER_PODS)) == 1 or None
        ),
        timeout=120.0,
    )
    # The old Pod may have answered wait_ready's probe; once it is gone the Service's
    # EndpointSlice changes again on the endpoint controller's time, so ask once more.
    poll(
        "the webhook answering through its Service",
        lambda: install.webhook_served(admin, MANAGER_NAMESPACE) or None,
        timeout=60.0,
    )


@contextmanager
def two_managers(run: LabRun, api: Api, timings: dict[str, str]) -> Iterator[Object]:
    """Two manager replicas with the leader-election ``timings`` (the chart's variables
    PTAH_LEADER_ELECTION_*, by suffix); the Deployment's own spec is put back after.

    The chart's lab install runs one replica; restoring the saved spec brings its
    ReplicaSet back (same template), so the environment ends as the chart made it.
    """
    saved = run.admin.get(DEPLOYMENTS, MANAGER_NAMESPACE, RELEASE)
    env = [
        {"name": f"PTAH_LEADER_ELECTION_{suffix}", "value": value}
        for suffix, value in timings.items()
    ]
    container = {"name": "manager", "env": env}
    api.http.patch(
        f"/apis/apps/v1/namespaces/{MANAGER_NAMESPACE}/deployments/{RELEASE}",
        json={"spec": {"replicas": 2, "template": {"spec": {"containers": [container]}}}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    ).raise_for_status()
    try:
        yield _rolled_out(run, 2)
    finally:
        current = run.admin.get(DEPLOYMENTS, MANAGER_NAMESPACE, RELEASE)
        current["spec"] = saved["spec"]
        run.admin.replace(DEPLOYMENTS, MANAGER_NAMESPACE, current)
        _rolled_out(run, int(saved["spec"].get("replicas", 1)))


def _rolled_out(run: LabRun, replicas: int) -> Object:
    def ready() -> Object | None:
        deployment = run.admin.get(DEPLOYMENTS, MANAGER_NAMESPACE, RELEASE)
        done = deployment_ready(deployment) and len(managers(run)) == replicas
        return deployment if done else None

    return poll(f"{replicas} manager replica(s) rolled out", ready, timeout=READY_DEADLINE)


def managers(run: LabRun) -> list[Object]:
    """The manager Pods (not the certificate rotator's), but those being deleted."""
    return [
        pod
        for pod in run.admin.list(PODS, MANAGER_NAMESPACE, label_selector=SELECTOR)
        if (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "manager"
        and not pod["metadata"].get("deletionTimestamp")
    ]


def leader_lease(run: LabRun) -> Object:
    return run.admin.get(LEASES, MANAGER_NAMESPACE, LEADER_LEASE)


def holder(lease: Object) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def restarts(pod: Object) -> int:
    return sum(
        int(status.get("restartCount") or 0)
        for status in (pod.get("status") or {}).get("containerStatuses") or []
    )


def container_processes(pod: Object) -> list[int]:
    """Every host process in the Pod's manager container, by its cgroup."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ids = [str(s.get("containerID") or "").rpartition("://")[2] for s in statuses]
    ids = [i for i in ids if i]
    assert ids, f"the kubelet reports no container of {pod['metadata']['name']}"
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cgroup = (proc / "cgroup").read_text()
        except OSError:
            continue  # exited while we looked
        if any(i in cgroup for i in ids):
            found.append(int(proc.name))
    assert found, f"no host process runs the container(s) {ids}"
    return found


@contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """SIGSTOP ``pids`` for the block; SIGCONT them on the way out, always."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        resume(pids)


def resume(pids: list[int]) -> None:
    """SIGCONT ``pids`` (resuming a process twice, or one that is gone, is harmless)."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
