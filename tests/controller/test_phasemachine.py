"""The phase machine, row by row, and the rules that hold for every input.

Every row of ``controller.pieces.phasemachine.ROWS`` is walked through ``decide``, and the
table in ``docs/architecture.md`` must be exactly the one the rows render, so the
document cannot describe a machine the code does not run.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.pieces.phasemachine import (
    ROWS,
    Event,
    Facts,
    FamilyName,
    Row,
    Wait,
    decide,
    render_table,
)

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _id(row: Row) -> str:
    return f"{row.facts.family}:{row.before}:{row.event.name}"


@pytest.mark.parametrize("row", ROWS, ids=[_id(r) for r in ROWS])
def test_every_row_is_what_decide_answers(row: Row) -> None:
    decision = decide(row.facts)
    assert (decision.event, decision.phase, decision.claim, decision.discard_plan) == (
        row.event,
        row.after,
        row.claim,
        row.discard_plan,
    )


def test_the_rows_cover_every_event_of_both_families() -> None:
    for family in ("schema", "migration"):
        seen = {row.event for row in ROWS if row.facts.family == family}
        # A schema has no unresolved runs and no History to refuse planning.
        absent = (
            {Event.RUN_UNRESOLVED, Event.RUN_UNRESOLVED_READ, Event.READING_REFUSES}
            if family == "schema"
            else set()
        )
        assert seen == set(Event) - absent, family


def test_the_document_carries_the_table_the_rows_render() -> None:
    text = ARCHITECTURE.read_text()
    assert "## The phase machine" in text
    assert render_table() in text


def test_a_row_that_lies_is_caught() -> None:
    # Control for the walk: a row claiming Apply before anything is verified fails.
    lying = Row(
        "Pending",
        Facts("schema", plan=True, approval_found=True),
        Event.APPROVED,
        "Applying",
        "Apply",
    )
    decision = decide(lying.facts)
    assert (decision.event, decision.claim) != (lying.event, lying.claim)


_BOOLS = [f.name for f in fields(Facts) if f.name != "family"]


@st.composite
def any_facts(draw: st.DrawFn) -> Facts:
    family: FamilyName = draw(st.sampled_from(["schema", "migration"]))
    flags = {name: draw(st.booleans()) for name in _BOOLS}
    return Facts(family, **flags)


@given(any_facts())
def test_apply_is_claimed_only_for_an_authorized_plan_over_verified_readings(facts: Facts) -> None:
    decision = decide(facts)
    if decision.claim != "Apply":
        return
    assert facts.plan and facts.resolved and facts.verified
    assert not (facts.suspended or facts.spec_changed or facts.retry_not_due or facts.apply_never)
    assert facts.approval_found or not facts.needs_approval
    assert not (facts.family == "migration" and facts.run_unresolved)


@given(any_facts())
def test_suspension_claims_nothing_and_a_spec_change_resolves_again(facts: Facts) -> None:
    decision = decide(facts)
    if facts.suspended:
        assert decision.claim is None and decision.phase == "Suspended"
    elif facts.spec_changed:
        assert decision.claim == "Resolve"
        assert decision.discard_plan == facts.plan
    else:
        assert not decision.discard_plan


@given(any_facts())
def test_a_failed_reading_claims_nothing_until_its_retry_time(facts: Facts) -> None:
    waiting = replace(facts, suspended=False, spec_changed=False, retry_not_due=True)
    decision = decide(waiting)
    assert decision.claim is None and decision.wait is Wait.RETRY


@given(any_facts())
def test_a_decision_that_claims_nothing_says_what_it_waits_for(facts: Facts) -> None:
    decision = decide(facts)
    assert (decision.claim is None) == (decision.wait is not Wait.NONE)
