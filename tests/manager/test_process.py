"""The manager process in this interpreter, on the API double: it serves health and
metrics, leads, and a stop gives the Lease back and exits 0; without a certificate it
refuses to start. (The real-API suite runs it as a process with the chart's env.)"""

from __future__ import annotations

import os
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from jobclaim.apiserver import LEASES
from kube.fake.inmemory import InMemoryApi
from lab.localmanager import CHART_DEFAULTS, local_environment
from manager.config import Config, load
from manager.process import Manager
from webhook.serving import local_certificates

# A whole manager with its servers and threads: integration, left to `make test`.
pytestmark = pytest.mark.integration

DEADLINE = 30.0


def webhook_double(_config: Config) -> InMemoryApi:
    """The webhook child's reader: module-level, since the child imports it by name."""
    return InMemoryApi()


def config_for(tmp_path: Path, **overrides: str) -> Config:
    return load(
        local_environment(
            CHART_DEFAULTS,
            identity="manager-0",
            kubeconfig=tmp_path / "unused",
            cert_dir=tmp_path / "certs",
            configurations=("ptah-operator-controller-write",),
            PTAH_LOG_LEVEL="error",
            **overrides,
        )
    )


@dataclass
class Running:
    manager: Manager
    api: InMemoryApi
    stopping: threading.Event
    thread: threading.Thread
    codes: list[int]
    ca: Path

    def get(self, path: str) -> httpx.Response:
        port = self.manager.config.webhook_port
        context = ssl.create_default_context(cafile=str(self.ca))
        with httpx.Client(verify=context, timeout=10) as http:
            return http.get(f"https://127.0.0.1:{port}{path}")

    def metrics(self) -> str:
        port = self.manager.config.metrics_port
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text


def until(condition: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)  # the servers start on their own threads' time


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    local = local_certificates(tmp_path / "certs")
    config = config_for(tmp_path)
    api = InMemoryApi()
    manager = Manager(config, api=lambda _config: api, webhook_api=webhook_double)
    stopping = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(manager.run(stopping)))
    thread.start()
    started = Running(manager, api, stopping, thread, codes, local.ca)

    def serving() -> bool:
        try:
            return started.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False

    try:
        until(serving, "the webhook to serve")
        yield started
    finally:
        stopping.set()
        thread.join(timeout=DEADLINE)


def test_it_leads_serves_health_and_metrics_and_stops_cleanly(running: Running) -> None:
    until(lambda: "ptah_controller_leader 1.0" in running.metrics(), "leadership")
    assert running.get("/healthz").text == "ok"
    metrics = running.metrics()
    assert "ptah_webhook_certificate_expiry_timestamp_seconds " in metrics
    assert "ptah_controller_queue_depth 0.0" in metrics
    assert (
        running.api.get(LEASES, "ptah-system", "ptah-operator-leader")["spec"]["holderIdentity"]
        == "manager-0"
    )
    # The webhook child's series are re-exported once each, beside the controller's.
    assert metrics.count("# TYPE ptah_webhook_ready gauge") == 1
    # A review the child refused is counted in the manager's /metrics.
    port = running.manager.config.webhook_port
    context = ssl.create_default_context(cafile=str(running.ca))
    with httpx.Client(verify=context, timeout=10) as http:
        answer = http.post(f"https://127.0.0.1:{port}/validate-controller-write", content=b"{}")
    assert answer.status_code == 400
    assert 'ptah_webhook_decisions_total{endpoint="controller-write"' in running.metrics()
    # No /metrics on the admission port: metrics live on their own port.
    assert running.get("/metrics").status_code == 404
    running.stopping.set()
    running.thread.join(timeout=DEADLINE)
    assert running.codes == [0]
    lease = running.api.get(LEASES, "ptah-system", "ptah-operator-leader")
    assert lease["spec"]["holderIdentity"] == ""


def test_without_a_certificate_it_does_not_start(tmp_path: Path) -> None:
    manager = Manager(
        config_for(tmp_path), api=lambda _config: InMemoryApi(), webhook_api=webhook_double
    )
    assert manager.run(threading.Event()) == 1


def test_a_webhook_process_that_dies_takes_the_manager_down(running: Running) -> None:
    webhook = running.manager.webhook
    assert webhook is not None and webhook.process.pid != os.getpid()
    webhook.process.kill()
    running.thread.join(timeout=DEADLINE)
    assert running.codes == [1]
