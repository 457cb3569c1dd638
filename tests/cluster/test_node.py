"""A real node runs what the API server is asked to run.

Each test is one thing the lab cluster must do for the operator's Jobs to be
real: a Job completes, its Pod's log is read through the API server, a
termination message comes back, deadlines and deletions are enforced by the
kubelet, Pods reach the API server through the kubernetes Service, and images
come from the lab's own registry.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lab.cluster import LocalCluster
from lab.cluster.images import oci_layout, push
from tests.cluster.clusterkit import Api, pod_manifest, pod_phase_in, poll

pytestmark = pytest.mark.cluster

KUBE_VERSION = "v1.37.2"


def test_every_component_reports_the_pinned_kubernetes_version(
    cluster: LocalCluster, api: Api
) -> None:
    assert api.get("/version")["gitVersion"] == KUBE_VERSION
    node = api.get(f"/api/v1/nodes/{cluster.topology.node_name}")
    assert node["status"]["nodeInfo"]["kubeletVersion"] == KUBE_VERSION
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.6")
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == str(cluster.topology.node_ip)


def test_the_node_is_the_node_authorizers_and_cannot_touch_other_nodes(
    cluster: LocalCluster, api: Api
) -> None:
    # The kubelet authenticates as system:node:ptah-lab in system:nodes;
    # NodeRestriction refuses it another node's object.
    config = yaml.safe_load(cluster.kubeconfig("node").read_text())
    user = config["users"][0]["user"]
    tls = cluster.control_plane.ssl_context()
    tls.load_cert_chain(user["client-certificate"], user["client-key"])
    with httpx.Client(base_url=api.server, verify=tls, timeout=30.0) as node:
        review = node.post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        ).json()
        assert review["status"]["userInfo"]["username"] == "system:node:ptah-lab"
        assert "system:nodes" in review["status"]["userInfo"]["groups"]
        other = node.post(
            "/api/v1/nodes",
            json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "not-this-node"}},
        )
        assert other.status_code == 403, other.text


def test_a_job_runs_to_complete_and_its_log_is_read_through_the_api_server(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello"},
        "spec": {
            "backoffLimit": 0,
            "template": pod_manifest(
                "unused", cluster.image("probe").ref, ["say", "hello from a real node"]
            )
            | {"metadata": {}},
        },
    }
    api.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", job)

    def complete() -> dict[str, Any] | None:
        found = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/hello")
        conditions = {c["type"]: c["status"] for c in found.get("status", {}).get("conditions", [])}
        assert conditions.get("Failed") != "True", found["status"]
        return found if conditions.get("Complete") == "True" else None

    poll("the Job's completion", complete)
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3Dhello")["items"]
    assert len(pods) == 1
    log = api.text(f"/api/v1/namespaces/{namespace}/pods/{pods[0]['metadata']['name']}/log")
    assert log == "hello from a real node\n"


def test_a_termination_message_is_read_back_from_the_pod_status(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("ends", cluster.image("probe").ref, ["terminate", "3", "the last word"]),
    )
    pod = poll("the Pod's failure", lambda: pod_phase_in(api, namespace, "ends", {"Failed"}))
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert terminated["message"] == "the last word"


def test_active_deadline_seconds_kills_a_running_pod(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("late", cluster.image("probe").ref, ["wait"], activeDeadlineSeconds=5),
    )
    pod = poll("the deadline's kill", lambda: pod_phase_in(api, namespace, "late", {"Failed"}))
    assert pod["status"]["reason"] == "DeadlineExceeded"

    def container_stopped() -> dict[str, Any] | None:
        current = api.get(f"/api/v1/namespaces/{namespace}/pods/late")
        state: dict[str, dict[str, Any]] = current["status"]["containerStatuses"][0]["state"]
        return state.get("terminated")

    # The phase is written first; the kubelet kills the container right after.
    poll("the container's end", container_stopped)


def _tasks(cluster: LocalCluster) -> str:
    result = subprocess.run(
        ["ctr", "--address", str(cluster.layout.containerd_socket), "-n", "k8s.io", "tasks", "ls"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return result.stdout


def test_a_deleted_running_pod_is_finished_off_by_the_kubelet(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("doomed", cluster.image("probe").ref, ["wait"]),
    )
    pod = poll("the Pod running", lambda: pod_phase_in(api, namespace, "doomed", {"Running"}))
    container_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix(
        "containerd://"
    )
    assert container_id in _tasks(cluster)

    api.delete(f"/api/v1/namespaces/{namespace}/pods/doomed")
    # Deletion only sets deletionTimestamp; the object goes once the kubelet
    # has stopped the container and confirmed it (a delete with grace 0).
    poll(
        "the kubelet's confirmation of the deletion",
        lambda: (
            True if api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/doomed") is None else None
        ),
    )
    assert container_id not in _tasks(cluster)


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("asks", cluster.image("probe").ref, ["whoami"]),
    )
    pod = poll(
        "the Pod's end", lambda: pod_phase_in(api, namespace, "asks", {"Succeeded", "Failed"})
    )
    log = api.text(f"/api/v1/namespaces/{namespace}/pods/asks/log")
    assert pod["status"]["phase"] == "Succeeded", log
    service_ip = cluster.topology.kubernetes_service_ip
    assert log == f"user=system:serviceaccount:{namespace}:default via={service_ip}:443\n"


def test_an_image_pushed_to_the_lab_registry_runs(
    cluster: LocalCluster, api: Api, namespace: str, tmp_path: Path
) -> None:
    probe = cluster.layout.images / "bin" / "probe"
    layout = tmp_path / "layout"
    digest = oci_layout(layout, {"bin/probe": (probe.read_bytes(), 0o755)}, ["/bin/probe"])
    image = push(cluster.crane, layout, f"{cluster.registry}/tests/pushed:{namespace}", digest)
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("pushed", image.ref, ["say", f"pulled {digest}"]),
    )
    pod = poll(
        "the Pod's end", lambda: pod_phase_in(api, namespace, "pushed", {"Succeeded", "Failed"})
    )
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["imageID"].endswith(digest)
    assert api.text(f"/api/v1/namespaces/{namespace}/pods/pushed/log") == f"pulled {digest}\n"


def test_a_pod_has_no_route_off_this_machine(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    # An address outside the machine (TEST-NET-2). With no default route in
    # the Pod, the kernel refuses the connection before any packet is sent.
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("stays", cluster.image("probe").ref, ["dial", "198.51.100.1:80"]),
    )
    poll("the Pod's end", lambda: pod_phase_in(api, namespace, "stays", {"Succeeded"}))
    log = api.text(f"/api/v1/namespaces/{namespace}/pods/stays/log")
    assert (
        log == "dial 198.51.100.1:80: dial tcp 198.51.100.1:80: connect: network is unreachable\n"
    )


def test_the_bridge_keeps_its_set_address_while_pods_come_and_go(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    # A bridge whose address the kernel chose follows its lowest port's address; a Pod's
    # cached gateway address then goes stale when another Pod's veth comes or goes, and
    # its connections to the node time out (an Apply failed so on the lab cluster).
    link = Path("/sys/class/net") / cluster.topology.bridge
    assert (link / "addr_assign_type").read_text().strip() == "3"  # NET_ADDR_SET
    api.create(
        f"/api/v1/namespaces/{namespace}/pods",
        pod_manifest("passes", cluster.image("probe").ref, ["say", "a veth came and went"]),
    )
    poll("the Pod's end", lambda: pod_phase_in(api, namespace, "passes", {"Succeeded", "Failed"}))
    api.delete(f"/api/v1/namespaces/{namespace}/pods/passes", gracePeriodSeconds="0")
    poll(
        "the Pod's deletion",
        lambda: (
            True if api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/passes") is None else None
        ),
    )
    assert (link / "address").read_text().strip() == cluster.topology.bridge_mac
