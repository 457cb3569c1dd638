"""How long a bare Pod takes on the lab's real node: the floor under every Job the
operator dispatches.

Starts the lab cluster (``lab.cluster``, root), then creates one-container Pods
(the lab's probe image, ``probe say``) one after another and measures, for each,
create -> Running-or-later (scheduled, sandbox and network made, container
started) and create -> Succeeded (the kubelet saw it exit and reported it). The
first Pod pulls the image from the loopback registry; the rest find it cached,
so the first is reported apart. Also prints what the cluster's start and stop cost.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.cluster import LocalCluster
from tests.cluster.clusterkit import Api, pod_manifest

PODS = 10
# A bounded wait per Pod: a real node acts on its own time, and a Pod that
# never finishes must end the benchmark, not hang it.
DEADLINE = 120.0


def _phase(api: Api, namespace: str, name: str) -> str:
    pod: dict[str, Any] = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return str(pod.get("status", {}).get("phase", ""))


def pod_start(api: Api, namespace: str, image: str, name: str) -> tuple[float, float]:
    """create -> Running-or-later and create -> Succeeded of one probe Pod, in seconds."""
    began = time.monotonic()
    api.create(f"/api/v1/namespaces/{namespace}/pods", pod_manifest(name, image, ["say", "floor"]))
    running = 0.0
    while True:
        phase = _phase(api, namespace, name)
        now = time.monotonic() - began
        if phase in {"Running", "Succeeded"} and not running:
            running = now
        if phase == "Succeeded":
            return running, now
        if phase == "Failed" or now > DEADLINE:
            raise SystemExit(f"pod {name} ended {phase or 'nowhere'} after {now:.1f}s")
        time.sleep(0.02)  # the pause between polls of the API


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="ptah-lab-", dir="/tmp"))
    with LocalCluster(workdir) as lab:
        api = Api.from_kubeconfig(lab.kubeconfig("admin"))
        namespace = "bench"
        api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        while api.get_or_none(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is None:
            time.sleep(0.05)  # the service-account controller makes it moments later
        image = lab.image("probe").ref
        results = [pod_start(api, namespace, image, f"p{i}") for i in range(PODS)]
        api.http.close()
    shutil.rmtree(workdir)  # only after a clean stop; otherwise kept for its logs
    first, rest = results[0], results[1:]
    print(f"lab cluster start {lab.timings['start']:.1f}s, stop {lab.timings['stop']:.1f}s")
    print(f"first pod (pulls the image): running {first[0]:.2f}s, succeeded {first[1]:.2f}s")
    for label, index in (("running", 0), ("succeeded", 1)):
        values = sorted(r[index] for r in rest)
        print(
            f"next {len(rest)} pods, create -> {label}: median {statistics.median(values):.2f}s,"
            f" min {values[0]:.2f}s, max {values[-1]:.2f}s"
        )


if __name__ == "__main__":
    main()
