"""The realm Lease: contention across spellings, expiry by our own observation only,
failing closed on what cannot be read, continuity, and exact release.

Every clock is injected: the monotonic one decides expiry, the wall one only stamps
the times written into the Lease, and no test sleeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.pieces.targetlock import (
    ANN_LEASE_EPOCH,
    LABEL_COORDINATION,
    LeaseRecord,
    LeaseState,
    MalformedLease,
    Sighting,
    TargetLock,
    lease_decision,
)
from jobclaim import coordination_digest, lease_holder, lease_name
from jobclaim.apiserver import CAS_ATTEMPTS as MAX_ATTEMPTS
from jobclaim.apiserver import LEASES, Conflict, Object, Unavailable
from kube.fake.inmemory import InMemoryApi, matching

NS = "ptah-system"
DURATION = 60
DIGEST = coordination_digest(
    engine="PostgreSQL", namespace="shop", coordination_key="Orders", realm=None
)
HOLDER_A = lease_holder("schema-uid-a", "op-a")
HOLDER_B = lease_holder("schema-uid-b", "op-b")
EPOCH_X = "v1-" + "1" * 32
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
# The first epoch the injected token source hands out.
FIRST = "v1-" + "0" * 31 + "1"


class Clock:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Wall:
    def __init__(self, moment: datetime = T0) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment


def tokens() -> Callable[[], str]:
    counter = iter(range(1, 1000))
    return lambda: f"v1-{next(counter):032x}"


def lock(api: Any, clock: Clock | None = None, wall: Wall | None = None) -> TargetLock:
    return TargetLock(api, NS, clock=clock or Clock(), wall=wall or Wall(), token=tokens())


def stored(api: InMemoryApi) -> Object:
    found = api.peek(LEASES, NS, lease_name(DIGEST))
    assert found is not None
    return found


def test_the_first_acquisition_creates_the_lease_under_a_new_epoch() -> None:
    api = InMemoryApi()
    state = lock(api).acquire(DIGEST, HOLDER_A, DURATION, None)
    assert state == LeaseState(held=True, epoch=FIRST, continuity_lost=False, retry_after=None)
    lease = stored(api)
    assert lease["metadata"]["annotations"] == {ANN_LEASE_EPOCH: state.epoch}
    assert lease["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "ptah-operator",
        LABEL_COORDINATION: "database-target",
    }
    assert lease["spec"] == {
        "holderIdentity": HOLDER_A,
        "leaseDurationSeconds": DURATION,
        "acquireTime": "2026-12-02T12:00:00.000000Z",
        "renewTime": "2026-12-02T12:00:00.000000Z",
        "leaseTransitions": 0,
    }


def test_the_default_epoch_is_v1_and_32_random_hex() -> None:
    api = InMemoryApi()
    first = TargetLock(api, NS).acquire(DIGEST, HOLDER_A, DURATION, None)
    other = coordination_digest(engine="mysql", namespace="shop", coordination_key="x", realm=None)
    second = TargetLock(api, NS).acquire(other, HOLDER_A, DURATION, None)
    assert first.epoch and second.epoch and first.epoch != second.epoch
    assert all(len(e) == 35 and e.startswith("v1-") for e in (first.epoch, second.epoch))


def test_two_resources_whose_keys_differ_in_spelling_contend_for_one_lease() -> None:
    api = InMemoryApi()
    spelled = coordination_digest(
        engine="postgresql", namespace="shop", coordination_key="  ORDERS ", realm=None
    )
    assert spelled == DIGEST
    assert lock(api).acquire(DIGEST, HOLDER_A, DURATION, None).held
    second = lock(api).acquire(spelled, HOLDER_B, DURATION, None)
    assert second == LeaseState(held=False, epoch=None, continuity_lost=False, retry_after=DURATION)
    assert stored(api)["spec"]["holderIdentity"] == HOLDER_A


def test_a_foreign_lease_expires_only_by_our_own_monotonic_observation() -> None:
    api = InMemoryApi()
    # The holder's wall clock says its renewal was a year ago; a lock that compared
    # renewTime with its own clock would take the realm at once.
    lock(api, wall=Wall(T0 - timedelta(days=365))).acquire(DIGEST, HOLDER_A, DURATION, None)
    clock = Clock()
    taker = lock(api, clock)
    assert taker.acquire(DIGEST, HOLDER_B, DURATION, None).retry_after == DURATION
    clock.now += DURATION - 1
    assert taker.acquire(DIGEST, HOLDER_B, DURATION, None).retry_after == 1
    # Another process (a fresh memory) has observed nothing yet, whatever the time.
    assert lock(api, clock).acquire(DIGEST, HOLDER_B, DURATION, None).retry_after == DURATION
    clock.now += 1
    taken = taker.acquire(DIGEST, HOLDER_B, DURATION, None)
    assert taken.held and not taken.continuity_lost
    spec = stored(api)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (HOLDER_B, 1)


def test_a_renewal_by_the_holder_restarts_our_observation() -> None:
    api = InMemoryApi()
    wall = Wall()
    holder = lock(api, wall=wall)
    epoch = holder.acquire(DIGEST, HOLDER_A, DURATION, None).epoch
    assert epoch is not None
    clock = Clock()
    taker = lock(api, clock)
    taker.acquire(DIGEST, HOLDER_B, DURATION, None)
    clock.now += DURATION - 1
    wall.moment += timedelta(seconds=30)
    assert holder.renew(DIGEST, HOLDER_A, DURATION, epoch).held
    clock.now += 1
    assert taker.acquire(DIGEST, HOLDER_B, DURATION, None).retry_after == DURATION


def foreign(**spec_changes: Any) -> Callable[[Object], None]:
    def change(lease: Object) -> None:
        for key, value in spec_changes.items():
            if value is None:
                lease["spec"].pop(key, None)
            else:
                lease["spec"][key] = value

    return change


def epoch_annotation(value: str | None) -> Callable[[Object], None]:
    def change(lease: Object) -> None:
        if value is None:
            del lease["metadata"]["annotations"][ANN_LEASE_EPOCH]
        else:
            lease["metadata"]["annotations"][ANN_LEASE_EPOCH] = value

    return change


# (id, a change to holder A's Lease, whether B's acquisition must fail closed)
MALFORMED: list[tuple[str, Callable[[Object], None], bool]] = [
    # Control row: an intact foreign Lease is waited for, so the rows below that fail
    # closed fail because of their one change.
    ("intact", foreign(), False),
    ("no-duration", foreign(leaseDurationSeconds=None), True),
    ("zero-duration", foreign(leaseDurationSeconds=0), True),
    ("too-short", foreign(leaseDurationSeconds=4), True),
    ("too-long", foreign(leaseDurationSeconds=86_461), True),
    ("string-duration", foreign(leaseDurationSeconds="60"), True),
    ("bool-duration", foreign(leaseDurationSeconds=True), True),
    ("no-timestamps", foreign(acquireTime=None, renewTime=None), True),
    ("only-acquire-time", foreign(renewTime=None), False),
    ("unreadable-renew-time", foreign(renewTime="yesterday"), True),
    ("no-epoch", epoch_annotation(None), True),
    ("invalid-epoch", epoch_annotation("v1-XYZ"), True),
    ("legacy-epoch", epoch_annotation("1" * 32), True),
]


@pytest.mark.parametrize(
    ("change", "fails_closed"), [r[1:] for r in MALFORMED], ids=[r[0] for r in MALFORMED]
)
def test_a_foreign_lease_that_cannot_be_read_fails_closed(
    change: Callable[[Object], None], fails_closed: bool
) -> None:
    api = InMemoryApi()
    lock(api).acquire(DIGEST, HOLDER_A, DURATION, None)
    lease = stored(api)
    change(lease)
    api.replace(LEASES, NS, lease)
    clock = Clock()
    taker = lock(api, clock)
    if not fails_closed:
        assert not taker.acquire(DIGEST, HOLDER_B, DURATION, None).held
        return
    with pytest.raises(MalformedLease, match="cannot be read"):
        taker.acquire(DIGEST, HOLDER_B, DURATION, None)
    # No amount of waiting makes it readable.
    clock.now += 10 * 86_460
    with pytest.raises(MalformedLease):
        taker.acquire(DIGEST, HOLDER_B, DURATION, None)
    assert stored(api)["spec"]["holderIdentity"] == HOLDER_A


def test_a_released_lease_is_taken_at_once_even_when_the_rest_is_malformed() -> None:
    api = InMemoryApi()
    lease = {"metadata": {"name": lease_name(DIGEST)}, "spec": {"holderIdentity": ""}}
    api.create(LEASES, NS, lease)
    state = lock(api).acquire(DIGEST, HOLDER_B, DURATION, None)
    assert state.held
    assert stored(api)["spec"]["leaseTransitions"] == 1


Setup = Callable[[InMemoryApi], None]


def held_by_a(epoch: str | None) -> Setup:
    def setup(api: InMemoryApi) -> None:
        lock(api).acquire(DIGEST, HOLDER_A, DURATION, None)
        lease = stored(api)
        if epoch is None:
            del lease["metadata"]["annotations"][ANN_LEASE_EPOCH]
        else:
            lease["metadata"]["annotations"][ANN_LEASE_EPOCH] = epoch
        api.replace(LEASES, NS, lease)

    return setup


def held_by_b(api: InMemoryApi) -> None:
    lock(api).acquire(DIGEST, HOLDER_B, DURATION, None)


def nothing(api: InMemoryApi) -> None:
    pass


OTHER = "v1-" + "2" * 32
# (id, what the store holds, the expectation A acquires with, held, epoch, lost)
CONTINUITY: list[tuple[str, Setup, str | None, bool, str | None, bool]] = [
    # Control row: our own tenure under the epoch we expected continues.
    ("same-holder-same-epoch", held_by_a(EPOCH_X), EPOCH_X, True, EPOCH_X, False),
    ("first-acquisition", nothing, None, True, FIRST, False),
    ("adopt-without-expectation", held_by_a(EPOCH_X), None, True, EPOCH_X, False),
    # The stale expectation a crash before the epoch's status write leaves behind.
    ("same-holder-other-epoch", held_by_a(OTHER), EPOCH_X, True, OTHER, True),
    (
        "same-holder-invalid-epoch",
        held_by_a("bogus"),
        EPOCH_X,
        True,
        FIRST,
        True,
    ),
    ("lease-gone", nothing, EPOCH_X, True, FIRST, True),
    ("foreign-holder", held_by_b, EPOCH_X, False, None, True),
]


@pytest.mark.parametrize(
    ("setup", "expected", "held", "epoch", "lost"),
    [r[1:] for r in CONTINUITY],
    ids=[r[0] for r in CONTINUITY],
)
def test_continuity_is_lost_unless_the_same_holder_keeps_the_expected_epoch(
    setup: Setup, expected: str | None, held: bool, epoch: str | None, lost: bool
) -> None:
    api = InMemoryApi()
    setup(api)
    state = lock(api).acquire(DIGEST, HOLDER_A, DURATION, expected)
    assert (state.held, state.epoch, state.continuity_lost) == (held, epoch, lost)
    if expected is not None:
        assert lock(api).renew(DIGEST, HOLDER_A, DURATION, expected).continuity_lost is lost


def test_a_renewal_keeps_the_epoch_and_never_moves_renew_time_backwards() -> None:
    api = InMemoryApi()
    wall = Wall()
    holder = lock(api, wall=wall)
    epoch = holder.acquire(DIGEST, HOLDER_A, DURATION, None).epoch
    assert epoch is not None
    wall.moment = T0 + timedelta(seconds=20)
    assert holder.renew(DIGEST, HOLDER_A, 90, epoch).epoch == epoch
    assert stored(api)["spec"]["renewTime"] == "2026-12-02T12:00:20.000000Z"
    assert stored(api)["spec"]["leaseDurationSeconds"] == 90
    wall.moment = T0 - timedelta(hours=1)
    holder.renew(DIGEST, HOLDER_A, 90, epoch)
    spec = stored(api)["spec"]
    assert spec["renewTime"] == "2026-12-02T12:00:20.000000Z"
    assert (spec["acquireTime"], spec["leaseTransitions"]) == ("2026-12-02T12:00:00.000000Z", 0)


def test_an_acquisition_whose_answer_was_lost_is_adopted_on_the_next_pass() -> None:
    api = InMemoryApi()
    api.fail_after_write(matching("create", LEASES))
    first = lock(api)
    with pytest.raises(Unavailable):
        first.acquire(DIGEST, HOLDER_A, DURATION, None)
    epoch = stored(api)["metadata"]["annotations"][ANN_LEASE_EPOCH]
    assert first.acquire(DIGEST, HOLDER_A, DURATION, None) == LeaseState(True, epoch, False, None)


class Racing:
    """The API, with another claimant's write slipped in right after our first read."""

    def __init__(self, api: InMemoryApi, interloper: Callable[[], object]) -> None:
        self.api = api
        self._interloper: Iterator[Callable[[], object]] = iter([interloper])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def get(self, *args: Any) -> Object:
        found = self.api.get(*args)
        # Runs at most once: the interloper writes between our read and our write.
        for interloper in self._interloper:
            interloper()
        return found

    def list(self, *args: Any, **kwargs: Any) -> list[Object]:
        return self.api.list(*args, **kwargs)


def test_two_claimants_that_read_one_free_lease_cannot_both_win() -> None:
    api = InMemoryApi()
    lock(api).acquire(DIGEST, HOLDER_A, DURATION, None)
    lease = stored(api)
    lock(api).release(DIGEST, HOLDER_A, lease["metadata"]["annotations"][ANN_LEASE_EPOCH])
    b_state: list[LeaseState] = []
    racing = Racing(api, lambda: b_state.append(lock(api).acquire(DIGEST, HOLDER_B, 60, None)))
    a_state = lock(racing).acquire(DIGEST, HOLDER_A, DURATION, None)
    assert b_state[0].held
    assert (a_state.held, a_state.retry_after) == (False, 60)
    assert stored(api)["spec"]["holderIdentity"] == HOLDER_B


def test_conflicts_are_retried_a_bounded_number_of_times() -> None:
    api = InMemoryApi()
    holder = lock(api)
    epoch = holder.acquire(DIGEST, HOLDER_A, DURATION, None).epoch
    assert epoch is not None
    api.fail_before_write(matching("replace", LEASES), Conflict("stale"), times=MAX_ATTEMPTS - 1)
    assert holder.renew(DIGEST, HOLDER_A, DURATION, epoch).held
    api.fail_before_write(matching("replace", LEASES), Conflict("stale"), times=None)
    api.clear_calls()
    with pytest.raises(Conflict):
        holder.renew(DIGEST, HOLDER_A, DURATION, epoch)
    assert [c.verb for c in api.calls].count("replace") == MAX_ATTEMPTS


def release_setup(api: InMemoryApi) -> str:
    epoch = lock(api).acquire(DIGEST, HOLDER_A, DURATION, None).epoch
    assert epoch is not None
    return epoch


# (id, holder releasing, epoch it names relative to the tenure, whether it releases)
RELEASES: list[tuple[str, str, bool, bool]] = [
    # Control row: the exact holder and epoch hand the realm back.
    ("exact", HOLDER_A, True, True),
    ("wrong-epoch", HOLDER_A, False, False),
    ("other-holder", HOLDER_B, True, False),
]


@pytest.mark.parametrize(
    ("holder", "exact_epoch", "releases"), [r[1:] for r in RELEASES], ids=[r[0] for r in RELEASES]
)
def test_release_needs_the_exact_holder_and_epoch(
    holder: str, exact_epoch: bool, releases: bool
) -> None:
    api = InMemoryApi()
    epoch = release_setup(api)
    before = stored(api)
    api.clear_calls()
    lock(api).release(DIGEST, holder, epoch if exact_epoch else OTHER)
    after = stored(api)
    if not releases:
        assert after == before
        assert api.writes() == []
        return
    assert after["spec"]["holderIdentity"] == ""
    assert after["metadata"]["annotations"] == before["metadata"]["annotations"]
    # A released realm is free at once: no one waits out a tenure that ended.
    assert lock(api).acquire(DIGEST, HOLDER_B, DURATION, None).held


def test_releasing_a_lease_that_is_gone_is_silent() -> None:
    api = InMemoryApi()
    lock(api).release(DIGEST, HOLDER_A, EPOCH_X)
    assert api.writes() == []


def test_a_release_retries_a_conflict_and_then_releases() -> None:
    api = InMemoryApi()
    epoch = release_setup(api)
    api.fail_before_write(matching("replace", LEASES), Conflict("stale"))
    lock(api).release(DIGEST, HOLDER_A, epoch)
    assert stored(api)["spec"]["holderIdentity"] == ""


def record(**changes: Any) -> LeaseRecord:
    base: dict[str, Any] = {
        "uid": "u",
        "resource_version": "7",
        "holder": HOLDER_B,
        "duration": DURATION,
        "acquire_time": "2026-12-02T12:00:00.000000Z",
        "renew_time": "2026-12-02T12:00:00.000000Z",
        "transitions": 0,
        "epoch": EPOCH_X,
    }
    return LeaseRecord(**(base | changes))


@given(
    duration=st.integers(min_value=5, max_value=86_460),
    since=st.floats(min_value=0, max_value=1e9, allow_nan=False),
    elapsed=st.floats(min_value=0, max_value=2e5, allow_nan=False),
)
def test_a_foreign_lease_is_taken_exactly_when_our_observation_reaches_its_duration(
    duration: int, since: float, elapsed: float
) -> None:
    seen = record(duration=duration)
    now = since + elapsed
    decision = lease_decision(
        seen, holder=HOLDER_A, sighting=Sighting(seen.key, since), now=now, token=lambda: OTHER
    )
    if now - since >= duration:
        assert decision.action == "take"
    else:
        assert decision.action == "wait"
        assert decision.retry_after == pytest.approx(duration - (now - since))


@given(
    field=st.sampled_from(
        [
            "resource_version",
            "uid",
            "holder",
            "duration",
            "acquire_time",
            "renew_time",
            "transitions",
        ]
    ),
    elapsed=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_any_change_to_the_record_restarts_the_observation(field: str, elapsed: float) -> None:
    first = record()
    changed: dict[str, Any] = {
        "resource_version": "8",
        "uid": "u2",
        "holder": lease_holder("schema-uid-c", "op-c"),
        "duration": DURATION + 1,
        "acquire_time": "2026-12-02T12:00:01.000000Z",
        "renew_time": "2026-12-02T12:00:01.000000Z",
        "transitions": 1,
    }
    now = 5.0 + elapsed
    decision = lease_decision(
        record(**{field: changed[field]}),
        holder=HOLDER_A,
        sighting=Sighting(first.key, 5.0),
        now=now,
        token=lambda: OTHER,
    )
    assert decision.action == "wait"
    assert decision.sighting == Sighting(record(**{field: changed[field]}).key, now)


def test_the_pure_decision_keeps_and_takes_by_holder_and_epoch() -> None:
    def decide(seen: LeaseRecord | None) -> str:
        return lease_decision(
            seen, holder=HOLDER_A, sighting=None, now=0, token=lambda: OTHER
        ).action

    # Control row first: our own tenure under a valid epoch is kept.
    assert decide(record(holder=HOLDER_A)) == "keep"
    assert decide(None) == "create"
    assert decide(record(holder="")) == "take"
    assert decide(record(holder=HOLDER_A, epoch="bad")) == "take"
    assert decide(record()) == "wait"
