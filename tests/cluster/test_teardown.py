"""Stopping the lab leaves nothing of it on this machine.

These run last (conftest orders them): the first stops the session's cluster
with a Pod still running in it; the second runs the lab as a command, starts a
Pod, and ends it with SIGTERM as a terminal or a CI runner would; the last runs
``make run`` (the README's command) on the builds the suite already made, checks it
rebuilt nothing, and presses Ctrl-C once the schema's plan waits for approval.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab.cluster import LocalCluster, Topology, host
from lab.cluster.cluster import REPO_ROOT
from tests.cluster.clusterkit import (
    Api,
    close_lab_runs,
    pod_manifest,
    pod_phase_in,
    poll,
    short_workdir,
)

# make's own report of a child's exit, at any recursion level ("make: ***", "make[1]: ***").
MAKE_REPORT = re.compile(r"make(\[\d+\])?: ")

pytestmark = pytest.mark.cluster

# A cold start of the lab command (binaries already built) on a loaded machine.
START_DEADLINE = 300.0


def _running_pod(api: Api, namespace: str, image: str) -> None:
    api.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest("left", image, ["wait"]))
    poll("the Pod running", lambda: pod_phase_in(api, namespace, "left", {"Running"}))


def test_stopping_the_cluster_leaves_no_process_mount_namespace_or_link(
    cluster: LocalCluster, api: Api, namespace: str
) -> None:
    _running_pod(api, namespace, cluster.image("probe").ref)
    before = cluster.host_settings_before
    close_lab_runs()
    cluster.stop()
    assert host.leftovers(cluster.workdir, cluster.topology) == []
    assert host.read_sysctls(before) == before


def _lines(stream: object, out: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        out.put(line)


def _await_line(
    process: subprocess.Popen[str],
    lines: queue.Queue[str],
    seen: list[str],
    prefix: str,
    timeout: float,
    what: str,
) -> None:
    """Collect the command's lines into ``seen`` until one starts with ``prefix``."""
    deadline = time.monotonic() + timeout
    while not any(line.startswith(prefix) for line in seen):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or process.poll() is not None:
            pytest.fail(f"not so within {timeout:.0f}s: {what}:\n" + "".join(seen))
        try:
            seen.append(lines.get(timeout=min(remaining, 1.0)))
        except queue.Empty:
            continue


def test_sigterm_of_the_lab_command_tears_everything_down() -> None:
    workdir = short_workdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "lab.cluster", "--workdir", str(workdir)],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        _await_line(process, lines, seen, "ready", START_DEADLINE, "the lab command got ready")
        kubeconfig = Path(seen[-1].split("KUBECONFIG=", 1)[1].strip())
        admin = Api.from_kubeconfig(kubeconfig)
        admin.create("/api/v1/namespaces", {"metadata": {"name": "teardown"}})
        poll(
            "the default service account",
            lambda: admin.get_or_none("/api/v1/namespaces/teardown/serviceaccounts/default"),
        )
        _running_pod(admin, "teardown", _probe_ref(workdir))
        admin.http.close()
    finally:
        os.kill(process.pid, signal.SIGTERM)
        code = process.wait(timeout=180)
        reader.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    while not lines.empty():
        seen.append(lines.get())
    assert code == 0, "".join(seen)
    assert seen[-1] == "# stopped; nothing left behind\n"
    assert host.leftovers(workdir, Topology()) == []
    shutil.rmtree(workdir)


# What make run reuses by make's own rules: the virtualenv, the control plane, helm
# and crane. The images are reused by images/build.sh, which compares their inputs'
# fingerprints and says "every image cached".
BUILDS = (
    ".venv/.installed",
    "lab/controlplane/bin/controlplane",
    ".tools/bin/helm",
    ".tools/bin/crane",
)
# The cluster's start, the chart's install and four Jobs (Resolve, Verify, Observe,
# Plan) on a loaded machine; a healthy run needs about two minutes.
PLAN_DEADLINE = 900.0


def test_ctrl_c_of_make_run_at_the_approval_tears_everything_down() -> None:
    make = shutil.which("make")
    assert make is not None, "make run needs make on PATH"
    # The builds the suite made are reused: `make -q` answers 0 only when none of
    # them would be rebuilt, and make run then prints no build step.
    fresh = subprocess.run(
        [make, "-q", *BUILDS], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert fresh.returncode == 0, f"make would rebuild something: {fresh.stdout}{fresh.stderr}"
    workdir = short_workdir()
    process = subprocess.Popen(
        [make, "--no-print-directory", "run", f"RUN_ARGS=--workdir {workdir}"],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own process group, so the SIGINT below reaches make and its child as a
        # terminal's Ctrl-C does, and nothing else.
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        # A plan was made by real Jobs and is waiting for a person.
        _await_line(
            process, lines, seen, "# approve it with:", PLAN_DEADLINE, "make run reached approval"
        )
    finally:
        # Already gone when it failed on its own; the assertions below say why.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=300)
        reader.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    while not lines.empty():
        seen.append(lines.get())
    output = "".join(seen)
    try:
        assert "go build" not in output and "go install" not in output, output
        # The first plan to wait (the schema's SQL or the migration's files) was printed.
        assert "  plan:         ptah-" in output, output
        assert "every image cached" in output, output
        # make reports its child's exit (130) after the child's own last line; under a
        # parent make (CI runs this suite from `make test`) it signs as make[1], make[2]...
        ours = [line for line in seen if not MAKE_REPORT.match(line)]
        assert ours[-1] == "# stopped; everything started here has been torn down\n", output
        assert host.leftovers(workdir / "cluster", Topology()) == []
    finally:
        # The run's work directory goes whichever check failed, unless something of the
        # lab is still mounted in it: removing through a mount could reach the host.
        if not host.leftovers(workdir / "cluster", Topology()):
            shutil.rmtree(workdir, ignore_errors=True)


def _probe_ref(workdir: Path) -> str:
    registry = next((workdir / "containerd" / "certs.d").iterdir()).name
    return f"{registry}/ptah-lab/probe:lab"
