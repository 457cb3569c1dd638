"""The manager's pure decisions: leadership by the renew deadline, liveness, trust,
the shutdown budget, the pass outcome label and the log line."""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime, timedelta

import orjson
import pytest

import certs
from controller.mutationlifecycle import Stop
from controller.runtime.leaderelection import LeaderElector, holds_leadership
from controller.runtime.reconciler import Key
from jobclaim.errors import InvalidInput
from kube.fake.inmemory import InMemoryApi
from manager import logs
from manager.health import ControllerSnapshot, liveness_problems, trust_problems
from manager.metrics import outcome_of
from manager.process import shutdown_plan
from webhook.observability import DECISION_LOGGER

K = Key("PtahSchema", "shop", "orders")


def test_a_leader_stops_at_its_renew_deadline_before_the_lease_can_lapse() -> None:
    now = [0.0]
    api = InMemoryApi()
    leader, other = (
        LeaderElector(
            api,
            "ns",
            "lead",
            identity,
            duration_seconds=15,
            renew_deadline_seconds=10,
            retry_period_seconds=2,
            clock=lambda: now[0],
        )
        for identity in ("one", "two")
    )
    assert leader.try_acquire_or_renew()
    assert not other.try_acquire_or_renew()  # starts its own count at 0
    now[0] = 9.9
    assert leader.leading and leader.seconds_left() == pytest.approx(0.1)
    now[0] = 10.0
    assert not leader.leading  # deadline reached: stop working
    now[0] = 14.9
    assert not other.try_acquire_or_renew()  # and the Lease is still not anybody else's
    now[0] = 15.0
    assert other.try_acquire_or_renew()


@pytest.mark.parametrize(
    ("renewed", "now", "holds"), [(None, 0.0, False), (0.0, 9.99, True), (0.0, 10.0, False)]
)
def test_holds_leadership(renewed: float | None, now: float, holds: bool) -> None:
    assert holds_leadership(renewed, now, 10.0) is holds


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"), [(15, 15, 2), (15, 10, 10), (15, 10, 0), (0, 10, 2)]
)
def test_durations_that_cannot_work_are_refused(
    duration: int, deadline: float, retry: float
) -> None:
    with pytest.raises(InvalidInput):
        LeaderElector(
            InMemoryApi(),
            "ns",
            "l",
            "me",
            duration_seconds=duration,
            renew_deadline_seconds=deadline,
            retry_period_seconds=retry,
        )


def snapshot(**changes: object) -> ControllerSnapshot:
    base: dict[str, object] = {
        "now": 100.0,
        "loop_alive": True,
        "stopping": False,
        "last_turn": 99.0,
        "passes": {},
    }
    base.update(changes)
    return ControllerSnapshot(**base)  # type: ignore[arg-type]


LIVENESS = [
    ("live", {}, []),
    ("a pass within the period", {"passes": {1: (K, 41.0)}}, []),
    (
        "a wedged pass",
        {"passes": {1: (K, 40.0)}},
        ["a pass over PtahSchema shop/orders has run for 60s"],
    ),
    ("a still loop", {"last_turn": 40.0}, ["the controller loop has not turned for 60s"]),
    ("an ended loop", {"loop_alive": False}, ["the controller loop has ended"]),
    ("stopping on purpose", {"loop_alive": False, "stopping": True}, []),
]


@pytest.mark.parametrize(
    ("change", "problems"), [r[1:] for r in LIVENESS], ids=[r[0] for r in LIVENESS]
)
def test_liveness(change: dict[str, object], problems: list[str]) -> None:
    assert liveness_problems(snapshot(**change), stall_seconds=60.0) == problems


def test_trust_is_by_the_issuing_ca() -> None:
    now = datetime.now(UTC)
    ca, other = certs.generate_ca(now=now), certs.generate_ca(now=now)
    leaf = certs.issue_serving_certificate(ca, dns_names=["x"], now=now, validity=timedelta(days=1))
    both = ca.cert_pem() + other.cert_pem()
    bundles = {"good": both, "wrong": other.cert_pem(), "empty": b""}
    assert trust_problems(leaf.certificate, bundles) == [
        "the caBundle of webhook configuration empty does not trust it",
        "the caBundle of webhook configuration wrong does not trust it",
    ]


def test_the_shutdown_budget_keeps_the_drain_short() -> None:
    assert shutdown_plan(25.0) == shutdown_plan(25.0)
    plan = shutdown_plan(25.0)
    assert (plan.controller_seconds, plan.drain_seconds) == (20.0, 5.0)
    small = shutdown_plan(4.0)
    assert (small.controller_seconds, small.drain_seconds) == (3.0, 1.0)


def test_pass_outcomes() -> None:
    assert outcome_of(Stop("x", error=ValueError())) == "error"
    assert outcome_of(Stop("x", requeue_after=0.0)) == "requeued"
    assert outcome_of(Stop("x")) == "waiting"


def test_one_json_line_per_event_with_decisions_merged() -> None:
    stream = io.StringIO()
    logs.configure("info", stream)
    try:
        logging.getLogger("controller").debug("not at info")
        logging.getLogger(DECISION_LOGGER).info('{"event":"admission.decision","rule":"r"}')
        try:
            raise ValueError("boom\nsecond line")
        except ValueError:
            logging.getLogger("controller").exception("a pass failed")
    finally:
        logging.getLogger().handlers.clear()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    decision, failure = (orjson.loads(line) for line in lines)
    assert (decision["event"], decision["rule"], decision["level"]) == (
        "admission.decision",
        "r",
        "info",
    )
    assert "message" not in decision
    assert failure["message"] == "a pass failed"
    assert "boom" in failure["exception"]
