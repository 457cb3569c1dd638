"""The work of each dispatch step, shared by both families.

``mutationlifecycle.Driver`` decides the order; this module decides what each step
writes. A ``Family`` is asked once, to authorize, and hands back what held as data
(``Authorized``); the Job and its claim are the contract's per-family answers. Each
step's durable write is made before the step returns, so the next step's failure is
always covered:

- lease: the tenure the Lease is held under is in status before anything that
  depends on it (a projection, a snapshot, the Job) exists;
- snapshot: a resolved admission snapshot is written and the pass *returns*, so no
  Job can exist under an envelope that is not durable;
- consume: the approval is spent before the mark, so every marked claim's approval is
  already spent, and nothing that can fail sits between the mark and the create;
- mark: ``dispatchStarted`` turns a missing Job from "create it" into "unknown";
- create: once. A refusal before storing withdraws the mark (the next pass creates
  under the approval already spent); any other failure is an unknown outcome;
- confirm: the Job is read back and held to its claim by ``jobclaim.match`` before
  its UID is recorded;
- record: the UID.
"""

from __future__ import annotations

from typing import Final

from controller.context.passcontext import Authorized, PassContext
from controller.mutationlifecycle import (
    CreateOutcome,
    Step,
    Stop,
    classify_create,
)
from controller.pieces.approvals import ApprovalGone, consume_approval
from controller.pieces.faultpoints import Boundary
from controller.pieces.planstore import PlanUnverified, ProjectionConflict, project
from controller.pieces.podintent import AdmissionUnresolvable, resolve_snapshot, snapshot_verdict
from controller.pieces.targetlock import MalformedLease
from controller.pieces.vocabulary import EventReason
from controller.stages.claimsupervision import settle_drift
from controller.stages.claimwrites import AGAIN, epoch_update, retire_undispatched
from controller.stages.realmgate import gate_lease
from jobclaim import JobInputs, active_job_inputs, build_job, match, stored_claim
from jobclaim.apiserver import JOBS, ApiError, Object
from jobclaim.errors import InvalidInput
from jobclaim.times import timestamp

# How soon a refused create is tried again: the refusal may be a webhook that is
# being replaced, or priority and fairness shedding load.
REFUSED_RETRY: Final = 5.0
# How soon contention is looked at again: a holder's release is a Lease write, which
# no watch of ours sees, so a claimant only learns of it by looking. The foreign
# Lease's own expiry (up to its whole duration, minutes) is the latest it must look.
CONTENTION_RETRY: Final = 5.0


def contention_retry(retry_after: float | None) -> float:
    """When a claimant that found the realm held looks again. Pure.

    Soon, whatever the holder's Lease says: looking again is an uncached read, and the
    expiry is measured by this process's sighting, which a look does not reset. Waiting
    for ``retry_after`` left a second resource idle for the holder's whole duration
    after the holder had released the realm in seconds.
    """
    return CONTENTION_RETRY if retry_after is None else min(retry_after, CONTENTION_RETRY)


class DispatchPass:
    """``mutationlifecycle.DispatchSteps`` over one pass of one resource.

    The family is asked once, by the authorize step; what it found holding (the
    approval, the verified plan, the sequence) is handed to the later steps as data,
    and the Job and the claim it is matched to are the contract's per-family answers
    (``jobclaim.owner_family``), so no step calls the family back mid-step.
    """

    def __init__(self, ctx: PassContext) -> None:
        self.ctx = ctx
        # What the steps hand each other: what authorize found holding, the Job as
        # built (held to its snapshot), and as created.
        self.authorized: Authorized | None = None
        self.built: Object | None = None
        self.created: Object | None = None

    def run(self, step: Step) -> Stop | None:
        try:
            return _STEPS[step](self)
        except ApiError as error:
            # Whatever the step had made durable stays; the next pass re-reads it.
            return Stop(f"the {step.value} step could not finish", error=error)

    def crossed(self, reason: EventReason, note: str, *, warning: bool = False) -> None:
        """Note a boundary crossed, in the pass's own list (``PassContext.crossings``,
        made Events after the pass): a note is data the step appends where it stands,
        not a trip out of the step to the context and back."""
        self.ctx.crossings.append((reason, note, "Warning" if warning else "Normal"))

    # -- the steps -------------------------------------------------------------------

    def authorize(self) -> Stop | None:
        found = self.ctx.family.authorize(self.ctx)
        if isinstance(found, Stop):
            return found
        self.authorized = found
        return None

    def _inputs(self, authorized: Authorized) -> JobInputs:
        """What the claim's Job is built from, at the version the pass holds: the
        contract's per-family inputs, held to the sequence authorize read."""
        ctx = self.ctx
        return active_job_inputs(
            ctx.subject,
            binding=ctx.binding,
            manager=ctx.env.config.manager,
            expected_sequence=authorized.sequence,
        )

    def _authorized(self, step: str) -> Authorized | Stop:
        """What authorize found, for a step that needs it; only a driver with its steps
        exchanged gets here before authorize, and that step then stops (fail closed)."""
        if self.authorized is None:
            return Stop(f"the {step} step runs only after authorize")
        return self.authorized

    def lease(self) -> Stop | None:
        ctx = self.ctx
        operation = ctx.operation
        if operation.coordination_digest is None or operation.lease_duration_seconds is None:
            return retire_undispatched(ctx, "the claim names no realm to lock")
        # Re-read, uncached, every time: a realm edited since the claim was made must not
        # be the one the Lease is taken under.
        stop = gate_lease(ctx)
        if stop is not None:
            return stop
        try:
            state = ctx.env.lock.acquire(
                operation.coordination_digest,
                ctx.holder,
                operation.lease_duration_seconds,
                operation.lease_epoch,
            )
        except MalformedLease as error:
            # Fail closed: a Lease nobody can read is never waited out or taken.
            self.crossed("LeaseMalformed", str(error), warning=True)
            return Stop("the realm's Lease cannot be read", error=error)
        if not state.held:
            self.crossed("RealmBusy", "another claim holds the database realm")
            return Stop(
                "another claim holds the database realm",
                requeue_after=contention_retry(state.retry_after),
            )
        update = epoch_update(operation, state, dispatched=False)
        if update is not None:
            ctx.write_operation(**update)
            self.crossed("RealmLocked", f"the database realm is held under {state.epoch}")
        return None

    def stage(self) -> Stop | None:
        """Project the verified plan for the Apply Pod, on every pass that can still
        create the Job, before the mark; a foreign object under a projection name
        retires the plan, since no retry can clear a name derived from the plan."""
        ctx = self.ctx
        authorized = self._authorized("stage")
        if isinstance(authorized, Stop):
            return authorized
        plan = authorized.plan
        if plan is None:
            return Stop("the claim has no verified plan to stage")
        try:
            project(ctx.api, plan, ctx.name, list(authorized.chunks))
        except (ProjectionConflict, PlanUnverified) as error:
            return retire_undispatched(ctx, f"a projection name is taken: {error}", drop_plan=True)
        self.crossed("PlanProjected", f"plan {plan.metadata.name} is projected for the Apply Pod")
        return None

    def snapshot(self) -> Stop | None:
        ctx = self.ctx
        operation = ctx.operation
        authorized = self._authorized("snapshot")
        if isinstance(authorized, Stop):
            return authorized
        try:
            inputs = self._inputs(authorized)
            draft = build_job(inputs)
        except InvalidInput as error:
            return retire_undispatched(
                ctx, f"the claim cannot build its Job: {error}", drop_plan=True
            )
        template = draft["spec"]["template"]
        snapshot = operation.admission_snapshot
        verdict = snapshot_verdict(
            snapshot, template, refreshed=operation.admission_snapshot_refreshed
        )
        if verdict == "refuse":
            return retire_undispatched(
                ctx, "the Job's Pod template disagrees with its admission snapshot twice"
            )
        if verdict in ("resolve", "refresh"):
            try:
                resolved = resolve_snapshot(
                    ctx.api, ctx.namespace, template, ctx.env.config.admission
                )
            except AdmissionUnresolvable as error:
                # Nothing was written: a missing ServiceAccount may yet be created.
                self.crossed("AdmissionUnresolvable", str(error), warning=True)
                return Stop("admission cannot be pinned", error=error)
            refreshed = operation.admission_snapshot_refreshed or verdict == "refresh"
            ctx.write_operation(admission_snapshot=resolved, admission_snapshot_refreshed=refreshed)
            self.crossed("AdmissionResolved", f"admission snapshot {resolved.digest} is durable")
            # The pass that writes the snapshot returns: no Job may carry its digest in
            # the same pass that made it durable.
            return Stop("the admission snapshot is durable; the pass returns", requeue_after=AGAIN)
        assert snapshot is not None
        self.built = build_job(inputs._replace(snapshot_digest=snapshot.digest))
        return None

    def consume(self) -> Stop | None:
        ctx = self.ctx
        authorized = self._authorized("consume")
        if isinstance(authorized, Stop):
            return authorized
        approval = authorized.approval
        if approval is None:
            return None
        try:
            spent = consume_approval(
                ctx.api,
                ctx.family.approvals,
                ctx.namespace,
                approval.name,
                approval.uid,
                now=timestamp(ctx.env.wall()),
                claim=ctx.operation.id,
            )
        except ApprovalGone as error:
            return retire_undispatched(ctx, f"its approval is gone: {error}", drop_plan=False)
        if spent:
            # Said by the write: a mark withdrawn and made again passes here twice.
            self.crossed("ApprovalConsumed", f"approval {approval.name} is spent")
        return None

    def mark(self) -> Stop | None:
        self.ctx.write_operation(dispatch_started=True)
        self.crossed("DispatchMarked", "a Job may exist from here on")
        return None

    def create(self) -> Stop | None:
        ctx = self.ctx
        if self.built is None:
            # Only a driver with its steps exchanged gets here without a snapshot step.
            authorized = self._authorized("create")
            if isinstance(authorized, Stop):
                return authorized
            snapshot = ctx.operation.admission_snapshot
            inputs = self._inputs(authorized)
            self.built = build_job(
                inputs._replace(snapshot_digest=snapshot.digest if snapshot else None)
            )
        try:
            self.created = ctx.api.create(JOBS, ctx.namespace, self.built)
        except Exception as error:  # every answer, and none, is classified
            return self._create_failed(error)
        self.crossed("JobCreated", f"Job {ctx.operation.job_name} was created")
        if ctx.env.faults is not None:  # only a lab manager has fault points
            ctx.env.faults.after(Boundary.CREATE, ctx.subject, ctx.operation)
        return None

    def _create_failed(self, error: Exception) -> Stop:
        ctx = self.ctx
        if classify_create(error) is CreateOutcome.REFUSED_BEFORE_STORING:
            # Nothing stands under the reserved name: withdraw the mark, and the claim is
            # where a stop between spending its approval and marking leaves it. If the
            # withdrawal itself fails the mark stays, and the outcome stays unknown.
            if ctx.operation.dispatch_started:
                ctx.write_operation(dispatch_started=False)
                self.crossed("DispatchWithdrawn", f"the create was refused: {error}", warning=True)
            return Stop(
                "the create was refused before storing", requeue_after=REFUSED_RETRY, error=error
            )
        self.crossed("CreateUncertain", f"the create's outcome is unknown: {error}", warning=True)
        return Stop(
            "the create's outcome is unknown; the next pass adopts the Job or records it",
            requeue_after=AGAIN,
            error=error,
        )

    def confirm(self) -> Stop | None:
        ctx = self.ctx
        job = ctx.api.get(JOBS, ctx.namespace, ctx.operation.job_name)
        verdict = match(job, stored_claim(ctx.subject, built=self.built, binding=ctx.binding))
        if not verdict:
            return settle_drift(ctx, f"the created Job is not its claim's: {verdict.reason}")
        self.created = job
        return None

    def record(self) -> Stop | None:
        ctx = self.ctx
        job = self.created
        assert job is not None
        uid = job["metadata"]["uid"]
        ctx.write_operation(job_uid=uid)
        self.crossed("OperationStarted", f"Job {ctx.operation.job_name} ({uid}) is this claim's")
        return None


_STEPS: Final = {
    Step.AUTHORIZE: DispatchPass.authorize,
    Step.LEASE: DispatchPass.lease,
    Step.STAGE: DispatchPass.stage,
    Step.SNAPSHOT: DispatchPass.snapshot,
    Step.CONSUME: DispatchPass.consume,
    Step.MARK: DispatchPass.mark,
    Step.CREATE: DispatchPass.create,
    Step.CONFIRM: DispatchPass.confirm,
    Step.RECORD: DispatchPass.record,
}
