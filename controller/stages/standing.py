"""What a resource that holds no claim stands at: its records reduced to the phase
machine's facts, and what it publishes (phase, conditions, next reconciliation time).

``planning.advance`` publishes it when a pass claims nothing, and a reading's
retirement carries it in the patch that retires the claim (``standing_update``), so a
quiet reading ends in one status write rather than a retirement followed by a
publication. Both ask the same functions here, so they publish the same thing, and
the pass after a folded retirement computes exactly what is stored and writes
nothing. Nothing here reads the API.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final

from controller.context.passcontext import PassContext, Status
from controller.pieces.freshness import source_due
from controller.pieces.phasemachine import Decision, Event, Facts, Wait, decide
from controller.stages.conditions import conditions_for
from jobclaim import requested_reference, resolved_artifact
from jobclaim.times import parse_duration, parse_time, timestamp

DEFAULT_INTERVAL: Final = 600.0
# Events whose claim the family re-reads first (the plan and its approvals): a
# decision on one of them is never published without that re-read.
PLAN_EVENTS: Final = frozenset({Event.AWAITING_APPROVAL, Event.APPROVED, Event.NEEDS_NO_APPROVAL})


def _at(value: str | None) -> datetime | None:
    return parse_time(value) if value else None


def interval_seconds(ctx: PassContext) -> float:
    try:
        return parse_duration(ctx.subject.spec.interval)
    except ValueError:
        return DEFAULT_INTERVAL


def last_reading(ctx: PassContext) -> datetime | None:
    """When the rung above Verify was last read (``Family.last_reading``)."""
    return ctx.family.last_reading(ctx)


def _source_checked(ctx: PassContext) -> datetime | None:
    """When the reference was last read. A status written before the time was recorded
    counts from its last reading (the artifact was current when that was made), so an
    upgrade does not resolve every resource at once."""
    status = ctx.status
    checked = _at(status.source_checked_at) if status else None
    return checked or last_reading(ctx)


def _source_due_at(ctx: PassContext) -> datetime | None:
    """When a resolved tag is next resolved; None for a digest-pinned reference."""
    if ctx.pinned or resolved_artifact(ctx.subject) is None:
        return None
    checked = _source_checked(ctx)
    return checked + timedelta(seconds=interval_seconds(ctx)) if checked else None


def _retry_at(ctx: PassContext) -> datetime | None:
    status = ctx.status
    failure = status.reading_failure if status else None
    return _at(failure.retry_not_before) if failure else None


def facts_of(ctx: PassContext) -> Facts:
    """The records of the resource, reduced to what the machine decides from."""
    subject = ctx.subject
    status = ctx.status
    facts = ctx.family.facts(ctx)
    assert status is not None  # the family's facts read it
    now = ctx.now()
    retry_at = _retry_at(ctx)
    last = last_reading(ctx)
    return replace(
        facts,
        suspended=subject.spec.suspend,
        spec_changed=subject.metadata.generation != status.observed_generation,
        retry_not_due=retry_at is not None and now < retry_at,
        reading_due=last is not None and now >= last + timedelta(seconds=interval_seconds(ctx)),
        source_due=facts.resolved
        and source_due(
            requested_reference(subject), _source_checked(ctx), now, interval_seconds(ctx)
        ),
    )


def due_at(ctx: PassContext, decision: Decision) -> datetime | None:
    """When the next pass is due for a decision that claims nothing."""
    if decision.wait is Wait.RETRY:
        return _retry_at(ctx)
    if decision.wait is Wait.INTERVAL:
        # The database's reading (a waiting plan's too: its refresh) and a tag's
        # resolution are each due an interval after they were last made: the next
        # pass is the earlier.
        last = last_reading(ctx)
        times = [last + timedelta(seconds=interval_seconds(ctx)) if last else None]
        times.append(_source_due_at(ctx))
        known = [t for t in times if t is not None]
        return min(known) if known else None
    return None


def published(ctx: PassContext, status: Status, decision: Decision) -> dict[str, Any]:
    """The phase, conditions and next reconciliation time ``decision`` publishes over
    ``status`` (as the pass leaves it). Pure."""
    due = due_at(_over(ctx, status), decision)
    update: dict[str, Any] = {
        "phase": decision.phase,
        "next_reconciliation_time": timestamp(due) if due else None,
    }
    update["conditions"] = conditions_for(
        ctx.family,
        ctx.subject,
        status.model_copy(update=update),
        decision,
        now=timestamp(ctx.now()),
    )
    return update


def standing_update(ctx: PassContext, status: Status) -> dict[str, Any]:
    """What the pass after a retirement leaving ``status`` would publish, when that
    pass would claim nothing and read nothing first; else nothing (that pass decides,
    and its claim patch or its publication carries it).

    A decision about a standing plan is left to that pass: the family re-reads the plan
    and its approvals uncached before it is published. So is one that discards a plan,
    since it marks approvals Stale first.
    """
    decision = decide(facts_of(_over(ctx, status)))
    if decision.claim is not None or decision.discard_plan or decision.event in PLAN_EVENTS:
        return {}
    return published(ctx, status, decision)


def _over(ctx: PassContext, status: Status) -> PassContext:
    """The pass's view with ``status`` in place of the stored one."""
    return replace(ctx, subject=ctx.subject.model_copy(update={"status": status}))
