"""ApiEventSink: an Event reaches the API server, and one it cannot send is said."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.pieces.events import (
    ApiEventSink,
    EventRecord,
    Regarding,
    _worth_saying,
    event_name,
    last_observed,
    occurrences,
)
from controller.runtime.reconciler import Reconciler
from jobclaim.apiserver import EVENTS
from kube.fake.faults import matching
from kube.fake.inmemory import InMemoryApi
from tests.support.dispatchworld import add_schema, make_rig

ABOUT = Regarding("operator.ptah.run/v1alpha1", "PtahSchema", "shop", "orders", "uid-1")
RECORD = EventRecord("JobCreated", "Job ptah-apply-orders was created")


def test_an_event_is_created_about_its_resource() -> None:
    api = InMemoryApi()
    sink = ApiEventSink(api, instance="manager-a")
    sink.emit(ABOUT, RECORD)
    (event,) = api.list(EVENTS, "shop")
    assert event["regarding"]["name"] == "orders"
    assert (event["reportingInstance"], event["reason"]) == ("manager-a", "JobCreated")
    assert sink.dropped == 0


def test_an_event_refused_is_counted_and_logged_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = InMemoryApi()
    api.fail_before_write(matching("create", EVENTS), times=None)
    sink = ApiEventSink(api, instance="manager-a")
    with caplog.at_level(logging.WARNING, logger="controller.pieces.events"):
        for _ in range(12):
            sink.emit(ABOUT, RECORD)
    assert sink.dropped == 12 and api.list(EVENTS, "shop") == []
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2  # the first drop and the tenth
    assert "PtahSchema shop/orders could not be sent (1 dropped so far)" in said[0]
    assert "(10 dropped so far)" in said[1]


@pytest.mark.parametrize(
    ("dropped", "said"),
    [(1, True), (2, False), (9, False), (10, True), (11, False), (100, True), (200, False)],
)
def test_a_steady_failure_is_said_at_each_power_of_ten(dropped: int, said: bool) -> None:
    assert _worth_saying(dropped) is said


SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@given(
    st.from_regex(SUBDOMAIN, fullmatch=True).filter(lambda name: len(name) <= 253),
    st.text("0123456789abcdef", min_size=16, max_size=16),
)
def test_an_events_name_is_a_valid_subdomain_for_any_resource_name(
    regarding: str, nonce: str
) -> None:
    name = event_name(regarding, nonce)
    assert SUBDOMAIN.fullmatch(name) and len(name) <= 253, name
    assert name.endswith(f".{nonce}")


def test_an_event_is_named_by_the_sink_never_by_generate_name() -> None:
    api = InMemoryApi()
    ApiEventSink(api, instance="manager-a").emit(ABOUT, RECORD)
    (event,) = api.list(EVENTS, "shop")
    assert re.fullmatch(r"orders\.[0-9a-f]{16}", event["metadata"]["name"])


# -- aggregation: one Event per (object, reason, message), with a count ---------------

OTHER_NOTE = EventRecord("JobCreated", "Job ptah-apply-orders-2 was created")
OTHER_REASON = EventRecord("RealmBusy", "Job ptah-apply-orders was created")
WARNING = EventRecord("JobCreated", "Job ptah-apply-orders was created", "Warning")
OTHER_OBJECT = Regarding("operator.ptah.run/v1alpha1", "PtahSchema", "shop", "users", "uid-2")


def ticking() -> Callable[[], datetime]:
    """A wall clock one second later at each reading."""
    moments = (datetime(2026, 12, 5, tzinfo=UTC) + timedelta(seconds=s) for s in count())
    return lambda: next(moments)


def counts(api: InMemoryApi) -> list[tuple[str, str, int]]:
    """(reason, note, occurrences) per stored Event."""
    return sorted((e["reason"], e["note"], occurrences(e)) for e in api.list(EVENTS, "shop"))


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        ((ABOUT, RECORD), [("JobCreated", RECORD.note, 3)]),
        (
            (ABOUT, OTHER_NOTE),
            [("JobCreated", OTHER_NOTE.note, 1), ("JobCreated", RECORD.note, 2)],
        ),
        (
            (ABOUT, OTHER_REASON),
            [("JobCreated", RECORD.note, 2), ("RealmBusy", RECORD.note, 1)],
        ),
        ((ABOUT, WARNING), [("JobCreated", RECORD.note, 2), ("JobCreated", RECORD.note, 1)]),
        ((OTHER_OBJECT, RECORD), [("JobCreated", RECORD.note, 1), ("JobCreated", RECORD.note, 2)]),
    ],
    ids=["same-again", "other-message", "other-reason", "other-type", "other-object"],
)
def test_a_repeat_counts_on_its_event_and_anything_else_is_its_own(
    second: tuple[Regarding, EventRecord], expected: list[tuple[str, str, int]]
) -> None:
    api = InMemoryApi()
    sink = ApiEventSink(api, instance="manager-a", wall=ticking())
    sink.emit(ABOUT, RECORD)
    sink.emit(*second)
    sink.emit(ABOUT, RECORD)
    assert counts(api) == sorted(expected) and sink.dropped == 0


def test_a_series_says_when_it_was_last_seen_and_keeps_its_first_time() -> None:
    api = InMemoryApi()
    sink = ApiEventSink(api, instance="manager-a", wall=ticking())
    for _ in range(4):
        sink.emit(ABOUT, RECORD)
    (event,) = api.list(EVENTS, "shop")
    assert event["eventTime"] == "2026-12-05T00:00:00.000000Z"
    assert event["series"] == {"count": 4, "lastObservedTime": "2026-12-05T00:00:03.000000Z"}
    assert (occurrences(event), last_observed(event)) == (4, "2026-12-05T00:00:03.000000Z")


def test_an_event_said_once_is_one_occurrence_at_its_own_time() -> None:
    api = InMemoryApi()
    ApiEventSink(api, instance="manager-a", wall=ticking()).emit(ABOUT, RECORD)
    (event,) = api.list(EVENTS, "shop")
    assert (occurrences(event), last_observed(event)) == (1, "2026-12-05T00:00:00.000000Z")


def test_an_expired_event_starts_a_new_one() -> None:
    api = InMemoryApi()
    sink = ApiEventSink(api, instance="manager-a", wall=ticking())
    sink.emit(ABOUT, RECORD)
    sink.emit(ABOUT, RECORD)
    (first,) = api.list(EVENTS, "shop")
    api.delete(EVENTS, "shop", first["metadata"]["name"])  # the API server's event TTL
    sink.emit(ABOUT, RECORD)
    sink.emit(ABOUT, RECORD)
    (second,) = api.list(EVENTS, "shop")
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["series"]["count"] == 2 and sink.dropped == 0


def test_a_lost_patch_is_dropped_and_the_next_one_carries_the_true_count() -> None:
    api = InMemoryApi()
    sink = ApiEventSink(api, instance="manager-a", wall=ticking())
    sink.emit(ABOUT, RECORD)
    api.fail_before_write(matching("patch_fields", EVENTS))
    sink.emit(ABOUT, RECORD)  # raises nothing: counted as dropped
    assert sink.dropped == 1 and counts(api) == [("JobCreated", RECORD.note, 1)]
    sink.emit(ABOUT, RECORD)
    assert counts(api) == [("JobCreated", RECORD.note, 3)]


def test_a_forgotten_key_starts_a_new_event() -> None:
    # The memory is bounded: a sink that remembers one key forgets ABOUT's when
    # OTHER_OBJECT's is sent, so ABOUT's repeat is a new Event rather than a patch.
    api = InMemoryApi()
    sink = ApiEventSink(api, instance="manager-a", wall=ticking(), memory=1)
    sink.emit(ABOUT, RECORD)
    sink.emit(OTHER_OBJECT, RECORD)
    sink.emit(ABOUT, RECORD)
    assert counts(api) == [("JobCreated", RECORD.note, 1)] * 3


def test_ten_minutes_on_a_busy_realm_are_one_realm_busy_event_with_its_count() -> None:
    # Issue #32: a resource waiting for a busy realm once sent a new RealmBusy Event
    # every pass (12 a minute). Two schemas share one realm; the first one's Apply
    # holds it (its Job runs, nothing finishes it) while the second looks again at
    # every retry its stop asks for, for ten minutes of the rig's clock.
    rig = make_rig()
    sink = ApiEventSink(rig.api, instance="manager-a", wall=rig.clocks.wall)
    reconciler = Reconciler(rig.env, sink)
    holder = add_schema(rig, "first", coordination_key="shared")
    waiter = add_schema(rig, "second", coordination_key="shared")
    for _ in range(10):
        reconciler.reconcile(holder)
    assert len(rig.jobs()) == 1  # the first one's Apply holds the realm
    waited, passes = 0.0, 0
    while waited < 600:
        reconciler.reconcile(holder)  # the holder renews its Lease, as its passes do
        stop = reconciler.reconcile(waiter)
        if stop.reason != "another claim holds the database realm":
            continue  # the waiter's own claim steps before the Lease
        passes += 1
        assert stop.requeue_after is not None and stop.requeue_after > 0
        rig.clocks.advance(stop.requeue_after)
        waited += stop.requeue_after
    busy = [e for e in rig.api.list(EVENTS, rig.namespace) if e["reason"] == "RealmBusy"]
    assert passes >= 100  # every five seconds, as the retry asks
    (event,) = busy
    assert occurrences(event) == passes
    assert event["regarding"]["name"] == "second"
