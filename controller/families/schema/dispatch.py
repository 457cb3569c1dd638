"""What a PtahSchema supplies to the dispatch sequence, and only that.

- Authorize: an Apply is permitted only while every binding its plan was computed
  under still holds, re-read uncached: the plan object (its chunks verified by
  ``planstore.load_plan``), the verification-policy ConfigMap, and the approval the
  claim holds by reference. Any of them having moved discards the plan, rather than
  narrowing the claim to what still holds.
- Stage: the verified chunks go into the plan's projection ConfigMaps on every pass
  that can still create the Job, before the mark; a foreign object under a projection
  name retires the plan, since no retry can clear a name derived from the plan.
- Its Job: ``schema_job_inputs`` + ``build_job``; its claim for ``match``:
  ``schema_claim``; where it keeps the approval: ``status.plan.approval``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Unpack

from controller.context.passcontext import (
    Approval,
    FamilyRecords,
    PassContext,
    Status,
    Subject,
    narrowed,
    schema_status_of,
)
from controller.families.schema.records import (
    prove,
    record_schema_apply,
    restart_proof,
    schema_outcome,
)
from controller.families.schema.rotation import rotate_schema_binding
from controller.mutationlifecycle import Disposition, Stop
from controller.pieces.approvals import (
    find_schema_approval,
    held_schema_approval,
    note_skipped,
    skipped_schema_approvals,
)
from controller.pieces.harvested import Harvest
from controller.pieces.operationidentity import ClaimFields, schema_operation
from controller.pieces.phasemachine import Facts
from controller.pieces.planpolicy import approval_required, policy_digest
from controller.pieces.planstore import PlanUnverified, ProjectionConflict, load_plan, project
from controller.stages.claimsupervision import claim_inputs, retire_moved
from controller.stages.claimwrites import form_claim, retire_undispatched
from controller.stages.conditions import drift_condition
from controller.stages.planning import schema_facts
from controller.stages.retirement import retire_schema_claim
from jobclaim import (
    DEFAULT_GRACE_SECONDS,
    Claim,
    build_job,
    schema_claim,
    schema_job_inputs,
    schema_plan_problem,
)
from jobclaim.api import (
    SCHEMA_FINALIZER,
    ActiveOperationStatus,
    Condition,
    ConfigMapKeySelector,
    ConsumedApprovalStatus,
    CurrentPlanStatus,
    ManagerRecord,
    ObjectReference,
    OCIArtifactAccessBinding,
    PtahSchema,
    PtahSchemaApproval,
    PtahSchemaPlan,
    PtahSchemaStatus,
)
from jobclaim.apiserver import (
    CONFIGMAPS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    NotFound,
    Object,
)
from jobclaim.errors import BuildRefused, InvalidInput
from jobclaim.times import parse_time

_APPLY: Final = "Apply"


class SchemaFamily:
    name: Final = "schema"
    kind: Final = "PtahSchema"
    resource: Final = PTAHSCHEMAS
    approvals: Final = PTAHSCHEMAAPPROVALS
    finalizer: Final = SCHEMA_FINALIZER

    def parse(self, obj: Object) -> PtahSchema:
        return PtahSchema.model_validate(obj)

    def records(self, subject: Subject) -> FamilyRecords:
        return _records(narrowed(subject, PtahSchema))

    def read(self, obj: Object) -> tuple[PtahSchema, FamilyRecords]:
        schema = self.parse(obj)
        return schema, _records(schema)

    def inputs(self, ctx: PassContext[PtahSchema], operation: str) -> dict[str, Any] | None:
        schema = ctx.subject
        inputs = claim_inputs(ctx, operation, schema.metadata.generation)
        if inputs is not None and operation == _APPLY:
            plan = schema.status.plan if schema.status else None
            if plan is None:
                return None
            inputs["plan"] = {"name": plan.name, "uid": plan.uid, "fingerprint": plan.fingerprint}
        return inputs

    # -- authorize and stage -----------------------------------------------------------

    def authorize(self, ctx: PassContext[PtahSchema]) -> Stop | None:
        schema = ctx.subject
        # A proof runs before suspension: a suspended schema still owes its account.
        suspended = schema.spec.suspend and not (ctx.proof_outstanding and ctx.info.serves_proof)
        stop = retire_moved(ctx, "the schema is suspended" if suspended else None)
        if stop is not None or ctx.operation.type != _APPLY:
            return stop
        # Narrowed once: every check below reads the same schema and recorded plan.
        plan = _status(schema).plan
        assert plan is not None  # inputs_hold needs it
        problem = self._plan_problem(ctx, schema, plan) or _policy_problem(ctx, schema, plan)
        problem = problem or self._approval_problem(ctx, schema, plan)
        if problem is not None:
            return retire_undispatched(ctx, problem, drop_plan=True)
        return None

    def _plan_problem(
        self, ctx: PassContext[PtahSchema], schema: PtahSchema, plan: CurrentPlanStatus
    ) -> str | None:
        try:
            obj = PtahSchemaPlan.model_validate(
                ctx.api.get(PTAHSCHEMAPLANS, ctx.namespace, plan.name)
            )
        except NotFound:
            return f"plan {plan.name} is gone"
        problem = schema_plan_problem(obj, plan, owner=schema.metadata)
        if problem is not None:
            return f"plan {plan.name} is not the plan the claim records: {problem}"
        try:
            ctx.chunks = load_plan(ctx.api, ctx.namespace, obj)
        except PlanUnverified as error:
            return f"plan {plan.name} cannot be verified: {error}"
        ctx.plan_object = obj
        return None

    def _approval_problem(
        self, ctx: PassContext[PtahSchema], schema: PtahSchema, plan: CurrentPlanStatus
    ) -> str | None:
        held = _held_approval(ctx, plan)
        if held is None:
            return (
                "the plan needs an approval the claim does not hold"
                if (approval_required(schema))
                else None
            )
        if held_schema_approval(ctx.api, schema, plan, held) is None:
            return f"approval {held.name} no longer authorizes this plan"
        return None

    def stage(self, ctx: PassContext[PtahSchema]) -> Stop | None:
        plan = ctx.plan_object
        if not isinstance(plan, PtahSchemaPlan) or ctx.chunks is None:
            # Only a driver with its steps exchanged stages before authorizing.
            schema = ctx.subject
            recorded = _status(schema).plan
            assert recorded is not None  # inputs_hold needs it
            problem = self._plan_problem(ctx, schema, recorded)
            if problem is not None:
                return retire_undispatched(ctx, problem, drop_plan=True)
            plan = ctx.plan_object
            assert isinstance(plan, PtahSchemaPlan) and ctx.chunks is not None
        try:
            project(ctx.api, plan, ctx.name, ctx.chunks)
        except (ProjectionConflict, PlanUnverified) as error:
            return retire_undispatched(ctx, f"a projection name is taken: {error}", drop_plan=True)
        ctx.crossed("PlanProjected", f"plan {plan.metadata.name} is projected for the Apply Pod")
        return None

    # -- the Job and the claim ---------------------------------------------------------

    def build(
        self,
        ctx: PassContext[PtahSchema],
        *,
        snapshot_digest: str | None,
        manager: ManagerRecord | None,
    ) -> Object:
        binding = ctx.binding
        if binding is None:
            raise BuildRefused("the schema records no execution binding")
        return build_job(
            schema_job_inputs(
                ctx.subject,
                binding=binding,
                manager=manager or ctx.env.config.manager,
                snapshot_digest=snapshot_digest,
            )
        )

    def claim(self, ctx: PassContext[PtahSchema], built: Mapping[str, Any] | None) -> Claim:
        made = schema_claim(ctx.subject, built=built, stored=True, binding=ctx.binding)
        assert made is not None
        return made

    def approval(self, ctx: PassContext[PtahSchema]) -> ObjectReference | None:
        return _held_approval(ctx, schema_status_of(ctx).plan)

    # -- what to claim -----------------------------------------------------------------

    def next_claim(self, ctx: PassContext[PtahSchema]) -> tuple[str, Approval | None] | Stop | None:
        """An Apply, once the current plan is authorized. Read-only work is claimed when
        asked (issue 5 decides when from the readings)."""
        schema = ctx.subject
        status = schema.status
        binding = ctx.binding
        plan = status.plan if status else None
        if schema.spec.suspend or status is None or plan is None or binding is None:
            return None
        if ctx.proof_outstanding or schema.spec.policy.apply == "Never":
            return None
        if plan.execution_binding_id != binding.epoch:
            return None
        if not approval_required(schema):
            return (_APPLY, None)
        approval = find_schema_approval(ctx.api, schema, plan)
        if approval is None:
            objects = ctx.api.list(PTAHSCHEMAAPPROVALS, ctx.namespace)
            note_skipped(ctx, skipped_schema_approvals(objects, schema, plan))
            return Stop("the plan awaits an approval")
        return (_APPLY, approval)

    def new_claim(
        self, ctx: PassContext[PtahSchema], operation: str, approval: Approval | None
    ) -> PtahSchemaStatus:
        status = schema_status_of(ctx)
        claim = form_claim(ctx, operation, self.inputs(ctx, operation))
        extra: dict[str, Any] = {}
        if operation == _APPLY:
            extra["termination_grace_period_seconds"] = DEFAULT_GRACE_SECONDS
        update: dict[str, Any] = {
            "active_operation": claim.model_copy(update=extra),
            "phase": ctx.info_for(operation).phase,
        }
        if operation == _APPLY and status.plan is not None:
            reserved = None
            if isinstance(approval, PtahSchemaApproval):
                reserved = _reservation(approval)
            update["plan"] = status.plan.model_copy(update={"approval": reserved})
        return status.model_copy(update=update)

    # -- the family's records ------------------------------------------------------------

    def empty_status(self) -> PtahSchemaStatus:
        return PtahSchemaStatus()

    def operation(
        self, ctx: PassContext[PtahSchema], **fields: Unpack[ClaimFields]
    ) -> ActiveOperationStatus:
        return schema_operation(ctx.subject, **fields)

    def prelude(self, ctx: PassContext[PtahSchema]) -> Stop | None:
        return None  # a schema's records are worked off by its claims and its rotation

    def record_unknown(self, ctx: PassContext[PtahSchema], reason: str) -> Stop:
        return record_schema_apply(ctx, reason, succeeded=False, pod_uids=())

    def outcome(self, ctx: PassContext[PtahSchema], harvested: Harvest) -> Stop:
        return schema_outcome(ctx, harvested)

    def retire_unread(self, ctx: PassContext[PtahSchema], reason: str) -> Stop:
        return retire_schema_claim(
            ctx,
            reason,
            disposition=Disposition.DISCARD,
            record=schema_status_of(ctx).pending_observation,
        )

    # -- the family's readings and records, as the shared stages ask for them --------

    def artifact(self, status: Status) -> OCIArtifactAccessBinding | None:
        return narrowed(status, PtahSchemaStatus).source

    def resolved(self, source: OCIArtifactAccessBinding) -> dict[str, Any]:
        return {"source": source, "observation": None}

    def policy_selector(self, ctx: PassContext[PtahSchema]) -> ConfigMapKeySelector | None:
        return ctx.subject.spec.desired.verification_policy_from

    def last_reading(self, ctx: PassContext[PtahSchema]) -> datetime | None:
        # A drift Observe is the schema's reading above Verify.
        observation = schema_status_of(ctx).observation
        return parse_time(observation.observed_at) if observation else None

    def facts(self, ctx: PassContext[PtahSchema]) -> Facts:
        binding = ctx.binding
        epoch = binding.epoch if binding else None
        return schema_facts(ctx.subject, schema_status_of(ctx), epoch)

    def own_conditions(self, status: Status) -> list[Condition]:
        return [drift_condition(narrowed(status, PtahSchemaStatus))]

    def retire_reading(
        self,
        ctx: PassContext[PtahSchema],
        reason: str,
        disposition: Disposition,
        update: dict[str, Any],
    ) -> Stop:
        return retire_schema_claim(ctx, reason, disposition=disposition, record=None, update=update)

    def keeps_reading(self, ctx: PassContext[PtahSchema], harvested: Harvest) -> bool:
        return False  # a proof's reading is the pending observation's, asked before

    def settle_record(self, ctx: PassContext[PtahSchema]) -> Stop | None:
        return prove(ctx)

    def rotate_binding(self, ctx: PassContext[PtahSchema]) -> Stop:
        return rotate_schema_binding(ctx)

    def restart_proof(self, ctx: PassContext[PtahSchema], why: str) -> Stop:
        return restart_proof(ctx, why)


def _records(schema: PtahSchema) -> FamilyRecords:
    status = schema.status
    if status is None:
        return FamilyRecords()
    return FamilyRecords(
        pending_proof=status.pending_observation,
        binding_retirement=status.pending_binding_retirement,
    )


def _status(schema: PtahSchema) -> PtahSchemaStatus:
    """The status of a schema a claim stands on (there is one: the claim is in it)."""
    return narrowed(schema.status, PtahSchemaStatus)


def _held_approval(
    ctx: PassContext[PtahSchema], plan: CurrentPlanStatus | None
) -> ObjectReference | None:
    """The approval an Apply's claim holds by reference, from its recorded plan."""
    if ctx.operation.type != _APPLY or plan is None or plan.approval is None:
        return None
    return ObjectReference(name=plan.approval.name, uid=plan.approval.uid)


def _policy_problem(
    ctx: PassContext[PtahSchema], schema: PtahSchema, plan: CurrentPlanStatus
) -> str | None:
    if plan.verification_policy_uid is None:
        return None
    selector = schema.spec.desired.verification_policy_from
    if selector is None:
        return "the plan was verified under a policy the schema no longer names"
    try:
        obj = ctx.api.get(CONFIGMAPS, ctx.namespace, selector.name)
    except NotFound:
        return f"verification policy {selector.name} is gone"
    data = (obj.get("data") or {}).get(selector.key)
    if obj["metadata"].get("uid") != plan.verification_policy_uid or not isinstance(data, str):
        return f"verification policy {selector.name} was replaced"
    if policy_digest(data) != plan.verification_policy_digest:
        return f"verification policy {selector.name} changed since the plan was verified"
    return None


def _reservation(approval: PtahSchemaApproval) -> ConsumedApprovalStatus:
    spec = approval.spec
    if spec.approver is None or spec.approved_at is None:
        raise InvalidInput("an approval admission did not stamp cannot be reserved")
    return ConsumedApprovalStatus(
        name=approval.metadata.name or "",
        uid=approval.metadata.uid or "",
        approver=spec.approver,
        approved_at=spec.approved_at,
    )


SCHEMA: Final = SchemaFamily()
