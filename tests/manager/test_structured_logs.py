"""Every log line is one JSON object; a line said during a pass names its resource.

The controller's stages log through ``logging`` without passing the resource along;
the pass's fields (``controller.passlog``) join every line of the pass, and the
summary line of a pass that crossed a boundary is said at info. The rotator's lines
are the same JSON.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from controller.passlog import pass_fields
from manager import logs, rotator
from tests.controller.dispatchworld import add_migration, make_rig


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


def test_the_rotator_says_its_lines_as_json(lines: io.StringIO) -> None:
    rotator._said("written after: the serving certificate was renewed")
    (line,) = parsed(lines)
    assert line["logger"] == "manager.rotator" and line["level"] == "info"
