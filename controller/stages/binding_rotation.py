"""Execution-binding rotation: work authorized under one epoch never finishes under
another.

A change of the executor image, the Ptah version, the runner protocol or the
controller-state version (``BindingInputs.matches`` says no) installs a new epoch.

This module holds what both families share: when a rotation is due (``rotate``) and
the pieces of its write. Each family's rotation is its own
(``Family.rotate_binding``):

A migration leaves nothing behind (``controller/families/migration/dispatch.py``). A
dispatched Apply is recorded unresolved first (its own pass, through
``record_unresolved_run``); the epoch then moves on a later pass, in one write that
also drops any other claim (staging the release it owes) and the plan made under
the old epoch.

A schema (``controller/families/schema/rotation.py``) names what it leaves in the
write that installs the epoch, as
``status.pendingBindingRetirement``: the retired plan (its approvals are still to be
marked stale) and the Job the retired claim dispatched, by name and, once known, UID.
A dispatched Apply becomes an unknown-outcome pending observation in that same write.
``work_off`` then meets one obligation per pass, removing each as it is met and the
record with its last one:

- the retired plan's approvals are marked stale;
- a read-only claim stays until a Job under the recorded name has stopped (its Lease
  renewed meanwhile), then goes, its Job given the cleanup TTL only when the Job
  carries the retired epoch and the claim's admission snapshot;
- an Apply's Job is adopted by UID from a late create, or given up at the record's
  ObserveAfter horizon, and its TTL set once it stops; the proof claims nothing and
  renews the Apply's Lease meanwhile.

No other rotation starts while the record stands, so it names exactly one retired
epoch. No condition reason or phase takes part in any of it.
"""

from __future__ import annotations

from typing import Any

from controller.context.passcontext import (
    PassContext,
    Status,
)
from controller.mutationlifecycle import (
    Stop,
    may_have_dispatched,
)
from controller.pieces.managerconfig import random_epoch
from controller.stages.claimwrites import AGAIN, complete_pending_release, discard_release


def new_binding(ctx: PassContext) -> Any:
    make_epoch = ctx.env.epochs
    return ctx.env.config.binding.install(make_epoch() if make_epoch else random_epoch())


def discarded(ctx: PassContext, status: Status) -> dict[str, Any]:
    """The claim dropped, with the release a discard owes staged in the same write."""
    update: dict[str, Any] = {"active_operation": None}
    release = discard_release(ctx)
    if release is not None:
        update["pending_lock_release"] = release
    return update


def finish_rotation(ctx: PassContext, reason: str) -> Stop:
    status = ctx.status
    if status is not None and status.pending_lock_release is not None:
        complete_pending_release(ctx)
    return Stop(reason, requeue_after=AGAIN)


def rotate(ctx: PassContext) -> Stop | None:
    """Rotate the binding, or work off what a rotated one still owes; None when neither
    is due."""
    status = ctx.status
    binding = ctx.binding
    if status is None or binding is None:
        return None
    if ctx.binding_retirement is None:
        if ctx.env.config.binding.matches(binding):
            return None
        active = status.active_operation
        if active is not None and not ctx.info.known:
            return Stop("a claim this operator does not define holds the old epoch")
    # The family rotates, or works off what its last rotation still owes (only a
    # schema records anything: ``controller/families/schema/rotation.py``).
    return ctx.family.rotate_binding(ctx)


def dispatched(ctx: PassContext) -> bool:
    operation = ctx.operation
    return may_have_dispatched(
        dispatch_started=operation.dispatch_started, job_uid=operation.job_uid
    )
