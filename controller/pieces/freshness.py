"""Freshness: when what a resource stands on must be read again, and whether a new
reading shows that it moved. Pure.

A plan is made from three readings: the artifact a reference resolved to, the
database a reading compared with it, and (for a migration) the history it found. Each
may move after the plan is made: a tag is pushed to new bytes, someone changes the
database by hand, a history is restored backwards. So while a resource waits (in
sync, or with a plan awaiting an approval, Blocked or ready to apply) each of them is
read again every ``spec.interval``:

- a reference that is not pinned by digest is resolved again (``source_due``); a
  digest pinned in the spec names its bytes for ever and needs no Resolve;
- the database is read again (the schema's Observe, the migration's History) by the
  phase machine's ``reading_due``, now also while a plan stands.

A reading that differs from the one the plan was made from retires the plan that was
not applied, and marks its approvals Stale, in the write that records the reading
(``controller.stages.readings``): no approval authorizes work against a source or a
database nobody reviewed. A refresh that fails leaves its "due" standing, so nothing
above it is claimed (no approval consumed, no Apply) until the retried reading
succeeds: the resource fails closed while its freshness is unknown.

A migration history is refused for planning, with its reason, when it is dirty, an
applied file was modified, a version is out of order, or the database is ahead of the
artifact (``history_refusal``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final, Literal

from jobclaim.api import DriftObservationStatus, MigrationHistoryStatus

HistoryRefusal = Literal["HistoryDirty", "HistoryModified", "HistoryOutOfOrder", "HistoryAhead"]

# The readings whose failure leaves a resource's freshness unknown: the source's own
# (Resolve) and the database's (Observe, Plan, History).
SOURCE_READING: Final = "Resolve"
DATABASE_READINGS: Final = frozenset({"Observe", "Plan", "History"})


def digest_pinned(reference: str) -> bool:
    """Whether the reference names its bytes by digest (``repo@sha256:...``): nothing
    can move under it, so it is resolved once per spec."""
    _, at, digest = reference.rpartition("@")
    return bool(at) and digest.startswith("sha256:")


def source_due(reference: str, checked_at: datetime | None, now: datetime, interval: float) -> bool:
    """Whether a resolved reference is to be resolved again now: a mutable one, not
    read within the last interval (with no time to count from, the ladder's own
    Resolve is the reading: not due)."""
    if digest_pinned(reference) or checked_at is None:
        return False
    return now >= checked_at + timedelta(seconds=interval)


def history_refusal(history: MigrationHistoryStatus | None) -> HistoryRefusal | None:
    """Why a history reading refuses planning, or None. The first that holds wins."""
    if history is None:
        return None
    if history.dirty:
        return "HistoryDirty"
    if history.modified_versions:
        return "HistoryModified"
    if history.out_of_order_versions:
        return "HistoryOutOfOrder"
    if history.ahead:
        return "HistoryAhead"
    return None


def observation_moved(before: DriftObservationStatus | None, after: DriftObservationStatus) -> bool:
    """Whether a drift reading shows a database other than the one ``before`` read:
    another artifact, another database identity, or other findings. A reading with
    nothing to compare with has moved (fail closed: the plan is made again)."""
    if before is None:
        return True
    return (
        before.artifact_digest,
        before.target_identity_digest,
        before.drift,
        before.highest_severity,
        before.finding_count,
        before.report_digest,
    ) != (
        after.artifact_digest,
        after.target_identity_digest,
        after.drift,
        after.highest_severity,
        after.finding_count,
        after.report_digest,
    )
