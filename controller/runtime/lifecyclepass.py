"""One pass over one PtahSchema or PtahMigration, in the order the records demand.

1. A release a retiring write staged (``pendingLockRelease``) is performed first, so
   the realm is never held by a record nobody acts on.
2. A migration's unresolved record and its annotation copy are made to agree (a
   restore that dropped status gets the record back); a migration being deleted with
   one says so by a Warning Event.
3. A finalizer no record explains is removed before anything else.
4. The execution binding is installed on first sight (the pass then ends); a binding
   that changed is rotated, and a schema's retirement record is worked off.
5. A standing claim is supervised (and harvested once its Job is terminal); one whose
   Job does not exist yet and that has not dispatched goes through the dispatch
   sequence.
6. The family's record of an earlier run is worked toward its end
   (``Family.settle_record``): a schema's pending observation is proved, before
   suspension and the generation gate; a migration's unresolved run is settled by an
   acknowledgment naming it.
7. Otherwise the phase machine decides what to claim next (``planning.advance``):
   the next reading, or the Apply of an authorized plan, and the claim is persisted.

Every read is uncached and every pass starts from the resource as stored: watches
only say that something may have changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from controller.context import passlog
from controller.context.passcontext import Environment, Family, PassContext
from controller.families.migration.dispatch import MIGRATION
from controller.families.schema.dispatch import SCHEMA
from controller.mutationlifecycle import ClaimView, Stop, may_have_dispatched
from controller.pieces.events import Regarding
from controller.pieces.managerconfig import random_epoch
from controller.stages.binding_rotation import rotate
from controller.stages.claimsupervision import supervise
from controller.stages.claimwrites import (
    AGAIN,
    claim_operation,
    complete_pending_release,
    remove_orphan_finalizer,
    retire_undispatched,
)
from controller.stages.dispatch_steps import DispatchPass
from controller.stages.planning import advance
from controller.stages.realmgate import gate_new_claim
from jobclaim.api import API_VERSION
from jobclaim.apiserver import ApiError, NotFound
from jobclaim.errors import PtahError

FAMILIES: Final[dict[str, Family[Any]]] = {SCHEMA.kind: SCHEMA, MIGRATION.kind: MIGRATION}


@dataclass(frozen=True, slots=True)
class PassResult:
    stop: Stop
    ctx: PassContext | None

    @property
    def regarding(self) -> Regarding | None:
        if self.ctx is None:
            return None
        return Regarding(
            API_VERSION, self.ctx.family.kind, self.ctx.namespace, self.ctx.name, self.ctx.uid
        )


def _load(env: Environment, kind: str, namespace: str, name: str) -> PassContext | Stop:
    family = FAMILIES.get(kind)
    if family is None:
        return Stop(f"{kind} is not a kind this operator reconciles")
    try:
        obj = env.api.get(family.resource, namespace, name)
    except NotFound:
        return Stop("the resource is gone")
    except ApiError as error:
        return Stop("the resource cannot be read", error=error)
    # Parsed and its records read in one go: the pass decides from both.
    subject, records = family.read(obj)
    return PassContext(env, family, subject, records=records)


def run_pass(env: Environment, kind: str, namespace: str, name: str) -> PassResult:
    """One pass over the named resource."""
    loaded = _load(env, kind, namespace, name)
    if isinstance(loaded, Stop):
        return PassResult(loaded, None)
    passlog.note(loaded.subject)
    try:
        return PassResult(_pass(loaded), loaded)
    except (ApiError, PtahError) as error:
        # Whatever the pass made durable stays; a refusal to build a record (a claim an
        # older build wrote without its realm binding) leaves the claim live and renewed.
        return PassResult(Stop("the pass could not finish", error=error), loaded)


def request_claim(
    env: Environment, kind: str, namespace: str, name: str, operation: str
) -> PassResult:
    """Claim ``operation`` (any type the family's operation table defines) on a
    resource with no claim; the reconciler's passes then dispatch it."""
    loaded = _load(env, kind, namespace, name)
    if isinstance(loaded, Stop):
        return PassResult(loaded, None)
    try:
        # A claim asked for by name meets the realm gate too: naming the operation must
        # not be a way around the realm that refuses the resource.
        stop = _prelude(loaded) or gate_new_claim(loaded)
        if stop is None:
            stop = _requested(loaded, operation)
        return PassResult(stop, loaded)
    except (ApiError, PtahError) as error:
        return PassResult(Stop("the claim could not be made", error=error), loaded)


def _requested(ctx: PassContext, operation: str) -> Stop:
    if not ctx.info_for(operation).mutating:
        return claim_operation(ctx, operation)
    # Mutating work is claimed only with the approval the family finds for it: asking
    # for it by name must not be a way around the approval.
    wanted = ctx.family.next_claim(ctx)
    if isinstance(wanted, Stop):
        return wanted
    if wanted is None or wanted[0] != operation:
        return Stop(f"{operation} is not authorized for this resource now")
    return claim_operation(ctx, operation, wanted[1])


def _prelude(ctx: PassContext) -> Stop | None:
    status = ctx.status
    if status is not None and status.pending_lock_release is not None:
        return complete_pending_release(ctx)
    stop = ctx.family.prelude(ctx)
    if stop is not None:
        return stop
    stop = remove_orphan_finalizer(ctx)
    if stop is not None:
        return stop
    return _ensure_binding(ctx) or rotate(ctx)


def _ensure_binding(ctx: PassContext) -> Stop | None:
    """Install the execution binding the first time a resource is seen."""
    if ctx.subject.metadata.deletion_timestamp or ctx.binding is not None:
        return None
    status = ctx.status
    if status is None:
        status = ctx.family.empty_status()
    make_epoch = ctx.env.epochs
    binding = ctx.env.config.binding.install(make_epoch() if make_epoch else random_epoch())
    ctx.write_status(status.model_copy(update={"execution_binding": binding, "phase": "Pending"}))
    ctx.crossed("ExecutionBindingInstalled", f"work here runs under epoch {binding.epoch}")
    return Stop("the execution binding is installed", requeue_after=AGAIN)


def _pass(ctx: PassContext) -> Stop:
    stop = _prelude(ctx)
    if stop is not None:
        return stop
    status = ctx.status
    if status is not None and status.active_operation is not None:
        return _active(ctx)
    stop = ctx.family.settle_record(ctx)
    if stop is not None:
        return stop
    if ctx.subject.metadata.deletion_timestamp:
        return Stop("the resource is being deleted")
    binding = ctx.binding
    if binding is None or not ctx.env.config.binding.matches(binding):
        return Stop("the execution binding changed; nothing is claimed until it rotates")
    # The realm census comes after the proof (settle_record), so a schema owing proof
    # is never overtaken by it, and before anything new is claimed.
    return gate_new_claim(ctx) or advance(ctx)


def _active(ctx: PassContext) -> Stop:
    operation = ctx.operation
    if not ctx.info.known:
        # A newer operator's claim: neither run nor discarded, since this build cannot
        # say what it is or whether it may have written.
        return Stop(f"the claim names {operation.type!r}, which this operator does not define")
    dispatched = may_have_dispatched(
        dispatch_started=operation.dispatch_started, job_uid=operation.job_uid
    )
    if ctx.subject.metadata.deletion_timestamp and not dispatched:
        return retire_undispatched(ctx, "the resource is being deleted")
    stop = supervise(ctx, dispatched=dispatched)
    if stop is not None:
        return stop
    binding = ctx.binding
    if binding is None or not ctx.env.config.binding.matches(binding):
        return Stop("the execution binding changed; the claim waits for its rotation")
    steps = DispatchPass(ctx)
    view = ClaimView.of(
        ctx.family.name, operation, ctx.info, proof_outstanding=ctx.proof_outstanding
    )
    return ctx.env.driver.dispatch(view, steps)
