"""The double's test surface: injected faults, the call log and its clock.

These exist only on the double, so they are tested here rather than in the
conformance suite. Each fault is checked for what the caller sees and, separately,
for what the store holds afterwards, because the two differ exactly when a write
happened and its answer was lost.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    LEASES,
    PODS,
    PTAHSCHEMAS,
    ApiError,
    NotFound,
    Refused,
    Unavailable,
)
from kube.fake.faults import Request
from kube.fake.inmemory import InMemoryApi, matching

NS = "ns"


def schema(api: InMemoryApi) -> str:
    """A PtahSchema with an empty status; returns its resourceVersion."""
    made = api.create(PTAHSCHEMAS, NS, {"metadata": {"name": "s"}, "spec": {}})
    return str(made["metadata"]["resourceVersion"])


Arm = Callable[[InMemoryApi], object]
# (id, the fault, the error the create raises or None, whether the object is stored)
FAULTS: list[tuple[str, Arm, type[ApiError] | None, bool]] = [
    # Control row: a fault aimed elsewhere leaves the create alone.
    ("aimed-elsewhere", lambda a: a.fail_before_write(matching("create", JOBS)), None, True),
    (
        "before-refused",
        lambda a: a.fail_before_write(matching("create"), Refused("denied by a webhook")),
        Refused,
        False,
    ),
    ("before-default", lambda a: a.fail_before_write(matching("create")), Unavailable, False),
    ("after", lambda a: a.fail_after_write(matching("create", CONFIGMAPS)), Unavailable, True),
    ("stop", lambda a: a.stop_after_write(matching(name="c")), Unavailable, True),
    # A read fault never touches a write.
    ("read-only", lambda a: a.fail_read(matching(resource=CONFIGMAPS)), None, True),
]


@pytest.mark.parametrize(
    ("arm", "raised", "stored"), [row[1:] for row in FAULTS], ids=[row[0] for row in FAULTS]
)
def test_a_fault_decides_what_the_caller_sees_and_what_is_stored(
    arm: Arm, raised: type[ApiError] | None, stored: bool
) -> None:
    api = InMemoryApi()
    arm(api)
    if raised is None:
        api.create(CONFIGMAPS, NS, {"metadata": {"name": "c"}})
    else:
        with pytest.raises(raised):
            api.create(CONFIGMAPS, NS, {"metadata": {"name": "c"}})
    assert (api.peek(CONFIGMAPS, NS, "c") is not None) is stored


def test_a_fault_can_target_the_status_patch_that_marks_dispatch() -> None:
    api = InMemoryApi()
    version = schema(api)
    marking = matching(
        "patch_status",
        PTAHSCHEMAS,
        body=lambda status: bool(status.get("activeOperation", {}).get("dispatchStarted")),
    )
    fault = api.stop_after_write(marking)
    claimed = api.patch_status(
        PTAHSCHEMAS, NS, "s", {"activeOperation": {"id": "op"}}, resource_version=version
    )
    assert fault.fired == 0
    with pytest.raises(Unavailable):
        api.patch_status(
            PTAHSCHEMAS,
            NS,
            "s",
            {"activeOperation": {"id": "op", "dispatchStarted": True}},
            resource_version=claimed["metadata"]["resourceVersion"],
        )
    assert fault.fired == 1
    # The process is down: nothing answers, not even a read.
    with pytest.raises(Unavailable):
        api.get(PTAHSCHEMAS, NS, "s")
    api.restart()
    # The mark is durable: the next pass sees it.
    status = api.get(PTAHSCHEMAS, NS, "s")["status"]
    assert status == {"activeOperation": {"id": "op", "dispatchStarted": True}}


@pytest.mark.parametrize(("times", "failures"), [(1, 1), (2, 2), (None, 4)])
def test_a_fault_fires_as_many_times_as_asked(times: int | None, failures: int) -> None:
    api = InMemoryApi()
    api.create(LEASES, NS, {"metadata": {"name": "l"}})
    fault = api.fail_read(matching("get", LEASES), times=times)
    outcomes = []
    for _ in range(4):
        try:
            api.get(LEASES, NS, "l")
            outcomes.append("ok")
        except Unavailable:
            outcomes.append("failed")
    assert outcomes == ["failed"] * failures + ["ok"] * (4 - failures)
    assert fault.fired == failures


@pytest.mark.parametrize(
    "read",
    [
        lambda a: a.get(PODS, NS, "p"),
        lambda a: a.list(PODS, NS),
        lambda a: a.watch(PODS, NS),
    ],
    ids=["get", "list", "watch"],
)
def test_every_read_verb_can_fail(read: Callable[[InMemoryApi], object]) -> None:
    api = InMemoryApi()
    api.fail_read(matching(resource=PODS), NotFound("gone"))
    with pytest.raises(NotFound, match="gone"):
        read(api)


def test_the_call_log_records_order_and_outcome() -> None:
    api = InMemoryApi()
    api.fail_after_write(matching("patch_metadata"))
    api.create(CONFIGMAPS, NS, {"metadata": {"name": "c"}})
    with pytest.raises(Unavailable):
        api.patch_metadata(CONFIGMAPS, NS, "c", {"finalizers": ["x.io/f"]})
    with pytest.raises(NotFound):
        api.get(CONFIGMAPS, NS, "missing")
    assert api.peek(CONFIGMAPS, NS, "c") is not None  # not a call: not logged
    assert [str(c) for c in api.calls] == [
        "create configmaps ns/c ok",
        "patch_metadata configmaps ns/c failed (Unavailable)",
        "get configmaps ns/missing failed (NotFound)",
    ]
    # A lost answer still wrote: write-order tests see it.
    assert [(c.verb, c.wrote) for c in api.writes()] == [
        ("create", True),
        ("patch_metadata", True),
    ]
    api.clear_calls()
    assert api.calls == ()


def test_a_predicate_sees_the_whole_request() -> None:
    api = InMemoryApi()
    seen: list[Request] = []

    def record(request: Request) -> bool:
        seen.append(request)
        return False

    api.fail_before_write(record)
    api.create(CONFIGMAPS, NS, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    [request] = seen
    assert (request.verb, request.resource, request.namespace, request.name) == (
        "create",
        CONFIGMAPS,
        NS,
        "c",
    )
    assert request.body["data"] == {"k": "v"}


def test_a_watch_ends_once_it_has_caught_up() -> None:
    api = InMemoryApi()
    created = api.create(CONFIGMAPS, NS, {"metadata": {"name": "a"}})
    api.delete(CONFIGMAPS, NS, "a")
    stream = api.watch(CONFIGMAPS, NS, resource_version=created["metadata"]["resourceVersion"])
    assert [e.type for e in stream] == ["DELETED"]


def test_a_watch_sees_changes_made_while_it_is_read() -> None:
    api = InMemoryApi()
    stream = api.watch(CONFIGMAPS, NS)
    api.create(CONFIGMAPS, NS, {"metadata": {"name": "a"}})
    assert [(e.type, e.object["metadata"]["name"]) for e in stream] == [("ADDED", "a")]


def test_timestamps_come_from_the_injected_clock() -> None:
    api = InMemoryApi(clock=lambda: datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC))
    api.create(CONFIGMAPS, NS, {"metadata": {"name": "c", "finalizers": ["x.io/f"]}})
    api.delete(CONFIGMAPS, NS, "c")
    meta = api.get(CONFIGMAPS, NS, "c")["metadata"]
    assert meta["creationTimestamp"] == meta["deletionTimestamp"] == "2026-12-02T12:00:00Z"


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda a: a.get(CONFIGMAPS, None, "c"), "namespace must be given"),
        (lambda a: a.replace(CONFIGMAPS, NS, {"metadata": {"name": "c"}}), "resourceVersion"),
        (lambda a: a.patch_status(PTAHSCHEMAS, NS, "s", {}, resource_version=""), "decided at"),
    ],
    ids=["namespaced-without-namespace", "replace-without-version", "status-without-version"],
)
def test_a_programming_error_is_a_value_error_as_in_the_adapter(
    call: Callable[[InMemoryApi], object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        call(InMemoryApi())
