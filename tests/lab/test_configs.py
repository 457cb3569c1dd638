"""What the lab tells containerd, the CNI plugins, the kubelet and kube-proxy."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml

from lab.cluster import configs
from lab.cluster.topology import Layout, Topology

TOPOLOGY = Topology()
LAYOUT = Layout(Path("/w"))


def _cri(config: dict[str, Any]) -> dict[str, Any]:
    cri: dict[str, Any] = config["plugins"]["io.containerd.grpc.v1.cri"]
    return cri


def test_containerd_keeps_every_path_in_the_work_directory() -> None:
    config = tomllib.loads(configs.containerd_config(LAYOUT, "127.0.0.1:5000/ptah-lab/pause:lab"))
    cri = _cri(config)
    assert config["root"] == "/w/containerd/root"
    assert config["state"] == "/w/containerd/state"
    assert config["grpc"]["address"] == "/w/containerd/containerd.sock"
    assert config["plugins"]["io.containerd.internal.v1.opt"]["path"] == "/w/containerd/opt"
    assert cri["cni"]["conf_dir"] == "/w/cni/net.d"
    assert cri["registry"]["config_path"] == "/w/containerd/certs.d"
    assert cri["netns_mounts_under_state_dir"] is True
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    assert runc == {"SystemdCgroup": False, "Root": "/w/containerd/runc"}


def test_containerd_can_start_sandboxes_here() -> None:
    cri = _cri(tomllib.loads(configs.containerd_config(LAYOUT, "reg/pause:lab")))
    # Without it every sandbox fails: oom_score_adj cannot be lowered here.
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "reg/pause:lab"


def test_the_registry_is_plain_http_on_its_own_address() -> None:
    hosts = tomllib.loads(configs.registry_hosts_toml("127.0.0.1:5000"))
    assert hosts == {
        "server": "http://127.0.0.1:5000",
        "host": {"http://127.0.0.1:5000": {"capabilities": ["pull", "resolve"]}},
    }


def test_pods_get_the_bridge_and_a_route_to_services_only() -> None:
    conf = json.loads(configs.cni_conflist(TOPOLOGY, LAYOUT))
    bridge = conf["plugins"][0]
    assert [p["type"] for p in conf["plugins"]] == ["bridge", "portmap"]
    assert bridge["bridge"] == "ptahlab0"
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.77.0.0/24", "gateway": "10.77.0.1"}]]
    # No default route: a Pod has nowhere to send anything but the node and Services.
    assert bridge["ipam"]["routes"] == [{"dst": "10.0.0.0/24"}]
    assert bridge["ipam"]["dataDir"] == "/w/cni/ipam"


def test_the_kubelet_serves_on_the_bridge_and_authorizes_through_the_api() -> None:
    config = yaml.safe_load(
        configs.kubelet_config(
            TOPOLOGY,
            LAYOUT,
            port=12345,
            client_ca=Path("/w/pki/ca.crt"),
            serving_cert=Path("/w/pki/k.crt"),
            serving_key=Path("/w/pki/k.key"),
        )
    )
    assert config["address"] == "10.77.0.1"
    assert config["port"] == 12345
    assert config["readOnlyPort"] == 0
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authentication"]["x509"] == {"clientCAFile": "/w/pki/ca.crt"}
    assert config["authorization"] == {"mode": "Webhook"}
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/ptah-lab"
    assert config["failCgroupV1"] is False
    assert config["containerRuntimeEndpoint"] == "unix:///w/containerd/containerd.sock"
    assert config["podLogsDir"] == "/w/kubelet/pod-logs"
    assert config["volumePluginDir"] == "/w/kubelet/volume-plugins"
    assert config["evictionHard"] == {}


def test_kube_proxy_uses_iptables_and_leaves_the_machine_settings_alone() -> None:
    config = yaml.safe_load(
        configs.kube_proxy_config(
            TOPOLOGY, kubeconfig=Path("/w/p.yaml"), healthz_port=1, metrics_port=2
        )
    )
    assert config["mode"] == "iptables"
    assert config["clusterCIDR"] == "10.77.0.0/24"
    assert config["healthzBindAddress"] == "127.0.0.1:1"
    assert config["metricsBindAddress"] == "127.0.0.1:2"
    assert config["nodePortAddresses"] == ["10.77.0.1/32"]
    assert config["iptables"] == {"localhostNodePorts": False}
    assert config["conntrack"]["maxPerCore"] == 0
