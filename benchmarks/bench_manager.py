"""The manager process: its memory idle and with 1,000 resources, and the webhook's p99
inside it while the controller works, beside the same figure while it is idle.

The manager is the real program (``manager.process.Manager``, as ``python -m manager``
assembles it) in a child process, with its controller on the API double and its webhook
reading a fixed state (the objects a Job-create review reads), so nothing but the
manager itself runs there. The parent reads the child's RSS from /proc and drives the
webhook over loopback TLS with a lean asyncio client; a client in the same process would
share the manager's interpreter lock and measure itself.

1,000 PtahSchemas over 100 databases are created in the double at once; the controller
claims a Plan for each (a binding, a claim, a realm Lease, a plan Job) and the webhook
is measured while those passes run. Figures only; nothing asserts on them. RSS includes
the API double's own store, which a real manager does not hold; the webhook is a child
process of the manager (``manager.webhookprocess``), its RSS printed apart.
"""

from __future__ import annotations

import asyncio
import copy
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson
import yaml

from benchmarks.procmem import children, rss_mib
from jobclaim.apiserver import PTAHSCHEMAS, SERVICEACCOUNTS
from kube.fake.inmemory import InMemoryApi
from lab.localmanager import CHART_DEFAULTS, local_environment
from manager import logs
from manager.config import Config, load
from manager.process import Manager
from tests.support.webhookscenes import job_create
from webhook import StateReader
from webhook.serving import local_certificates

RESOURCES = 1000
DATABASES = 100
CLIENTS = 10
REQUESTS = 2000
NAMESPACE = "shop"
REPO = Path(__file__).resolve().parents[1]


# -- the child: the manager on the API double ----------------------------------------------


def fixed_state(_config: Config) -> StateReader:
    """The webhook child's reader (module-level: the child imports it by name)."""
    return StateReader(job_create("schema", "Plan").objects)


def child(scratch: Path) -> None:
    env = local_environment(
        CHART_DEFAULTS,
        identity="bench",
        kubeconfig=scratch / "unused-kubeconfig",
        cert_dir=scratch,
        configurations=("bench-controller-write",),
        PTAH_LOG_LEVEL="error",  # a decision line per request would measure the log
    )
    (scratch / "ports").write_text(f"{env['PTAH_WEBHOOK_PORT']} {env['PTAH_METRICS_PORT']}")
    config = load(env)
    logs.configure(config.log_level)
    double = InMemoryApi()
    double.create(SERVICEACCOUNTS, NAMESPACE, {"metadata": {"name": "default"}})
    stopping = threading.Event()
    manager = Manager(config, api=lambda _config: double, webhook_api=fixed_state)
    runner = threading.Thread(target=manager.run, args=(stopping,))
    runner.start()
    example = yaml.safe_load((REPO / "examples" / "ptahschema.yaml").read_text())
    for line in sys.stdin:
        if line.strip() == "populate":
            for index in range(RESOURCES):
                schema = copy.deepcopy(example)
                schema["metadata"] = {"name": f"db-{index:04d}", "namespace": NAMESPACE}
                # Keyed, not on the example's realm: the figure is the manager's cost
                # per resource, and a realm's census lists every claimant per pass.
                schema["spec"]["target"].pop("realmRef", None)
                schema["spec"]["target"]["coordinationKey"] = f"db-{index % DATABASES:03d}"
                double.create(PTAHSCHEMAS, NAMESPACE, schema)
            print("populated", flush=True)
        elif line.strip() == "stop":
            break
    stopping.set()
    runner.join()


# -- the parent: RSS and webhook latency ---------------------------------------------------


def passes(metrics_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("ptah_controller_passes_total{")
    )


async def latencies(port: int, ca: Path, body: bytes) -> list[float]:
    context = ssl.create_default_context(cafile=str(ca))
    seen: list[float] = []
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(verify=context, limits=limits, timeout=30) as http:
        url = f"https://127.0.0.1:{port}/validate-controller-write"

        async def one_client(count: int) -> None:
            for _ in range(count):
                started = time.perf_counter()
                answer = await http.post(url, content=body)
                seen.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text

        await asyncio.gather(*(one_client(REQUESTS // CLIENTS) for _ in range(CLIENTS)))
    return seen


def figure(label: str, seen: list[float]) -> None:
    p50 = statistics.median(seen) * 1000
    p99 = statistics.quantiles(seen, n=100)[98] * 1000
    print(f"webhook {label:<28} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   ({len(seen)} reviews)")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(Path(sys.argv[2]))
        return
    body = orjson.dumps(job_create("schema", "Plan").review())
    with tempfile.TemporaryDirectory(prefix="bench-manager-") as scratch_name:
        scratch = Path(scratch_name)
        local = local_certificates(scratch)
        process = subprocess.Popen(
            [sys.executable, __file__, "--child", str(scratch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert process.stdin is not None and process.stdout is not None
        try:
            deadline = time.monotonic() + 60
            while True:  # the child binds its ports on its own time
                try:
                    webhook, metrics = map(int, (scratch / "ports").read_text().split())
                    httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=2)
                    # The webhook child starts before the metrics server is up, but a
                    # start that failed is only seen on its own port.
                    httpx.get(f"https://127.0.0.1:{webhook}/healthz", verify=str(local.ca))
                    break
                except (OSError, ValueError, httpx.TransportError):
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise RuntimeError("the manager did not start") from None
                    time.sleep(0.1)
            asyncio.run(latencies(webhook, local.ca, body))  # warm-up
            print(f"RSS idle                             {rss_mib(process.pid):7.1f} MiB")
            for pid in children(process.pid):
                print(f"RSS idle, webhook process            {rss_mib(pid):7.1f} MiB")
            figure("(controller idle)", asyncio.run(latencies(webhook, local.ca, body)))
            process.stdin.write("populate\n")
            process.stdin.flush()
            assert process.stdout.readline().strip() == "populated"
            figure(
                f"(controller on {RESOURCES} new)", asyncio.run(latencies(webhook, local.ca, body))
            )
            still = passes(metrics)
            deadline = time.monotonic() + 600
            while passes(metrics) < RESOURCES and time.monotonic() < deadline:
                time.sleep(0.5)  # the controller works through its queue on its own time
            print(
                f"RSS with {RESOURCES} resources              {rss_mib(process.pid):7.1f} MiB"
                f"   ({passes(metrics):.0f} passes; {still:.0f} ran during the busy phase)"
            )
            process.stdin.write("stop\n")
            process.stdin.flush()
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


if __name__ == "__main__":
    main()
