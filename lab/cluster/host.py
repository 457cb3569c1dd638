"""What a lab cluster changes on this machine outside its work directory, and undoing it.

The bridge (the node's address), one cgroup tree per cgroup v1 hierarchy, the
kernel settings the kubelet and the bridge plugin change, mounts (the kubelet's
root, pod volumes, container root filesystems, network namespaces), and the
processes. ``leftovers`` lists what of a lab is still on the machine; start
refuses to run on top of leftovers and the teardown test asserts there are none.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from lab.cluster import netfilter
from lab.cluster.topology import Topology

__all__ = [
    "SYSCTLS",
    "SYSTEM_DIRS",
    "absent_dirs",
    "cgroup_hierarchies",
    "clean",
    "create_bridge",
    "create_cgroups",
    "delete_links",
    "forward_guard",
    "kill_cgroup_tasks",
    "lab_processes",
    "leftovers",
    "mounts_under",
    "read_sysctls",
    "remove_cgroups",
    "remove_container_log_links",
    "remove_empty_dirs",
    "restore_sysctls",
    "unmount_under",
]

# Kernel settings a node changes machine-wide: the bridge plugin turns on IPv4
# forwarding, and the kubelet sets its "kernel tunables" (overcommit, panic
# behaviour, key quotas). The lab restores each to what it was.
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def _must(*argv: str) -> str:
    result = _run(*argv)
    if result.returncode != 0:
        raise OSError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result.stdout


# -- links -------------------------------------------------------------------


def _links() -> list[dict[str, object]]:
    links: list[dict[str, object]] = json.loads(_must("ip", "-j", "link", "show") or "[]")
    return links


def create_bridge(topology: Topology) -> None:
    """The bridge with the node's address, up, before anything binds to it."""
    prefix = topology.pod_subnet.prefixlen
    _must("ip", "link", "add", topology.bridge, "address", topology.bridge_mac, "type", "bridge")
    _must("ip", "addr", "add", f"{topology.node_ip}/{prefix}", "dev", topology.bridge)
    _must("ip", "link", "set", topology.bridge, "up")


def lab_links(topology: Topology) -> list[str]:
    """The bridge and every link enslaved to it (pods' host-side veths)."""
    return [
        str(link["ifname"])
        for link in _links()
        if link.get("ifname") == topology.bridge or link.get("master") == topology.bridge
    ]


def delete_links(topology: Topology) -> list[str]:
    problems = []
    for name in sorted(lab_links(topology), key=lambda n: n == topology.bridge):
        result = _run("ip", "link", "del", name)
        # A veth disappears by itself once its peer's namespace is gone.
        if result.returncode != 0 and name in lab_links(topology):
            problems.append(f"cannot delete link {name}: {result.stderr.strip()}")
    return problems


def forward_guard(topology: Topology, *, add: bool) -> None:
    """Drop anything forwarded from the bridge to anywhere but the bridge.

    The bridge plugin turns IP forwarding on for the whole machine; this rule
    (first in FORWARD, marked with the lab's comment) keeps a Pod's packets
    from ever being routed out of this machine.
    """
    rule = [
        "FORWARD",
        "-i",
        topology.bridge,
        "!",
        "-o",
        topology.bridge,
        "-m",
        "comment",
        "--comment",
        topology.rule_comment,
        "-j",
        "DROP",
    ]
    if add:
        _must("iptables", "-I", *rule[:1], "1", *rule[1:])
    else:
        _run("iptables", "-D", *rule)


def registry_refusal(topology: Topology, port: int, *, add: bool) -> None:
    """Refuse every connection to the registry (first in INPUT, marked with the lab's
    comment, so a rule left behind goes with the lab's others): what a client sees of
    a registry that is down, a reset, while the registry keeps what it holds."""
    rule = [
        "INPUT",
        "-p",
        "tcp",
        "-d",
        str(topology.node_ip),
        "--dport",
        str(port),
        "-m",
        "comment",
        "--comment",
        topology.rule_comment,
        "-j",
        "REJECT",
        "--reject-with",
        "tcp-reset",
    ]
    if add:
        _must("iptables", "-I", *rule[:1], "1", *rule[1:])
    else:
        _must("iptables", "-D", *rule)


# -- system directories ----------------------------------------------------------

# The kubelet links every container's log here, whatever its pod log directory.
CONTAINER_LOG_LINKS = Path("/var/log/containers")
# libcni caches each attachment's result here (not configurable through
# containerd 1.6), named after the network: ptah-lab-<container>-<interface>.
CNI_RESULTS = Path("/var/lib/cni/results")

# Directories containerd, the CNI library and the kubelet create outside any
# configured path (shim sockets, the CNI result cache, log links). They are
# empty once the lab is gone.
SYSTEM_DIRS = (
    Path("/run/containerd/s"),
    Path("/run/containerd"),
    CNI_RESULTS,
    Path("/var/lib/cni"),
    CONTAINER_LOG_LINKS,
)


def absent_dirs() -> list[Path]:
    """The system directories that do not exist yet (the lab may create them)."""
    return [d for d in SYSTEM_DIRS if not d.exists()]


def remove_empty_dirs(directories: Iterable[Path]) -> None:
    """Remove the directories the lab created, when nothing else put files there."""
    for directory in directories:
        with contextlib.suppress(OSError):
            directory.rmdir()


# -- sysctls ------------------------------------------------------------------


def read_sysctls(keys: Iterable[str] = SYSCTLS) -> dict[str, str]:
    values = {}
    for key in keys:
        with contextlib.suppress(OSError):
            values[key] = (Path("/proc/sys") / key).read_text().strip()
    return values


def restore_sysctls(before: Mapping[str, str]) -> list[str]:
    problems = []
    now = read_sysctls(before)
    for key, value in before.items():
        if now.get(key) != value:
            try:
                (Path("/proc/sys") / key).write_text(value + "\n")
            except OSError as exc:
                problems.append(f"cannot restore {key.replace('/', '.')}={value}: {exc}")
    return problems


# -- cgroups --------------------------------------------------------------------


def _mountinfo() -> list[list[str]]:
    rows = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        rows.append([*before.split(), "-", *after.split()])
    return rows


def _unescape(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return path.encode().decode("unicode_escape")


def cgroup_hierarchies() -> list[Path]:
    """The mount point of every cgroup v1 hierarchy (fstype ``cgroup``)."""
    found = []
    for row in _mountinfo():
        fstype = row[row.index("-") + 1]
        if fstype == "cgroup":
            found.append(Path(_unescape(row[4])))
    return found


def create_cgroups(topology: Topology) -> None:
    for hierarchy in cgroup_hierarchies():
        (hierarchy / topology.cgroup_root).mkdir(exist_ok=True)


def _cgroup_dirs(topology: Topology) -> list[Path]:
    """Every cgroup under the lab's roots, deepest first."""
    dirs: list[Path] = []
    for hierarchy in cgroup_hierarchies():
        root = hierarchy / topology.cgroup_root
        if root.is_dir():
            dirs += [Path(d) for d, _, _ in os.walk(root)]
    return sorted(dirs, key=lambda d: len(d.parts), reverse=True)


def kill_cgroup_tasks(topology: Topology) -> None:
    """SIGKILL whatever still runs in the lab's cgroups (containers of a crashed lab)."""
    for directory in _cgroup_dirs(topology):
        with contextlib.suppress(OSError):
            for pid in (directory / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def remove_cgroups(topology: Topology) -> list[str]:
    problems = []
    for directory in _cgroup_dirs(topology):
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            problems.append(f"cannot remove cgroup {directory}: {exc}")
    return problems


# -- mounts ------------------------------------------------------------------------


def mounts_under(root: Path) -> list[Path]:
    """Mount points at or below root, deepest first."""
    root = root.resolve()
    found = []
    for row in _mountinfo():
        point = Path(_unescape(row[4]))
        if point == root or root in point.parents:
            found.append(point)
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def unmount_under(root: Path) -> list[str]:
    """Unmount everything below root, deepest first; a busy one lazily."""
    problems = []
    # A mount may be stacked several times (the kubelet bind-mounts its root
    # onto itself), so repeat until nothing is left or nothing changes.
    for _ in range(10):
        points = mounts_under(root)
        if not points:
            return []
        for point in points:
            if _run("umount", str(point)).returncode != 0:
                _run("umount", "--lazy", str(point))
    problems += [f"still mounted: {p}" for p in mounts_under(root)]
    return problems


# -- processes -------------------------------------------------------------------------


def _ancestry() -> set[int]:
    """This process and its ancestors: whatever started the lab names its directory too."""
    pids = set()
    pid = os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def lab_processes(workdir: Path, topology: Topology) -> list[tuple[int, str]]:
    """Processes of a lab: any naming its work directory, or in its cgroups.

    Every component's command line names a path in the work directory (its
    config, socket, state or kubeconfig), and every container runs in a cgroup
    under the lab's cgroup root.
    """
    # With the separator: /tmp/ptah-lab-x must not claim /tmp/ptah-lab-xy's processes.
    marker = str(workdir.resolve()).encode() + b"/"
    cgroup_marker = f"/{topology.cgroup_root}/".encode()
    found = []
    mine = _ancestry()
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid in mine:
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            cgroups = (proc / "cgroup").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited while we looked
        if state == "Z":
            continue
        if marker in cmdline or cgroup_marker in cgroups:
            command = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            found.append((pid, command))
    return found


def _container_log_links(workdir: Path) -> list[Path]:
    root = str(workdir.resolve())
    found = []
    with contextlib.suppress(FileNotFoundError):
        for link in CONTAINER_LOG_LINKS.iterdir():
            if link.is_symlink() and str(link.readlink()).startswith(root):
                found.append(link)
    return found


def _cni_results(topology: Topology) -> list[Path]:
    """The lab network's cached results, and the loopback results of the same sandboxes.

    A teardown that kills sandboxes instead of asking the runtime to remove them
    never runs CNI DEL, which is what would delete these.
    """
    prefix = f"{topology.cni_network}-"
    try:
        ours = [p for p in CNI_RESULTS.iterdir() if p.name.startswith(prefix)]
    except FileNotFoundError:
        return []
    sandboxes = {p.name.removeprefix(prefix).rsplit("-", 1)[0] for p in ours}
    loopbacks = [CNI_RESULTS / f"cni-loopback-{sandbox}-lo" for sandbox in sandboxes]
    return sorted(ours + [p for p in loopbacks if p.exists()])


def remove_container_log_links(workdir: Path, topology: Topology) -> list[str]:
    """Remove the kubelet's log links and libcni's cached results of the lab's Pods."""
    problems = []
    for link in [*_container_log_links(workdir), *_cni_results(topology)]:
        try:
            link.unlink()
        except OSError as exc:
            problems.append(f"cannot remove {link}: {exc}")
    return problems


def _lab_netns_mounts(workdir: Path) -> list[str]:
    """Network namespaces kept by a mount: the lab's (under its work directory)
    and any CNI namespace in the system directory, where containerd would put
    them without ``netns_mounts_under_state_dir``."""
    found = []
    for row in _mountinfo():
        if row[row.index("-") + 1] != "nsfs":
            continue
        point = _unescape(row[4])
        if point.startswith(str(workdir.resolve())) or "/netns/cni-" in point:
            found.append(point)
    return found


def leftovers(workdir: Path, topology: Topology) -> list[str]:
    """Everything of a lab still on this machine; empty when it is all gone."""
    found = [f"process {pid}: {command}" for pid, command in lab_processes(workdir, topology)]
    found += [f"container log link {p}" for p in _container_log_links(workdir)]
    found += [f"CNI result cache {p}" for p in _cni_results(topology)]
    found += [f"mount {p}" for p in mounts_under(workdir)]
    found += [f"network namespace {p}" for p in _lab_netns_mounts(workdir)]
    found += [f"link {name}" for name in lab_links(topology)]
    found += [f"cgroup {d}" for d in _cgroup_dirs(topology)]
    for family in netfilter.IPTABLES:
        found += [
            f"{family} {r}"
            for r in netfilter.lab_residue(netfilter.save(family), topology.rule_comment)
        ]
    return found


def clean(workdir: Path, topology: Topology) -> list[str]:
    """Remove what a lab that could not stop itself (killed outright) left behind.

    The kernel settings it changed cannot be restored: what they were died with it.
    """
    kill_cgroup_tasks(topology)
    for pid, _ in lab_processes(workdir, topology):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    problems = unmount_under(workdir)
    problems += delete_links(topology)
    forward_guard(topology, add=False)
    problems += remove_cgroups(topology)
    problems += netfilter.remove_residue(topology.rule_comment)
    problems += remove_container_log_links(workdir, topology)
    return problems
