"""The database realm's Lease: one ``coordination.k8s.io/v1`` Lease per coordination digest.

Two resources that address one physical database must never run beside each other,
even when their keys are spelled differently, so the Lease is named by
``jobclaim.lease_name(coordination_digest)`` and not by any resource. Its holder is
one claim of one resource (``jobclaim.lease_holder(resource_uid, operation_id)``),
and its epoch (annotation ``operator.ptah.run/lease-epoch``) names one tenure: a new
epoch on every acquisition from someone else, the same epoch on every renewal. A claim
persists the epoch it holds, so a Lease that changed hands underneath it is noticed
(``continuity_lost``) instead of being mistaken for the tenure the claim began under.

Three rules carry the safety argument:

- Every write is a compare-and-swap: a create, or a replace at the resourceVersion the
  decision was made from, after an uncached read. Two claimants that read the same
  free Lease cannot both win; the loser's write is a Conflict and it decides again.
- A foreign holder's Lease expires only by this process's own monotonic observation of
  an unchanged record for at least its duration. Comparing the holder's renewTime with
  our wall clock would let a skewed clock (ours fast, or theirs slow) hand the
  database to a second writer while the first still runs.
- A foreign Lease we cannot read (no or an impossible duration, no timestamps, an
  epoch that is not ``v1-`` + 32 hex) fails closed with ``MalformedLease``: guessing
  its expiry could take a database from a live holder.

The decision is the pure ``lease_decision``; ``TargetLock`` only reads, remembers
sightings and writes.

``renew`` is ``acquire`` with an expectation that must be given: it keeps or retakes
the Lease it may hold exactly as ``acquire`` would, and reports ``continuity_lost``
whenever the Lease is not the tenure the claim recorded. A dispatched claim latches
that; one that has not dispatched adopts the new epoch.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from jobclaim import (
    LABEL_MANAGED_BY,
    LEASE_EPOCH_ANNOTATION,
    MANAGED_BY,
    PREFIX,
    is_epoch,
    lease_name,
)
from jobclaim.apiserver import (
    LEASES,
    AlreadyExists,
    ApiClient,
    Conflict,
    NotFound,
    Object,
    compare_and_swap,
)
from jobclaim.errors import InvalidInput, PtahError
from jobclaim.times import micro_timestamp, parse_time, utc_now

__all__ = [
    "ANN_LEASE_EPOCH",
    "LABEL_COORDINATION",
    "LeaseDecision",
    "LeaseRecord",
    "LeaseState",
    "MalformedLease",
    "Sighting",
    "TargetLock",
    "lease_decision",
    "new_epoch",
    "read_lease",
]

ANN_LEASE_EPOCH: Final = LEASE_EPOCH_ANNOTATION
LABEL_COORDINATION: Final = PREFIX + "coordination"
COORDINATION: Final = "database-target"
# Bounds of a duration we will honour: below 5 s no renewal cadence can keep up, and
# above a day and a minute no claim of ours asks for it (an Apply window of a day
# plus the grace). A foreign Lease outside them is not one we know how to wait for.
MIN_DURATION: Final = 5
MAX_DURATION: Final = 86_460


class MalformedLease(PtahError):
    """A foreign Lease whose expiry cannot be read: nobody may take it over."""


@dataclass(frozen=True)
class LeaseState:
    """What an acquisition or a renewal found.

    ``epoch`` is the tenure held (None unless ``held``); ``retry_after`` the seconds
    until a foreign Lease could be taken over if its holder stopped renewing.
    """

    held: bool
    epoch: str | None
    continuity_lost: bool
    retry_after: float | None


@dataclass(frozen=True)
class LeaseRecord:
    """A stored Lease as the decision reads it: raw values, judged by ``lease_decision``."""

    uid: str
    resource_version: str
    holder: str
    duration: object
    acquire_time: object
    renew_time: object
    transitions: object
    epoch: object

    @property
    def key(self) -> tuple[object, ...]:
        """Everything that changes when the holder renews, hands over or is replaced:
        while this key stays the same, nobody has written the Lease."""
        return (
            self.resource_version,
            self.uid,
            self.holder,
            self.duration,
            self.acquire_time,
            self.renew_time,
            self.transitions,
        )


@dataclass(frozen=True)
class Sighting:
    """This process's first observation of one unchanged foreign record."""

    key: tuple[object, ...]
    since: float


@dataclass(frozen=True)
class LeaseDecision:
    """``create`` a missing Lease, ``keep`` our own tenure, ``take`` a free or expired
    one under a new epoch, or ``wait`` for a foreign holder."""

    action: Literal["create", "keep", "take", "wait"]
    epoch: str | None = None
    retry_after: float | None = None
    sighting: Sighting | None = None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def read_lease(obj: Mapping[str, Any]) -> LeaseRecord:
    meta, spec = _mapping(obj.get("metadata")), _mapping(obj.get("spec"))
    return LeaseRecord(
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        holder=str(spec.get("holderIdentity") or ""),
        duration=spec.get("leaseDurationSeconds"),
        acquire_time=spec.get("acquireTime"),
        renew_time=spec.get("renewTime"),
        transitions=spec.get("leaseTransitions"),
        epoch=_mapping(meta.get("annotations")).get(ANN_LEASE_EPOCH),
    )


def _valid_duration(value: object) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and MIN_DURATION <= value <= MAX_DURATION
    )


def malformed_problem(record: LeaseRecord) -> str | None:
    """Why a foreign Lease cannot be waited out, or None."""
    if not _valid_duration(record.duration):
        return (
            f"its leaseDurationSeconds {record.duration!r} is not between "
            f"{MIN_DURATION} and {MAX_DURATION}"
        )
    stamps = [t for t in (record.acquire_time, record.renew_time) if t is not None]
    if not stamps:
        return "it carries neither an acquireTime nor a renewTime"
    if any(parse_time(t) is None for t in stamps):
        return "a timestamp it carries is not an RFC 3339 time"
    if not is_epoch(record.epoch):
        return "its epoch annotation is not v1- followed by 32 lowercase hex"
    return None


def lease_decision(
    record: LeaseRecord | None,
    *,
    holder: str,
    sighting: Sighting | None,
    now: float,
    token: Callable[[], str],
) -> LeaseDecision:
    """What to do with the Lease as read: pure but for ``token``, the new-epoch source.

    ``sighting`` is what this process remembers of the record; ``now`` is its own
    monotonic clock. Raises ``MalformedLease`` for a foreign Lease it cannot judge.
    """
    if record is None:
        return LeaseDecision("create", epoch=token())
    if record.holder == holder and is_epoch(record.epoch):
        # Our own tenure: renewing keeps the epoch, even if the claim expected another,
        # because the epoch is the identity of this tenure and it never ended.
        assert isinstance(record.epoch, str)
        return LeaseDecision("keep", epoch=record.epoch)
    if record.holder in ("", holder):
        # Released, or ours with an epoch nobody can name: a new tenure begins.
        return LeaseDecision("take", epoch=token())
    problem = malformed_problem(record)
    if problem is not None:
        raise MalformedLease(f"the Lease held by {record.holder} cannot be read: {problem}")
    assert isinstance(record.duration, int)
    seen = sighting if sighting is not None and sighting.key == record.key else None
    since = seen.since if seen is not None else now
    elapsed = max(0.0, now - since)
    if elapsed >= record.duration:
        return LeaseDecision("take", epoch=token())
    return LeaseDecision(
        "wait", retry_after=record.duration - elapsed, sighting=Sighting(record.key, since)
    )


def _continuity_lost(decision: LeaseDecision, expected_epoch: str | None) -> bool:
    """True when a claim expected a tenure and this is not it: only keeping our own
    Lease under exactly the expected epoch continues one. A new tenure never does,
    whatever its epoch happens to be, because something else may have held the realm
    in between."""
    if expected_epoch is None:
        return False
    return not (decision.action == "keep" and decision.epoch == expected_epoch)


def new_epoch() -> str:
    return "v1-" + secrets.token_hex(16)


def _desired(
    current: Object | None,
    *,
    name: str,
    decision: LeaseDecision,
    holder: str,
    duration: int,
    moment: datetime,
) -> Object:
    """The Lease to write: ``current`` with our holder, duration, times and epoch."""
    obj: Object = copy.deepcopy(current) if current is not None else {}
    meta = obj.setdefault("metadata", {})
    meta["name"] = name
    meta.setdefault("labels", {}).update(
        {LABEL_MANAGED_BY: MANAGED_BY, LABEL_COORDINATION: COORDINATION}
    )
    meta.setdefault("annotations", {})[ANN_LEASE_EPOCH] = decision.epoch
    spec = obj.setdefault("spec", {})
    # Never write a renewTime earlier than one already stored: a reader comparing
    # times would see the Lease go back in time when our clock is behind its writer's.
    stored = [parse_time(spec.get(f)) for f in ("acquireTime", "renewTime")]
    stamp = micro_timestamp(max([moment, *(t for t in stored if t is not None)]))
    spec.update(holderIdentity=holder, leaseDurationSeconds=duration, renewTime=stamp)
    if decision.action == "create":
        spec.update(acquireTime=stamp, leaseTransitions=0)
    elif decision.action == "take":
        transitions = spec.get("leaseTransitions")
        counted = transitions if isinstance(transitions, int) and transitions >= 0 else 0
        spec.update(acquireTime=stamp, leaseTransitions=counted + 1)
    return obj


class TargetLock:
    """Acquire, renew and release realm Leases in one namespace, by compare-and-swap.

    An instance is one process's memory of foreign Leases it has seen: make one per
    manager and share it between workers, or a restarted worker waits a whole
    duration again (safe, only slower).
    """

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = utc_now,
        token: Callable[[], str] = new_epoch,
    ) -> None:
        if not namespace:
            raise InvalidInput("the Lease namespace must not be empty")
        self._api = api
        self._namespace = namespace
        self._clock = clock
        self._wall = wall
        self._token = token
        self._sightings: dict[str, Sighting] = {}
        self._memory = threading.Lock()

    def acquire(
        self,
        coordination_digest: str,
        holder: str,
        duration_seconds: int,
        expected_epoch: str | None,
    ) -> LeaseState:
        """Take or keep the realm's Lease for ``holder``.

        Returns ``held=False`` with ``retry_after`` while a foreign holder may still
        be running; raises ``MalformedLease`` for a foreign Lease that cannot be judged,
        and the last ``Conflict`` when every compare-and-swap attempt lost a race.
        """
        if not holder:
            raise InvalidInput("a Lease holder must not be empty")
        if not _valid_duration(duration_seconds):
            raise InvalidInput(
                f"a Lease duration must be between {MIN_DURATION} and {MAX_DURATION} seconds"
            )
        name = lease_name(coordination_digest)

        def attempt() -> LeaseState:
            current = self._read(name)
            decision = self._decide(name, current, holder)
            if decision.action == "wait":
                return LeaseState(
                    held=False,
                    epoch=None,
                    continuity_lost=expected_epoch is not None,
                    retry_after=decision.retry_after,
                )
            desired = _desired(
                current,
                name=name,
                decision=decision,
                holder=holder,
                duration=duration_seconds,
                moment=self._wall(),
            )
            # A create beaten by another creator races like a replace beaten by a writer.
            if current is None:
                self._api.create(LEASES, self._namespace, desired)
            else:
                self._api.replace(LEASES, self._namespace, desired)
            with self._memory:
                self._sightings.pop(name, None)
            return LeaseState(
                held=True,
                epoch=decision.epoch,
                continuity_lost=_continuity_lost(decision, expected_epoch),
                retry_after=None,
            )

        return compare_and_swap(attempt, races=(Conflict, AlreadyExists))

    def renew(
        self, coordination_digest: str, holder: str, duration_seconds: int, expected_epoch: str
    ) -> LeaseState:
        """Keep the tenure ``expected_epoch`` names; see the module docstring."""
        if not is_epoch(expected_epoch):
            raise InvalidInput("a renewal needs the epoch the claim recorded")
        return self.acquire(coordination_digest, holder, duration_seconds, expected_epoch)

    def release(self, coordination_digest: str, holder: str, expected_epoch: str) -> None:
        """Hand the realm back, only from exactly this holder's tenure ``expected_epoch``.

        Silent when the Lease is gone, held by someone else or carries another epoch:
        each means our tenure already ended, and clearing a successor's holder would
        let a third claimant start beside it. The Lease itself is kept.
        """
        if not is_epoch(expected_epoch):
            raise InvalidInput("a release needs the exact epoch of the tenure it ends")
        name = lease_name(coordination_digest)

        def attempt() -> None:
            current = self._read(name)
            if current is None:
                return
            record = read_lease(current)
            if record.holder != holder or record.epoch != expected_epoch:
                return
            released = copy.deepcopy(current)
            spec = released.setdefault("spec", {})
            stored = [parse_time(spec.get(f)) for f in ("acquireTime", "renewTime")]
            moment = max([self._wall(), *(t for t in stored if t is not None)])
            spec.update(holderIdentity="", renewTime=micro_timestamp(moment))
            self._api.replace(LEASES, self._namespace, released)

        compare_and_swap(attempt)

    def tenure_of(self, coordination_digest: str, holder: str) -> str | None:
        """The epoch ``holder`` holds the realm under, or None when it holds nothing.

        Read uncached. Only a claim that never dispatched may use the answer to choose
        what to release: nothing ran under any tenure its own holder identity took.
        """
        current = self._read(lease_name(coordination_digest))
        if current is None:
            return None
        record = read_lease(current)
        if record.holder != holder or not is_epoch(record.epoch):
            return None
        return str(record.epoch)

    def _read(self, name: str) -> Object | None:
        try:
            return self._api.get(LEASES, self._namespace, name)
        except NotFound:
            return None

    def _decide(self, name: str, current: Object | None, holder: str) -> LeaseDecision:
        record = read_lease(current) if current is not None else None
        with self._memory:
            decision = lease_decision(
                record,
                holder=holder,
                sighting=self._sightings.get(name),
                now=self._clock(),
                token=self._token,
            )
            if decision.sighting is not None:
                self._sightings[name] = decision.sighting
        return decision
