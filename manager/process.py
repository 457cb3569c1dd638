"""The manager process: the controller under leader election, the webhook over TLS,
health and metrics, one shutdown.

Threads, not processes: the webhook's event loop runs in a thread of its own (uvicorn
installs no signal handlers off the main thread, so SIGTERM stays ours), the
controller loop in another, the metrics server in a third; the main thread only waits
for a signal and then shuts down in this order:

1. the controller stops taking keys and finishes the passes in flight, then gives the
   Lease back (``Reconciler.run``); the webhook keeps serving meanwhile, because those
   passes' own writes are admitted by it;
2. the webhook stops accepting connections and finishes the requests it has;
3. the metrics server stops, the API clients close, and the process exits 0.

Each stage has its share of ``PTAH_SHUTDOWN_SECONDS`` (``shutdown_plan``). A pass
still running when the controller's share is spent is left behind with the Lease
*not* given back: the Lease then expires on its own after the pass has had its chance
to write, never while it still may.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import uvicorn
from prometheus_client import start_http_server

import certs
from controller import (
    ApiEventSink,
    Driver,
    Environment,
    Key,
    LeaderElector,
    Reconciler,
    Stop,
    TargetLock,
)
from jobclaim.apiserver import PTAHMIGRATIONPLANS, PTAHSCHEMAPLANS, ApiClient
from kube.client import KubeApi
from manager.config import Config
from manager.health import liveness_problems
from manager.labfaults import LabFaultPoints
from manager.metrics import ManagerMetrics
from manager.readiness import ReadinessFacts, cached_readiness
from webhook.app import create_app
from webhook.engine import Engine
from webhook.serving import uvicorn_server

log = logging.getLogger("manager")

# How long the webhook has to finish the requests it holds once it stops accepting.
DRAIN_SECONDS: Final = 5.0
STARTUP_SECONDS: Final = 30.0


@dataclass(frozen=True, slots=True)
class ShutdownPlan:
    controller_seconds: float
    drain_seconds: float


def shutdown_plan(total: float) -> ShutdownPlan:
    """Split the shutdown budget: the webhook's drain first, the rest to the passes. Pure."""
    drain = min(DRAIN_SECONDS, total / 4)
    return ShutdownPlan(controller_seconds=total - drain, drain_seconds=drain)


def connect(config: Config) -> KubeApi:
    """An API client as the configuration says: a kubeconfig, else the service account."""
    if config.kubeconfig is not None:
        return KubeApi.from_kubeconfig(config.kubeconfig)
    return KubeApi.in_cluster()


class _WedgingReconciler(Reconciler):
    """The test hook ``PTAH_TEST_WEDGE_PASSES``: every pass blocks until shutdown."""

    def __init__(self, *args: Any, release: threading.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._release = release

    def reconcile(self, key: Key) -> Stop:
        log.warning("test hook: the pass over %s is wedged until shutdown", key)
        self._release.wait()
        return Stop("wedged by the test hook", requeue_after=1.0)


class Manager:
    """One manager process's parts; ``run`` serves until ``stopping`` is set."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Callable[[], float] = time.monotonic,
        api: Callable[[Config], ApiClient] = connect,
    ) -> None:
        """``api`` makes each API client (the controller's, the webhook's); a benchmark
        hands in the API double, production the real adapter."""
        self.config = config
        self._clock = clock
        self._connect = api
        self.metrics = ManagerMetrics()
        self.monitor = self.metrics.monitor
        self._lock = threading.Lock()
        self._term: threading.Event | None = None
        self._reconciler: Reconciler | None = None
        self._failed = False

    # -- the controller ----------------------------------------------------------------

    def _new_reconciler(self, api: ApiClient, stopping: threading.Event) -> Reconciler:
        config = self.config
        env = Environment(
            api=api,
            config=config.controller,
            lock=TargetLock(api, config.controller.lease_namespace),
        )
        # Only a lab configuration (manager.config refuses these elsewhere).
        if config.lab_fault_points:
            env.faults = LabFaultPoints()
        if config.lab_swap_steps is not None:
            log.warning("lab: dispatch steps %s and %s exchanged", *config.lab_swap_steps)
            env.driver = Driver.swapped(*config.lab_swap_steps)
        elector = None
        if config.leader_election is not None:
            election = config.leader_election
            elector = LeaderElector(
                api,
                config.controller.lease_namespace,
                election.lease_name,
                config.identity,
                duration_seconds=election.duration_seconds,
                renew_deadline_seconds=election.renew_deadline_seconds,
                retry_period_seconds=election.retry_period_seconds,
            )
        events = ApiEventSink(api, instance=config.identity)
        options: dict[str, Any] = {
            "namespace": config.watch_namespace,
            "elector": elector,
            "observer": self.metrics,
        }
        if config.wedge_passes:
            return _WedgingReconciler(env, events, release=stopping, **options)
        return Reconciler(env, events, **options)

    def _control(self, api: ApiClient, stopping: threading.Event) -> None:
        """Terms of leadership, one after another, until shutdown.

        A term ends when the Lease is lost (or on shutdown); a new one campaigns again
        with a fresh queue, so nothing queued under the old term runs unled.
        """
        while True:
            term = threading.Event()
            reconciler = self._new_reconciler(api, stopping)
            with self._lock:
                if stopping.is_set():
                    return
                self._term, self._reconciler = term, reconciler
            self.metrics.watch_queue(reconciler.queue.__len__)
            try:
                reconciler.run(term)
            except Exception:
                log.exception("the controller loop failed; campaigning again")
            self.metrics.leader.set(0)

    def _stop_controller(self, stopping: threading.Event) -> None:
        with self._lock:
            stopping.set()
            self.monitor.stopping.set()
            if self._term is not None:
                self._term.set()

    # -- health ------------------------------------------------------------------------

    def liveness(self) -> list[str]:
        return liveness_problems(self.monitor.snapshot(), self.config.stall_seconds)

    def _readiness_facts(self, reader: ApiClient) -> ReadinessFacts:
        return ReadinessFacts(
            reader,
            namespace=self.config.pod_namespace,
            configurations=self.config.webhook_configurations,
            clock=self._clock,
        )

    def _readiness(
        self, tls: certs.ReloadingTLS, facts: ReadinessFacts, window_seconds: float
    ) -> Callable[[], list[str]]:
        cached = cached_readiness(tls, facts, window_seconds=window_seconds)

        def problems() -> list[str]:
            found = cached()
            # The kubelet asks every few seconds: the alert on admission reads this.
            self.metrics.webhook_ready.set(0 if found else 1)
            return found

        return problems

    # -- the process -------------------------------------------------------------------

    def run(self, stopping: threading.Event) -> int:
        """Serve until ``stopping`` is set (a signal), then shut down; the exit code."""
        config = self.config
        cert_dir = config.cert_dir
        try:
            tls = certs.ReloadingTLS(cert_dir / certs.TLS_CERT, cert_dir / certs.TLS_KEY)
        except certs.CertificateError as error:
            log.error("cannot serve the webhook: %s", error)
            return 1
        self.metrics.watch_certificate(lambda: tls.certificate.not_valid_after_utc)
        controller_api = self._connect(config)
        webhook_api = self._connect(config)
        namespace = config.watch_namespace
        self.metrics.watch_plans(
            lambda: (
                controller_api.list(PTAHSCHEMAPLANS, namespace),
                controller_api.list(PTAHMIGRATIONPLANS, namespace),
            )
        )
        # Its own client: a read the refresher waits on never holds up admission.
        readiness_api = self._connect(config)
        facts = self._readiness_facts(readiness_api)
        engine = Engine(webhook_api, config.webhook_settings())
        app = create_app(
            engine,
            readiness=self._readiness(tls, facts, config.ready_window_seconds),
            liveness=self.liveness,
            observer=self.metrics,
        )
        server = uvicorn_server(
            app, tls, host=config.bind_address, port=config.webhook_port, log_config=None
        )
        webhook = threading.Thread(
            target=self._serve_webhook, args=(server, tls, stopping), name="webhook", daemon=True
        )
        metrics_server, metrics_thread = start_http_server(
            config.metrics_port, addr=config.bind_address, registry=self.metrics.registry
        )
        controller = threading.Thread(
            target=self._control, args=(controller_api, stopping), name="controller", daemon=True
        )
        refresher = threading.Thread(
            target=facts.run,
            args=(stopping, config.ready_refresh_seconds),
            name="readiness",
            daemon=True,
        )
        self.monitor.loop_alive = controller.is_alive
        try:
            refresher.start()
            webhook.start()
            if not self._until_started(server, webhook):
                log.error("the webhook server did not start")
                self._failed = True
                stopping.set()
            else:
                controller.start()
                log.info(
                    "serving: webhook on %s:%d, metrics on %s:%d; identity %s; leader election %s",
                    config.bind_address,
                    config.webhook_port,
                    config.bind_address,
                    config.metrics_port,
                    config.identity,
                    "on" if config.leader_election else "off",
                )
            stopping.wait()
            log.info("stopping: no new passes; finishing the passes in flight")
            return self._shut_down(stopping, controller, server, webhook)
        finally:
            metrics_server.shutdown()
            metrics_server.server_close()
            metrics_thread.join(timeout=5)
            engine.close()
            for client in (webhook_api, controller_api, readiness_api):
                close = getattr(client, "close", None)
                if callable(close):
                    close()

    def _serve_webhook(
        self, server: uvicorn.Server, tls: certs.ReloadingTLS, stopping: threading.Event
    ) -> None:
        try:
            asyncio.run(certs.serve_reloading(server, tls))
        except BaseException:
            log.exception("the webhook server failed")
        finally:
            if not stopping.is_set():
                # The webhook ended on its own (its reloading failed, or it crashed):
                # the process goes down, and the kubelet starts a fresh one.
                self._failed = True
                stopping.set()

    def _until_started(self, server: uvicorn.Server, thread: threading.Thread) -> bool:
        # uvicorn sets ``started`` on its own loop and announces it nowhere we can wait
        # on; a short bounded poll, ended early by the thread's death.
        end = self._clock() + STARTUP_SECONDS
        while not server.started:
            if not thread.is_alive() or self._clock() > end:
                return False
            time.sleep(0.02)
        return True

    def _shut_down(
        self,
        stopping: threading.Event,
        controller: threading.Thread,
        server: uvicorn.Server,
        webhook: threading.Thread,
    ) -> int:
        plan = shutdown_plan(self.config.shutdown_seconds)
        self._stop_controller(stopping)
        if controller.ident is not None:
            controller.join(timeout=plan.controller_seconds)
        if controller.is_alive():
            log.warning(
                "passes still running after %.0fs; leaving the Lease to expire on its own",
                plan.controller_seconds,
            )
        else:
            log.info("the controller stopped; the Lease is given back")
        server.should_exit = True
        webhook.join(timeout=plan.drain_seconds)
        log.info("the webhook drained; exiting")
        return 1 if self._failed else 0
