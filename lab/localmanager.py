"""The manager program (``python -m manager``) started as a process of its own, with the
chart's environment, against the local control plane.

``make run`` and the real-API tests run the very program the chart's Deployment runs,
not a second assembly of the controller and the webhook: what differs is only what a
Pod would get from the cluster (its name, the mounted certificate, the service
account's credentials, here a kubeconfig) and the ports, all given through the same
environment variables ``manager.config`` reads.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import httpx

import certs

# The chart's defaults (charts/ptah-operator values.yaml and templates/deployment.yaml)
# for everything that is not about where this process runs; `make run` cannot render
# the chart (that needs helm), so tests/chart holds this table to the render.
CHART_DEFAULTS: Final[dict[str, str]] = {
    "PTAH_MANAGER_USERNAME": "system:serviceaccount:ptah-system:ptah-operator",
    "PTAH_MANAGER_IMAGE": "registry.example.com/ptah/ptah-operator@sha256:" + "2" * 64,
    "PTAH_EXECUTOR_IMAGE": "registry.example.com/ptah/executor@sha256:" + "1" * 64,
    "PTAH_RUNNER_IMAGE": "registry.example.com/ptah/runner@sha256:" + "3" * 64,
    "PTAH_VERSION": "1.9.0",
    "PTAH_REQUIRE_DISTINCT_APPROVER": "false",
    "PTAH_COORDINATION_NAMESPACE": "ptah-system",
    "PTAH_LEADER_ELECTION": "true",
    "PTAH_LEADER_ELECTION_LEASE_NAME": "ptah-operator-leader",
    "PTAH_LEADER_ELECTION_LEASE_DURATION_SECONDS": "15",
    "PTAH_LEADER_ELECTION_RENEW_DEADLINE_SECONDS": "10",
    "PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS": "2",
    "PTAH_WEBHOOK_PORT": "9443",
    "PTAH_WEBHOOK_CERT_DIR": "/etc/ptah/webhook-certs",
    "PTAH_METRICS_PORT": "8080",
    "PTAH_LOG_LEVEL": "info",
    "PTAH_SHUTDOWN_SECONDS": "25",
    "PTAH_WATCH_NAMESPACES": "",
    "PTAH_WATCH_NAMESPACE_SELECTOR": "",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
# The chart's execution.scratchImages as the lab installs them (the default render names
# none): the examples' schemas say spec.dev provided, and a manager without an image for
# the engine refuses their Observe and Plan Jobs. No Pod runs off the lab cluster, so
# these are never pulled; they are pinned only because nothing else is accepted.
LOCAL_SCRATCH_IMAGES: Final[dict[str, str]] = {
    "PTAH_SCRATCH_IMAGE_POSTGRESQL": "registry.example.com/ptah/scratch-postgresql@sha256:"
    + "4" * 64,
    "PTAH_SCRATCH_IMAGE_MYSQL": "registry.example.com/ptah/scratch-mariadb@sha256:" + "5" * 64,
}
# Bounds what a starting manager does on its own time (imports, binding its ports).
START_DEADLINE: Final = 60.0


def free_port() -> int:
    """A loopback port nobody listens on now (the manager binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_environment(
    chart: Mapping[str, str],
    *,
    identity: str,
    kubeconfig: Path,
    cert_dir: Path,
    configurations: tuple[str, ...],
    watch_namespace: str = "",
    **overrides: str,
) -> dict[str, str]:
    """The chart's environment with what a Pod would get from the cluster filled in.

    ``overrides`` replace chart values by variable name (short Lease durations in a
    test, say). Everything the manager reads still comes through ``manager.config``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PTAH_", "POD_"))}
    env.update(LOCAL_SCRATCH_IMAGES)
    env.update(chart)
    env.update(
        POD_NAME=identity,
        POD_NAMESPACE=chart["PTAH_COORDINATION_NAMESPACE"],
        PTAH_KUBECONFIG=str(kubeconfig),
        PTAH_WEBHOOK_CERT_DIR=str(cert_dir),
        PTAH_WEBHOOK_CONFIGURATIONS=",".join(configurations),
        PTAH_WEBHOOK_PORT=str(free_port()),
        PTAH_METRICS_PORT=str(free_port()),
        PTAH_BIND_ADDRESS="127.0.0.1",
        PTAH_WATCH_NAMESPACES=watch_namespace,
    )
    env.update(overrides)
    return env


@dataclass
class ManagerProcess:
    """One ``python -m manager`` process; its JSON log lines go to ``log``."""

    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    @property
    def identity(self) -> str:
        return self.env["POD_NAME"]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.env['PTAH_WEBHOOK_PORT']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.env['PTAH_METRICS_PORT']}/metrics"

    @property
    def ca_bundle(self) -> bytes:
        return (Path(self.env["PTAH_WEBHOOK_CERT_DIR"]) / certs.CA_CERT).read_bytes()

    def start(self) -> ManagerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "manager"],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _tls(self, *, verify: bool) -> ssl.SSLContext:
        if verify:
            return ssl.create_default_context(cadata=self.ca_bundle.decode())
        # As a kubelet's HTTPS probe: it does not verify the certificate.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context

    def probe(self, path: str, *, verify: bool = True) -> httpx.Response:
        """GET ``path`` on the webhook port, trusting the local CA (or, as a kubelet
        does, nothing: ``verify=False``)."""
        with httpx.Client(verify=self._tls(verify=verify), timeout=10.0) as http:
            return http.get(self.url + path)

    def metrics(self) -> str:
        with httpx.Client(timeout=10.0) as http:
            return http.get(self.metrics_url).text

    def gauge(self, name: str) -> float | None:
        """A label-less sample of ``/metrics``, or None when it is not exported."""
        for line in self.metrics().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def wait_serving(self, deadline: float = START_DEADLINE) -> None:
        """Return once ``/healthz`` answers; raise if the process ends or time runs out."""
        end = time.monotonic() + deadline
        pause = 0.05
        while True:
            if not self.alive():
                raise RuntimeError(f"the manager {self.identity} exited:\n{self.tail()}")
            try:
                if self.probe("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet: the process is still importing
            if time.monotonic() > end:
                raise TimeoutError(f"the manager {self.identity} did not serve:\n{self.tail()}")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, as the kubelet sends it, and the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        return self._signal(signal.SIGKILL, 30.0)

    def _signal(self, signum: int, timeout: float) -> int:
        process = self.process
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(signum)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Past its own shutdown budget: a teardown must still finish.
            process.kill()
            code = process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
        return code

    def close(self) -> None:
        """Stop the process if it still runs (SIGTERM, then SIGKILL)."""
        if self.alive():
            self.terminate()
        elif self._log_file is not None:
            self._log_file.close()
            self._log_file = None
