"""What the rest of the cluster costs a manager: RSS, CPU per minute and API requests
with 10,000 unrelated Jobs and Pods in other namespaces, beside the same with none.

The manager program (``python -m manager`` through ``lab.localmanager``, the chart's
environment) runs against the real kube-apiserver of ``make controlplane``
(``lab.localplane.LocalControlPlane``), idle, with nothing of its own to serve: what
is measured is what unrelated objects make it do. Two managers are measured, each
once with none and once with the unrelated objects present:

- scoped: ``watch.namespaces: [shop]`` (``PTAH_WATCH_NAMESPACES=shop``);
- cluster-wide: no scope; its Job watch still asks the server for the operator's own
  Jobs only (``app.kubernetes.io/managed-by``), and it watches no Pods at all.

The unrelated objects: ``PTAH_BENCH_UNRELATED`` (default 10,000) spread over ten
namespaces, half Jobs and half Pods, none labelled as the operator's (no controller
or kubelet runs here: they stay as created, which is all a watch could see of them).

Figures, over ``PTAH_BENCH_WINDOW`` seconds (default 60) after a 10 s settle:
- RSS: the manager's VmRSS at the end of the window;
- CPU per minute: its user + system time over the window, scaled to a minute;
- API requests: the API server's own ``apiserver_request_total`` across the window:
  GETs and LISTs of the kinds the manager reads, WATCHes of the kinds it watches
  (``controller.reconciler.WATCHED``), printed by verb and kind. The plane's own
  controllers write (Job status, Events) and re-open a watch on every kind now and
  then (measured: about one per kind per minute once 10,000 objects exist); an idle
  manager with leader election off writes nothing, and the bench asks nothing of
  those kinds during a window, so the count is the manager's, give or take the
  controllers' occasional watch of the same kinds. The unrelated Jobs are
  suspended, or the plane's Job controller would create a Pod for each during the
  windows.

Target (issue 35): the ratio with unrelated objects to without, at or under 1.1 for
RSS and for API requests, for the scoped manager (printed for both).
Cost: about 3 minutes to create 10,000 objects on a 2-core machine, plus four
windows of 70 s: about 8 minutes all told.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.procmem import rss_mib
from controller.runtime.reconciler import WATCHED
from kube.client import KubeApi
from lab import run as localrun
from lab.localmanager import CHART_DEFAULTS, ManagerProcess, local_environment
from lab.localplane import LocalControlPlane, ensure_binary
from webhook.serving import local_certificates

UNRELATED = int(os.environ.get("PTAH_BENCH_UNRELATED", "10000"))
WINDOW = float(os.environ.get("PTAH_BENCH_WINDOW", "60"))
SETTLE = 10.0
NAMESPACES = 10
SHOP = "shop"
TARGET = 1.1
TICKS = os.sysconf("SC_CLK_TCK")
WATCH = frozenset(resource.plural for resource in WATCHED)
# What the manager could read on its own: its watched kinds, what its readiness and
# metrics read, and the kinds a pass reads (a manager sent unrelated objects would
# come to read these).
READ = WATCH | {
    "pods",
    "configmaps",
    "namespaces",
    "ptahschemaplans",
    "ptahmigrationplans",
    "ptahresultrecords",
    "ptahrealms",
}
_LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


@dataclass(frozen=True)
class Figures:
    rss_mib: float
    cpu_seconds_per_minute: float
    requests: Counter[str]  # by verb and resource

    @property
    def request_count(self) -> float:
        return float(sum(self.requests.values()))


def _cpu_seconds(pid: int) -> float:
    # /proc/<pid>/stat: the command may hold spaces, so split after its closing ')'.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _requests(plane: LocalControlPlane) -> Counter[str]:
    with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
        text = http.get(
            f"{plane.server_url}/metrics",
            headers={"Authorization": f"Bearer {plane.token('admin')}"},
        ).text
    total: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(_LABEL.findall(line.split("}", 1)[0]))
        verb, resource = labels.get("verb", ""), labels.get("resource", "")
        # The plane's own controllers write (Job status, Events) and re-open a watch on
        # every kind now and then; an idle manager with leader election off writes
        # nothing and watches WATCHED only. So: reads of what the manager may read,
        # watches of what it watches. (Non-resource URLs, the bench's scrapes among
        # them, have no resource.)
        read = verb in ("GET", "LIST") and resource in READ
        if not (read or (verb == "WATCH" and resource in WATCH)):
            continue
        total[f"{labels['verb']} {labels['resource']}"] += int(float(line.rsplit(" ", 1)[1]))
    return total


def _measure(plane: LocalControlPlane, scratch: Path, label: str, scope: str) -> Figures:
    env = local_environment(
        CHART_DEFAULTS,
        identity=f"bench-{label}",
        kubeconfig=plane.kubeconfig("manager"),
        cert_dir=scratch / "certs",
        configurations=(),
        watch_namespace=scope,
        PTAH_LEADER_ELECTION="false",
    )
    process = ManagerProcess(env, scratch / f"{label}.log").start()
    try:
        process.wait_serving()
        assert process.process is not None
        pid = process.process.pid
        # Let the start-up's lists and first watches finish; a bounded wait, no event
        # says the manager has gone quiet.
        time.sleep(SETTLE)
        cpu, before = _cpu_seconds(pid), _requests(plane)
        time.sleep(WINDOW)  # the window measured: nothing else is asked meanwhile
        figures = Figures(
            rss_mib=rss_mib(pid),
            cpu_seconds_per_minute=(_cpu_seconds(pid) - cpu) * 60.0 / WINDOW,
            requests=_requests(plane) - before,
        )
    finally:
        process.close()
    return figures


def _unrelated(plane: LocalControlPlane, admin: KubeApi) -> None:
    names = [f"tenant-{i:02d}" for i in range(NAMESPACES)]
    for namespace in names:
        localrun.prepare_namespace(admin, namespace)
    container = {"name": "app", "image": "registry.example.com/app@sha256:" + "0" * 64}
    headers = {
        "Authorization": f"Bearer {plane.token('admin')}",
        "Content-Type": "application/json",
    }

    def create(index: int) -> None:
        namespace = names[index % NAMESPACES]
        name = f"unrelated-{index:05d}"
        spec: dict[str, Any] = {"containers": [container]}
        body: dict[str, Any]
        if index % 2:
            path = f"/api/v1/namespaces/{namespace}/pods"
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
        else:
            path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
            template = {"spec": {**spec, "restartPolicy": "Never"}}
            # Suspended: the plane's Job controller would otherwise create a Pod for
            # each, thousands of requests in the windows that are none of the manager's.
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": {"template": template, "suspend": True},
            }
        with httpx.Client(verify=plane.ssl_context(), timeout=60.0) as http:
            answer = http.post(plane.server_url + path, content=json.dumps(body), headers=headers)
        if answer.status_code not in (201, 409):
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:300]}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, range(UNRELATED)))


def _row(label: str, figures: Figures) -> None:
    print(
        f"{label:<36} RSS {figures.rss_mib:7.1f} MiB   CPU {figures.cpu_seconds_per_minute:6.2f}"
        f" s/min   API requests {figures.request_count:6.0f}"
    )
    # Which requests they were: the figure's own evidence, so a change is attributable.
    print("    " + ", ".join(f"{key} {n}" for key, n in sorted(figures.requests.items()) if n))


def _ratios(label: str, none: Figures, some: Figures) -> bool:
    rss = some.rss_mib / none.rss_mib
    requests = some.request_count / max(none.request_count, 1.0)
    cpu = some.cpu_seconds_per_minute / max(none.cpu_seconds_per_minute, 1e-6)
    meets = rss <= TARGET and requests <= TARGET
    print(
        f"{label:<36} ratio RSS {rss:5.2f}   CPU {cpu:5.2f}   API requests {requests:5.2f}"
        f"   (target <= {TARGET} for RSS and requests: {'met' if meets else 'NOT met'})"
    )
    return meets


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-watch-scope-") as scratch_name:
        scratch = Path(scratch_name)
        local_certificates(scratch / "certs")
        with (
            LocalControlPlane(scratch / "plane", binary=ensure_binary()) as plane,
            KubeApi.from_kubeconfig(plane.kubeconfig("admin")) as admin,
        ):
            localrun.install_crds(plane, admin)
            localrun.grant_manager(plane)
            localrun.prepare_namespace(admin, SHOP)
            none = {
                "scoped": _measure(plane, scratch, "scoped-none", SHOP),
                "cluster-wide": _measure(plane, scratch, "cluster-none", ""),
            }
            started = time.monotonic()
            _unrelated(plane, admin)
            print(
                f"created {UNRELATED} unrelated Jobs and Pods in {time.monotonic() - started:.0f} s"
            )
            some = {
                "scoped": _measure(plane, scratch, "scoped-some", SHOP),
                "cluster-wide": _measure(plane, scratch, "cluster-some", ""),
            }
        for label in ("scoped", "cluster-wide"):
            _row(f"{label}, none", none[label])
            _row(f"{label}, {UNRELATED} unrelated", some[label])
        scoped = _ratios("scoped [shop]", none["scoped"], some["scoped"])
        _ratios("cluster-wide", none["cluster-wide"], some["cluster-wide"])
        if not scoped:
            sys.exit(1)


if __name__ == "__main__":
    main()
