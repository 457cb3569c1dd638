"""ApiEventSink: an Event reaches the API server, and one it cannot send is said."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.events import ApiEventSink, EventRecord, Regarding, _worth_saying, event_name
from jobclaim.apiserver import EVENTS
from kube.fake.faults import matching
from kube.fake.inmemory import InMemoryApi

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
    with caplog.at_level(logging.WARNING, logger="controller.events"):
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
