"""The Job-create rule remembers its rebuild; a remembered answer is a fresh one.

``rules.decoded_text`` remembers the decode of an exact stored text and
``jobs.Rebuilds`` the claim (and the claim's half of ``match``) that decoded owner
rebuilds to. Both are pure functions of their whole input, so every row of the
Job-create tables must get the very same Outcome (verdict, code, rule, sentence and
trail) when both memos are empty as when the same review is judged again from them;
and an owner that changed in any byte, its claim included, must rebuild again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.webhookscenes import Scene, change_owner, decide, job_create, with_claim
from tests.webhook.jobcreaterows import MIGRATION_APPLY_ROWS, SCHEMA_APPLY_ROWS
from tests.webhook.tables import Row, unchanged
from webhook import jobs
from webhook.engine import Outcome
from webhook.rules import forget_decoded_texts

# Every row of the Job-create tables, each with the scene it changes.
CASES = [("schema", "Apply", row) for row in SCHEMA_APPLY_ROWS] + [
    ("migration", "Apply", row) for row in MIGRATION_APPLY_ROWS
]
READ_ONLY = [("schema", "Plan"), ("schema", "Observe"), ("migration", "History")]


class Rebuilt:
    """Counts the rebuilds the rule really makes (the real function, counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = jobs.rebuilt_claim

        def counted(*args: Any) -> Any:
            self.count += 1
            return real(*args)

        monkeypatch.setattr(jobs, "rebuilt_claim", counted)


@pytest.fixture
def rebuilt(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rebuilt]:
    forget()
    yield Rebuilt(monkeypatch)
    forget()


def forget() -> None:
    jobs.REBUILDS.clear()
    forget_decoded_texts()


def answer(outcome: Outcome) -> tuple[Any, ...]:
    d = outcome.decision
    return (d.allowed, d.code, d.rule, d.message, d.trail, d.patch, outcome.uid)


def changed(scene: Scene, row: Row) -> Scene:
    out = scene.copy()
    row.change(out)
    return out


@pytest.mark.parametrize(("family", "operation", "row"), CASES, ids=str)
def test_a_remembered_rebuild_answers_every_row_as_a_fresh_one(
    family: str, operation: str, row: Row, rebuilt: Rebuilt
) -> None:
    scene = changed(job_create(family, operation), row)
    fresh = decide(scene)
    made = rebuilt.count
    again = decide(scene.copy())
    assert answer(again) == answer(fresh), row.name
    # The second review rebuilt nothing it had rebuilt before (a refused rebuild is
    # not remembered, so it is made again: still the same answer).
    assert rebuilt.count in (made, 2 * made), row.name
    forget()
    assert answer(decide(scene.copy())) == answer(fresh), row.name


@pytest.mark.parametrize(("family", "operation"), READ_ONLY)
def test_a_read_only_job_is_rebuilt_once_then_remembered(
    family: str, operation: str, rebuilt: Rebuilt
) -> None:
    scene = job_create(family, operation)
    first = decide(scene)
    assert first.decision.allowed and rebuilt.count == 1
    for _ in range(3):
        assert answer(decide(scene.copy())) == answer(first)
    assert rebuilt.count == 1


# Each row changes the owner the rule reads and nothing else; the control row must hit.
CHANGED_OWNER = [
    Row("the same owner", unchanged, None),
    Row(
        "another operation id",
        lambda s: change_owner(s, lambda o: with_claim(o, id="op-other")),
        None,
    ),
    Row(
        "another attempt",
        lambda s: change_owner(s, lambda o: with_claim(o, attempt=2)),
        None,
    ),
    Row(
        "only another resourceVersion",
        lambda s: s.find("PtahSchema")["metadata"].update(resourceVersion="999"),
        None,
    ),
]


@pytest.mark.parametrize("row", CHANGED_OWNER, ids=str)
def test_an_owner_changed_in_any_byte_is_rebuilt_again(row: Row, rebuilt: Rebuilt) -> None:
    scene = job_create("schema", "Plan")
    assert decide(scene).decision.allowed
    assert rebuilt.count == 1
    other = changed(scene, row)
    remembered = decide(other)
    expected_rebuilds = 1 if row.change is unchanged else 2
    assert rebuilt.count == expected_rebuilds, row.name
    forget()
    assert answer(remembered) == answer(decide(other)), row.name
