"""Persisting a claim, and keeping its Lease tenure readable.

A claim is written before its Job exists, in two writes and in this order:

1. the finalizer, by a metadata patch, so the resource cannot vanish under a claim;
2. the claim, by a status patch, carrying the Job's deterministic name.

A process that stops between them leaves a finalizer with no claim. The next pass
removes it before anything else (``remove_orphan_finalizer``): a finalizer that no
record explains would hold deletion forever, and a claim is never inferred from one.
A read-only claim that holds no Lease takes no finalizer (``claim_holds_deletion``):
it owes no outcome and no release, so its claim is the one write, and a stop right
after it leaves a claim that proceeds, exactly as for any other claim.

The claim also carries the Lease epoch it expects, a placeholder derived from its
operation ID, before any acquisition. What an acquisition or renewal then found is
decided by ``epoch_update``: before dispatch a different epoch is adopted silently,
because nothing ran; after dispatch it latches ``leaseContinuityLost``, because a run
whose realm changed hands under it can no longer be read as this claim's.

Retiring a claim that never dispatched is the other end: the write that retires it
clears it and stages the Lease release it owes (``status.pendingLockRelease``) in
one status patch, and the release follows that write, never leads it. A process that
stops between the two leaves the record, which the top of the next pass performs
(``complete_pending_release``); the other order would hand the database back while a
claim still reads as live. Which release is owed is ``mutationlifecycle.Retirement``'s
decision. A claim that may have dispatched is not retired here: its run has to be
accounted for first (issue 5's records), and ``retire_undispatched`` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from controller.context.passcontext import (
    Approval,
    Operation,
    PassContext,
    Status,
    migration_of,
    schema_of,
)
from controller.mutationlifecycle import (
    ClaimView,
    Disposition,
    MayHaveDispatched,
    RealmHolder,
    Stop,
    may_have_dispatched,
    owed_release,
    snapshot_is_first_write,
)
from controller.pieces.operationidentity import input_fingerprint
from controller.pieces.podintent import AdmissionUnresolvable, resolve_snapshot
from controller.pieces.targetlock import LeaseState
from jobclaim import (
    active_job_inputs,
    build_job,
    coordination_digest,
    job_name,
    lease_holder,
    operation_info,
    reaches_registry,
    sha256_digest,
)
from jobclaim.api import (
    DatabaseTargetSpec,
    TargetLockReleaseStatus,
)
from jobclaim.apiserver import CONFIGMAPS, ApiError, NotFound
from jobclaim.errors import InvalidInput, PtahError
from jobclaim.times import timestamp

# A status-only write wakes no watch a controller filters on generation; the pass
# that wrote asks to be run again at once instead.
AGAIN = 0.0


class UnknownOperation(PtahError):
    """A claim was asked for an operation type the operation table does not define."""


def placeholder_epoch(operation_id: str) -> str:
    """The epoch a claim expects before it first holds the Lease: derived from its own
    operation ID, so no tenure anyone else began can carry it."""
    return "v1-" + operation_id.removeprefix("sha256:")[:32]


def target_digest(target: DatabaseTargetSpec, namespace: str) -> str:
    return coordination_digest(
        engine=target.engine,
        namespace=namespace,
        coordination_key=target.coordination_key,
        realm=target.realm_ref.name if target.realm_ref else None,
    )


def form_claim(ctx: PassContext, operation: str, inputs: Mapping[str, Any] | None) -> Operation:
    """A new claim of ``operation``: its ID, fingerprint, reserved Job name and realm
    binding, formed the same way for both families (each adds only what differs)."""
    binding = ctx.binding
    if binding is None or inputs is None:
        raise InvalidInput(f"a {operation} claim cannot be formed from this {ctx.family.name} yet")
    fingerprint = input_fingerprint(inputs)
    nonce = ctx.env.entropy(16)
    started_at = timestamp(ctx.now())
    claim = ctx.family.operation(
        ctx,
        operation=operation,
        fingerprint=fingerprint,
        epoch=binding.epoch,
        nonce=nonce,
        started_at=started_at,
    )
    fields = {**realm_fields(ctx, operation, claim.id), **registry_ca_fields(ctx, operation)}
    return claim.model_copy(update=fields)


class RegistryCAUnreadable(PtahError):
    """The registry CA bundle the spec names cannot be read, so no claim can pin it."""


def registry_ca_fields(ctx: PassContext, operation: str) -> dict[str, Any]:
    """The registry CA bundle's digest, pinned by a new claim whose Pod reaches the registry.

    Read when the claim is made, like the verification policy a plan binds: the Job
    carries the digest (``jobclaim.builder``), so the webhook admits only a Job that
    trusts the bundle the claim pinned, and the runner refuses to start Resolve or
    Verify when the mounted bundle is another. A bundle that cannot be read makes no
    claim: the pass stops and says why, and nothing runs without the CA it was given.
    """
    family = ctx.family.name
    source = schema_of(ctx).spec.desired if family == "schema" else migration_of(ctx).spec.artifact
    transport = source.transport
    selector = transport.ca_from if transport else None
    runner = operation_info(family, operation).runner_operation
    if selector is None or not reaches_registry(runner):
        return {}
    try:
        obj = ctx.api.get(CONFIGMAPS, ctx.namespace, selector.name)
    except NotFound as error:
        raise RegistryCAUnreadable(
            f"the registry CA ConfigMap {selector.name} does not exist"
        ) from error
    data = (obj.get("data") or {}).get(selector.key)
    if not isinstance(data, str) or not data.strip():
        raise RegistryCAUnreadable(
            f"the registry CA ConfigMap {selector.name} holds no {selector.key}"
        )
    return {"registry_ca_digest": sha256_digest(data.encode("utf-8"))}


def realm_fields(ctx: PassContext, operation: str, operation_id: str) -> dict[str, Any]:
    """The realm binding and windows a new claim persists before any acquisition."""
    family = ctx.family.name
    info = operation_info(family, operation)
    config = ctx.env.config
    fields: dict[str, Any] = {
        "coordination_digest": target_digest(ctx.subject.spec.target, ctx.namespace),
    }
    pending = ctx.pending_proof
    if pending is not None and info.serves_proof:
        # A proof's reading runs under the Apply's own realm binding and tenure.
        fields["coordination_digest"] = pending.coordination_digest
        fields["lease_duration_seconds"] = pending.lease_duration_seconds
        fields["lease_epoch"] = pending.lease_epoch
    elif info.holds_lock(False):
        fields["lease_duration_seconds"] = config.lease_duration(family, operation)
        fields["lease_epoch"] = placeholder_epoch(operation_id)
    if info.mutating:
        # An Apply may start only within its window, and the runner stops it at the end.
        deadline = ctx.later(config.apply_window_seconds)
        fields["dispatch_not_after"] = deadline
        fields["execution_not_after"] = deadline
    return fields


def claim_holds_deletion(family: str, operation: Operation | None) -> bool:
    """Whether a claim needs the finalizer. Pure.

    The finalizer keeps the resource, and so the claim, readable while something the
    claim does still has to be accounted for or handed back: a mutating run's outcome,
    the realm's Lease. A read-only claim that holds no Lease owes neither: deleting
    the resource under it loses only a reading nobody will use, and its Job, owned by
    the resource, goes with it. So it takes no finalizer, and a quiet reading costs no
    metadata write on either side of it. A type this build does not define answers
    yes: what it owes cannot be known, so deletion is held for it.
    """
    if operation is None:
        return False
    info = operation_info(family, operation.type)
    return not (info.read_only and operation.lease_epoch is None)


def finalizer_owed(ctx: PassContext, status: Status | None = None) -> bool:
    """Whether a claim or record on the resource (as ``status`` leaves it, else as
    stored) still needs its finalizer."""
    if status is not None:
        ctx = replace(ctx, subject=ctx.subject.model_copy(update={"status": status}))
    status = ctx.status
    if status is None:
        return False
    owed: list[object] = [status.pending_lock_release]
    if claim_holds_deletion(ctx.family.name, status.active_operation):
        owed.append(status.active_operation)
    owed.append(ctx.pending_proof)
    owed.append(ctx.binding_retirement)
    if not ctx.subject.metadata.deletion_timestamp:
        # A migration does not hold deletion for its unresolved run, but a pass must
        # see the deletion to announce the loss: the finalizer stays until then and
        # comes off in the pass that sees it.
        owed.append(getattr(status, "unresolved_run", None))
    return any(record is not None for record in owed)


def _finalizers(ctx: PassContext) -> list[str]:
    return list(ctx.subject.metadata.finalizers or [])


def remove_orphan_finalizer(ctx: PassContext) -> Stop | None:
    """Remove our finalizer when no record explains it; the pass then ends."""
    finalizers = _finalizers(ctx)
    if ctx.family.finalizer not in finalizers or finalizer_owed(ctx):
        return None
    remaining = [f for f in finalizers if f != ctx.family.finalizer]
    ctx.write_metadata({"finalizers": remaining or None})
    ctx.crossed("FinalizerRemoved", "no claim or record holds the resource any longer")
    return Stop("a finalizer with no claim was removed", requeue_after=AGAIN)


def claim_operation(
    ctx: PassContext,
    operation: str,
    approval: Approval | None = None,
    *,
    update: Mapping[str, Any] | None = None,
) -> Stop:
    """Persist a claim of ``operation``: the finalizer first, then the claim.

    Any operation type of the family's table may be claimed; a type the table does
    not define is refused here, because no later step could say what it is.
    ``update`` is what else the claim's status patch publishes (conditions, a plan
    discarded); the claim and its phase are the family's.
    """
    info = operation_info(ctx.family.name, operation)
    if not info.known:
        raise UnknownOperation(f"{operation!r} is not a {ctx.family.name} operation")
    status = ctx.status
    if status is not None and status.active_operation is not None:
        return Stop("the resource already holds a claim")
    claimed = ctx.family.new_claim(ctx, operation, approval)
    if update:
        claimed = claimed.model_copy(
            update={
                **update,
                "phase": claimed.phase,
                "active_operation": claimed.active_operation,
            }
        )
    claimed = _with_admission_snapshot(ctx, claimed)
    finalizers = _finalizers(ctx)
    if ctx.family.finalizer not in finalizers and finalizer_owed(ctx, claimed):
        ctx.write_metadata({"finalizers": [*finalizers, ctx.family.finalizer]})
    ctx.write_status(claimed)
    ctx.crossed("Claimed", f"{operation} claimed as {ctx.operation.job_name}")
    snapshot = ctx.operation.admission_snapshot
    if snapshot is not None:
        ctx.crossed("AdmissionResolved", f"admission snapshot {snapshot.digest} is durable")
    return Stop("the claim is persisted; nothing external has happened", requeue_after=AGAIN)


def _with_admission_snapshot(ctx: PassContext, claimed: Status) -> Status:
    """The claim, carrying its Pod admission snapshot when the snapshot would be its
    dispatch's first durable write (``snapshot_is_first_write``: no Lease, no plan to
    stage). One status patch then persists both, and a stop right after it leaves a
    claim with its snapshot and no Job: the next pass authorizes, finds the snapshot
    pinning the template it builds, and creates. Each boundary still holds: the claim
    names its Job before the Job exists, and the pass that made the snapshot durable
    creates nothing. A snapshot that cannot be resolved now is left to the snapshot
    step, which retries it and says why.
    """
    view = replace(ctx, subject=ctx.subject.model_copy(update={"status": claimed}))
    claim = view.operation
    first = ClaimView.of(
        ctx.family.name, claim, view.info, proof_outstanding=view.proof_outstanding
    )
    if not snapshot_is_first_write(first):
        return claimed
    try:
        inputs = active_job_inputs(
            view.subject, binding=view.binding, manager=ctx.env.config.manager
        )
        template = build_job(inputs)["spec"]["template"]
        snapshot = resolve_snapshot(ctx.api, ctx.namespace, template, ctx.env.config.admission)
    except (InvalidInput, AdmissionUnresolvable, ApiError):
        return claimed
    operation = view.operation.model_copy(update={"admission_snapshot": snapshot})
    return claimed.model_copy(update={"active_operation": operation})


def epoch_update(
    operation: Operation, state: LeaseState, *, dispatched: bool
) -> dict[str, Any] | None:
    """What a held Lease means for the claim's persisted tenure, or None when it is the
    tenure the claim already names. Pure."""
    if not state.held:
        # Not holding the realm is only a loss once something may be running; a loss
        # already latched is not written again.
        if dispatched and not operation.lease_continuity_lost:
            return {"lease_continuity_lost": True}
        return None
    same = state.epoch == operation.lease_epoch and not state.continuity_lost
    if same:
        return None
    if not dispatched:
        # Before dispatch nothing ran under the old expectation: adopt the new tenure.
        return {"lease_epoch": state.epoch}
    # After dispatch the realm may have changed hands under the run: the tenure now
    # held is recorded (a release needs its exact epoch) and the loss is latched.
    if operation.lease_continuity_lost and state.epoch == operation.lease_epoch:
        return None
    return {"lease_epoch": state.epoch, "lease_continuity_lost": True}


def retry_attempt(ctx: PassContext) -> Operation:
    """A read-only claim's next attempt: a new Job name, nothing dispatched yet.

    The old Job is left to its own deadline; the new name keeps the two apart.
    """
    operation = ctx.operation
    if not ctx.info.read_only:
        raise InvalidInput("only a read-only claim runs again under a new attempt")
    attempt = operation.attempt + 1
    name = job_name(
        family=ctx.family.name,
        owner_name=ctx.name,
        owner_uid=ctx.uid,
        operation=operation.type,
        operation_id=operation.id,
        epoch=operation.execution_binding_id,
        input_fingerprint=operation.input_fingerprint,
        attempt=attempt,
    )
    return operation.model_copy(
        update={
            "attempt": attempt,
            "job_name": name,
            "job_uid": None,
            "dispatch_started": False,
            # The new attempt has run nothing: its lease step adopts the tenure it finds,
            # and a loss latched under the old attempt would end it before it ran.
            "lease_continuity_lost": False,
            "started_at": timestamp(ctx.now()),
        }
    )


def write_retry(ctx: PassContext, reason: str) -> Stop:
    status = ctx.status
    assert status is not None
    retried = retry_attempt(ctx)
    updated: Status = status.model_copy(update={"active_operation": retried})
    ctx.write_status(updated)
    ctx.crossed("AttemptRetried", f"{reason}; attempt {retried.attempt} is {retried.job_name}")
    return Stop(f"a read-only claim runs again: {reason}", requeue_after=AGAIN)


def discard_release(ctx: PassContext) -> TargetLockReleaseStatus | None:
    """The release discarding the current claim owes, or None when it owes none.

    Shared by every discard (a retirement before dispatch, a binding rotation) so the
    release a discard stages is decided, and its epoch chosen, in one place.
    """
    operation = ctx.operation
    assert ctx.status is not None
    retirement = ctx.retirement(Disposition.DISCARD)
    if not retirement.releases():
        return None
    epoch = operation.lease_epoch
    if operation.coordination_digest and retirement.holder is RealmHolder.CLAIM:
        # A stop between the Lease write and the epoch status write leaves the
        # placeholder in status while the Lease carries the real tenure. Nothing ran
        # under it, so the tenure this claim's own holder holds is the one to end;
        # releasing the placeholder would keep the Lease for a whole duration.
        epoch = ctx.env.lock.tenure_of(operation.coordination_digest, ctx.holder) or epoch
    return owed_release(
        coordination_digest=operation.coordination_digest,
        operation_id=operation.id,
        lease_duration_seconds=operation.lease_duration_seconds,
        lease_epoch=epoch,
    )


def retired_status(status: Status, *, drop_plan: bool) -> Status:
    """The status with the claim gone (and, when its plan moved, the plan too): both
    families' statuses spell these fields alike."""
    update: dict[str, Any] = {"active_operation": None, "phase": "Pending"}
    if drop_plan:
        update["plan"] = None
    return status.model_copy(update=update)


def retire_undispatched(ctx: PassContext, reason: str, *, drop_plan: bool = False) -> Stop:
    """Discard a claim that never dispatched, releasing the realm it may hold.

    ``drop_plan`` also drops the plan the claim was authorized by: a moved binding
    discards the plan rather than narrowing the claim.
    """
    operation = ctx.operation
    info = ctx.info
    status = ctx.status
    assert status is not None
    dispatched = may_have_dispatched(
        dispatch_started=operation.dispatch_started, job_uid=operation.job_uid
    )
    if dispatched and not info.read_only:
        raise MayHaveDispatched(
            "a claim that may have dispatched cannot be retired as if it never ran"
        )
    retired = retired_status(status, drop_plan=drop_plan)
    release = discard_release(ctx)
    if release is not None:
        retired = retired.model_copy(update={"pending_lock_release": release})
    ctx.write_status(retired)
    ctx.crossed("ClaimRetired", f"{operation.type} retired before dispatch: {reason}")
    stop = complete_pending_release(ctx)
    return Stop(f"the claim was retired: {reason}", requeue_after=AGAIN, error=stop.error)


def complete_pending_release(ctx: PassContext) -> Stop:
    """Release the Lease ``status.pendingLockRelease`` names, then clear the record.

    A release that fails leaves the record for the next pass: finalizers stay on and
    nothing else is claimed until it is done.
    """
    status = ctx.status
    release = status.pending_lock_release if status else None
    if status is None or release is None:
        return Stop("no release is owed", requeue_after=AGAIN)
    try:
        ctx.env.lock.release(
            release.coordination_digest,
            lease_holder(ctx.uid, release.operation_id),
            release.lease_epoch,
        )
        ctx.write_status(status.model_copy(update={"pending_lock_release": None}))
    except ApiError as error:
        return Stop("the owed release is not done yet", error=error)
    ctx.crossed("RealmReleased", f"the database realm's Lease {release.lease_epoch} was released")
    return Stop("the owed release is done", requeue_after=AGAIN)
