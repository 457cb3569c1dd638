"""Where the lab's single-node cluster lives: its names, addresses and files.

One frozen value that every other module reads, so a name (the bridge, the
cgroup root, the node) is chosen in exactly one place and teardown removes
exactly what start created.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Layout", "Topology"]

# A /24 from 10/8 that neither this machine's uplink (192.0.2.0/24) nor the
# harness's Service range uses.
_POD_SUBNET = ipaddress.IPv4Network("10.77.0.0/24")
# The API server's default; its first address is the kubernetes Service.
_SERVICE_CIDR = ipaddress.IPv4Network("10.0.0.0/24")


@dataclass(frozen=True)
class Topology:
    """The cluster's names and addresses, all inside this machine.

    The pod subnet is routed nowhere: the bridge's own address is the node's
    address, pods get a route to the Service range only (no default route), and
    the lab drops anything forwarded off the bridge, so nothing a Pod sends can
    leave the machine.
    """

    node_name: str = "ptah-lab"
    bridge: str = "ptahlab0"
    # Set, not left to the kernel: a bridge whose address nobody set takes the lowest
    # address among its ports, so it changed whenever a Pod's veth came or went, and a
    # running Pod's cached gateway address went stale: its next connection to the node
    # (PostgreSQL on the bridge) timed out and an Apply failed without touching SQL.
    # Locally administered (0x02), unicast.
    bridge_mac: str = "02:70:74:61:68:00"
    pod_subnet: ipaddress.IPv4Network = _POD_SUBNET
    service_cidr: ipaddress.IPv4Network = _SERVICE_CIDR
    # Under every cgroup v1 hierarchy: the kubelet puts all pods below it, so
    # teardown removes one tree per hierarchy and nothing else.
    cgroup_root: str = "ptah-lab"
    # The CNI network's name (its cached results are named after it).
    cni_network: str = "ptah-lab"
    # Marks the lab's own iptables rules so teardown can find them.
    rule_comment: str = "ptah-lab"

    @property
    def node_ip(self) -> ipaddress.IPv4Address:
        """The bridge's address: the node IP, the API server's, the gateway's."""
        return next(self.pod_subnet.hosts())

    @property
    def kubernetes_service_ip(self) -> ipaddress.IPv4Address:
        return next(self.service_cidr.hosts())


@dataclass(frozen=True)
class Layout:
    """Every file and directory of one cluster, under its work directory."""

    workdir: Path

    @property
    def controlplane(self) -> Path:
        return self.workdir / "controlplane"

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def kubeconfigs(self) -> Path:
        return self.workdir / "kubeconfigs"

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    @property
    def containerd(self) -> Path:
        return self.workdir / "containerd"

    @property
    def containerd_config(self) -> Path:
        return self.containerd / "config.toml"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def registry_hosts(self) -> Path:
        """containerd's per-registry host configuration (certs.d layout)."""
        return self.containerd / "certs.d"

    @property
    def cni_conf_dir(self) -> Path:
        return self.workdir / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.workdir / "cni" / "ipam"

    @property
    def kubelet(self) -> Path:
        return self.workdir / "kubelet"

    @property
    def kubelet_root(self) -> Path:
        return self.kubelet / "root"

    @property
    def kubelet_config(self) -> Path:
        return self.kubelet / "config.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.workdir / "kube-proxy" / "config.yaml"

    @property
    def registry_storage(self) -> Path:
        return self.workdir / "registry"

    @property
    def images(self) -> Path:
        return self.workdir / "images"
