"""From a person's approval to a changed database, on the lab's real node, beside its floor.

Brings up what ``make run`` brings up (``lab.clusterrun.LabRun``: the lab cluster,
PostgreSQL and MariaDB on the bridge, the images and example artifacts in the
registry, the chart, with the manager at ``logLevel=debug`` for the trace), lets every
example reach AwaitingApproval (so no example's readings share the node with another's
Apply), then approves them one at a time and measures:

- approval -> the Apply Pod running (the controller saw the approval, claimed, took the
  database Lease, created the Job; the Job controller, the scheduler, the kubelet and
  runc started it), from the approval's write (the moment the benchmark's own watch
  hears of the new approval; ``kubectl ptah approve`` reads the plan twice before it
  writes, which is the person's tool, not the path) to the moment the watch hears of
  the Pod in phase Running;
- approval -> InSync (the Apply ran, its result was harvested, the proof read, the
  Lease released).

In the same run, on the same cluster, right after each example's InSync, the fair
floor under the first figure (what the cluster itself needs for the same work):

- the example's own Apply Job, read back and created again directly by one client
  under another name: the same init containers that copy the runner in, the same
  volumes, images, service account, environment and security settings; only the
  runner's program is swapped for a sleep (its Pod must not run the Apply a second
  time), which changes nothing before the container starts. create -> the Pod in phase
  Running, timed by the same watch;
- plus the same number of sequential API writes as the operator's path made, timed as
  plain ConfigMap patches by one client (no webhook, no controller). The operator's
  writes are counted as the admission decisions its webhooks took in the window
  (every write the manager makes to its resources, and the Job create, passes one of
  them), so the count includes the approval's own admission.

Then the ratio of the two, and the trace of each path (``approvaltrace``): the merged
timeline of the benchmark's watches and the manager's log, in milliseconds from the
approval's write. It prints figures; it asserts nothing. Needs root and the images
(``make images``).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from approvaltrace import Mark, Watches, log_marks, render, watch_marks

from jobclaim.apiserver import CONFIGMAPS, JOBS, PODS, PTAHMIGRATIONAPPROVALS, PTAHSCHEMAAPPROVALS
from kube.client import KubeApi
from lab import install
from lab.clusterrun import EXAMPLES, MANAGER_NAMESPACE, NAMESPACE, Example, Follow, LabRun
from lab.progress import DONE, phase_of

# Bounded waits: a real node acts on its own time; one that never gets there must end
# the benchmark with a sentence, not hang it.
DEADLINE: Final = 900.0
_DECISIONS = re.compile(r"^ptah_webhook_decisions_total\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)
_STARTED: Final = frozenset({"Running", "Succeeded", "Failed"})
# The floor's runner: the interpreter the init container copied in, asked to wait.
_FLOOR_PROGRAM: Final = ["-c", "import time; time.sleep(30)"]
_LOG_BYTES: Final = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ApprovalPath:
    """One example's approval path, in wall-clock seconds."""

    example: Example
    approved: float  # the approval's write, heard by the benchmark's watch
    running: float  # the Apply Pod in phase Running (or later), heard by the same watch
    in_sync: float
    writes: float  # admission decisions in the window
    job: dict[str, Any]  # the Apply Job, as stored
    cli: float  # kubectl ptah approve, from its start to its return


def _quiet(_line: str) -> None:
    pass


def _manager_pod(run: LabRun) -> str:
    pods = run.admin.list(
        PODS, MANAGER_NAMESPACE, label_selector={"app.kubernetes.io/name": install.RELEASE}
    )
    return next(str(p["metadata"]["name"]) for p in pods if p["status"].get("phase") == "Running")


def _metrics_url(run: LabRun, pod: str) -> str:
    ip = run.admin.get(PODS, MANAGER_NAMESPACE, pod)["status"]["podIP"]
    return f"http://{ip}:8080/metrics"


def _decisions(url: str) -> float:
    # The manager Pod's metrics port, on the bridge (the host routes to it).
    text = httpx.get(url, timeout=10.0).text
    return sum(float(value) for value in _DECISIONS.findall(text))


def _until(what: str, check: Any, follow: Follow | None = None) -> Any:
    began = time.monotonic()
    while True:
        if follow is not None:
            follow.step()
        found = check()
        if found:
            return found
        if time.monotonic() - began > DEADLINE:
            raise SystemExit(f"{what} did not happen within {DEADLINE:.0f}s")
        time.sleep(0.05)  # the pause between polls; the times come from the watch


def _first(watches: Watches, since: float, kind: str, test: Any) -> tuple[float, Any] | None:
    for at, resource, _, obj in watches.between(since, float("inf")):
        if resource.kind == kind and test(obj):
            return at, obj
    return None


def _pod_started(job: str) -> Any:
    def test(pod: dict[str, Any]) -> bool:
        ours = (pod["metadata"].get("labels") or {}).get("job-name") == job
        return ours and pod["status"].get("phase") in _STARTED

    return test


def _approves(name: str) -> Any:
    def test(approval: dict[str, Any]) -> bool:
        spec = approval.get("spec") or {}
        ref = spec.get("schemaRef") or spec.get("migrationRef") or {}
        return bool(ref.get("name") == name)

    return test


def _owned_by(name: str) -> Any:
    # Two examples are PtahMigrations: their Jobs share a prefix, never an owner.
    def test(job: dict[str, Any]) -> bool:
        return any(ref.get("name") == name for ref in job["metadata"].get("ownerReferences", []))

    return test


def _measure(run: LabRun, example: Example, watches: Watches, metrics: str) -> ApprovalPath:
    follow = Follow(run, approve=False, say=_quiet)
    _until(
        f"{example.name} AwaitingApproval",
        lambda: phase_of(run.get(example)) == "AwaitingApproval",
        follow,
    )
    before = _decisions(metrics)
    cli_began = time.time()
    run.approve(example)
    cli = time.time() - cli_began
    approval = PTAHSCHEMAAPPROVALS if example.cli_kind == "schema" else PTAHMIGRATIONAPPROVALS
    approved, _ = _until(
        f"{example.name}'s approval heard",
        lambda: _first(watches, cli_began, approval.kind, _approves(example.name)),
    )
    _, created = _until(
        f"{example.name}'s Apply Job created",
        lambda: _first(watches, approved, JOBS.kind, _owned_by(example.name)),
        follow,
    )
    job_name = created["metadata"]["name"]
    running, _ = _until(
        f"{example.name}'s Apply Pod running",
        lambda: _first(watches, approved, PODS.kind, _pod_started(job_name)),
        follow,
    )
    job = run.admin.get(JOBS, NAMESPACE, job_name)
    _until(f"{example.name} InSync", lambda: phase_of(run.get(example)) == DONE, follow)
    in_sync = time.time()
    writes = _decisions(metrics) - before
    return ApprovalPath(example, approved, running, in_sync, writes, job, cli)


def floor_job(stored: dict[str, Any], name: str) -> dict[str, Any]:
    """The Apply Job as the operator created it, for one client to create directly.

    Everything the Pod is made of stays (init containers, volumes, images, service
    account, environment, security); what goes is what ties it to its claim (owner,
    labels, annotations, the selector the server chose) and the runner's program.
    """
    spec = copy.deepcopy(stored["spec"])
    spec.pop("selector", None)
    spec.pop("ttlSecondsAfterFinished", None)
    spec["template"]["metadata"] = {}
    runner = spec["template"]["spec"]["containers"][0]
    command = list(runner["command"])
    runner["command"] = command[: command.index("-I") + 1] + _FLOOR_PROGRAM
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def _job_floor(run: LabRun, watches: Watches, path: ApprovalPath) -> tuple[float, float]:
    """create -> Running of the example's Apply Job created again directly: (began, ran)."""
    name = f"floor-{path.example.name}"
    began = time.time()
    run.admin.create(JOBS, NAMESPACE, floor_job(path.job, name))
    ran, _ = _until(
        f"{name}'s Pod running", lambda: _first(watches, began, PODS.kind, _pod_started(name))
    )
    run.admin.delete(JOBS, NAMESPACE, name)
    return began, ran


def _sequential_writes(run: LabRun, name: str, count: int) -> float:
    run.admin.create(CONFIGMAPS, NAMESPACE, {"metadata": {"name": name}, "data": {"n": "0"}})
    began = time.monotonic()
    for n in range(count):
        run.admin.patch_metadata(CONFIGMAPS, NAMESPACE, name, {"labels": {"n": str(n)}})
    return time.monotonic() - began


def _trace(
    watches: Watches, log: str, window: tuple[float, float], *, prefix: str, resource: str
) -> list[str]:
    began, ended = window
    # From just before the write: the approval's own admission is decided before it.
    marks: list[Mark] = watch_marks(watches, began - 0.1, ended + 0.05, prefix)
    marks += log_marks(log, began - 0.1, ended + 0.05, resource)
    return render(marks, began)


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="ptah-run-", dir="/tmp"))
    run = LabRun(workdir, say=_quiet, log_level="debug")
    try:
        run.start()
        families = tuple({example.resource.kind: example.resource for example in EXAMPLES}.values())
        api = KubeApi.from_kubeconfig(run.lab.kubeconfig("admin"))
        watches = Watches(api, NAMESPACE, (*families, PTAHSCHEMAAPPROVALS, PTAHMIGRATIONAPPROVALS))
        watches.start()
        manager = _manager_pod(run)
        metrics = _metrics_url(run, manager)
        # Every example waits for its approval before any is given: one example's
        # readings (their Pods) must not share the node with another's Apply Pod, or
        # the path would be timed on a busier node than its floor.
        follow = Follow(run, approve=False, say=_quiet)
        _until(
            "every example AwaitingApproval",
            lambda: set(follow.step().values()) == {"AwaitingApproval"},
        )
        paths: list[ApprovalPath] = []
        floors: dict[str, tuple[float, float]] = {}
        writes: dict[str, float] = {}
        for example in EXAMPLES:
            # The path, then its floor at once: the same node, the same moment's load.
            path = _measure(run, example, watches, metrics)
            paths.append(path)
            floors[example.name] = _job_floor(run, watches, path)
            writes[example.name] = _sequential_writes(
                run, f"floor-{example.name}", round(path.writes)
            )
        log = run.admin.read_pod_log(
            MANAGER_NAMESPACE, manager, container="manager", limit_bytes=_LOG_BYTES
        )
        watches.stop()
    finally:
        run.close()
    shutil.rmtree(workdir)
    print(f"make run's environment up in {sum(run.timings.values()):.1f}s ({run.timings})")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for path in paths:
        name = path.example.name
        running = path.running - path.approved
        job_began, job_ran = floors[name]
        floor = (job_ran - job_began) + writes[name]
        print(
            f"{name}: approval -> Apply Pod running {running:.2f}s, approval -> InSync "
            f"{path.in_sync - path.approved:.2f}s ({path.writes:.0f} admitted writes in the "
            f"window; kubectl ptah approve took {path.cli:.2f}s)"
        )
        print(
            f"{name}: fair floor {floor:.2f}s = its Apply Job created directly, create -> Pod "
            f"running {job_ran - job_began:.2f}s + {path.writes:.0f} sequential API writes "
            f"{writes[name]:.2f}s; ratio {running / floor:.2f}"
        )
    for path in paths:
        name = path.example.name
        print(f"trace of {name}'s approval path (ms from the approval's write):")
        window = (path.approved, path.running)
        for line in _trace(
            watches, log, window, prefix=path.job["metadata"]["name"], resource=name
        ):
            print(line)
        print(f"trace of {name}'s floor Job (ms from its create):")
        for line in _trace(watches, "", floors[name], prefix=f"floor-{name}", resource=name):
            print(line)


if __name__ == "__main__":
    main()
