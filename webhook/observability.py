"""What each decision leaves behind: one JSON log line and the Prometheus counters.

The log line is the audit record a security reviewer reads: who asked for which
write, which rule decided and why, one line per request, nothing else. It names the
request and the user but never carries an object's contents, ``userInfo.extra`` (it
holds token and credential identifiers) or anything read from the API server, so no
secret value can reach a log through it.

The metrics are prometheus-client's, in the manager's one registry when the manager
serves the webhook (the process's and the controller's figures beside them).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from webhook.engine import Outcome
from webhook.rules import Endpoint

DECISION_LOGGER: Final = "webhook.decisions"
DECISIONS: Final = "ptah_webhook_decisions_total"
LATENCY: Final = "ptah_webhook_decision_duration_seconds"
# Seconds. The API server's own call timeout is at most 30 s; the buckets resolve the
# sub-millisecond in-process case and the tens of milliseconds a real read costs.
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def decision_record(endpoint: Endpoint, outcome: Outcome, seconds: float) -> dict[str, Any]:
    """The fields of one decision's log line (no object contents, no userInfo.extra)."""
    request = outcome.request
    decision = outcome.decision
    record: dict[str, Any] = {
        "event": "admission.decision",
        "endpoint": endpoint,
        "uid": outcome.uid,
    }
    if request is not None:
        gvr = request.resource
        resource = "/".join(p for p in (gvr.group, gvr.version, gvr.resource) if p)
        if request.sub_resource:
            resource += "/" + request.sub_resource
        record.update(
            user=request.user_info.username,
            operation=request.operation,
            resource=resource,
            namespace=request.namespace,
            name=request.name,
            dryRun=request.dry_run,
        )
    record.update(
        rule=decision.rule,
        verdict=decision.verdict,
        code=decision.code,
        reason=decision.message,
        durationMs=round(seconds * 1000, 3),
    )
    return record


def log_decision(
    endpoint: Endpoint, outcome: Outcome, seconds: float, logger: logging.Logger | None = None
) -> None:
    """Write the decision as one JSON line (INFO when allowed, WARNING otherwise)."""
    line = orjson.dumps(decision_record(endpoint, outcome, seconds)).decode()
    level = logging.INFO if outcome.decision.allowed else logging.WARNING
    (logger or logging.getLogger(DECISION_LOGGER)).log(level, line)


class Metrics:
    """Decisions by endpoint, rule and verdict; decision latency by endpoint.

    In ``registry`` (the manager's, so the webhook's figures are served with the
    controller's), or a registry of its own for the webhook alone."""

    def __init__(
        self, buckets: Sequence[float] = BUCKETS, registry: CollectorRegistry | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._decisions = Counter(
            DECISIONS.removesuffix("_total"),
            "Admission decisions by endpoint, rule and verdict.",
            ["endpoint", "rule", "verdict"],
            registry=self.registry,
        )
        self._latency = Histogram(
            LATENCY,
            "Time to decide one review, from body to answer.",
            ["endpoint"],
            buckets=tuple(buckets),
            registry=self.registry,
        )
        self._counters: dict[tuple[str, str, str], Counter] = {}
        self._histograms: dict[str, Histogram] = {}

    def observe(self, endpoint: Endpoint, outcome: Outcome, seconds: float) -> None:
        decision = outcome.decision
        key = (endpoint, decision.rule, decision.verdict)
        # ``labels()`` checks and looks up its values under a lock on every call; the
        # series of one (endpoint, rule, verdict) is the same object for the registry's
        # life, so each is looked up once. Rules and verdicts are a closed set (the
        # registry's), so this holds at most a few hundred entries.
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters.setdefault(key, self._decisions.labels(*key))
        histogram = self._histograms.get(endpoint)
        if histogram is None:
            histogram = self._histograms.setdefault(endpoint, self._latency.labels(endpoint))
        counter.inc()
        histogram.observe(seconds)

    def series(self) -> tuple[Counter, Histogram]:
        """Its collectors, for a registry that re-exports them from elsewhere."""
        return self._decisions, self._latency

    def decisions(self) -> dict[tuple[str, str, str], int]:
        counts: dict[tuple[str, str, str], int] = {}
        for family in self._decisions.collect():
            for sample in family.samples:
                if sample.name == DECISIONS:
                    labels = sample.labels
                    key = (labels["endpoint"], labels["rule"], labels["verdict"])
                    counts[key] = int(sample.value)
        return counts

    def render(self) -> str:
        """The Prometheus text exposition, by prometheus-client."""
        return generate_latest(self.registry).decode()
