"""The manager's Prometheus metrics, in one registry served on the metrics port.

The controller's figures come from the loop's ``PassObserver`` calls, the webhook's
from the app's ``DecisionObserver`` calls; nothing here decides anything. Labels are
bounded sets (kinds, outcomes, endpoints, rule names, verdicts): never a resource's
name, which would grow the series without bound.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.mutationlifecycle import Stop
from controller.reconciler import Key
from manager.health import ControllerMonitor
from webhook.engine import Outcome
from webhook.observability import BUCKETS
from webhook.rules import Endpoint

# The Event reason of a pass that created a Job: one dispatch.
DISPATCHED: Final = "JobCreated"
PASS_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def outcome_of(stop: Stop) -> str:
    """How a pass ended, as a bounded label. Pure."""
    if stop.error is not None:
        return "error"
    if stop.requeue_after is not None:
        return "requeued"
    return "waiting"


class ManagerMetrics:
    """Every series the manager exports; also the loop's and the webhook's observer."""

    def __init__(self, monitor: ControllerMonitor | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.monitor = monitor or ControllerMonitor()
        r = self.registry
        self.passes = Counter(
            "ptah_controller_passes",
            "Reconcile passes by kind and outcome.",
            ["kind", "outcome"],
            registry=r,
        )
        self.dispatches = Counter(
            "ptah_controller_dispatches", "Jobs created by a pass, by kind.", ["kind"], registry=r
        )
        self.pass_seconds = Histogram(
            "ptah_controller_pass_duration_seconds",
            "Time one pass took, by kind.",
            ["kind"],
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "ptah_controller_queue_wait_seconds",
            "Time a ready key waited in the queue for a worker.",
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "ptah_controller_queue_depth", "Keys queued, ready or delayed.", registry=r
        )
        self.leader = Gauge(
            "ptah_controller_leader", "1 while this replica holds the leader Lease.", registry=r
        )
        self.decisions = Counter(
            "ptah_webhook_decisions",
            "Admission decisions by endpoint, rule and verdict.",
            ["endpoint", "rule", "verdict"],
            registry=r,
        )
        self.decision_seconds = Histogram(
            "ptah_webhook_decision_duration_seconds",
            "Time to decide one review.",
            ["endpoint"],
            buckets=BUCKETS,
            registry=r,
        )
        self.certificate_expiry = Gauge(
            "ptah_webhook_certificate_expiry_timestamp_seconds",
            "When the served certificate expires (Unix seconds).",
            registry=r,
        )

    def watch_queue(self, depth: Callable[[], int]) -> None:
        self.queue_depth.set_function(lambda: float(depth()))

    def watch_certificate(self, expiry: Callable[[], datetime]) -> None:
        self.certificate_expiry.set_function(lambda: expiry().timestamp())

    # -- PassObserver -------------------------------------------------------------------

    def loop_turned(self, leading: bool) -> None:
        self.monitor.turned()
        self.leader.set(1 if leading else 0)

    def pass_started(self, key: Key) -> None:
        self.monitor.started(key)

    def pass_finished(self, key: Key, stop: Stop, seconds: float, reasons: list[str]) -> None:
        self.monitor.finished()
        self.passes.labels(key.kind, outcome_of(stop)).inc()
        self.pass_seconds.labels(key.kind).observe(seconds)
        created = reasons.count(DISPATCHED)
        if created:
            self.dispatches.labels(key.kind).inc(created)

    def waited(self, seconds: float) -> None:
        self.queue_wait.observe(seconds)

    # -- DecisionObserver ---------------------------------------------------------------

    def observe(self, endpoint: Endpoint, outcome: Outcome, seconds: float) -> None:
        decision = outcome.decision
        self.decisions.labels(endpoint, decision.rule, decision.verdict).inc()
        self.decision_seconds.labels(endpoint).observe(seconds)
