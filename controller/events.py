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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, Protocol

from controller.vocabulary import EventReason
from jobclaim.apiserver import EVENTS, ApiClient, ApiError
from jobclaim.times import micro_timestamp, utc_now

log = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "operator.ptah.run/ptah-operator"
_NOTE_LIMIT: Final = 1024
_NAME_LIMIT: Final = 253


@dataclass(frozen=True, slots=True)
class EventRecord:
    # Only a registered reason: one missing from controller/vocabulary.py is one no
    # person can find in docs/reference/events.md or alert on.
    reason: EventReason
    note: str
    type: Literal["Normal", "Warning"] = "Normal"


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


class ApiEventSink:
    """Creates ``events.k8s.io/v1`` Events; a failure is counted, never raised."""

    def __init__(
        self,
        api: ApiClient,
        *,
        instance: str,
        wall: Callable[[], datetime] = utc_now,
    ) -> None:
        self._api = api
        self._instance = instance
        self._wall = wall
        self._lock = threading.Lock()
        self.dropped = 0

    def emit(self, regarding: Regarding, record: EventRecord) -> None:
        moment = micro_timestamp(self._wall())
        event = {
            "metadata": {"name": event_name(regarding.name), "namespace": regarding.namespace},
            "eventTime": moment,
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance,
            "action": record.reason,
            "reason": record.reason,
            "note": record.note[:_NOTE_LIMIT],
            "type": record.type,
            "regarding": {
                "apiVersion": regarding.api_version,
                "kind": regarding.kind,
                "namespace": regarding.namespace,
                "name": regarding.name,
                "uid": regarding.uid,
            },
        }
        try:
            self._api.create(EVENTS, regarding.namespace, event)
        except ApiError as error:
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
