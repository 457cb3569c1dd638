"""A real single-node Kubernetes cluster on this machine, with no Docker.

    with LocalCluster(workdir) as cluster:
        cluster.kubeconfig("admin")      # kubectl works with it
        cluster.image("probe").ref       # an image the node can pull

Start order (each step needs the one before): refuse leftovers of an earlier
lab, take the machine-wide lock, note the kernel settings and iptables rules,
create the bridge (the node's address) and the lab's cgroup roots, issue the
identities, start the registry and push the lab's images, start containerd,
start the API server with etcd and the controller manager (advertised on the
bridge), then the scheduler, the kubelet and kube-proxy, and wait until the
node is Ready. Stop undoes all of it in reverse and then checks that nothing of
the lab is left (``host.leftovers``); anything left is an error, not a warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import httpx

from lab.cluster import configs, host, images, netfilter
from lab.cluster.pki import ClientIdentity, LabPKI, write_kubeconfig
from lab.cluster.processes import Child, run_checked, wait_until
from lab.cluster.registry import Registry, free_port
from lab.cluster.topology import Layout, Topology
from lab.localplane import (
    DEFAULT_CONTROLLERS,
    DEFAULT_IDENTITIES,
    LocalControlPlane,
    ensure_binary,
)

__all__ = [
    "CLUSTER_CONTROLLERS",
    "ClusterError",
    "ClusterStartError",
    "LocalCluster",
    "ensure_tools",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CRANE = REPO_ROOT / ".tools" / "bin" / "crane"
# One lab cluster per machine: kube-proxy's chains, the bridge and the cgroup
# roots are machine-wide, and two labs would tear down each other's.
LOCK_PATH = Path("/run/ptah-lab.lock")

# The harness's controllers, plus what a node's Pods need: the node lifecycle
# controller (it lifts the not-ready taint a kubelet registers its node with;
# without it nothing is ever scheduled), a default service account in every
# namespace (ServiceAccount admission requires it), the kube-root-ca.crt
# ConfigMap that every Pod's token volume mounts, Services' EndpointSlices, and
# Deployments (the chart's manager).
CLUSTER_CONTROLLERS = (
    *DEFAULT_CONTROLLERS,
    "node-lifecycle-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "endpointslice-controller",
    "deployment-controller",
    "replicaset-controller",
)

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

IMAGE_TAG = "lab"
_MAX_SOCKET_PATH = 107


class ClusterError(Exception):
    """The lab cluster cannot be built, started or stopped cleanly."""


class ClusterStartError(ClusterError):
    """The lab cluster did not start; what was started has been stopped."""


def ensure_tools(timeout: float = 3600.0) -> None:
    """Build or install what the cluster runs: ``make controlplane crane node-packages``."""
    ensure_binary(timeout=timeout)
    run_checked(
        ["make", "--no-print-directory", "crane", "node-packages"],
        what="`make crane node-packages`",
        error=ClusterStartError,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


class _Turns:
    """A waiter's ticket in a directory of tickets: the oldest live one goes first.

    A ticket is ``<ns>-<pid>``; a ticket whose process is gone is removed by whoever
    sees it, so a killed waiter does not block the queue.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(exist_ok=True)
        self._directory = directory
        self._ticket = directory / f"{time.time_ns():020d}-{os.getpid()}"
        self._ticket.touch()
        self.said = False

    def first(self) -> bool:
        for ticket in sorted(self._directory.iterdir()):
            if ticket == self._ticket:
                return True
            pid = int(ticket.name.rpartition("-")[2] or 0)
            if pid and Path(f"/proc/{pid}").exists():
                return False
            ticket.unlink(missing_ok=True)
        return True

    def leave(self) -> None:
        self._ticket.unlink(missing_ok=True)


class LocalCluster:
    """The lab's cluster in ``workdir`` (kept after stop, for its logs)."""

    def __init__(
        self,
        workdir: Path,
        *,
        topology: Topology | None = None,
        start_timeout: float = 180.0,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.topology = topology or Topology()
        self.layout = Layout(workdir.resolve())
        self._timeout = start_timeout
        self._echo = echo or (lambda _line: None)
        self._lock: IO[bytes] | None = None
        self._sysctls: dict[str, str] | None = None
        self._absent_dirs: list[Path] = []
        self._rules: dict[str, netfilter.Ruleset] | None = None
        self._registry: Registry | None = None
        self._plane: LocalControlPlane | None = None
        self._children: dict[str, Child] = {}
        self._images: dict[str, images.LabImage] = {}
        self._kubeconfigs: dict[str, Path] = {}
        self.timings: dict[str, float] = {}

    # -- lifecycle -------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        self._take_lock()
        try:
            self._start()
        except BaseException as exc:
            try:
                self.stop()
            except ClusterError as stop_error:
                exc.add_note(f"tearing down afterwards also failed: {stop_error}")
            if isinstance(exc, Exception) and not isinstance(exc, ClusterError):
                raise ClusterStartError(f"the lab cluster did not start: {exc}") from exc
            raise
        self.timings["start"] = time.monotonic() - began

    def stop(self) -> None:
        """Tear everything down, then check nothing is left. Safe to call twice."""
        if self._lock is None:
            return
        began = time.monotonic()
        problems: list[str] = []
        # The node first, so nothing restarts containers while they are killed.
        for name in ("kube-proxy", "kube-scheduler", "kubelet"):
            child = self._children.pop(name, None)
            if child is not None and (problem := child.stop(grace=15.0)):
                problems.append(problem)
        problems += self._stop_runtime()
        if self._plane is not None:
            try:
                self._plane.stop()
            except Exception as exc:
                problems.append(str(exc))
            self._plane = None
        if self._registry is not None:
            if problem := self._registry.stop():
                problems.append(problem)
            self._registry = None
        problems += self._kill_the_rest()
        problems += self._undo_host_changes()
        host.remove_empty_dirs(self._absent_dirs)
        problems += [
            f"left behind: {item}" for item in host.leftovers(self.layout.workdir, self.topology)
        ]
        self._release_lock()
        self.timings["stop"] = time.monotonic() - began
        if problems:
            raise ClusterError("the lab cluster did not tear down cleanly:\n" + "\n".join(problems))

    # -- what callers use ------------------------------------------------

    @property
    def workdir(self) -> Path:
        return self.layout.workdir

    @property
    def control_plane(self) -> LocalControlPlane:
        if self._plane is None:
            raise ClusterError("the lab cluster is not running")
        return self._plane

    def kubeconfig(self, identity: str) -> Path:
        """admin, manager or person (tokens), or node (the kubelet's certificate)."""
        if identity in self._kubeconfigs:
            return self._kubeconfigs[identity]
        return self.control_plane.kubeconfig(identity)

    def image(self, name: str) -> images.LabImage:
        """A lab image in the registry: ``probe`` or ``pause``."""
        return self._images[name]

    @property
    def registry(self) -> str:
        if self._registry is None:
            raise ClusterError("the lab cluster is not running")
        return self._registry.address

    @contextlib.contextmanager
    def registry_down(self) -> Iterator[None]:
        """The registry unreachable for the block (every connection reset), then serving
        again, however the block ends.

        Not a stopped process: ``crane registry serve`` keeps its manifests in memory
        (only blobs are on disk), so a restarted one has lost every tag and digest the
        session pushed. A reset at the node's address is what a client sees of a
        registry that is down.
        """
        port = int(self.registry.rpartition(":")[2])
        host.registry_refusal(self.topology, port, add=True)
        try:
            yield
        finally:
            host.registry_refusal(self.topology, port, add=False)

    @property
    def host_settings_before(self) -> dict[str, str]:
        """The kernel settings as they were before the lab started (restored on stop)."""
        if self._sysctls is None:
            raise ClusterError("the lab cluster has not started")
        return dict(self._sysctls)

    @property
    def crane(self) -> Path:
        return CRANE

    def check(self) -> None:
        """Raise ChildExited when a component has died."""
        for child in self._children.values():
            child.check()

    def pids(self) -> dict[str, int]:
        return {name: child.pid for name, child in self._children.items()}

    @contextlib.contextmanager
    def kubelet_stopped(self) -> Iterator[None]:
        """The node's kubelet stopped for the block, then started again and Ready.

        What a node agent's crash or upgrade does: containerd and its shims keep
        every container running, nothing reports them to the API server meanwhile,
        and the restarted kubelet takes the running Pods over from the runtime. The
        kubelet is started again however the block ends (the fault tests rely on a
        node that works afterwards), with the same command line and log file.
        """
        child = self._children.get("kubelet")
        if child is None:
            raise ClusterError("the lab cluster's kubelet is not running")
        if problem := child.stop(grace=15.0):
            raise ClusterError(problem)
        try:
            yield
        finally:
            again = Child(child.name, child.argv, child.log_path)
            self._children["kubelet"] = again
            again.start()
            self._wait_node_ready()

    # -- start -------------------------------------------------------------

    def _step(self, name: str, began: float) -> float:
        now = time.monotonic()
        self.timings[name] = now - began
        self._echo(f"# {name}: {now - began:.1f}s")
        return now

    def _take_lock(self) -> None:
        """The machine's one lab cluster, or a clear refusal.

        ``PTAH_LAB_LOCK_WAIT`` (seconds, default 0) waits that long for another
        cluster to stop first: engineers running cluster tests side by side queue
        instead of failing. CI and ``make run`` never set it. Waiters take turns in
        the order they came (``_Turns``): polling alone let one engineer who starts
        a run the moment the last one ends win again and again.
        """
        lock = LOCK_PATH.open("ab")
        patience = float(os.environ.get("PTAH_LAB_LOCK_WAIT") or 0)
        deadline = time.monotonic() + patience
        turns = _Turns(LOCK_PATH.with_name(LOCK_PATH.name + ".queue")) if patience > 0 else None
        try:
            while True:
                if turns is None or turns.first():
                    try:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        pass
                if time.monotonic() >= deadline:
                    lock.close()
                    raise ClusterStartError(
                        f"another lab cluster is running on this machine (it holds "
                        f"{LOCK_PATH}); one node per machine, since its bridge, cgroups "
                        "and iptables chains are shared"
                    )
                if turns is not None and not turns.said:
                    self._echo(f"# waiting up to {patience:.0f}s for {LOCK_PATH}")
                    turns.said = True
                # A bounded poll: flock cannot wait with a deadline by itself.
                time.sleep(1.0)
        finally:
            if turns is not None:
                turns.leave()
        self._lock = lock

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _start(self) -> None:
        t = time.monotonic()
        # The kubelet's deepest socket; a Unix socket path has at most 107 bytes
        # and a longer one fails deep inside a component with a cryptic error.
        socket_path = self.layout.kubelet_root / "pod-resources" / "kubelet.sock"
        if len(str(socket_path).encode()) > _MAX_SOCKET_PATH:
            raise ClusterStartError(
                f"the work directory {self.layout.workdir} is too long: its sockets would "
                f"exceed {_MAX_SOCKET_PATH} bytes; use a shorter one (e.g. under /tmp)"
            )
        found = host.leftovers(self.layout.workdir, self.topology)
        if found:
            raise ClusterStartError(
                "an earlier lab cluster left things behind; run "
                "`python -m lab.cluster clean --workdir DIR` first:\n" + "\n".join(found)
            )
        ensure_tools()
        t = self._step("tools", t)
        self.layout.workdir.mkdir(parents=True, exist_ok=True)
        self.layout.logs.mkdir(exist_ok=True)
        self._sysctls = host.read_sysctls()
        self._absent_dirs = host.absent_dirs()
        self._rules = {family: netfilter.save(family) for family in netfilter.IPTABLES}
        host.create_bridge(self.topology)
        host.forward_guard(self.topology, add=True)
        host.create_cgroups(self.topology)

        pki = LabPKI(self.layout.pki, now=datetime.now(UTC))
        self._registry = Registry(
            CRANE,
            self.layout.registry_storage,
            self.layout.logs / "registry.log",
            host=str(self.topology.node_ip),
        )
        self._registry.start(timeout=30.0)
        self._push_images()
        t = self._step("registry and images", t)

        self._start_containerd()
        t = self._step("containerd", t)

        kubelet_client = pki.client(NODE_CLIENTS["kubelet-client"])
        self._plane = LocalControlPlane(
            self.layout.controlplane,
            identities=DEFAULT_IDENTITIES,
            controllers=CLUSTER_CONTROLLERS,
            binary=ensure_binary(),
            address=str(self.topology.node_ip),
            service_account_admission=True,
            extra_apiserver_args=(
                f"--client-ca-file={pki.ca_cert}",
                f"--kubelet-client-certificate={kubelet_client[0]}",
                f"--kubelet-client-key={kubelet_client[1]}",
                f"--kubelet-certificate-authority={pki.ca_cert}",
                # The node's hostname is not resolvable (and nothing may be
                # looked up outside): reach the kubelet at its InternalIP.
                "--kubelet-preferred-address-types=InternalIP",
                # Webhooks and aggregated APIs are called at their Service's
                # endpoints (the Pod's bridge address), which this host routes;
                # a cluster IP exists only in kube-proxy's rules for Pods' traffic.
                "--enable-aggregator-routing=true",
            ),
        )
        self._plane.start()
        t = self._step("control plane", t)

        self._start_node(pki)
        self._wait_node_ready()
        self._step("node ready", t)

    def _push_images(self) -> None:
        binaries = images.build_binaries(self.layout.images / "bin")
        registry = self.registry
        for name, entrypoint in (("pause", ["/pause"]), ("probe", ["/probe"])):
            layout_dir = self.layout.images / name
            layout_dir.mkdir(parents=True, exist_ok=True)
            data = binaries[name].read_bytes()
            digest = images.oci_layout(layout_dir, {name: (data, 0o755)}, entrypoint)
            self._images[name] = images.push(
                CRANE, layout_dir, f"{registry}/ptah-lab/{name}:{IMAGE_TAG}", digest
            )

    def _start_containerd(self) -> None:
        layout = self.layout
        layout.containerd.mkdir(parents=True, exist_ok=True)
        hosts = layout.registry_hosts / self.registry
        hosts.mkdir(parents=True, exist_ok=True)
        (hosts / "hosts.toml").write_text(configs.registry_hosts_toml(self.registry))
        layout.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        (layout.cni_conf_dir / "10-ptah-lab.conflist").write_text(
            configs.cni_conflist(self.topology, layout)
        )
        layout.containerd_config.write_text(
            configs.containerd_config(layout, self.image("pause").tag_ref)
        )
        child = Child(
            "containerd",
            ["containerd", "--config", str(layout.containerd_config)],
            layout.logs / "containerd.log",
        )
        self._children["containerd"] = child
        child.start()

        def ready() -> str:
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(str(layout.containerd_socket))
                except OSError as exc:
                    return f"its socket does not answer: {exc}"
            return ""

        wait_until("containerd", ready, timeout=60.0, children=[child])

    def _start_node(self, pki: LabPKI) -> None:
        topology, layout = self.topology, self.layout
        plane = self.control_plane
        binary = str(ensure_binary())
        for name in ("scheduler", "proxy"):
            cert, key = pki.client(NODE_CLIENTS[name])
            self._kubeconfigs[name] = write_kubeconfig(
                layout.kubeconfigs / f"{name}.yaml",
                server=plane.server_url,
                server_ca=plane.ca_path,
                user=NODE_CLIENTS[name].user,
                cert=cert,
                key=key,
            )
        node = ClientIdentity("node", f"system:node:{topology.node_name}", ("system:nodes",))
        cert, key = pki.client(node)
        self._kubeconfigs["node"] = write_kubeconfig(
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
                kubeconfig=self._kubeconfigs["proxy"],
                healthz_port=free_port(),
                metrics_port=free_port(),
            )
        )
        commands = {
            "kube-scheduler": [
                f"--kubeconfig={self._kubeconfigs['scheduler']}",
                # One scheduler, no competitor, and nothing scrapes it.
                "--leader-elect=false",
                "--secure-port=0",
            ],
            "kubelet": [
                f"--config={layout.kubelet_config}",
                f"--kubeconfig={self._kubeconfigs['node']}",
                f"--root-dir={layout.kubelet_root}",
                f"--hostname-override={topology.node_name}",
                # A loopback node IP is refused; the bridge's address is the node's.
                f"--node-ip={topology.node_ip}",
            ],
            "kube-proxy": [f"--config={layout.kube_proxy_config}"],
        }
        for name, args in commands.items():
            child = Child(name, [binary, name, *args], layout.logs / f"{name}.log")
            self._children[name] = child
            child.start()

    def _wait_node_ready(self) -> None:
        plane = self.control_plane
        headers = {"Authorization": f"Bearer {plane.token('admin')}"}
        url = f"{plane.server_url}/api/v1/nodes/{self.topology.node_name}"
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
                    c
                    for c in node.get("status", {}).get("conditions", [])
                    if c.get("type") == "Ready"
                ]
                if not ready or ready[0].get("status") != "True":
                    return f"node not Ready: {ready[0].get('message') if ready else 'no condition'}"
                if taints := node.get("spec", {}).get("taints"):
                    return f"the node is still tainted: {taints}"
                return ""

            # The kubelet registers the node and reports Ready on its own time
            # (its runtime and network checks run every few seconds).
            wait_until(
                "the node", ready, timeout=self._timeout, children=list(self._children.values())
            )

    # -- stop ----------------------------------------------------------------

    def _ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                "ctr",
                "--address",
                str(self.layout.containerd_socket),
                "--namespace",
                "k8s.io",
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    def _stop_runtime(self) -> list[str]:
        problems: list[str] = []
        containerd = self._children.pop("containerd", None)
        if containerd is not None and containerd.running():
            # Kill every container's task through containerd, so its shim
            # reaps it and records the exit, then stop containerd.
            listed = self._ctr("tasks", "list", "--quiet")
            for task in listed.stdout.split():
                self._ctr("tasks", "kill", "--signal", "SIGKILL", task)
            for task in listed.stdout.split():
                self._ctr("tasks", "delete", "--force", task)
        if containerd is not None and (problem := containerd.stop(grace=15.0)):
            problems.append(problem)
        return problems

    def _kill_the_rest(self) -> list[str]:
        """Kill what outlives its starter: shims, containers, anything naming the work directory."""
        problems: list[str] = []
        # Shims outlive containerd by design (containers survive its restart);
        # the lab's are the processes naming its socket, and containers are
        # whatever still runs in its cgroups.
        host.kill_cgroup_tasks(self.topology)
        for pid, _ in host.lab_processes(self.layout.workdir, self.topology):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

        def gone() -> str:
            left = host.lab_processes(self.layout.workdir, self.topology)
            return "; ".join(f"{pid} {command}" for pid, command in left)

        # SIGKILL is delivered at once but a process is gone only once the
        # kernel has torn it down (and a shim's parent has reaped it).
        try:
            wait_until("the lab's processes to exit", gone, timeout=30.0, children=[])
        except TimeoutError as exc:
            problems.append(str(exc))
        return problems

    def _undo_host_changes(self) -> list[str]:
        problems = host.unmount_under(self.layout.workdir)
        problems += host.delete_links(self.topology)
        host.forward_guard(self.topology, add=False)
        problems += host.remove_cgroups(self.topology)
        if self._rules is not None:
            problems += netfilter.remove_lab_rules(self._rules, self.topology.rule_comment)
        if self._sysctls is not None:
            problems += host.restore_sysctls(self._sysctls)
        problems += host.remove_container_log_links(self.layout.workdir, self.topology)
        # The kubelet's root holds tmpfs-backed secrets until unmounted; once
        # unmounted, container filesystems are plain files nobody needs.
        for directory in (self.layout.containerd / "root", self.layout.kubelet_root):
            if not host.mounts_under(directory):
                shutil.rmtree(directory, ignore_errors=True)
        return problems
