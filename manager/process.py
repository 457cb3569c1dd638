"""The manager process: the controller under leader election, the webhook over TLS,
health and metrics, one shutdown.

The webhook is served by a child process (``manager.webhookprocess``, which says why
and how it keeps the certificate reload, readiness, liveness and metrics); this process
runs the controller loop in a thread and the metrics server in another, and the main
thread only waits for a signal and then shuts down in this order:

1. the controller stops taking keys and finishes the passes in flight, then gives the
   Lease back (``Reconciler.run``); the webhook child keeps serving meanwhile, because
   those passes' own writes are admitted by it (the child ignores the signals, so a
   Ctrl-C to the process group does not stop it early);
2. the child is told to stop: it stops accepting connections, finishes the requests
   it has, and exits (killed if it outlives its share);
3. the metrics server stops, the API client closes, and the process exits 0.

A webhook child that exits on its own takes the manager down with it (exit 1), so the
kubelet restarts the pair, as a crash of the in-process webhook did.

Each stage has its share of ``PTAH_SHUTDOWN_SECONDS`` (``shutdown_plan``). A pass
still running when the controller's share is spent is left behind with the Lease
*not* given back: the Lease then expires on its own after the pass has had its chance
to write, never while it still may.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import start_http_server

import certs
from controller import (
    ApiEventSink,
    Environment,
    Key,
    LeaderElector,
    Reconciler,
    Stop,
    TargetLock,
    watch_targets,
)
from jobclaim.apiserver import PTAHMIGRATIONPLANS, PTAHSCHEMAPLANS, ApiClient, Object
from kube.client import KubeApi
from manager.config import Config
from manager.health import liveness_problems
from manager.metrics import ManagerMetrics
from manager.webhookprocess import WebhookProcess

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
        api: Callable[[Config], ApiClient] = connect,
        webhook_api: Callable[[Config], ApiClient] = connect,
        prepare: Callable[[Environment], None] | None = None,
    ) -> None:
        """``api`` makes the controller's API client, ``webhook_api`` the webhook
        child's (in the child, so a module-level function); a test or a benchmark hands
        in doubles, production the real adapter. ``prepare`` adjusts each pass
        environment before its reconciler gets it: the lab's fault hooks
        (``lab.manager``); the shipped program passes none."""
        self.config = config
        self._connect = api
        self._webhook_api = webhook_api
        self._prepare = prepare
        self.metrics = ManagerMetrics()
        self.monitor = self.metrics.monitor
        self._lock = threading.Lock()
        self._term: threading.Event | None = None
        self._reconciler: Reconciler | None = None
        self._failed = False
        self.webhook: WebhookProcess | None = None  # while run serves

    # -- the controller ----------------------------------------------------------------

    def _new_reconciler(self, api: ApiClient, stopping: threading.Event) -> Reconciler:
        config = self.config
        env = Environment(
            api=api,
            config=config.controller,
            lock=TargetLock(api, config.controller.lease_namespace),
        )
        if self._prepare is not None:
            self._prepare(env)
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
            "scope": config.watch_scope,
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

    def _plans(self, api: ApiClient) -> tuple[list[Object], list[Object]]:
        """The plans the metrics count: in each served namespace, never beyond (the
        chart grants a scoped manager no cluster-wide list)."""
        scope = self.config.watch_scope
        schema: list[Object] = []
        migration: list[Object] = []
        for namespace in watch_targets(scope):
            schema += api.list(PTAHSCHEMAPLANS, namespace)
            migration += api.list(PTAHMIGRATIONPLANS, namespace)
        return schema, migration

    # -- health ------------------------------------------------------------------------

    def liveness(self) -> list[str]:
        return liveness_problems(self.monitor.snapshot(), self.config.stall_seconds)

    # -- the process -------------------------------------------------------------------

    def run(self, stopping: threading.Event) -> int:
        """Serve until ``stopping`` is set (a signal), then shut down; the exit code."""
        config = self.config
        cert_dir = config.cert_dir
        try:
            # Loaded here too: a manager without a certificate does not start at all,
            # and the expiry gauge is the manager's.
            tls = certs.ReloadingTLS(cert_dir / certs.TLS_CERT, cert_dir / certs.TLS_KEY)
        except certs.CertificateError as error:
            log.error("cannot serve the webhook: %s", error)
            return 1
        self.metrics.watch_certificate(lambda: tls.certificate.not_valid_after_utc)
        controller_api = self._connect(config)
        self.metrics.watch_plans(lambda: self._plans(controller_api))
        plan = shutdown_plan(config.shutdown_seconds)
        webhook = self.webhook = WebhookProcess(
            config, self._webhook_api, self.liveness, drain_seconds=plan.drain_seconds
        )
        metrics_server, metrics_thread = start_http_server(
            config.metrics_port, addr=config.bind_address, registry=self.metrics.registry
        )
        controller = threading.Thread(
            target=self._control, args=(controller_api, stopping), name="controller", daemon=True
        )
        self.monitor.loop_alive = controller.is_alive
        try:
            if not webhook.start(STARTUP_SECONDS):
                log.error("the webhook server did not start")
                self._failed = True
                stopping.set()
            else:
                self.metrics.webhook_in_child(webhook.collector)
                watcher = threading.Thread(
                    target=self._watch_webhook, args=(webhook, stopping), daemon=True
                )
                watcher.start()
                controller.start()
                log.info(
                    "serving: webhook on %s:%d (process %s), metrics on %s:%d; identity %s;"
                    " leader election %s",
                    config.bind_address,
                    config.webhook_port,
                    webhook.process.pid,
                    config.bind_address,
                    config.metrics_port,
                    config.identity,
                    "on" if config.leader_election else "off",
                )
            stopping.wait()
            log.info("stopping: no new passes; finishing the passes in flight")
            return self._shut_down(stopping, controller, webhook, plan)
        finally:
            webhook.stop(0.0)  # already stopped unless the start failed
            metrics_server.shutdown()
            metrics_server.server_close()
            metrics_thread.join(timeout=5)
            close = getattr(controller_api, "close", None)
            if callable(close):
                close()

    def _watch_webhook(self, webhook: WebhookProcess, stopping: threading.Event) -> None:
        webhook.process.join()
        if not stopping.is_set():
            # The webhook ended on its own (its reloading failed, or it crashed): the
            # process goes down, and the kubelet starts a fresh one.
            log.error("the webhook process exited (code %s)", webhook.process.exitcode)
            self._failed = True
            stopping.set()

    def _shut_down(
        self,
        stopping: threading.Event,
        controller: threading.Thread,
        webhook: WebhookProcess,
        plan: ShutdownPlan,
    ) -> int:
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
        webhook.stop(plan.drain_seconds)
        log.info("the webhook drained; exiting")
        return 1 if self._failed else 0
