"""``/readyz`` under a slow API server: ready while its facts are fresh, unready once stale.

The manager program runs as the chart starts it (``python -m manager``, the chart's
environment), talking to the real API server through a TCP relay on loopback that
can hold every answer back (a slow API server, as a kubelet sees one under load) or
cut every connection (an API server gone). A kubelet's probe has a 2-second timeout:
before issue 29, ``/readyz`` read the API server on every probe, so a slow API server
timed every replica's probe out at once and the fail-closed webhooks lost every
endpoint together. Now the probe reads only the refresher's record:

- answers held back 3 s each: every probe still answers 200 well inside the kubelet's
  timeout, for longer than the readiness window, because reads keep succeeding;
- every connection cut: the probe answers 503 once no read has succeeded for the
  window, naming how long and the last failure.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import yaml

from lab import run as localrun
from lab.localmanager import ManagerProcess, local_environment
from tests.support.chartrender import VALUES, Helm
from tests.support.realapioperator import Operator, operator  # noqa: F401
from webhook.serving import local_certificates

pytestmark = pytest.mark.controlplane

# The kubelet's probe timeout in the chart (deployment.yaml, readinessProbe).
PROBE_TIMEOUT = 2.0
# How long the relay holds back each answer: longer than a probe may take.
DELAY = 3.0
WINDOW = 10.0
REFRESH = 0.5


class Relay:
    """A TCP relay to the API server that can hold answers back or cut connections."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.delay = 0.0
        self.down = False
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """Refuse from now on, and end every connection open now."""
        with self._lock:
            self.down = True
            for sock in self._open:
                # shutdown, not only close: a thread blocked in recv on it wakes, and
                # the peer sees the connection end.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, answer: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if answer and self.delay:
                    # The slowness under test, on the API server's side of the wire.
                    time.sleep(self.delay)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                sock.close()

    def close(self) -> None:
        self._listener.close()
        self.cut()


def relayed_kubeconfig(source: Path, port: int, target: Path) -> Path:
    """``source`` with its server replaced by the relay's address (the API server's
    certificate names 127.0.0.1, whatever the port)."""
    document = yaml.safe_load(source.read_text())
    for cluster in document["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    target.write_text(yaml.safe_dump(document))
    return target


@contextmanager
def relayed_manager(
    operator: Operator,  # noqa: F811
    helm: Helm,
    tmp_path: Path,
) -> Iterator[tuple[Relay, ManagerProcess]]:
    objects = helm.render([VALUES / "required.yaml"])
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    chart = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    plane = operator.plane
    host, port = plane.server_url.removeprefix("https://").rsplit(":", 1)
    relay = Relay((host, int(port)))
    cert_dir = tmp_path / "certs"
    local_certificates(cert_dir)
    env = local_environment(
        chart,
        identity=f"slow-{uuid.uuid4().hex[:6]}",
        kubeconfig=relayed_kubeconfig(
            plane.kubeconfig("manager"), relay.port, tmp_path / "kubeconfig"
        ),
        cert_dir=cert_dir,
        configurations=(),
        PTAH_LEADER_ELECTION_LEASE_NAME=f"leader-{uuid.uuid4().hex[:8]}",
        PTAH_READY_REFRESH_SECONDS=str(REFRESH),
        PTAH_READY_WINDOW_SECONDS=str(WINDOW),
        PTAH_SHUTDOWN_SECONDS="5",
    )
    process = ManagerProcess(env, tmp_path / "manager.log")
    with ExitStack() as stack:
        stack.callback(relay.close)
        stack.callback(process.terminate)
        process.start()
        process.wait_serving()
        yield relay, process


def probe(process: ManagerProcess) -> tuple[int, float, str]:
    """``/readyz`` as the kubelet asks it; (status, seconds, text)."""
    started = time.monotonic()
    answer = process.probe("/readyz", verify=False)
    return answer.status_code, time.monotonic() - started, answer.text


def test_a_slow_api_server_leaves_the_replica_ready_and_a_gone_one_does_not(
    operator: Operator,  # noqa: F811
    helm: Helm,
    tmp_path: Path,
) -> None:
    with relayed_manager(operator, helm, tmp_path) as (relay, process):
        # The control: ready through the relay at full speed.
        localrun.until(lambda: probe(process)[0] == 200, "the manager to be ready")

        relay.delay = DELAY
        answers: list[tuple[int, float, str]] = []
        end = time.monotonic() + WINDOW * 1.5
        while time.monotonic() < end:
            answers.append(probe(process))
        statuses = {status for status, _, _ in answers}
        slowest = max(seconds for _, seconds, _ in answers)
        assert statuses == {200}, [a for a in answers if a[0] != 200][:3]
        assert slowest < PROBE_TIMEOUT / 2, slowest
        print(f"slow API server: {len(answers)} probes, all 200, slowest {slowest:.3f}s")

        relay.delay = 0.0
        relay.cut()
        cut = time.monotonic()
        localrun.until(lambda: probe(process)[0] == 503, "readiness to turn red", deadline=60)
        red_after = time.monotonic() - cut
        status, seconds, text = probe(process)
        assert status == 503 and seconds < PROBE_TIMEOUT / 2
        assert "the api server has not been read for" in text.lower(), text
        assert "the last read failed" in text, text
        # Not before the facts went stale: a failed read alone does not turn it red.
        assert red_after >= WINDOW - 2 * REFRESH - DELAY, red_after
        print(f"API server gone: unready after {red_after:.1f}s (window {WINDOW:.0f}s)")
