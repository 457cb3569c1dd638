"""Leader election through a Lease: one manager dispatches at a time.

Two managers dispatching for one resource would each read the same undispatched
claim and each take it through the sequence; the API server's preconditions make one
of their writes lose, but only one manager doing the work keeps the losses rare and
the Events readable. The Lease is taken by compare-and-swap, renewed by its holder,
and a foreign holder's Lease expires only by this process's own monotonic observation
of an unchanged record, never by comparing another node's timestamps with our clock.

A holder counts itself the leader only until its *renew deadline* (shorter than the
Lease duration) has passed since the start of its last successful renewal. Another
manager may take the Lease over only after a whole duration of the record unchanged by
its own clock, so a leader cut off from the API server stops taking work at least
``duration - renew_deadline`` seconds before anyone else can start.
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


def default_renew_deadline(duration: float) -> float:
    """Two thirds of the Lease duration (10 of 15 s, as client-go's defaults)."""
    return duration * 2 / 3


def default_retry_period(duration: float) -> float:
    """A seventh of the duration (2 of 15 s, as client-go's defaults), rounded down."""
    return duration * 2 / 15


def timing_problem(duration: float, renew_deadline: float, retry_period: float) -> str | None:
    """Why these three durations cannot work together, or None. Pure.

    The renew deadline must leave room for at least one retry, and end before the
    Lease can lapse elsewhere: otherwise a silent leader could still be working when a
    successor starts.
    """
    if not duration > 0:
        return "the lease duration must be positive"
    if not 0 < retry_period < renew_deadline:
        return "the retry period must be positive and shorter than the renew deadline"
    if not renew_deadline < duration:
        return "the renew deadline must be shorter than the lease duration"
    return None


def holds_leadership(renewed_at: float | None, now: float, renew_deadline: float) -> bool:
    """Whether a holder whose last renewal began at ``renewed_at`` may still work. Pure."""
    return renewed_at is not None and now - renewed_at < renew_deadline


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
        renew_deadline_seconds: float | None = None,
        retry_period_seconds: float | None = None,
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
        self.renew_deadline = (
            default_renew_deadline(duration_seconds)
            if renew_deadline_seconds is None
            else renew_deadline_seconds
        )
        self.retry_period = (
            default_retry_period(duration_seconds)
            if retry_period_seconds is None
            else retry_period_seconds
        )
        problem = timing_problem(self.duration, self.renew_deadline, self.retry_period)
        if problem is not None:
            raise InvalidInput(problem)
        self._clock = clock
        self._wall = wall
        self._seen: tuple[tuple[object, ...], float] | None = None
        self._renewed_at: float | None = None

    @property
    def leading(self) -> bool:
        """Whether our last successful renewal began less than the renew deadline ago."""
        return holds_leadership(self._renewed_at, self._clock(), self.renew_deadline)

    def seconds_left(self) -> float:
        """How long we may still work without another renewal (0 when not leading)."""
        renewed = self._renewed_at
        if renewed is None:
            return 0.0
        return max(0.0, self.renew_deadline - (self._clock() - renewed))

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
