"""The webhook in an OS process of its own, a child of the manager process.

Why a process: one interpreter cannot run the admission webhook and the controller side
by side. Judging a review is CPU work under the GIL, and so is a controller pass; with
both in one interpreter a busy controller made every review wait for its passes, and
every write the controller makes waits for a review (issue 34: p99 135 ms idle, 839 ms
while the controller worked through 1,000 new resources). A child process has its own
interpreter and its own core. It is a child of the manager rather than a second container
so that the manager alone decides the shutdown order (a container's SIGTERM reaches every
container at once) and the Pod keeps one container, one image, one set of probes.

What the child keeps from the in-process webhook, and how:

- **certificate reload**: the child serves through ``certs.serve_reloading`` from the
  same certificate directory, exactly as before;
- **readiness**: the child runs the readiness facts refresher itself (its own API
  client) and answers ``/readyz`` from them; ``ptah_webhook_ready`` is its gauge;
- **liveness**: ``/healthz`` stays on the admission port, but what it reports is the
  controller's, so the child asks the manager over a pipe (``_Asker``); a manager that
  does not answer within ``ASK_SECONDS`` makes ``/healthz`` fail, closed;
- **metrics**: the decisions are counted in the child's own registry and the manager's
  ``/metrics`` asks the child for them at scrape time over the control pipe
  (``ChildCollector``): one port, one scrape, no message per review;
- **shutdown order**: the child ignores SIGTERM and SIGINT (a terminal's Ctrl-C reaches
  the whole process group) and stops only when the manager says ``stop`` or the
  manager's end of the pipe closes (the manager died): the manager first drains its
  controller, whose passes' writes this webhook admits, then tells the child to stop,
  and the child drains its requests within its share of the budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

import certs
from jobclaim.apiserver import ApiClient
from manager import logs
from manager.config import Config
from manager.metrics import webhook_ready_gauge
from manager.readiness import ReadinessFacts, cached_readiness
from webhook.app import create_app
from webhook.engine import Engine
from webhook.observability import Metrics as WebhookMetrics
from webhook.serving import uvicorn_server

log = logging.getLogger("manager.webhook")

# How long either side waits for the other's answer before failing closed.
ASK_SECONDS: Final = 2.0
STARTED: Final = "started"
STOP: Final = "stop"
METRICS: Final = "metrics"


class _Asker:
    """One question at a time over a duplex pipe, answered within ``ASK_SECONDS``."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    def ask(self, question: object) -> object | None:
        """The answer, or None when the other side is gone or slow."""
        with self._lock:
            try:
                while self._connection.poll(0):
                    self._connection.recv()  # a late answer to a question given up on
                self._connection.send(question)
                if not self._connection.poll(ASK_SECONDS):
                    return None
                answer: object = self._connection.recv()
                return answer
            except (EOFError, OSError):
                return None


# -- the child ---------------------------------------------------------------------------


def child_main(
    config: Config,
    connect: Callable[[Config], ApiClient],
    control: Connection,
    health: Connection,
    drain_seconds: float,
) -> None:
    """The child process: serve the webhook until the manager says stop (or is gone)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logs.configure(config.log_level)
    cert_dir = config.cert_dir
    tls = certs.ReloadingTLS(cert_dir / certs.TLS_CERT, cert_dir / certs.TLS_KEY)
    registry = CollectorRegistry(auto_describe=True)
    decisions = WebhookMetrics(registry=registry)
    ready_gauge = webhook_ready_gauge(registry)
    webhook_api = connect(config)
    # Its own client: a read the refresher waits on never holds up admission.
    readiness_api = connect(config)
    facts = ReadinessFacts(
        readiness_api,
        namespace=config.pod_namespace,
        configurations=config.webhook_configurations,
    )
    cached = cached_readiness(tls, facts, window_seconds=config.ready_window_seconds)

    def readiness() -> list[str]:
        found = cached()
        ready_gauge.set(0 if found else 1)
        return found

    asker = _Asker(health)

    def liveness() -> list[str]:
        answer = asker.ask("liveness")
        if not isinstance(answer, list):
            return [f"the manager did not answer the liveness question within {ASK_SECONDS:.0f}s"]
        return [str(problem) for problem in answer]

    engine = Engine(webhook_api, config.webhook_settings())
    app = create_app(engine, readiness=readiness, liveness=liveness, observer=decisions)
    server = uvicorn_server(
        app, tls, host=config.bind_address, port=config.webhook_port, log_config=None
    )
    stop = threading.Event()
    refresher = threading.Thread(
        target=facts.run, args=(stop, config.ready_refresh_seconds), name="readiness", daemon=True
    )
    serving = threading.Thread(target=_serve, args=(server, tls, stop), name="webhook", daemon=True)
    refresher.start()
    serving.start()
    listener = threading.Thread(
        target=_listen,
        args=(control, server, stop, lambda: generate_latest(registry)),
        name="control",
        daemon=True,
    )
    listener.start()
    stop.wait()
    server.should_exit = True
    serving.join(timeout=drain_seconds)
    engine.close()
    for client in (webhook_api, readiness_api):
        close = getattr(client, "close", None)
        if callable(close):
            close()
    log.info("the webhook drained; its process exits")


def _serve(server: Any, tls: certs.ReloadingTLS, stop: threading.Event) -> None:
    try:
        asyncio.run(certs.serve_reloading(server, tls))
    except BaseException:
        log.exception("the webhook server failed")
    finally:
        stop.set()


def _listen(
    control: Connection, server: Any, stop: threading.Event, metrics: Callable[[], bytes]
) -> None:
    """Answer the manager: announce the start, render metrics, stop when told or orphaned."""
    announced = False
    try:
        while not stop.is_set():
            if not announced and server.started:
                control.send(STARTED)
                announced = True
            # A bounded wait, so the start is announced soon after uvicorn sets it.
            if not control.poll(0.05 if not announced else 1.0):
                continue
            message = control.recv()
            if message == METRICS:
                control.send(metrics())
            elif message == STOP:
                break
    except (EOFError, OSError):
        log.warning("the manager's end of the pipe closed; the webhook stops")
    finally:
        stop.set()


# -- the manager's side ------------------------------------------------------------------


class ChildCollector(Collector):
    """The child's series, asked for at scrape time and re-exported as they are."""

    def __init__(self, asker: _Asker) -> None:
        self._asker = asker

    def collect(self) -> Iterator[Any]:
        text = self._asker.ask(METRICS)
        if isinstance(text, bytes):
            yield from text_string_to_metric_families(text.decode())

    def describe(self) -> Iterator[Any]:
        return iter(())  # the child's series are not known before it answers


class WebhookProcess:
    """The manager's handle on its webhook child."""

    def __init__(
        self,
        config: Config,
        connect: Callable[[Config], ApiClient],
        liveness: Callable[[], list[str]],
        drain_seconds: float,
    ) -> None:
        """``connect`` makes the child's API clients in the child, so it must be a
        module-level function (the child is spawned and imports it by name)."""
        context = multiprocessing.get_context("spawn")
        self._control, child_control = context.Pipe()
        self._health, child_health = context.Pipe()
        self._liveness = liveness
        self.process = context.Process(
            target=child_main,
            args=(config, connect, child_control, child_health, drain_seconds),
            name="ptah-webhook",
            daemon=True,
        )
        self._asker = _Asker(self._control)
        self.collector = ChildCollector(self._asker)
        self._answering = threading.Thread(target=self._answer, name="liveness", daemon=True)

    def start(self, timeout: float) -> bool:
        """Start the child; True once it serves, False when it died or took too long."""
        self.process.start()
        self._answering.start()
        try:
            if self._control.poll(timeout):
                return bool(self._control.recv() == STARTED)
        except (EOFError, OSError):
            pass
        return False

    def _answer(self) -> None:
        """Answer the child's liveness questions until it is gone."""
        try:
            while True:
                self._health.recv()
                self._health.send(self._liveness())
        except (EOFError, OSError):
            return

    def stop(self, drain_seconds: float) -> None:
        """Tell the child to drain and exit; kill it if it outlives its share."""
        with contextlib.suppress(EOFError, OSError):
            self._control.send(STOP)
        self.process.join(timeout=drain_seconds + ASK_SECONDS)
        if self.process.is_alive():
            log.warning("the webhook process outlived its drain; killing it")
            self.process.kill()
            self.process.join(timeout=ASK_SECONDS)
