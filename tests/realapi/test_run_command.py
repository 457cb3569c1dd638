"""The node-less run works: ``make run RUN_ARGS=--node-less``, in a subprocess.

(``make run`` itself, the chart on the lab cluster, is tests/cluster/test_make_run.py.)
``python -m lab.clusterrun --node-less --once`` brings up its own control plane, webhook and
controller, takes the example PtahSchema to a recorded Job and exits 0. Without
``--once`` it keeps running until interrupted, and Ctrl-C (SIGINT to the terminal's
process group) tears everything down: no process it started outlives it.

Both start a control plane of their own (the command's, not the session's), so
each costs a cold start of kube-apiserver; the deadlines bound a failure and are
never waited out when the command works.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab.localplane import REPO_ROOT

pytestmark = pytest.mark.controlplane

DEADLINE = 300.0


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that name ``text`` (the run's workdir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


def test_the_node_less_run_once_takes_the_example_to_a_recorded_job(tmp_path: Path) -> None:
    workdir = tmp_path / "run"
    done = subprocess.run(
        # make run's own entry point, without make: its prerequisites are the lab
        # cluster's (images, node packages), which the node-less run does not use.
        [
            sys.executable,
            "-m",
            "lab.clusterrun",
            "--node-less",
            "--once",
            "--workdir",
            str(workdir),
        ],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"export KUBECONFIG={workdir}" in output
    assert "# STAND-IN for the readings Resolve, Verify, Observe, Plan" in output
    assert "# recorded: Job shop/ptah-apply-orders-" in output
    assert _processes_mentioning(str(workdir)) == []


def test_ctrl_c_tears_everything_down(tmp_path: Path) -> None:
    workdir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "lab.run", "--workdir", str(workdir)],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Its own process group, as a terminal's foreground job is, so SIGINT goes to
        # the group the way Ctrl-C does.
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while not any(line.startswith("# running;") for line in seen):
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, "make run ended before it was running:\n" + "".join(seen)
            seen.append(line)
        assert _processes_mentioning(str(workdir)), "the control plane is not running"
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    reader.join(timeout=10)
    assert process.stdout is not None
    process.stdout.close()
    while (line := lines.get_nowait() if not lines.empty() else None) is not None:
        seen.append(line)
    assert code == 130, "".join(seen)
    assert "# stopped; everything started here has been torn down\n" in seen
    assert _processes_mentioning(str(workdir)) == []
