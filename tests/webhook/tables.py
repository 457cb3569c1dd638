"""Table rows: a control row admitted first, then one change per row refused with its
sentence. Tables are module-level ``*ROWS`` lists, which the coverage test reads to
prove each registered sentence is produced by some row."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.webhookscenes import Scene, decide
from webhook import Outcome, Refusal

Change = Callable[[Scene], None]


def unchanged(scene: Scene) -> None:
    """The control row: the scene as built."""


@dataclass(frozen=True)
class Row:
    name: str
    change: Change
    refusal: Refusal | None
    # A substring the sentence must also hold (the filled-in placeholder, usually).
    detail: str = ""

    def __str__(self) -> str:
        return self.name


def pattern(refusal: Refusal) -> re.Pattern[str]:
    """The template as a regex: each ``{placeholder}`` stands for any non-empty text."""
    parts = re.split(r"\{\w+\}", refusal.template)
    return re.compile(".+".join(re.escape(p) for p in parts), re.DOTALL)


def expect(row: Row, scene: Scene, endpoint: str = "controller-write") -> Outcome:
    """Apply ``row`` to a copy of ``scene`` and hold the answer to what the row expects."""
    changed = scene.copy()
    row.change(changed)
    outcome = decide(changed, endpoint)
    decision = outcome.decision
    if row.refusal is None:
        assert decision.allowed, f"{row.name}: refused: {decision.message}"
        assert (decision.code, outcome.http_status) == (200, 200)
        return outcome
    assert not decision.allowed, f"{row.name}: admitted, expected {row.refusal.template!r}"
    assert pattern(row.refusal).fullmatch(decision.message), (
        f"{row.name}: {decision.message!r} is not {row.refusal.template!r}"
    )
    assert (decision.rule, decision.code) == (row.refusal.rule, row.refusal.code)
    assert row.detail in decision.message, f"{row.name}: {decision.message!r} lacks {row.detail!r}"
    return outcome
