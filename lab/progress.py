"""What ``make run`` prints about the example resources: one line per change. Pure.

A line says what a person watching ``kubectl get -w`` would want in one glance:
the phase, each condition (type=status and its reason), the pending plan, and the
claim in flight (its reading or Apply, whether its Job was dispatched, the Job).
"""

from __future__ import annotations

from typing import Final

from jobclaim.apiserver import Object

__all__ = ["DONE", "FAILED", "failure_of", "phase_of", "resource_line"]

# Phases after which nothing more happens without a person or a new generation.
DONE: Final = "InSync"
FAILED: Final = frozenset({"Failed"})


def phase_of(obj: Object) -> str:
    return str((obj.get("status") or {}).get("phase") or "-")


def _conditions(status: Object) -> str:
    """Ready with its reason, then only the conditions that hold (the rest are False)."""
    conditions = status.get("conditions") or []
    shown = [
        f"Ready={c.get('status')}({c.get('reason') or '-'})"
        for c in conditions
        if c.get("type") == "Ready"
    ]
    shown += [
        f"{c.get('type')}({c.get('reason') or '-'})"
        for c in conditions
        if c.get("type") != "Ready" and c.get("status") == "True"
    ]
    return ",".join(shown) or "-"


def failure_of(obj: Object) -> str:
    """Why a resource failed, in its own words: the failed condition's message, else its phase."""
    status = obj.get("status") or {}
    reading = (status.get("readingFailure") or {}).get("message")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "ReconciliationFailed" and condition.get("status") == "True":
            return str(condition.get("message") or condition.get("reason"))
    return str(reading or f"phase {phase_of(obj)}")


def resource_line(obj: Object) -> str:
    """``Kind ns/name phase=... conditions=... plan=... claim=...`` for one resource."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    parts = [
        f"{obj.get('kind', '?')} {meta.get('namespace')}/{meta.get('name')}",
        f"phase={phase_of(obj)}",
        f"conditions={_conditions(status)}",
        f"plan={(status.get('plan') or {}).get('name') or '-'}",
    ]
    claim = status.get("activeOperation") or {}
    if claim:
        dispatched = "dispatched" if claim.get("dispatchStarted") else "claimed"
        parts.append(f"claim={claim.get('type')}({dispatched}) job={claim.get('jobName')}")
    else:
        parts.append("claim=-")
    last_run = status.get("lastRun") or {}
    if last_run:
        applied = ",".join(last_run.get("appliedVersions") or []) or "-"
        parts.append(f"lastRun={last_run.get('outcome')}(applied {applied})")
    return " ".join(parts)
