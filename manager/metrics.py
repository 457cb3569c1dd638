"""The manager's Prometheus metrics, in one registry served on the metrics port.

The controller's figures come from the loop's ``PassObserver`` calls, the webhook's
from the app's ``DecisionObserver`` calls; nothing here decides anything. Labels are
bounded sets (kinds, outcomes, endpoints, rule names, verdicts): never a resource's
name, which would grow the series without bound.

The domain figures (``manager.statusmetrics``) are the status each pass last read or
wrote: gauges computed from it at every scrape, counters moved by what one pass
changed in it. The one thing remembered beyond those facts is which approvals each
resource's plan has had counted seen, so that a claim retired unspent and made again
on the same approval does not count it twice. Only the leader runs passes, so only
the leader reports them; a replica that is not leading forgets what it saw, and a
new leader reports the same gauges as its predecessor once its first passes (one per
resource, from the initial watch listing) have run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from controller import Key, Stop, Subject
from jobclaim.apiserver import Object
from jobclaim.times import utc_now
from manager.health import ControllerMonitor
from manager.statusmetrics import (
    KINDS,
    Facts,
    Gauges,
    SeenApprovals,
    approvals_seen,
    facts_of,
    gauges,
    stored_plans,
    transitions,
)
from webhook.engine import Outcome
from webhook.observability import Metrics as WebhookMetrics
from webhook.rules import Endpoint

log = logging.getLogger(__name__)

# The Event reason of a pass that created a Job: one dispatch.
DISPATCHED: Final = "JobCreated"
PASS_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# An operation runs from its claim to its harvest or retirement: seconds to an hour and more.
OPERATION_BUCKETS: Final = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
APPLY_OUTCOMES: Final = ("succeeded", "failed", "unknown", "partial", "retired")
GAUGE_HELP: Final = {
    "resources": "PtahSchemas and PtahMigrations by kind and phase, from their status.",
    "unresolved_attempts": "Attempts whose outcome nobody knows (a schema's OutcomeUnknown "
    "proof, a migration's unresolved run), by kind and outcome.",
    "unresolved_attempt_oldest_timestamp_seconds": "When the oldest unresolved attempt was "
    "recorded (a schema's: when its proof may start), Unix seconds.",
    "lock_releases_owed": "Resources whose status owes a realm Lease release.",
    "claims": "Resources with a live claim (status.activeOperation).",
    "claims_overdue": "Claims past their dispatch window or Job deadline by more than 5 min.",
    "resources_overdue": "Resources with no claim whose next reconciliation is more than "
    "5 min past.",
    "reading_failures": "Resources whose last reading failed.",
    "plans_awaiting_approval": "Resources in phase AwaitingApproval.",
    "pending_proofs": "Schemas owing the proof of an Apply, by the Apply's outcome.",
    "pending_proofs_failing": "Schemas owing a proof whose last reading failed.",
    "stored_plans": "Plan objects stored, by kind (PtahSchemaPlan, PtahMigrationPlan).",
    "stored_plan_bytes": "Bytes of the stored plans, by kind: each object's JSON, and a "
    "schema plan's chunks as its spec declares them.",
}
# Listing every plan at each scrape would cost the API server two lists per scrape per
# replica; once a minute is current enough for a figure about storage.
PLANS_TTL: Final = 60.0


def _families(values: Gauges) -> Iterator[GaugeMetricFamily]:
    for name, series in values.values.items():
        if not series:
            continue
        names = [label for label, _ in next(iter(series))]
        family = GaugeMetricFamily(f"ptah_{name}", GAUGE_HELP[name], labels=names)
        for labels, value in sorted(series.items()):
            family.add_metric([v for _, v in labels], value)
        yield family


class PlansCollector(Collector):
    """Stored plans and their bytes, from a list of each kind at most every
    ``PLANS_TTL`` seconds; nothing while the list fails (an absent figure, not a
    stale one)."""

    def __init__(
        self,
        lister: Callable[[], tuple[list[Object], list[Object]]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lister = lister
        self._clock = clock
        self._lock = threading.Lock()
        self._listed: tuple[float, Gauges] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            now = self._clock()
            if self._listed is None or now - self._listed[0] >= PLANS_TTL:
                try:
                    self._listed = (now, stored_plans(*self._lister()))
                except Exception as error:  # a scrape must not fail on the API
                    log.warning("cannot list the stored plans: %s", error)
                    self._listed = None
            values = self._listed[1] if self._listed is not None else Gauges()
        yield from _families(values)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


class StatusCollector(Collector):
    """The domain gauges: each resource's last facts, turned into values at scrape."""

    def __init__(self, now: Callable[[], datetime] = utc_now) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._facts: dict[Key, Facts] = {}
        self._approvals: dict[Key, SeenApprovals] = {}

    def seen(self, key: Key, facts: Facts | None) -> Facts | None:
        """Record ``key``'s facts (None: the resource is gone); the facts before."""
        with self._lock:
            before = self._facts.get(key)
            if facts is None:
                self._facts.pop(key, None)
            else:
                self._facts[key] = facts
            return before

    def approvals_seen(self, key: Key, facts: Facts | None, reasons: list[str]) -> int:
        """How many approvals ``key``'s pass saw first (``statusmetrics.approvals_seen``),
        remembering its approvals for the next pass."""
        with self._lock:
            counted, remembered = approvals_seen(self._approvals.get(key), facts, reasons)
            if remembered is None:
                self._approvals.pop(key, None)
            else:
                self._approvals[key] = remembered
            return counted

    def forget_all(self) -> None:
        with self._lock:
            self._facts.clear()
            self._approvals.clear()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            facts = list(self._facts.values())
        yield from _families(gauges(facts, self._now()))

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


def outcome_of(stop: Stop) -> str:
    """How a pass ended, as a bounded label. Pure."""
    if stop.error is not None:
        return "error"
    if stop.requeue_after is not None:
        return "requeued"
    return "waiting"


class ManagerMetrics:
    """Every series the manager exports; also the loop's and the webhook's observer."""

    def __init__(
        self,
        monitor: ControllerMonitor | None = None,
        *,
        now: Callable[[], datetime] = utc_now,
        process: bool = True,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.monitor = monitor or ControllerMonitor()
        r = self.registry
        if process:
            # The process's own figures (CPU, memory, descriptors, GC), as every
            # Python exporter has them; a test's many instances leave them out.
            ProcessCollector(registry=r)
            GCCollector(registry=r)
            PlatformCollector(registry=r)
        self._now = now
        self.status = StatusCollector(now)
        r.register(self.status)
        self.webhook = WebhookMetrics(registry=r)
        self.readings = Counter(
            "ptah_readings",
            "Readings that ended, by kind, operation and result (recorded, failed, retired "
            "before dispatch).",
            ["kind", "operation", "result"],
            registry=r,
        )
        self.plans = Counter(
            "ptah_plans", "Plans a resource came to stand on, by kind.", ["kind"], registry=r
        )
        self.approvals_seen = Counter(
            "ptah_approvals_seen",
            "Approvals found authorizing a resource's current plan and reserved on an "
            "Apply claim, once per approval and manager, by kind.",
            ["kind"],
            registry=r,
        )
        self.approvals_spent = Counter(
            "ptah_approvals_spent",
            "Approvals consumed by a dispatch, by kind.",
            ["kind"],
            registry=r,
        )
        self.applies = Counter(
            "ptah_applies",
            "Apply claims that ended, by kind and outcome (succeeded, failed, unknown, "
            "partial, retired before dispatch).",
            ["kind", "outcome"],
            registry=r,
        )
        self.settlements = Counter(
            "ptah_settlements",
            "Unresolved attempts settled, by kind and how (converged, settled_by_person, "
            "acknowledged).",
            ["kind", "how"],
            registry=r,
        )
        self.releases = Counter(
            "ptah_lock_releases", "Realm Lease releases performed, by kind.", ["kind"], registry=r
        )
        self.failures = Counter(
            "ptah_pass_failures",
            "Passes that failed, by kind, stage (the claim's operation, or none) and "
            "category (the error's type).",
            ["kind", "stage", "category"],
            registry=r,
        )
        self.operation_seconds = Histogram(
            "ptah_operation_duration_seconds",
            "From a claim's making (or its latest attempt's: status.activeOperation.startedAt) "
            "to the pass that ended the claim, by kind and operation.",
            ["kind", "operation"],
            buckets=OPERATION_BUCKETS,
            registry=r,
        )
        for kind in KINDS:
            for outcome in APPLY_OUTCOMES:
                self.applies.labels(kind, outcome)
            self.approvals_seen.labels(kind)
            self.approvals_spent.labels(kind)
            self.releases.labels(kind)
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
        self.webhook_ready = Gauge(
            "ptah_webhook_ready",
            "1 while the last readiness check found the webhook able to admit, else 0.",
            registry=r,
        )
        self.certificate_expiry = Gauge(
            "ptah_webhook_certificate_expiry_timestamp_seconds",
            "When the served certificate expires (Unix seconds).",
            registry=r,
        )

    def watch_queue(self, depth: Callable[[], int]) -> None:
        self.queue_depth.set_function(lambda: float(depth()))

    def watch_plans(self, lister: Callable[[], tuple[list[Object], list[Object]]]) -> None:
        """Report the stored plans ``lister`` lists (schema plans, migration plans)."""
        self.registry.register(PlansCollector(lister))

    def watch_certificate(self, expiry: Callable[[], datetime]) -> None:
        self.certificate_expiry.set_function(lambda: expiry().timestamp())

    # -- PassObserver -------------------------------------------------------------------

    def loop_turned(self, leading: bool) -> None:
        self.monitor.turned()
        self.leader.set(1 if leading else 0)
        if not leading:
            # Only the leader's passes keep the facts current.
            self.status.forget_all()

    def pass_started(self, key: Key) -> None:
        self.monitor.started(key)

    def pass_finished(
        self,
        key: Key,
        stop: Stop,
        seconds: float,
        reasons: list[str],
        subject: Subject | None = None,
    ) -> None:
        self.monitor.finished()
        self.passes.labels(key.kind, outcome_of(stop)).inc()
        self.pass_seconds.labels(key.kind).observe(seconds)
        created = reasons.count(DISPATCHED)
        if created:
            self.dispatches.labels(key.kind).inc(created)
        after = facts_of(subject) if subject is not None else None
        # Unread (an error and no resource) is not gone: what was last seen stands.
        unread = after is None and stop.error is not None
        before = None if unread else self.status.seen(key, after)
        if stop.error is not None:
            stage = after.claim.type if after is not None and after.claim is not None else "none"
            self.failures.labels(key.kind, stage, type(stop.error).__name__).inc()
        if not unread:
            seen = self.status.approvals_seen(key, after, reasons)
            if seen:
                self.approvals_seen.labels(key.kind).inc(seen)
        self._count(key.kind, before, after, reasons)

    def _count(
        self, kind: str, before: Facts | None, after: Facts | None, reasons: list[str]
    ) -> None:
        moves = transitions(before, after, reasons, self._now())
        for _, operation, result in moves.readings:
            self.readings.labels(kind, operation, result).inc()
        if moves.plans:
            self.plans.labels(kind).inc(moves.plans)
        if moves.approvals_spent:
            self.approvals_spent.labels(kind).inc(moves.approvals_spent)
        for outcome in moves.applies:
            self.applies.labels(kind, outcome).inc()
        for how in moves.settlements:
            self.settlements.labels(kind, how).inc()
        if moves.releases:
            self.releases.labels(kind).inc(moves.releases)
        for operation, duration in moves.durations:
            self.operation_seconds.labels(kind, operation).observe(duration)

    def waited(self, seconds: float) -> None:
        self.queue_wait.observe(seconds)

    # -- DecisionObserver ---------------------------------------------------------------

    def observe(self, endpoint: Endpoint, outcome: Outcome, seconds: float) -> None:
        self.webhook.observe(endpoint, outcome, seconds)
