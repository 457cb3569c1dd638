"""From a person's approval to a changed database, on the lab's real node, beside its floor.

Brings up what ``make run`` brings up (``lab.clusterrun.LabRun``: the lab cluster,
PostgreSQL on the bridge, the images and example artifacts in the registry, the chart),
lets each example reach AwaitingApproval, then approves it and measures:

- approval -> the Apply Pod running (the controller saw the approval, claimed, took the
  database Lease, created the Job; the scheduler, the kubelet and runc started it);
- approval -> InSync (the Apply ran, its result was harvested, the proof read, the
  Lease released).

In the same run, on the same cluster, the floor under those figures:

- the same number of sequential API writes as the operator's path made, timed as plain
  ConfigMap patches by one client (no webhook, no controller). The operator's writes
  are counted as the admission decisions its webhooks took in the window (every write
  the manager makes to its resources, and the Job create, passes one of them), so the
  count includes the approval's own admission;
- one bare Pod's start (the lab's probe image: create -> Running, -> Succeeded).

It prints figures; it asserts nothing. Needs root and the images (``make images``).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pod_start import pod_start

from jobclaim.apiserver import CONFIGMAPS, PODS
from lab import install
from lab.clusterrun import EXAMPLES, MANAGER_NAMESPACE, NAMESPACE, Example, Follow, LabRun
from lab.progress import DONE, phase_of
from tests.cluster.clusterkit import Api

# Bounded waits: a real node acts on its own time; one that never gets there must end
# the benchmark with a sentence, not hang it.
DEADLINE = 900.0
_DECISIONS = re.compile(r"^ptah_webhook_decisions_total\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)


def _quiet(_line: str) -> None:
    pass


def _metrics_url(run: LabRun) -> str:
    pods = run.admin.list(
        PODS, MANAGER_NAMESPACE, label_selector={"app.kubernetes.io/name": install.RELEASE}
    )
    ip = next(p["status"]["podIP"] for p in pods if p["status"].get("phase") == "Running")
    return f"http://{ip}:8080/metrics"


def _decisions(url: str) -> float:
    # The manager Pod's metrics port, on the bridge (the host routes to it).
    text = httpx.get(url, timeout=10.0).text
    return sum(float(value) for value in _DECISIONS.findall(text))


def _until(what: str, check: Any, follow: Follow) -> float:
    began = time.monotonic()
    while True:
        follow.step()
        if check():
            return time.monotonic()
        if time.monotonic() - began > DEADLINE:
            raise SystemExit(f"{what} did not happen within {DEADLINE:.0f}s")
        time.sleep(0.05)  # the pause between polls of the API


def _apply_pod_running(run: LabRun, example: Example) -> bool:
    prefix = "ptah-apply-" if example.cli_kind == "schema" else "ptah-m-apply-"
    for pod in run.admin.list(PODS, NAMESPACE):
        started = pod["metadata"]["name"].startswith(prefix)
        if started and pod["status"].get("phase") in {"Running", "Succeeded", "Failed"}:
            return True
    return False


def _measure(run: LabRun, example: Example, metrics: str) -> tuple[float, float, float]:
    follow = Follow(run, approve=False, say=_quiet)
    _until(
        f"{example.name} AwaitingApproval",
        lambda: phase_of(run.get(example)) == "AwaitingApproval",
        follow,
    )
    before = _decisions(metrics)
    approved = time.monotonic()
    run.approve(example)
    running = _until(
        f"{example.name}'s Apply Pod running", lambda: _apply_pod_running(run, example), follow
    )
    in_sync = _until(f"{example.name} InSync", lambda: phase_of(run.get(example)) == DONE, follow)
    writes = _decisions(metrics) - before
    return running - approved, in_sync - approved, writes


def _sequential_writes(run: LabRun, count: int) -> float:
    run.admin.create(CONFIGMAPS, NAMESPACE, {"metadata": {"name": "floor"}, "data": {"n": "0"}})
    began = time.monotonic()
    for n in range(count):
        run.admin.patch_metadata(CONFIGMAPS, NAMESPACE, "floor", {"labels": {"n": str(n)}})
    return time.monotonic() - began


def _bare_pod(run: LabRun) -> tuple[float, float]:
    api = Api.from_kubeconfig(run.lab.kubeconfig("admin"))
    try:
        return pod_start(api, NAMESPACE, run.lab.image("probe").ref, "floor")
    finally:
        api.http.close()


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="ptah-run-", dir="/tmp"))
    run = LabRun(workdir, say=_quiet)
    try:
        run.start()
        metrics = _metrics_url(run)
        results = {example.name: _measure(run, example, metrics) for example in EXAMPLES}
        writes = max(round(r[2]) for r in results.values())
        floor_writes = _sequential_writes(run, writes)
        pod_running, pod_done = _bare_pod(run)
    finally:
        run.close()
    shutil.rmtree(workdir)
    print(f"make run's environment up in {sum(run.timings.values()):.1f}s ({run.timings})")
    for name, (running, in_sync, counted) in results.items():
        print(
            f"{name}: approval -> Apply Pod running {running:.2f}s, approval -> InSync "
            f"{in_sync:.2f}s ({counted:.0f} admitted writes in the window)"
        )
    print(f"floor: {writes} sequential API writes {floor_writes:.2f}s")
    print(f"floor: one bare Pod create -> running {pod_running:.2f}s, -> succeeded {pod_done:.2f}s")


if __name__ == "__main__":
    main()
