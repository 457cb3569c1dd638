"""``/readyz``'s verdict over the recorded facts: one row passes, each other row changes
one fact and is refused with its sentence. The facts are recorded off the probe's path
(``manager.readiness``); tests/realapi/test_readiness_slow_api.py runs the manager
against a slow and then a gone API server."""

from __future__ import annotations

import threading

import pytest

from jobclaim.apiserver import Unavailable
from kube.fake.inmemory import InMemoryApi
from manager.health import ApiFacts, api_problems
from manager.readiness import ReadinessFacts

WINDOW = 60.0

ROWS: list[tuple[str, ApiFacts, list[str]]] = [
    ("read 5 s ago: ready", ApiFacts(now=100.0, last_read=95.0), []),
    (
        "read 5 s ago, one read failed since: still ready",
        ApiFacts(now=100.0, last_read=95.0, last_error="timed out"),
        [],
    ),
    (
        "never read",
        ApiFacts(now=100.0),
        ["the API server has not been read yet"],
    ),
    (
        "never read, and why",
        ApiFacts(now=100.0, last_error="connection refused"),
        ["the API server has not been read yet; the last read failed: connection refused"],
    ),
    (
        "last read beyond the window",
        ApiFacts(now=100.0, last_read=30.0, last_error="timed out"),
        [
            "the API server has not been read for 70s (more than 60s); "
            "the last read failed: timed out"
        ],
    ),
]


@pytest.mark.parametrize(("facts", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_readiness_is_judged_by_how_fresh_the_facts_are(
    facts: ApiFacts, expected: list[str]
) -> None:
    assert api_problems(facts, WINDOW) == expected


class FailingApi(InMemoryApi):
    """The API server's answers, or, while ``failing``, its unavailability."""

    failing = False

    def get(self, *args: object, **kwargs: object) -> dict[str, object]:
        if self.failing:
            raise Unavailable("no answer from the API server: timed out")
        return super().get(*args, **kwargs)  # type: ignore[arg-type]


def test_the_record_keeps_the_last_success_through_failures() -> None:
    now = [10.0]
    api = FailingApi()
    facts = ReadinessFacts(api, namespace="ptah-system", clock=lambda: now[0])
    facts.refresh()  # the probe name is absent: NotFound is a successful read
    now[0] = 20.0
    api.failing = True
    facts.refresh()
    snapshot = facts.snapshot()
    assert (snapshot.last_read, snapshot.now, facts.reads) == (10.0, 20.0, 2)
    assert snapshot.last_error == "no answer from the api server: timed out"
    api.failing = False
    facts.refresh()
    assert facts.snapshot().last_read == 20.0 and facts.snapshot().last_error is None


def test_the_refresher_stops_with_the_process() -> None:
    facts = ReadinessFacts(InMemoryApi(), namespace="ptah-system")
    stopping = threading.Event()
    thread = threading.Thread(target=facts.run, args=(stopping, 0.01))
    thread.start()
    assert facts.wait_for_reads(3, timeout=10.0)
    stopping.set()
    thread.join(timeout=10.0)
    assert not thread.is_alive()
