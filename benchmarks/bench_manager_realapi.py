"""The manager's own memory against a real API server, per PtahSchema.

``bench_manager.py`` runs the controller on the API double, whose store is counted in
that process's RSS. Here the manager is ``python -m manager`` as the chart starts it
(``lab.localmanager``), on the real kube-apiserver and etcd of ``make controlplane``
(``lab.localplane.LocalControlPlane``), with the operator's CRDs and the manager's
permissions; nothing of the API server lives in the manager's process. It creates
``--count`` PtahSchemas (over a tenth as many databases), waits until the controller
has run a pass over each, and prints the controller process's RSS (its webhook child
and multiprocessing's resource tracker printed apart) and MiB per resource beside the
idle figure.

No webhook configuration is registered, so the API server admits the manager's writes
without calling its webhook; the webhook's memory is its own process's either way. No
kubelet runs: Jobs are created and stay unscheduled, which is all the controller holds.

Target (issue 34): at most 150 MiB at 1,000 PtahSchemas. Figures only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks.procmem import children, rss_mib
from jobclaim.apiserver import PTAHSCHEMAS
from kube.client import KubeApi
from lab import run as localrun
from lab.localmanager import CHART_DEFAULTS, ManagerProcess, local_environment
from lab.localplane import LocalControlPlane, ensure_binary
from webhook.serving import local_certificates

NAMESPACE = "bench"
TARGET_MIB = 150.0
PASS_DEADLINE = 1800.0


def passes(manager: ManagerProcess) -> float:
    try:
        text = manager.metrics()
    except httpx.TransportError:
        return 0.0
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("ptah_controller_passes_total{")
    )


def leading(manager: ManagerProcess) -> bool:
    try:
        return manager.gauge("ptah_controller_leader") == 1.0
    except httpx.TransportError:
        return False  # not serving its metrics yet


def describe(label: str, pid: int, count: int, idle: float | None) -> float:
    mine = rss_mib(pid)
    extra = ""
    if idle is not None and count:
        extra = f"   {(mine - idle) / count * 1024:.1f} KiB per resource above idle"
    print(f"controller RSS {label:<28} {mine:7.1f} MiB{extra}")
    for child in children(pid):
        print(f"  child process {child:<27} {rss_mib(child):7.1f} MiB (not counted)")
    return mine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="PtahSchemas (default 1000)")
    args = parser.parse_args()
    count: int = args.count
    with tempfile.TemporaryDirectory(prefix="bench-realapi-") as scratch_name:
        scratch = Path(scratch_name)
        started = time.monotonic()
        with LocalControlPlane(scratch / "plane", binary=ensure_binary()) as plane:
            admin = KubeApi.from_kubeconfig(plane.kubeconfig("admin"))
            localrun.install_crds(plane, admin)
            localrun.grant_manager(plane)
            localrun.prepare_namespace(admin, NAMESPACE)
            local_certificates(scratch / "certs")
            env = local_environment(
                CHART_DEFAULTS,
                identity="bench",
                kubeconfig=plane.kubeconfig("manager"),
                cert_dir=scratch / "certs",
                configurations=(),
                watch_namespace=NAMESPACE,
                PTAH_LOG_LEVEL="error",
            )
            manager = ManagerProcess(env, scratch / "manager.log").start()
            try:
                assert manager.process is not None
                pid = manager.process.pid
                deadline = time.monotonic() + 120
                while not leading(manager):
                    if time.monotonic() > deadline or not manager.alive():
                        raise SystemExit("the manager did not lead: " + manager.log.read_text())
                    time.sleep(0.2)  # it starts and campaigns on its own time
                print(f"control plane and manager up in {time.monotonic() - started:.0f}s")
                idle = describe("idle", pid, 0, None)
                created = time.monotonic()
                databases = max(1, count // 10)
                for index in range(count):
                    schema = localrun.example_schema(NAMESPACE, f"db-{index:05d}")
                    schema["spec"]["target"]["coordinationKey"] = f"db-{index % databases:04d}"
                    admin.create(PTAHSCHEMAS, NAMESPACE, schema)
                print(f"{count} PtahSchemas created in {time.monotonic() - created:.0f}s")
                deadline = time.monotonic() + PASS_DEADLINE
                while passes(manager) < count:
                    if time.monotonic() > deadline or not manager.alive():
                        raise SystemExit(f"only {passes(manager):.0f} passes ran")
                    time.sleep(1.0)  # the controller works through its queue on its own time
                print(f"{passes(manager):.0f} passes in {time.monotonic() - created:.0f}s")
                loaded = describe(f"with {count} PtahSchemas", pid, count, idle)
                print(f"MiB per resource (whole RSS / count): {loaded / count:.3f}")
                if count == 1000:  # the target is stated at 1,000 only
                    verdict = "met" if loaded <= TARGET_MIB else "NOT met"
                    print(f"target ≤ {TARGET_MIB:.0f} MiB at 1,000: {verdict}")
            finally:
                manager.close()
                admin.close()
        print(f"total {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
