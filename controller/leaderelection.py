"""Leader election through a Lease: one manager dispatches at a time.

Two managers dispatching for one resource would each read the same undispatched
claim and each take it through the sequence; the API server's preconditions make one
of their writes lose, but only one manager doing the work keeps the losses rare and
the Events readable. The Lease is taken by compare-and-swap, renewed by its holder,
and a foreign holder's Lease expires only by this process's own monotonic observation
of an unchanged record, never by comparing another node's timestamps with our clock.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from jobclaim.apiserver import LEASES, AlreadyExists, ApiClient, ApiError, Conflict, NotFound
from jobclaim.errors import InvalidInput
from jobclaim.times import micro_timestamp, utc_now

DEFAULT_DURATION: Final = 15


def _record_key(obj: dict[str, Any]) -> tuple[object, ...]:
    meta, spec = obj.get("metadata", {}), obj.get("spec", {})
    return (
        meta.get("uid"),
        meta.get("resourceVersion"),
        spec.get("holderIdentity"),
        spec.get("renewTime"),
        spec.get("leaseDurationSeconds"),
    )


class LeaderElector:
    """Campaign for and keep one named Lease."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration_seconds: int = DEFAULT_DURATION,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = utc_now,
    ) -> None:
        if not (namespace and name and identity):
            raise InvalidInput("leader election needs a namespace, a Lease name and an identity")
        self._api = api
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self.duration = duration_seconds
        self._clock = clock
        self._wall = wall
        self._seen: tuple[tuple[object, ...], float] | None = None
        self._renewed_at: float | None = None

    @property
    def leading(self) -> bool:
        """Whether our last successful renewal is younger than the Lease duration."""
        renewed = self._renewed_at
        return renewed is not None and self._clock() - renewed < self.duration

    def try_acquire_or_renew(self) -> bool:
        """One attempt: True when we hold the Lease afterwards."""
        now = self._clock()
        try:
            current = self._api.get(LEASES, self._namespace, self._name)
        except NotFound:
            current = None
        except ApiError:
            return self.leading
        if current is not None and not self._may_take(current, now):
            return False
        desired = self._desired(current)
        try:
            if current is None:
                self._api.create(LEASES, self._namespace, desired)
            else:
                self._api.replace(LEASES, self._namespace, desired)
        except (Conflict, AlreadyExists):
            return False
        except ApiError:
            return self.leading
        self._renewed_at = now
        self._seen = None
        return True

    def _may_take(self, current: dict[str, Any], now: float) -> bool:
        holder = current.get("spec", {}).get("holderIdentity") or ""
        if holder in ("", self.identity):
            return True
        key = _record_key(current)
        if self._seen is None or self._seen[0] != key:
            self._seen = (key, now)
            return False
        duration = current.get("spec", {}).get("leaseDurationSeconds")
        if not isinstance(duration, int) or duration <= 0:
            return False  # a Lease we cannot read is never taken over
        return now - self._seen[1] >= duration

    def _desired(self, current: dict[str, Any] | None) -> dict[str, Any]:
        lease: dict[str, Any] = copy.deepcopy(current) if current else {}
        lease.setdefault("metadata", {})["name"] = self._name
        spec = lease.setdefault("spec", {})
        stamp = micro_timestamp(self._wall())
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = stamp
            transitions = spec.get("leaseTransitions")
            spec["leaseTransitions"] = (transitions + 1) if isinstance(transitions, int) else 0
        spec.update(
            holderIdentity=self.identity, leaseDurationSeconds=self.duration, renewTime=stamp
        )
        return lease

    def release(self) -> None:
        """Give the Lease up on a clean shutdown, so a successor need not wait it out."""
        self._renewed_at = None
        try:
            current = self._api.get(LEASES, self._namespace, self._name)
            if current.get("spec", {}).get("holderIdentity") != self.identity:
                return
            released = copy.deepcopy(current)
            released["spec"]["holderIdentity"] = ""
            self._api.replace(LEASES, self._namespace, released)
        except ApiError:
            return  # the Lease then expires on its own
