"""The approval path's trace: what happened between a person's approval and a running Pod.

Two sources, both read from real components without changing the path they time:

- **watches the benchmark holds itself** (one client, one thread per kind): the
  approval, the PtahSchema or PtahMigration (each status write: the claim, the Lease
  epoch, the snapshot, the mark, the Job's UID), the realm's Lease, the plan
  projection ConfigMap, the Job, and its Pod (created by the Job controller,
  scheduled, each init container and the runner started and stopped). Each event is
  stamped when it reaches this process: the API server's own timestamps are whole
  seconds, too coarse for a path that takes one or two;
- **the manager's own log** (the chart's ``logLevel=debug``): the watch event the
  manager saw, the pass that started on it and how it ended, each request the
  manager's client made (urllib3's line, written when the answer came; the writes
  only, the reads left out) and each
  admission decision the webhook took (its ``durationMs``).

Both clocks are this machine's wall clock (the manager runs on the lab's one node,
which is this machine), so the lines merge into one timeline, in milliseconds from
the approval's write.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from jobclaim.apiserver import CONFIGMAPS, JOBS, LEASES, PODS, Object, Resource
from kube.client import KubeApi

# The namespaces whose Leases are the cluster's own heartbeats, never the realm's.
_SYSTEM_NAMESPACES: Final = frozenset({"kube-node-lease", "kube-system"})
# The server ends each watch after this long; the watch is then opened again from the
# newest version seen, so no event between the two is lost.
_WATCH_SECONDS: Final = 30


@dataclass(frozen=True, slots=True)
class Mark:
    """One line of the timeline: when (wall clock, seconds), who saw it, what."""

    at: float
    source: str
    what: str


@dataclass
class Watches:
    """The benchmark's own watches; every event kept with the moment it arrived."""

    api: KubeApi
    namespace: str
    family: tuple[Resource, ...]
    events: list[tuple[float, Resource, str, Object]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        kinds: list[tuple[Resource, str | None]] = [
            *((resource, self.namespace) for resource in self.family),
            (JOBS, self.namespace),
            (PODS, self.namespace),
            (CONFIGMAPS, self.namespace),
            (LEASES, None),
        ]
        for resource, namespace in kinds:
            thread = threading.Thread(target=self._watch, args=(resource, namespace), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        # The threads end when their current watch does; nothing waits for them.
        self._stop.set()

    def _watch(self, resource: Resource, namespace: str | None) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                for event in self.api.watch(
                    resource, namespace, resource_version=version, timeout_seconds=_WATCH_SECONDS
                ):
                    arrived = _now()
                    version = str(event.object.get("metadata", {}).get("resourceVersion") or "")
                    with self._lock:
                        self.events.append((arrived, resource, event.type, event.object))
            except Exception:  # a broken watch is opened afresh; the trace only reads
                version = None
                self._stop.wait(0.2)  # not a synchronization: a pause before reconnecting

    def between(self, began: float, ended: float) -> list[tuple[float, Resource, str, Object]]:
        with self._lock:
            return [e for e in self.events if began <= e[0] <= ended]

    def before(self, moment: float) -> list[tuple[float, Resource, str, Object]]:
        with self._lock:
            return [e for e in self.events if e[0] < moment]


def _now() -> float:
    return datetime.now().timestamp()


def _name(obj: Object) -> str:
    return str(obj.get("metadata", {}).get("name") or "")


def _states(statuses: Iterable[dict[str, Any]] | None) -> dict[str, str]:
    """Each container's state, as one word: waiting, running or terminated(code)."""
    found: dict[str, str] = {}
    for status in statuses or ():
        state = status.get("state") or {}
        if "terminated" in state:
            found[status["name"]] = f"terminated({state['terminated'].get('exitCode')})"
        elif "running" in state:
            found[status["name"]] = "running"
        else:
            found[status["name"]] = "waiting"
    return found


def _pod_changes(old: Object | None, new: Object) -> list[str]:
    if old is None:
        return ["created (by the Job controller)"]
    said: list[str] = []
    if new.get("spec", {}).get("nodeName") and not old.get("spec", {}).get("nodeName"):
        said.append(f"scheduled to {new['spec']['nodeName']}")
    for key in ("initContainerStatuses", "containerStatuses"):
        before = _states(old.get("status", {}).get(key))
        for container, state in _states(new.get("status", {}).get(key)).items():
            if before.get(container) != state:
                said.append(f"{container} {state}")
    phase = new.get("status", {}).get("phase")
    if phase != old.get("status", {}).get("phase"):
        said.append(f"phase {phase}")
    return said


_CLAIM_FIELDS: Final = ("type", "leaseEpoch", "dispatchStarted", "jobUID", "jobUid")


def _owner_changes(old: Object | None, new: Object) -> list[str]:
    if old is None:
        return []
    said: list[str] = []
    if new.get("metadata", {}).get("finalizers") != old.get("metadata", {}).get("finalizers"):
        said.append(f"finalizers {new.get('metadata', {}).get('finalizers')}")
    was, now = old.get("status") or {}, new.get("status") or {}
    if was.get("phase") != now.get("phase"):
        said.append(f"phase {now.get('phase')}")
    claim_was, claim = was.get("activeOperation") or {}, now.get("activeOperation") or {}
    changed = sorted(k for k in set(claim) | set(claim_was) if claim.get(k) != claim_was.get(k))
    if changed:
        shown = [f"{k}={claim.get(k)}" if k in _CLAIM_FIELDS else k for k in changed]
        said.append("activeOperation: " + ", ".join(shown))
    others = sorted(
        k
        for k in set(now) | set(was)
        if k not in {"activeOperation", "phase", "conditions"} and now.get(k) != was.get(k)
    )
    if others:
        said.append("status: " + ", ".join(others))
    return said


def watch_marks(watches: Watches, began: float, ended: float, pod_prefix: str) -> list[Mark]:
    """The watched events of the window, each said as what changed."""
    last: dict[tuple[str, str, str], Object] = {}
    for _, resource, _, obj in watches.before(began):
        meta = obj.get("metadata", {})
        last[(resource.kind, str(meta.get("namespace") or ""), _name(obj))] = obj
    marks: list[Mark] = []
    for at, resource, kind, obj in watches.between(began, ended):
        meta = obj.get("metadata", {})
        key = (resource.kind, str(meta.get("namespace") or ""), _name(obj))
        old = last.get(key)
        last[key] = obj
        said: list[str]
        if resource.kind == PODS.kind:
            if not _name(obj).startswith(pod_prefix):
                continue
            said = _pod_changes(old, obj)
        elif resource.kind == LEASES.kind:
            if meta.get("namespace") in _SYSTEM_NAMESPACES:
                continue
            holder = (obj.get("spec") or {}).get("holderIdentity")
            if old is not None and (old.get("spec") or {}).get("holderIdentity") == holder:
                continue  # a renewal, the leader election's heartbeat among them
            said = [f"holder {holder}"]
        elif resource.kind in {JOBS.kind, CONFIGMAPS.kind}:
            if kind != "ADDED":
                continue
            said = ["created"]
        elif old is None:
            said = [kind.lower()]
        else:
            said = _owner_changes(old, obj)
        for line in said:
            marks.append(Mark(at, "watch", f"{resource.kind} {_name(obj)}: {line}"))
    return marks


def _log_line(fields: dict[str, Any]) -> str | None:
    """One manager log line as a step of the path, or None for one that is not."""
    message = str(fields.get("message") or "")
    if fields.get("event") == "admission.decision":
        return (
            f"admitted {fields.get('operation')} {fields.get('resource')} {fields.get('name')}"
            f" ({fields.get('rule')}, {fields.get('durationMs')} ms)"
        )
    logger = str(fields.get("logger") or "")
    if logger.startswith("urllib3") and '"' in message:
        request = message.split('"')[1]
        method, _, rest = request.partition(" ")
        path = rest.rsplit(" ", 1)[0].split("?")[0]
        if method == "GET":
            return None  # the reads; the trace is of the writes and what they wake
        return f"answered {method} {path.removeprefix('/apis/')}"
    if message.startswith(("watch:", "pass starts", "pass:")):
        extra = (
            f" ({fields.get('durationMs')} ms, {fields.get('events')})"
            if message.startswith("pass:")
            else ""
        )
        return message + extra
    return None


def log_marks(log_text: str, began: float, ended: float, resource: str) -> list[Mark]:
    """The manager's log lines of the window about ``resource`` (or about no pass)."""
    marks: list[Mark] = []
    for raw in log_text.splitlines():
        try:
            fields = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(fields, dict) or "time" not in fields:
            continue
        at = datetime.fromisoformat(str(fields["time"])).timestamp()
        if not began <= at <= ended:
            continue
        named = fields.get("resource")
        if named not in (None, resource) and fields.get("event") != "admission.decision":
            continue
        line = _log_line(fields)
        if line is not None:
            marks.append(Mark(at, "manager", line))
    return marks


def render(marks: list[Mark], began: float) -> list[str]:
    """The merged timeline, in milliseconds from ``began``."""
    ordered = sorted(marks, key=lambda m: m.at)
    return [f"  {1000 * (m.at - began):8.1f} ms  {m.source:7}  {m.what}" for m in ordered]
