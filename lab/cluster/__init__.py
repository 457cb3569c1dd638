"""A real single-node Kubernetes cluster on this machine, with no Docker (``LocalCluster``).

kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubelet and
kube-proxy v1.37.2 from one Go binary (``make controlplane``); containerd, runc
and the CNI plugins from Debian's packages (``make node-packages``); a registry
on the node's address (``make crane``). ``python -m lab.cluster`` runs one until Ctrl-C.
"""

from lab.cluster.cluster import (
    CLUSTER_CONTROLLERS,
    ClusterError,
    ClusterStartError,
    LocalCluster,
    ensure_tools,
)
from lab.cluster.topology import Layout, Topology

__all__ = [
    "CLUSTER_CONTROLLERS",
    "ClusterError",
    "ClusterStartError",
    "Layout",
    "LocalCluster",
    "Topology",
    "ensure_tools",
]
