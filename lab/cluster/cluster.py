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
What each node component is given and when it counts as up is ``lab.cluster.node``'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from lab.cluster import host, images, netfilter, node
from lab.cluster.pki import LabPKI
from lab.cluster.processes import Child, run_checked, wait_until
from lab.cluster.registry import Registry
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
        problems += node.stop_runtime(self.layout, self._children.pop("containerd", None))
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

        node.start_containerd(
            self.topology,
            self.layout,
            registry=self.registry,
            pause_ref=self.image("pause").tag_ref,
            children=self._children,
        )
        t = self._step("containerd", t)

        kubelet_client = pki.client(node.NODE_CLIENTS["kubelet-client"])
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

        self._kubeconfigs.update(
            node.start_node(
                self.topology, self.layout, self.control_plane, pki, children=self._children
            )
        )
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

    def _wait_node_ready(self) -> None:
        node.wait_node_ready(
            self.control_plane,
            self.topology.node_name,
            timeout=self._timeout,
            children=list(self._children.values()),
        )

    # -- stop ----------------------------------------------------------------

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
