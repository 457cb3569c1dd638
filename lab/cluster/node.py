"""The lab cluster's one node: containerd, the scheduler, the kubelet and kube-proxy.

``LocalCluster`` (``lab.cluster.cluster``) owns the order of a start and a stop; this
module knows what each node component is given (its identity, its configuration
file, its command line), when it counts as up (containerd's socket answers, the
Node object is Ready and untainted), and how the runtime is emptied on stop. Each
starter adds its ``Child`` to the cluster's ``children`` before starting it, so a
start that fails half-way still stops what came before.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import httpx

from lab.cluster import configs
from lab.cluster.pki import ClientIdentity, LabPKI, write_kubeconfig
from lab.cluster.processes import Child, wait_until
from lab.cluster.registry import free_port
from lab.cluster.topology import Layout, Topology
from lab.localplane import LocalControlPlane, ensure_binary

# The identities the node's components authenticate as (client certificates
# from the lab's CA). The scheduler's and kube-proxy's users are the ones the
# API server's bootstrap RBAC binds to their roles; the API server itself, when
# it asks the kubelet for logs, is in system:masters so the kubelet's
# SubjectAccessReview allows it.
NODE_CLIENTS = {
    "scheduler": ClientIdentity("scheduler", "system:kube-scheduler"),
    "proxy": ClientIdentity("proxy", "system:kube-proxy"),
    "kubelet-client": ClientIdentity(
        "kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
    ),
}


def start_containerd(
    topology: Topology,
    layout: Layout,
    *,
    registry: str,
    pause_ref: str,
    children: dict[str, Child],
) -> None:
    """containerd configured for the lab's registry, CNI and pause image, until its
    socket answers."""
    layout.containerd.mkdir(parents=True, exist_ok=True)
    hosts = layout.registry_hosts / registry
    hosts.mkdir(parents=True, exist_ok=True)
    (hosts / "hosts.toml").write_text(configs.registry_hosts_toml(registry))
    layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    (layout.cni_conf_dir / "10-ptah-lab.conflist").write_text(
        configs.cni_conflist(topology, layout)
    )
    layout.containerd_config.write_text(configs.containerd_config(layout, pause_ref))
    child = Child(
        "containerd",
        ["containerd", "--config", str(layout.containerd_config)],
        layout.logs / "containerd.log",
    )
    children["containerd"] = child
    child.start()

    def ready() -> str:
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(layout.containerd_socket))
            except OSError as exc:
                return f"its socket does not answer: {exc}"
        return ""

    wait_until("containerd", ready, timeout=60.0, children=[child])


def start_node(
    topology: Topology,
    layout: Layout,
    plane: LocalControlPlane,
    pki: LabPKI,
    *,
    children: dict[str, Child],
) -> dict[str, Path]:
    """The scheduler, the kubelet and kube-proxy started; the kubeconfigs written for
    them (``scheduler``, ``proxy``, ``node``), returned by identity."""
    kubeconfigs: dict[str, Path] = {}
    binary = str(ensure_binary())
    for name in ("scheduler", "proxy"):
        cert, key = pki.client(NODE_CLIENTS[name])
        kubeconfigs[name] = write_kubeconfig(
            layout.kubeconfigs / f"{name}.yaml",
            server=plane.server_url,
            server_ca=plane.ca_path,
            user=NODE_CLIENTS[name].user,
            cert=cert,
            key=key,
        )
    node = ClientIdentity("node", f"system:node:{topology.node_name}", ("system:nodes",))
    cert, key = pki.client(node)
    kubeconfigs["node"] = write_kubeconfig(
        layout.kubeconfigs / "node.yaml",
        server=plane.server_url,
        server_ca=plane.ca_path,
        user=node.user,
        cert=cert,
        key=key,
    )
    serving_cert, serving_key = pki.serving("kubelet-serving", [topology.node_ip])
    layout.kubelet_root.mkdir(parents=True, exist_ok=True)
    layout.kubelet_config.write_text(
        configs.kubelet_config(
            topology,
            layout,
            port=free_port(str(topology.node_ip)),
            client_ca=pki.ca_cert,
            serving_cert=serving_cert,
            serving_key=serving_key,
        )
    )
    layout.kube_proxy_config.parent.mkdir(parents=True, exist_ok=True)
    layout.kube_proxy_config.write_text(
        configs.kube_proxy_config(
            topology,
            kubeconfig=kubeconfigs["proxy"],
            healthz_port=free_port(),
            metrics_port=free_port(),
        )
    )
    commands = {
        "kube-scheduler": [
            f"--kubeconfig={kubeconfigs['scheduler']}",
            # One scheduler, no competitor, and nothing scrapes it.
            "--leader-elect=false",
            "--secure-port=0",
        ],
        "kubelet": [
            f"--config={layout.kubelet_config}",
            f"--kubeconfig={kubeconfigs['node']}",
            f"--root-dir={layout.kubelet_root}",
            f"--hostname-override={topology.node_name}",
            # A loopback node IP is refused; the bridge's address is the node's.
            f"--node-ip={topology.node_ip}",
        ],
        "kube-proxy": [f"--config={layout.kube_proxy_config}"],
    }
    for name, args in commands.items():
        child = Child(name, [binary, name, *args], layout.logs / f"{name}.log")
        children[name] = child
        child.start()
    return kubeconfigs


def wait_node_ready(
    plane: LocalControlPlane, node_name: str, *, timeout: float, children: list[Child]
) -> None:
    """Until the Node is Ready and untainted (or a child dies, or ``timeout``)."""
    headers = {"Authorization": f"Bearer {plane.token('admin')}"}
    url = f"{plane.server_url}/api/v1/nodes/{node_name}"
    with httpx.Client(verify=plane.ssl_context(), timeout=5.0, headers=headers) as http:

        def ready() -> str:
            try:
                response = http.get(url)
            except httpx.HTTPError as exc:
                return f"GET node: {exc!r}"
            if response.status_code == 404:
                return "the kubelet has not registered the node yet"
            node = response.json()
            ready = [
                c for c in node.get("status", {}).get("conditions", []) if c.get("type") == "Ready"
            ]
            if not ready or ready[0].get("status") != "True":
                return f"node not Ready: {ready[0].get('message') if ready else 'no condition'}"
            if taints := node.get("spec", {}).get("taints"):
                return f"the node is still tainted: {taints}"
            return ""

        # The kubelet registers the node and reports Ready on its own time
        # (its runtime and network checks run every few seconds).
        wait_until("the node", ready, timeout=timeout, children=children)


def _ctr(layout: Layout, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "--address", str(layout.containerd_socket), "--namespace", "k8s.io", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def stop_runtime(layout: Layout, containerd: Child | None) -> list[str]:
    """Every container's task killed through containerd, then containerd stopped; the
    problems met, as sentences."""
    problems: list[str] = []
    if containerd is not None and containerd.running():
        # Kill every container's task through containerd, so its shim
        # reaps it and records the exit, then stop containerd.
        listed = _ctr(layout, "tasks", "list", "--quiet")
        for task in listed.stdout.split():
            _ctr(layout, "tasks", "kill", "--signal", "SIGKILL", task)
        for task in listed.stdout.split():
            _ctr(layout, "tasks", "delete", "--force", task)
    if containerd is not None and (problem := containerd.stop(grace=15.0)):
        problems.append(problem)
    return problems
