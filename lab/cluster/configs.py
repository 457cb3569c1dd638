"""The configuration files of the lab's node, rendered from its topology.

Pure functions: each returns the text of one file, so a test can read exactly
what containerd, the CNI plugins, the kubelet and kube-proxy will be told.
Every setting that is not the component's default says why, next to it (the
TOML and YAML files carry the comments themselves, for whoever opens them in a
work directory).
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.cluster.topology import Layout, Topology

__all__ = [
    "CNI_BIN_DIR",
    "cni_conflist",
    "containerd_config",
    "kube_proxy_config",
    "kubelet_config",
    "registry_hosts_toml",
]

# Where Debian's containernetworking-plugins puts bridge, host-local, loopback
# and portmap.
CNI_BIN_DIR = Path("/usr/lib/cni")


def _q(value: object) -> str:
    """A TOML basic string (JSON's escaping is a subset TOML accepts)."""
    return json.dumps(str(value))


def containerd_config(layout: Layout, sandbox_image: str) -> str:
    """containerd 1.6's config.toml (version 2) for the lab's own instance."""
    c = layout.containerd
    return f"""\
# Written by lab/cluster for one lab cluster; deleted with its work directory.
version = 2
# Its own root, state and sockets, so it never touches (or collides with) a
# containerd the machine may run, and teardown knows every path it used.
root = {_q(c / "root")}
state = {_q(c / "state")}

[grpc]
  address = {_q(layout.containerd_socket)}

[ttrpc]
  address = {_q(c / "containerd.sock.ttrpc")}

# Nothing scrapes metrics or debug endpoints; an unused socket is one more leftover.
[debug]
  address = ""
[metrics]
  address = ""

[plugins]
  # The "opt" plugin would create /opt/containerd; keep it in the work directory.
  [plugins."io.containerd.internal.v1.opt"]
    path = {_q(c / "opt")}

  [plugins."io.containerd.grpc.v1.cri"]
    # Pulled from the lab's own registry (on the node's address): nothing can come from outside.
    sandbox_image = {_q(sandbox_image)}
    # Lowering oom_score_adj is not permitted on these machines, even as root;
    # without this every sandbox fails with "runc create failed: ... can't get
    # final child's PID from pipe: EOF".
    restrict_oom_score_adj = true
    # CNI network namespaces are bind-mounted under the state directory rather
    # than /var/run/netns, so every mount the lab makes lives in its work directory.
    netns_mounts_under_state_dir = true

    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          # These machines mount cgroup v1 hierarchies and run no systemd, so the
          # kubelet's cgroupfs driver and runc's must agree on plain cgroupfs.
          SystemdCgroup = false
          # runc's state in the work directory instead of /run/containerd/runc.
          Root = {_q(c / "runc")}

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = {_q(CNI_BIN_DIR)}
      # Only the lab's network, never a system-wide one from /etc/cni/net.d.
      conf_dir = {_q(layout.cni_conf_dir)}
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".registry]
      # Per-registry host files: the lab's registry speaks plain HTTP.
      config_path = {_q(layout.registry_hosts)}
"""


def registry_hosts_toml(registry: str) -> str:
    """containerd's hosts.toml for the lab registry at ``host:port``: plain HTTP."""
    url = f"http://{registry}"
    return f"""\
# The lab's registry (crane registry serve) has no TLS.
server = {_q(url)}

[host.{_q(url)}]
  capabilities = ["pull", "resolve"]
"""


def cni_conflist(topology: Topology, layout: Layout) -> str:
    """The CNI network: a bridge whose gateway address is the node's address."""
    conf = {
        "cniVersion": "1.0.0",
        "name": topology.cni_network,
        "plugins": [
            {
                "type": "bridge",
                # Created by the lab before anything starts (the API server binds
                # to its address), so the plugin finds it rather than making it.
                "bridge": topology.bridge,
                "isGateway": True,
                # No masquerade: pods talk only to this node and each other, and
                # their traffic must never be rewritten to leave the machine.
                "ipMasq": False,
                # A Pod can reach a Service that routes back to itself.
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [
                            {
                                "subnet": str(topology.pod_subnet),
                                "gateway": str(topology.node_ip),
                            }
                        ]
                    ],
                    # Only the Service range is routed (through the node, where
                    # kube-proxy's rules are); there is no default route to leave by.
                    "routes": [{"dst": str(topology.service_cidr)}],
                    # Address leases in the work directory, not /var/lib/cni.
                    "dataDir": str(layout.cni_ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


def kubelet_config(
    topology: Topology,
    layout: Layout,
    *,
    port: int,
    client_ca: Path,
    serving_cert: Path,
    serving_key: Path,
) -> str:
    """The KubeletConfiguration (YAML) of the lab's node."""
    return f"""\
# Written by lab/cluster for one lab cluster.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Serve on the bridge address only (the API server reaches it there for logs),
# on a free port rather than 10250, and never on the machine's uplink.
address: {topology.node_ip}
port: {port}
# No unauthenticated read-only port and no healthz listener: nothing uses them.
readOnlyPort: 0
healthzPort: 0
# The API server presents a client certificate from the lab's CA; every request
# is then authorized by asking the API server (a SubjectAccessReview).
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {json.dumps(str(client_ca))}}}
authorization:
  mode: Webhook
# A serving certificate from the lab's CA, so the API server can verify it.
tlsCertFile: {json.dumps(str(serving_cert))}
tlsPrivateKeyFile: {json.dumps(str(serving_key))}
containerRuntimeEndpoint: unix://{layout.containerd_socket}
imageServiceEndpoint: unix://{layout.containerd_socket}
# cgroup v1 without systemd: cgroupfs, and no refusal to run on v1.
cgroupDriver: cgroupfs
failCgroupV1: false
# Every pod cgroup under one lab-owned root in each hierarchy (created by the
# lab, removed by its teardown).
cgroupRoot: /{topology.cgroup_root}
# These machines may have swap; the lab does not care.
failSwapOn: false
# No cluster DNS and no host resolver inside pods: names resolve nowhere, so a
# Pod cannot look up (let alone reach) anything outside.
resolvConf: ""
# Never evict and never reserve: the lab's few pods share a developer's disk and
# memory, and an eviction would be a flaky test, not a finding.
evictionHard: {{}}
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
# Never garbage-collect images: the registry's copies are the only ones.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No static pods: everything runs through the API server.
staticPodPath: ""
# Pod logs and FlexVolume plugins in the work directory instead of /var/log/pods
# and /usr/libexec/kubernetes (the kubelet creates both when they are missing).
podLogsDir: {json.dumps(str(layout.kubelet / "pod-logs"))}
volumePluginDir: {json.dumps(str(layout.kubelet / "volume-plugins"))}
"""


def kube_proxy_config(
    topology: Topology,
    *,
    kubeconfig: Path,
    healthz_port: int,
    metrics_port: int,
) -> str:
    """The KubeProxyConfiguration (YAML): iptables mode on the lab's node."""
    return f"""\
# Written by lab/cluster for one lab cluster.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {json.dumps(str(kubeconfig))}
mode: iptables
hostnameOverride: {topology.node_name}
# Traffic from pods is cluster traffic: never masquerade it.
clusterCIDR: {topology.pod_subnet}
# Loopback listeners on free ports instead of 0.0.0.0:10256 and 127.0.0.1:10249.
healthzBindAddress: 127.0.0.1:{healthz_port}
metricsBindAddress: 127.0.0.1:{metrics_port}
# NodePorts only on the bridge address, never on the machine's uplink.
nodePortAddresses: ["{topology.node_ip}/32"]
iptables:
  # Would set net.ipv4.conf.all.route_localnet=1 machine-wide.
  localhostNodePorts: false
# Leave the machine's conntrack table size and timeouts as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"""
