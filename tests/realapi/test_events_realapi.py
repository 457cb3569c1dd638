"""The manager's Events reach a real API server.

Every Event the manager sent was refused on a current API server (its ``generateName``
``orders.`` is validated as a name and ends in a dot), and since Events never fail a
pass, nothing but a log line said so. This sends them through the same sink, to the
real server, for a short name and the longest name a resource may have.
"""

from __future__ import annotations

import pytest

from controller.pieces.events import ApiEventSink, EventRecord, Regarding
from jobclaim.apiserver import EVENTS
from kube.client import KubeApi
from lab.localplane import LocalControlPlane
from tests.support.realapioperator import Operator, operator  # noqa: F401

pytestmark = pytest.mark.controlplane


@pytest.mark.parametrize("name", ["orders", "o" * 253])
def test_the_sinks_events_are_stored_by_the_api_server(
    control_plane: LocalControlPlane, namespace: str, name: str
) -> None:
    about = Regarding("operator.ptah.run/v1alpha1", "PtahSchema", namespace, name, "uid-1")
    with KubeApi.from_kubeconfig(control_plane.kubeconfig("admin")) as api:
        sink = ApiEventSink(api, instance="manager-a")
        sink.emit(about, EventRecord("JobCreated", "Job ptah-apply-orders was created"))
        sink.emit(about, EventRecord("DispatchWithdrawn", "the create was refused", "Warning"))
        assert sink.dropped == 0
        stored = api.list(EVENTS, namespace)
    assert sorted((e["reason"], e["type"], e["regarding"]["name"]) for e in stored) == [
        ("DispatchWithdrawn", "Warning", name),
        ("JobCreated", "Normal", name),
    ]


def test_a_repeat_is_one_event_with_a_series_count_on_the_api_server(
    operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    # The API server validates a series (count >= 2, lastObservedTime set) and the
    # patch that updates it, and the manager's identity holds the chart's grant
    # (create and patch, no get): the fake checks none of that.
    about = Regarding("operator.ptah.run/v1alpha1", "PtahSchema", namespace, "orders", "uid-1")
    busy = EventRecord("RealmBusy", "another claim holds the database realm")
    sink = ApiEventSink(operator.manager, instance="manager-a")
    for _ in range(5):
        sink.emit(about, busy)
    sink.emit(about, EventRecord("RealmBusy", "another message"))
    assert sink.dropped == 0
    stored = operator.admin.list(EVENTS, namespace)
    assert sorted((e["note"], e.get("series", {}).get("count", 1)) for e in stored) == [
        ("another claim holds the database realm", 5),
        ("another message", 1),
    ]
    (series,) = [e["series"] for e in stored if "series" in e]
    assert series["lastObservedTime"] >= next(e["eventTime"] for e in stored if "series" in e)
