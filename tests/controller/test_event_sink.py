"""ApiEventSink: an Event reaches the API server, and one it cannot send is said."""

from __future__ import annotations

import logging

import pytest

from controller.events import ApiEventSink, EventRecord, Regarding, _worth_saying
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
