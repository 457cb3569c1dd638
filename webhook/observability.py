"""What each decision leaves behind: one JSON log line and the Prometheus counters.

The log line is the audit record a security reviewer reads: who asked for which
write, which rule decided and why, one line per request, nothing else. It names the
request and the user but never carries an object's contents, ``userInfo.extra`` (it
holds token and credential identifiers) or anything read from the API server, so no
secret value can reach a log through it.

The metrics are written in the Prometheus text format by hand: two families do not
justify a client library, and the format is small and stable.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

import orjson

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


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Decisions by endpoint, rule and verdict; decision latency by endpoint. Thread-safe."""

    def __init__(self, buckets: Sequence[float] = BUCKETS) -> None:
        self._lock = threading.Lock()
        self._buckets = tuple(buckets)
        self._decisions: Counter[tuple[str, str, str]] = Counter()
        self._latency: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, endpoint: Endpoint, outcome: Outcome, seconds: float) -> None:
        decision = outcome.decision
        slot = bisect.bisect_left(self._buckets, seconds)
        with self._lock:
            self._decisions[(endpoint, decision.rule, decision.verdict)] += 1
            counts = self._latency.setdefault(endpoint, [0] * (len(self._buckets) + 1))
            counts[slot] += 1
            self._sums[endpoint] = self._sums.get(endpoint, 0.0) + seconds

    def decisions(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            return dict(self._decisions)

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4)."""
        with self._lock:
            decisions = sorted(self._decisions.items())
            latency = {k: list(v) for k, v in sorted(self._latency.items())}
            sums = dict(self._sums)
        lines = [
            f"# HELP {DECISIONS} Admission decisions by endpoint, rule and verdict.",
            f"# TYPE {DECISIONS} counter",
        ]
        for (endpoint, rule, verdict), count in decisions:
            labels = ",".join(
                f'{k}="{_label(v)}"'
                for k, v in (("endpoint", endpoint), ("rule", rule), ("verdict", verdict))
            )
            lines.append(f"{DECISIONS}{{{labels}}} {count}")
        lines += [
            f"# HELP {LATENCY} Time to decide one review, from body to answer.",
            f"# TYPE {LATENCY} histogram",
        ]
        for endpoint, counts in latency.items():
            name = f'endpoint="{_label(endpoint)}"'
            cumulative = 0
            for bound, count in zip((*self._buckets, float("inf")), counts, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                lines.append(f'{LATENCY}_bucket{{{name},le="{le}"}} {cumulative}')
            lines.append(f"{LATENCY}_sum{{{name}}} {sums[endpoint]!r}")
            lines.append(f"{LATENCY}_count{{{name}}} {cumulative}")
        return "\n".join(lines) + "\n"
