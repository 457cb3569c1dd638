"""Every log line is one JSON object; a line said during a pass names its resource.

The controller's stages log through ``logging`` without passing the resource along;
the pass's fields (``controller.context.passlog``) join every line of the pass, and the
summary line of a pass that crossed a boundary is said at info. A leader transition
is said both ways. The rotator's lines are the same JSON.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import orjson
import pytest

from controller.context.passlog import pass_fields
from controller.runtime.leaderelection import LeaderElector
from controller.runtime.reconciler import Reconciler, Unobserved
from manager import logs, rotator
from tests.support.dispatchworld import (
    LEASE_NS,
    NS,
    Clocks,
    add_migration,
    add_schema,
    make_rig,
)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    logs.configure("debug", stream)
    yield stream
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def parsed(stream: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_outside_a_pass_names_no_resource(lines: io.StringIO) -> None:
    logging.getLogger("controller.somewhere").info("hello")
    (line,) = parsed(lines)
    assert line["message"] == "hello" and "resource" not in line


def test_a_line_inside_a_pass_carries_the_pass_fields(lines: io.StringIO) -> None:
    with pass_fields("PtahSchema", "team-a", "orders") as fields:
        fields.update(operation="Apply", attempt=2, phase="Applying")
        logging.getLogger("controller.somewhere").warning("deep in a stage")
    (line,) = parsed(lines)
    assert {k: line[k] for k in ("kind", "namespace", "resource", "operation", "attempt")} == {
        "kind": "PtahSchema",
        "namespace": "team-a",
        "resource": "orders",
        "operation": "Apply",
        "attempt": 2,
    }
    assert line["phase"] == "Applying"


def test_a_pass_that_claims_is_said_at_info_with_its_claim(lines: io.StringIO) -> None:
    rig = make_rig()
    key = add_migration(rig)
    for _ in range(10):
        if rig.reconciler.process(key).requeue_after != 0.0:
            break
    passes = [
        line
        for line in parsed(lines)
        if str(line.get("message", "")).startswith("pass:") and line["level"] == "info"
    ]
    claimed = [line for line in passes if "Claimed" in line["events"]]  # type: ignore[operator]
    assert claimed, passes
    assert claimed[0]["resource"] == key.name and claimed[0]["namespace"] == key.namespace
    assert claimed[0]["operation"] and claimed[0]["attempt"] == 1


PASS_KEYS = ("kind", "namespace", "resource", "phase", "operation", "operationId", "attempt")


def test_every_line_of_a_pass_has_the_same_keys_null_until_known(lines: io.StringIO) -> None:
    rig = make_rig()
    waiting = add_schema(rig, approve=False)  # no claim: its plan waits for a person
    claiming = add_migration(rig)
    rig.reconciler.process(waiting)
    rig.reconciler.process(claiming)
    with pass_fields("PtahSchema", NS, "unread"):
        logging.getLogger("controller.somewhere").info("before the resource is read")
    said = [line for line in parsed(lines) if "resource" in line]
    assert {line["resource"] for line in said} == {waiting.name, claiming.name, "unread"}
    for line in said:
        assert set(PASS_KEYS) <= set(line), line
    unread = next(line for line in said if line["resource"] == "unread")
    assert unread["phase"] is None and unread["operation"] is None
    last = {line["resource"]: line for line in said}
    assert (last[waiting.name]["operation"], last[waiting.name]["attempt"]) == (None, None)
    assert last[waiting.name]["phase"] == "AwaitingApproval"
    assert (last[claiming.name]["operation"], last[claiming.name]["attempt"]) == ("Apply", 1)


def test_the_rotator_says_its_lines_as_json(lines: io.StringIO) -> None:
    rotator._said("written after: the serving certificate was renewed")
    (line,) = parsed(lines)
    assert line["logger"] == "manager.rotator" and line["level"] == "info"


class _TakenOver(Unobserved):
    """An observer whose first leading turn lets another replica take the Lease over:
    the leader's next renewal then fails, and the loop ends on its own."""

    def __init__(self, leader: LeaderElector, other: LeaderElector, clocks: Clocks) -> None:
        self.leader, self.other, self.clocks = leader, other, clocks

    def loop_turned(self, leading: bool) -> None:
        if leading and not self.other.leading:
            assert not self.other.try_acquire_or_renew()  # its first sighting of the holder
            self.clocks.advance(self.leader.duration)
            assert self.other.try_acquire_or_renew()


def test_a_leader_transition_is_said_when_won_and_when_lost(lines: io.StringIO) -> None:
    rig = make_rig()
    clock = rig.clocks.monotonic
    leader = LeaderElector(rig.api, LEASE_NS, "ptah-leader", "manager-0", clock=clock)
    other = LeaderElector(rig.api, LEASE_NS, "ptah-leader", "manager-1", clock=clock)
    observer = _TakenOver(leader, other, rig.clocks)
    reconciler = Reconciler(
        rig.env, rig.sink, namespace=NS, elector=leader, observer=observer, watch_pause=0.01
    )
    reconciler.run(threading.Event())  # returns once leadership is lost
    said = [
        (line["level"], line["message"], line.get("identity"))
        for line in parsed(lines)
        if line["logger"] == "controller.runtime.reconciler"
    ]
    assert ("info", "became leader", "manager-0") in said
    assert ("warning", "leadership lost; stopping the workers", None) in said
    assert said.index(("info", "became leader", "manager-0")) < said.index(
        ("warning", "leadership lost; stopping the workers", None)
    )
