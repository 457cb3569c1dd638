"""A PtahMigration's account of an Apply: its last run, and a run nobody accounted for.

A run that ended Partial or Unknown becomes ``status.unresolvedRun``, written by
``record_unresolved_run`` alone. The record also lives outside status, in the
``operator.ptah.run/unresolved-run`` annotation, because a restore that drops status
would otherwise drop it:

1. the copy is written (metadata patch) before the status patch that stores the record;
2. the copy is removed after the status patch that settles it;
3. ``reconcile_unresolved_copy`` puts the record back when status comes back without
   it, and ``status.resolvedRun`` tells a copy an interrupted removal left (same
   attempt, settled) from one a restore brought back.

A stop after (1) leaves a copy and a live claim: the next pass finds the claim, harvests
again and writes the same record. A stop after the settling patch leaves a copy of a
settled attempt, which the next pass removes. Nothing else is ever inferred.

The record is settled only by a History reading of the same database with nothing
pending (``settle_by_history``), or by a PtahMigrationRunAcknowledgment that names the
attempt (``settle_by_acknowledgment``), after which status holds no history, so the
next plan needs a fresh reading. A migration Apply is not claimed while the record
stands (``MigrationFamily.next_claim``). Deleting a migration with a record loses it:
a Warning Event says so (``warn_record_lost``); a migration does not hold deletion.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from controller.context.passcontext import PassContext, migration_operation_of, migration_status_of
from controller.mutationlifecycle import Disposition, Stop
from controller.pieces.harvested import Harvest, history_of
from controller.stages.claimwrites import AGAIN, write_retry
from controller.stages.retirement import dispatched_apply_may_still_write, retire_migration_claim
from jobclaim import STAMPED, stamp_problem
from jobclaim.api import (
    UNRESOLVED_RUN_ANNOTATION,
    ManagerRecord,
    MigrationHistoryStatus,
    MigrationRunStatus,
    ObjectReference,
    PtahMigration,
    PtahMigrationRunAcknowledgment,
    PtahMigrationStatus,
    ResolvedMigrationRunStatus,
    UnresolvedMigrationRunStatus,
)
from jobclaim.apiserver import PTAHMIGRATIONRUNACKNOWLEDGMENTS, Conflict
from jobclaim.errors import PtahError
from jobclaim.times import parse_time, timestamp
from runner.harvest import Outcome
from runner.summary import Account


class UnreadableCopy(PtahError):
    """The annotation copy of an unresolved run cannot be read: the resource is blocked."""


def encode_copy(record: UnresolvedMigrationRunStatus) -> str:
    return json.dumps(record.to_wire(), sort_keys=True, separators=(",", ":"))


def decode_copy(text: str) -> UnresolvedMigrationRunStatus:
    try:
        return UnresolvedMigrationRunStatus.model_validate(json.loads(text))
    except (ValueError, ValidationError) as error:
        raise UnreadableCopy(f"the unresolved-run annotation cannot be read: {error}") from None


def _copy_of(ctx: PassContext[PtahMigration]) -> str | None:
    annotations = ctx.subject.metadata.annotations or {}
    value = annotations.get(UNRESOLVED_RUN_ANNOTATION)
    return value if isinstance(value, str) else None


def _write_copy(
    ctx: PassContext[PtahMigration], record: UnresolvedMigrationRunStatus | None
) -> None:
    value = encode_copy(record) if record is not None else None
    ctx.write_metadata({"annotations": {UNRESOLVED_RUN_ANNOTATION: value}})


def _last_run(
    ctx: PassContext[PtahMigration],
    outcome: str,
    versions: list[str],
    message: str | None,
    dispatched_by: ManagerRecord | None,
) -> MigrationRunStatus:
    operation = migration_operation_of(ctx)
    return MigrationRunStatus.model_validate(
        {
            "outcome": outcome,
            "job_name": operation.job_name,
            "job_uid": operation.job_uid,
            "started_at": operation.started_at,
            "finished_at": timestamp(ctx.now()),
            "applied_versions": versions,
            "dispatched_by": dispatched_by,
            "message": message,
        }
    )


def record_unresolved_run(
    ctx: PassContext[PtahMigration],
    reason: str,
    *,
    outcome: Literal["Partial", "Unknown"] = "Unknown",
    target_identity_digest: str | None = None,
    versions: list[str] | None = None,
    dispatched_by: ManagerRecord | None = None,
) -> Stop:
    """Swap an Apply claim for an unresolved record: copy first, then one status patch
    that clears the claim, stores the record and stages the release when nothing the
    claim dispatched can still write (asked before the write, never after).

    ``dispatched_by`` is the record of the Job that was read, if one was: never the
    manager writing, which after an upgrade is not the one that dispatched."""
    operation = migration_operation_of(ctx)
    status = migration_status_of(ctx)
    history = status.history
    record = UnresolvedMigrationRunStatus(
        outcome=outcome,
        operation_id=operation.id,
        job_name=operation.job_name,
        job_uid=operation.job_uid,
        plan_ref=operation.plan_ref,
        # The run's own report wins; else the last reading's.
        target_identity_digest=target_identity_digest
        or (history.target_identity_digest if history else None),
        dispatched_by=dispatched_by,
        recorded_at=timestamp(ctx.now()),
    )
    may_still_write = dispatched_apply_may_still_write(ctx)
    _write_copy(ctx, record)
    ctx.crossed("RunUnresolved", f"the run is {outcome}: {reason}", warning=True)
    return retire_migration_claim(
        ctx,
        f"the run is recorded unresolved: {reason}",
        disposition=Disposition.UNACCOUNTED,
        may_still_write=may_still_write,
        update={
            "unresolved_run": record,
            "last_run": _last_run(ctx, outcome, versions or [], reason, dispatched_by),
            "plan": None,
            "phase": "Blocked",
        },
    )


def run_outcome(account: Account) -> tuple[str, list[str]]:
    """What a read migration Apply did: its outcome and the versions it applied. Pure.

    An uncertain account is Unknown whatever outcome it names; an account without a
    run section (a refusal before the child ran) applied nothing. The versions come
    from the record only: a summary names the first and last, never the ones between.
    """
    summary = account.summary
    run = summary.migration
    recorded_run = account.recorded.result.migration_run if account.recorded else None
    versions = list(recorded_run.applied_versions) if recorded_run else []
    if summary.uncertain:
        return "Unknown", versions
    return (run.outcome if run else "Failed"), versions


def migration_outcome(ctx: PassContext[PtahMigration], harvest: Harvest) -> Stop:
    """What a migration claim's terminal Job accounts for."""
    account = harvest.account
    if ctx.info.mutating:
        if harvest.outcome is not Outcome.ACCOUNTED or account is None:
            return record_unresolved_run(
                ctx,
                harvest.reason or "no account could be read",
                dispatched_by=harvest.dispatched_by,
            )
        summary = account.summary
        outcome, versions = run_outcome(account)
        if outcome in ("Partial", "Unknown"):
            return record_unresolved_run(
                ctx,
                f"the run reported {outcome}",
                outcome="Partial" if outcome == "Partial" else "Unknown",
                target_identity_digest=summary.target_identity_digest,
                versions=versions,
                dispatched_by=harvest.dispatched_by,
            )
        return retire_migration_claim(
            ctx,
            f"the run was read: {outcome}",
            disposition=Disposition.ACCOUNTED,
            may_still_write=False,
            update={
                "last_run": _last_run(
                    ctx, outcome, versions, summary.error_code, harvest.dispatched_by
                ),
                # The reading the plan was made from is spent with it: the account
                # is settled by a History read after the run.
                "history": None,
                "plan": None,
                "phase": "VerifyingHistory",
            },
        )
    if harvest.outcome is not Outcome.ACCOUNTED or account is None or account.recorded is None:
        return write_retry(ctx, harvest.reason or "the reading gave no account")
    result = account.recorded.result
    if ctx.operation.type == "History" and result.migration_history is not None:
        return settle_by_history(ctx, result)
    return retire_migration_claim(
        ctx,
        f"{ctx.operation.type} was read",
        disposition=Disposition.ACCOUNTED,
        may_still_write=False,
    )


def settle_by_history(ctx: PassContext[PtahMigration], result: Any) -> Stop:
    """Record the reading; settle the unresolved record when it reads the same database
    with nothing pending and nothing refused. The copy goes after the patch."""
    status = migration_status_of(ctx)
    history = history_of(result, timestamp(ctx.now()))
    update: dict[str, Any] = {"history": history}
    record = status.unresolved_run
    settled = record is not None and _settles(record, history)
    if settled:
        assert record is not None
        update["unresolved_run"] = None
        update["resolved_run"] = ResolvedMigrationRunStatus(
            operation_id=record.operation_id,
            outcome=record.outcome,
            resolution="HistoryRead",
            resolved_at=timestamp(ctx.now()),
        )
        update["phase"] = "Pending"
    stop = retire_migration_claim(
        ctx,
        "the history was read" + ("; the unresolved run is settled" if settled else ""),
        disposition=Disposition.ACCOUNTED,
        may_still_write=False,
        update=update,
    )
    if settled and _copy_of(ctx) is not None:
        _write_copy(ctx, None)
    return stop


def _settles(record: UnresolvedMigrationRunStatus, history: MigrationHistoryStatus) -> bool:
    same = record.target_identity_digest is None or (
        history.target_identity_digest == record.target_identity_digest
    )
    clean = not (
        history.dirty or history.modified_versions or history.out_of_order_versions or history.ahead
    )
    return same and clean and history.pending_count == 0


def reconcile_unresolved_copy(ctx: PassContext[PtahMigration]) -> Stop | None:
    """Keep the annotation copy and status agreeing; None when they already do."""
    status = ctx.status
    if not isinstance(status, PtahMigrationStatus):
        return None
    text = _copy_of(ctx)
    record = status.unresolved_run
    if text is None:
        if record is None:
            return None
        _write_copy(ctx, record)  # a restore dropped the annotation, or it was edited away
        return Stop("the unresolved run's copy was rewritten", requeue_after=AGAIN)
    try:
        copy = decode_copy(text)
    except UnreadableCopy as error:
        ctx.crossed("UnresolvedRunCopyUnreadable", str(error), warning=True)
        return Stop("the unresolved run's copy cannot be read; the migration is blocked")
    if record is not None:
        if record == copy:
            return None
        _write_copy(ctx, record)
        return Stop("the unresolved run's copy was rewritten", requeue_after=AGAIN)
    active = status.active_operation
    if active is not None and active.id == copy.operation_id:
        # Written ahead of the patch that stores the record: the claim is still live,
        # and its harvest writes the record. Restoring now would leave both.
        return None
    resolved = status.resolved_run
    if resolved is not None and resolved.operation_id == copy.operation_id:
        # The settling patch landed and the removal did not: finish the removal.
        _write_copy(ctx, None)
        return Stop("a settled run's copy was removed", requeue_after=AGAIN)
    # Status came back without a record its copy names: restore it.
    ctx.write_status(status.model_copy(update={"unresolved_run": copy, "phase": "Blocked"}))
    ctx.crossed("UnresolvedRunRestored", f"run {copy.operation_id} was restored from its copy")
    return Stop("the unresolved run was restored from its copy", requeue_after=AGAIN)


def _created(ack: PtahMigrationRunAcknowledgment) -> datetime:
    stamp = ack.metadata.creation_timestamp or ""
    return parse_time(stamp) or datetime.max


def settle_by_acknowledgment(ctx: PassContext[PtahMigration]) -> Stop | None:
    """Settle the unresolved record by the oldest stamped acknowledgment naming it.

    Settled in the name admission stamped on it (``acknowledgedBy``): an
    acknowledgment whose stamp cannot be verified (``jobclaim.stamps.stamp_problem``)
    settles nothing, and a Warning Event says why.
    """
    status = ctx.status
    if not isinstance(status, PtahMigrationStatus) or status.unresolved_run is None:
        return None
    record = status.unresolved_run
    found: list[PtahMigrationRunAcknowledgment] = []
    for obj in ctx.api.list(PTAHMIGRATIONRUNACKNOWLEDGMENTS, ctx.namespace):
        try:
            ack = PtahMigrationRunAcknowledgment.model_validate(obj)
        except ValidationError:
            continue  # admission did not shape it: it acknowledges nothing
        spec = ack.spec
        conditions = ack.status.conditions if ack.status else []
        spent = any(c.type in ("Consumed", "Stale") and c.status == "True" for c in conditions)
        if (
            spec.migration_ref.uid != ctx.uid
            or spec.operation_id != record.operation_id
            or spent
            or ack.metadata.deletion_timestamp
        ):
            continue
        problem = stamp_problem(STAMPED[ack.kind], spec.to_wire(), ack.metadata.creation_timestamp)
        if problem is not None:
            ctx.crossed(
                "AcknowledgmentUnstamped",
                f"acknowledgment {ack.metadata.name} is skipped: {problem}",
                warning=True,
            )
            continue
        found.append(ack)
    if not found:
        return None
    ack = min(found, key=_created)
    resolved = ResolvedMigrationRunStatus(
        operation_id=record.operation_id,
        outcome=record.outcome,
        resolution="Acknowledged",
        acknowledgment_ref=ObjectReference(
            name=ack.metadata.name or "", uid=ack.metadata.uid or ""
        ),
        acknowledged_by=ack.spec.acknowledged_by,
        resolved_at=timestamp(ctx.now()),
    )
    # No history stands afterwards: the next plan needs a fresh reading.
    ctx.write_status(
        status.model_copy(
            update={
                "unresolved_run": None,
                "resolved_run": resolved,
                "history": None,
                "plan": None,
                "phase": "Pending",
            }
        )
    )
    ctx.crossed("RunAcknowledged", f"run {record.operation_id} was acknowledged")
    _consume(ctx, ack)
    _write_copy(ctx, None)
    return Stop("the unresolved run was settled by an acknowledgment", requeue_after=AGAIN)


def _consume(ctx: PassContext[PtahMigration], ack: PtahMigrationRunAcknowledgment) -> None:
    status = ack.status.to_wire() if ack.status else {}
    conditions = [c for c in status.get("conditions", []) if c.get("type") != "Consumed"]
    conditions.append(
        {
            "type": "Consumed",
            "status": "True",
            "reason": "RunAcknowledged",
            "message": "the acknowledgment settled the run it names",
            "lastTransitionTime": timestamp(ctx.now()),
        }
    )
    # A conflict means someone wrote the acknowledgment since our read; the record is
    # settled already, and an acknowledgment naming a settled attempt settles nothing.
    with contextlib.suppress(Conflict):
        ctx.api.patch_status(
            PTAHMIGRATIONRUNACKNOWLEDGMENTS,
            ctx.namespace,
            ack.metadata.name or "",
            {**status, "conditions": conditions},
            resource_version=ack.metadata.resource_version or "",
        )


def warn_record_lost(ctx: PassContext[PtahMigration]) -> None:
    """A migration being deleted with an unresolved record loses it: say so."""
    status = ctx.status
    if (
        isinstance(status, PtahMigrationStatus)
        and status.unresolved_run is not None
        and ctx.subject.metadata.deletion_timestamp
    ):
        ctx.crossed(
            "UnresolvedRunDeleted",
            f"run {status.unresolved_run.operation_id} was never settled and is deleted with "
            "its migration",
            warning=True,
        )
