"""Kubernetes Events for each boundary a claim crosses.

Events are telemetry, not records: the API server may drop or expire them, and no
decision ever reads one. Sending one therefore never fails a pass, and a pass sends
its Events only after its last step, so an Event that cannot be sent never sits
between a durable write and the step that write makes safe.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, Protocol

from controller.pieces.vocabulary import EventReason
from jobclaim.apiserver import EVENTS, ApiClient, ApiError, NotFound
from jobclaim.times import micro_timestamp, utc_now

log = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "operator.ptah.run/ptah-operator"
_NOTE_LIMIT: Final = 1024
_NAME_LIMIT: Final = 253


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class EventRecord:
    # Only a registered reason: one missing from controller/pieces/vocabulary.py is one no
    # person can find in docs/reference/events.md or alert on.
    reason: EventReason
    note: str
    type: EventType = "Normal"


@dataclass(frozen=True, slots=True)
class Regarding:
    """The object an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


class EventSink(Protocol):
    def emit(self, regarding: Regarding, record: EventRecord) -> None: ...


@dataclass(slots=True)
class _Sent:
    """An Event this sink created, as its last successful write left it."""

    name: str
    resource_version: str
    # Occurrences so far, counted even when a patch carrying them was lost, so the
    # next patch that lands says the true total.
    count: int


# An Event is one per (object, reason, message, type): the key client-go's recorder
# uses to aggregate ("isomorphic" Events).
_Key = tuple[str, str, str, str, str, str]


class ApiEventSink:
    """Creates ``events.k8s.io/v1`` Events and aggregates repeats; a failure is counted,
    never raised.

    A repeat of the same reason and message about the same object patches the Event
    already sent, setting ``series.count`` (the occurrences, 2 and up, as client-go
    counts) and ``series.lastObservedTime``: a resource waiting on a busy realm says so
    in one Event with a count rather than one new Event every pass. The sink remembers
    the last ``memory`` keys it sent; a key forgotten, or an Event the API server
    expired (a patch answered NotFound), starts a new Event.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        instance: str,
        wall: Callable[[], datetime] = utc_now,
        memory: int = 4096,
    ) -> None:
        self._api = api
        self._instance = instance
        self._wall = wall
        self._memory = memory
        self._lock = threading.Lock()
        self._sent: OrderedDict[_Key, _Sent] = OrderedDict()
        self.dropped = 0

    def emit(self, regarding: Regarding, record: EventRecord) -> None:
        moment = micro_timestamp(self._wall())
        note = record.note[:_NOTE_LIMIT]
        key: _Key = (
            regarding.namespace,
            regarding.kind,
            regarding.name,
            regarding.uid,
            f"{record.type}/{record.reason}",
            note,
        )
        with self._lock:
            sent = self._sent.get(key)
            if sent is not None:
                sent.count += 1
                self._sent.move_to_end(key)
                name, version, count = sent.name, sent.resource_version, sent.count
        try:
            if sent is None:
                stored = self._create(regarding, record, note, moment)
                self._remember(key, _Sent(stored["metadata"]["name"], _version(stored), 1))
                return
            try:
                stored = self._api.patch_fields(
                    EVENTS,
                    regarding.namespace,
                    name,
                    {"series": {"count": count, "lastObservedTime": moment}},
                    resource_version=version,
                )
            except NotFound:
                # Expired (the API server keeps Events an hour by default): this
                # occurrence starts a new Event, its count from one again.
                stored = self._create(regarding, record, note, moment)
                self._remember(key, _Sent(stored["metadata"]["name"], _version(stored), 1))
                return
            with self._lock:
                # Each patch is guarded by the version the last one left, so a racing
                # repeat answers Conflict and is dropped (its occurrence still counted
                # for the next patch), never overwritten by an older count.
                if self._sent.get(key) is sent:
                    sent.resource_version = _version(stored)
        except ApiError as error:
            self._drop(regarding, error)

    def _create(
        self, regarding: Regarding, record: EventRecord, note: str, moment: str
    ) -> dict[str, Any]:
        event = {
            "metadata": {"name": event_name(regarding.name), "namespace": regarding.namespace},
            "eventTime": moment,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": record.reason,
            "reason": record.reason,
            "note": note,
            "type": record.type,
            "regarding": {
                "apiVersion": regarding.api_version,
                "kind": regarding.kind,
                "namespace": regarding.namespace,
                "name": regarding.name,
                "uid": regarding.uid,
            },
        }
        return self._api.create(EVENTS, regarding.namespace, event)

    def _remember(self, key: _Key, sent: _Sent) -> None:
        if not sent.resource_version:
            return  # nothing to guard a patch with: a repeat creates its own Event
        with self._lock:
            self._sent[key] = sent
            self._sent.move_to_end(key)
            while len(self._sent) > self._memory:
                self._sent.popitem(last=False)

    def _drop(self, regarding: Regarding, error: ApiError) -> None:
        # An Event lost is telemetry lost; failing the pass for it would turn a
        # busy API server into a stalled dispatch. But a sink that drops every
        # Event (RBAC, a refusing policy) must not do so in silence: the first
        # drop and every tenfold after it are logged with the server's answer.
        with self._lock:
            self.dropped += 1
            dropped = self.dropped
        if _worth_saying(dropped):
            log.warning(
                "an Event about %s %s/%s could not be sent (%d dropped so far): %s",
                regarding.kind,
                regarding.namespace,
                regarding.name,
                dropped,
                error,
            )


def _version(stored: Mapping[str, Any]) -> str:
    return str(stored.get("metadata", {}).get("resourceVersion", ""))


def occurrences(event: Mapping[str, Any]) -> int:
    """How many times a stored Event was said: its series' count, else once. Pure.

    A repeat is a patch of one Event (``ApiEventSink``), so whoever counts what the
    operator said counts this, never the Event objects."""
    series = event.get("series") or {}
    return int(series.get("count") or 1)


def last_observed(event: Mapping[str, Any]) -> str | None:
    """When a stored Event was last said: its series' time, else its own. Pure."""
    series = event.get("series") or {}
    moment = series.get("lastObservedTime") or event.get("eventTime")
    return str(moment) if moment else None


def event_name(regarding: str, nonce: str | None = None) -> str:
    """``<name>.<16 hex>``, the shape client-go's recorder gives. Pure given ``nonce``.

    Not ``generateName``: a current API server validates ``generateName`` itself as a
    name, and ``orders.`` ends in a dot, so every Event the manager sent was refused
    and none ever reached a user (seen on the lab cluster). The name stays a valid
    subdomain however long the resource's own name is.
    """
    suffix = nonce if nonce is not None else uuid.uuid4().hex[:16]
    stem = regarding[: _NAME_LIMIT - len(suffix) - 1].rstrip("-.")
    return f"{stem}.{suffix}"


def _worth_saying(dropped: int) -> bool:
    """1, 10, 100, ...: a steady failure stays visible without flooding the log."""
    while dropped % 10 == 0:
        dropped //= 10
    return dropped == 1


class RecordingSink:
    """Keeps every Event in memory, for tests and the benchmark."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[tuple[Regarding, EventRecord]] = []
        self.listeners: list[Callable[[Regarding, EventRecord], None]] = []

    def emit(self, regarding: Regarding, record: EventRecord) -> None:
        with self._lock:
            self.records.append((regarding, record))
            listeners = list(self.listeners)
        for listener in listeners:
            listener(regarding, record)

    def reasons(self, name: str | None = None) -> list[str]:
        with self._lock:
            return [r.reason for g, r in self.records if name is None or g.name == name]
