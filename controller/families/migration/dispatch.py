"""What a PtahMigration supplies to the dispatch sequence, and only that.

- Authorize: an Apply is permitted only while the plan it names (``planRef``, read
  uncached) is still that plan under the epoch in force and over the artifact the
  claim pulls, and the approval it holds by reference (``approvalRef``) still
  authorizes it. A migration plan carries no SQL, so there is nothing to stage: the
  Apply reads its files from the verified artifact and is held to the plan's
  sequence by ``ptah migrations up --expect-sequence`` (versions, not files: hence
  the artifact).
- Its Job: the contract's per-family inputs (``jobclaim.owner_family``) held to the
  plan's sequence, which authorize hands the later steps as data (``Authorized``)
  with the approval the consume step spends; its claim for ``match``:
  ``migration_claim``, through ``owner_family`` too.
- An Apply is not claimed while ``status.unresolvedRun`` stands: a run nobody
  accounted for blocks the next one until a reading or a person settles it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Unpack

from controller.context.passcontext import (
    Approval,
    Authorized,
    FamilyRecords,
    PassContext,
    Status,
    Subject,
    migration_operation_of,
    migration_status_of,
    narrowed,
)
from controller.families.migration.records import (
    migration_outcome,
    reconcile_unresolved_copy,
    record_unresolved_run,
    settle_by_acknowledgment,
    warn_record_lost,
)
from controller.mutationlifecycle import Disposition, Stop
from controller.pieces.approvals import (
    find_migration_approval,
    held_migration_approval,
    note_skipped,
    skipped_migration_approvals,
)
from controller.pieces.harvested import Harvest
from controller.pieces.operationidentity import ClaimFields, claim_inputs, migration_operation
from controller.pieces.phasemachine import Facts
from controller.stages.binding_rotation import (
    discarded,
    dispatched,
    finish_rotation,
    new_binding,
)
from controller.stages.claimsupervision import retire_moved
from controller.stages.claimwrites import form_claim, retire_undispatched
from controller.stages.planning import migration_facts
from controller.stages.retirement import retire_migration_claim
from jobclaim import (
    migration_plan_problem,
)
from jobclaim.api import (
    MIGRATION_FINALIZER,
    Condition,
    ConfigMapKeySelector,
    MigrationOperationStatus,
    ObjectReference,
    OCIArtifactAccessBinding,
    PtahMigration,
    PtahMigrationApproval,
    PtahMigrationPlan,
    PtahMigrationStatus,
)
from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    NotFound,
    Object,
)
from jobclaim.errors import BuildRefused, InvalidInput
from jobclaim.times import parse_time
from runner.harvest import Outcome

_APPLY: Final = "Apply"


class PlanGone(BuildRefused):
    """A migration Apply cannot build its Job without the plan whose sequence it runs."""


class MigrationFamily:
    name: Final = "migration"
    kind: Final = "PtahMigration"
    resource: Final = PTAHMIGRATIONS
    approvals: Final = PTAHMIGRATIONAPPROVALS
    finalizer: Final = MIGRATION_FINALIZER

    def parse(self, obj: Object) -> PtahMigration:
        return PtahMigration.model_validate(obj)

    def records(self, subject: Subject) -> FamilyRecords:
        # A migration's record (its unresolved run) neither holds the realm nor
        # outlives a rotation: it owes nothing a shared stage asks about.
        return FamilyRecords()

    def read(self, obj: Object) -> tuple[PtahMigration, FamilyRecords]:
        return self.parse(obj), FamilyRecords()

    def _plan_ref(self, ctx: PassContext[PtahMigration], operation: str) -> ObjectReference | None:
        status = ctx.subject.status
        if status is None:
            return None
        active = status.active_operation
        if active is not None and active.type == operation and active.plan_ref is not None:
            return active.plan_ref
        return status.plan

    def inputs(self, ctx: PassContext[PtahMigration], operation: str) -> dict[str, Any] | None:
        inputs = claim_inputs(self.name, operation, ctx.subject.metadata.generation, ctx.binding)
        if inputs is not None and operation == _APPLY:
            ref = self._plan_ref(ctx, operation)
            if ref is None:
                return None
            inputs["plan"] = {"name": ref.name, "uid": ref.uid}
        return inputs

    def _read_plan(
        self,
        ctx: PassContext[PtahMigration],
        ref: ObjectReference,
        artifact: OCIArtifactAccessBinding | None,
    ) -> PtahMigrationPlan | str:
        """The plan ``ref`` names, still that plan under the epoch in force and over
        ``artifact`` (the claim's, or for a claim not yet taken the one status records,
        which the claim will snapshot); or why not."""
        try:
            plan = PtahMigrationPlan.model_validate(
                ctx.api.get(PTAHMIGRATIONPLANS, ctx.namespace, ref.name)
            )
        except NotFound:
            return f"plan {ref.name} is gone"
        binding = ctx.binding
        epoch = binding.epoch if binding else ""
        # The epoch in force: a claim is authorized only while its inputs (which hold
        # its epoch) still hold, and a new claim records the epoch in force.
        problem = migration_plan_problem(
            plan,
            ref,
            owner=ctx.subject.metadata,
            epoch=epoch,
            artifact=artifact.digest if artifact else None,
        )
        if problem is not None:
            return f"plan {ref.name} is not the plan the claim records: {problem}"
        return plan

    def authorize(self, ctx: PassContext[PtahMigration]) -> Stop | Authorized:
        suspended = ctx.subject.spec.suspend
        stop = retire_moved(ctx, "the migration is suspended" if suspended else None)
        if stop is not None:
            return stop
        if ctx.operation.type != _APPLY:
            return Authorized(approval=migration_operation_of(ctx).approval_ref)
        if migration_status_of(ctx).unresolved_run is not None:
            # A record restored (or written) after this claim was taken: the run nobody
            # accounted for blocks this one as it blocks a new claim.
            return retire_undispatched(ctx, "an unresolved run blocks the Apply", drop_plan=True)
        claim = migration_operation_of(ctx)
        ref = claim.plan_ref
        assert ref is not None  # inputs_hold needs it
        found = self._read_plan(ctx, ref, claim.source)
        if isinstance(found, str):
            return retire_undispatched(ctx, found, drop_plan=True)
        problem = self._approval_problem(ctx, found)
        if problem is not None:
            return retire_undispatched(ctx, problem, drop_plan=True)
        return Authorized(
            approval=claim.approval_ref,
            sequence=tuple(entry.version for entry in found.spec.migrations),
        )

    def _approval_problem(
        self, ctx: PassContext[PtahMigration], plan: PtahMigrationPlan
    ) -> str | None:
        held = migration_operation_of(ctx).approval_ref
        if held is None:
            policy = ctx.subject.spec.policy.apply
            return None if policy == "Always" else "the Apply needs an approval it does not hold"
        ref = migration_operation_of(ctx).plan_ref
        assert ref is not None
        found = held_migration_approval(ctx.api, ctx.subject, ref, plan.spec.fingerprint, held)
        if found is None:
            return f"approval {held.name} no longer authorizes this plan"
        return None

    def sequence(self, ctx: PassContext[PtahMigration]) -> tuple[str, ...]:
        """An Apply's plan's sequence, re-read (a pass that supervises its Job rebuilds
        it); authorize hands the dispatch steps the one it read."""
        if ctx.operation.type != _APPLY:
            return ()
        claim = migration_operation_of(ctx)
        ref = claim.plan_ref
        if ref is None:
            raise PlanGone("the Apply claim names no plan")
        found = self._read_plan(ctx, ref, claim.source)
        if isinstance(found, str):
            raise PlanGone(f"the Apply cannot be rebuilt: {found}")
        return tuple(entry.version for entry in found.spec.migrations)

    # -- what to claim -----------------------------------------------------------------

    def next_claim(
        self, ctx: PassContext[PtahMigration]
    ) -> tuple[str, Approval | None] | Stop | None:
        migration = ctx.subject
        status = migration.status
        binding = ctx.binding
        ref = status.plan if status else None
        if migration.spec.suspend or status is None or ref is None or binding is None:
            return None
        if status.unresolved_run is not None:
            return Stop("an unresolved run blocks the next Apply until it is settled")
        policy = migration.spec.policy.apply
        if policy == "Never":
            return None
        found = self._read_plan(ctx, ref, status.artifact)
        if isinstance(found, str):
            return Stop(found)
        if policy == "Always":
            return (_APPLY, None)
        approval = find_migration_approval(ctx.api, migration, ref, found.spec.fingerprint)
        if approval is None:
            objects = ctx.api.list(PTAHMIGRATIONAPPROVALS, ctx.namespace)
            fingerprint = found.spec.fingerprint
            note_skipped(ctx, skipped_migration_approvals(objects, migration, ref, fingerprint))
            return Stop("the plan awaits an approval")
        return (_APPLY, approval)

    def new_claim(
        self, ctx: PassContext[PtahMigration], operation: str, approval: Approval | None
    ) -> PtahMigrationStatus:
        status = migration_status_of(ctx)
        claim = form_claim(ctx, operation, self.inputs(ctx, operation))
        extra: dict[str, Any] = {}
        if operation == _APPLY:
            extra["plan_ref"] = status.plan
            if isinstance(approval, PtahMigrationApproval):
                extra["approval_ref"] = ObjectReference(
                    name=approval.metadata.name or "", uid=approval.metadata.uid or ""
                )
        return status.model_copy(
            update={
                "active_operation": claim.model_copy(update=extra),
                "phase": ctx.info_for(operation).phase,
            }
        )

    # -- the family's records ------------------------------------------------------------

    def empty_status(self) -> PtahMigrationStatus:
        return PtahMigrationStatus()

    def operation(
        self, ctx: PassContext[PtahMigration], **fields: Unpack[ClaimFields]
    ) -> MigrationOperationStatus:
        return migration_operation(ctx.subject, **fields)

    def prelude(self, ctx: PassContext[PtahMigration]) -> Stop | None:
        # The unresolved-run record and its annotation copy agree before anything else.
        warn_record_lost(ctx)
        return reconcile_unresolved_copy(ctx)

    def record_unknown(self, ctx: PassContext[PtahMigration], reason: str) -> Stop:
        return record_unresolved_run(ctx, reason)

    def outcome(self, ctx: PassContext[PtahMigration], harvested: Harvest) -> Stop:
        return migration_outcome(ctx, harvested)

    def retire_unread(self, ctx: PassContext[PtahMigration], reason: str) -> Stop:
        return retire_migration_claim(
            ctx, reason, disposition=Disposition.DISCARD, may_still_write=False
        )

    # -- the family's readings and records, as the shared stages ask for them --------

    def artifact(self, status: Status) -> OCIArtifactAccessBinding | None:
        return narrowed(status, PtahMigrationStatus).artifact

    def resolved(self, source: OCIArtifactAccessBinding) -> dict[str, Any]:
        return {"artifact": source, "history": None}

    def policy_selector(self, ctx: PassContext[PtahMigration]) -> ConfigMapKeySelector | None:
        return ctx.subject.spec.artifact.verification_policy_from

    def last_reading(self, ctx: PassContext[PtahMigration]) -> datetime | None:
        # A History, or an unresolved run recorded: it is read an interval after it
        # was recorded, like a reading.
        status = migration_status_of(ctx)
        times = [parse_time(status.history.observed_at) if status.history else None]
        if status.unresolved_run is not None:
            times.append(parse_time(status.unresolved_run.recorded_at))
        known = [t for t in times if t is not None]
        return max(known) if known else None

    def facts(self, ctx: PassContext[PtahMigration]) -> Facts:
        return migration_facts(ctx.subject, migration_status_of(ctx))

    def own_conditions(self, status: Status) -> list[Condition]:
        return []

    def retire_reading(
        self,
        ctx: PassContext[PtahMigration],
        reason: str,
        disposition: Disposition,
        update: dict[str, Any],
    ) -> Stop:
        return retire_migration_claim(
            ctx, reason, disposition=disposition, may_still_write=False, update=update
        )

    def keeps_reading(self, ctx: PassContext[PtahMigration], harvested: Harvest) -> bool:
        # A History while a run is unresolved: migration_outcome records it, and
        # settles the run when it shows nothing pending on the same database.
        account = harvested.account
        recorded = account.recorded if account else None
        return (
            migration_status_of(ctx).unresolved_run is not None
            and ctx.operation.type == "History"
            and harvested.outcome is Outcome.ACCOUNTED
            and recorded is not None
            and recorded.result.migration_history is not None
        )

    def settle_record(self, ctx: PassContext[PtahMigration]) -> Stop | None:
        return settle_by_acknowledgment(ctx)

    def rotate_binding(self, ctx: PassContext[PtahMigration]) -> Stop:
        return rotate_migration_binding(ctx)

    def restart_proof(self, ctx: PassContext[PtahMigration], why: str) -> Stop:
        # A migration's record owes no proof (``records`` says none is outstanding),
        # so no claim of it serves one: asked anyway, the pass fails rather than guess.
        raise InvalidInput(f"a migration has no proof to restart ({why})")


def rotate_migration_binding(ctx: PassContext[PtahMigration]) -> Stop:
    """A migration moves to the new binding with nothing left behind but a dispatched
    Apply's unresolved record (``MigrationFamily.rotate_binding``)."""
    status = migration_status_of(ctx)
    update: dict[str, Any] = {}
    if status.active_operation is not None:
        if ctx.info.mutating and dispatched(ctx):
            # Recorded first; the epoch moves on a later pass once no claim is in flight.
            return record_unresolved_run(ctx, "the execution binding changed under the run")
        update = discarded(ctx, status)
    new = new_binding(ctx)
    update.update({"execution_binding": new, "plan": None, "phase": "Pending"})
    ctx.write_status(status.model_copy(update=update))
    ctx.crossed("ExecutionBindingRotated", f"work here now runs under epoch {new.epoch}")
    return finish_rotation(ctx, "the execution binding was rotated")


MIGRATION: Final = MigrationFamily()
