"""What a PtahSchema supplies to the dispatch sequence, and only that.

- Authorize: an Apply is permitted only while every binding its plan was computed
  under still holds, re-read uncached: the plan object (its chunks verified by
  ``planstore.load_plan``), the verification-policy ConfigMap, and the approval the
  claim holds by reference. Any of them having moved discards the plan, rather than
  narrowing the claim to what still holds. What held (the verified plan and chunks,
  the approval) is handed to the later steps as data (``Authorized``): the stage step
  projects those chunks and the consume step spends that approval, without asking
  the family again.
- Its Job and its claim for ``match`` are the contract's per-family answers
  (``jobclaim.owner_family``); where it keeps the approval: ``status.plan.approval``.
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
from controller.pieces.operationidentity import ClaimFields, claim_inputs, schema_operation
from controller.pieces.phasemachine import Facts
from controller.pieces.planpolicy import approval_required, policy_digest
from controller.pieces.planstore import PlanUnverified, load_plan
from controller.stages.claimsupervision import retire_moved
from controller.stages.claimwrites import form_claim, retire_undispatched
from controller.stages.conditions import drift_condition
from controller.stages.planning import schema_facts
from controller.stages.retirement import retire_schema_claim
from jobclaim import (
    DEFAULT_GRACE_SECONDS,
    schema_plan_problem,
)
from jobclaim.api import (
    SCHEMA_FINALIZER,
    ActiveOperationStatus,
    Condition,
    ConfigMapKeySelector,
    ConsumedApprovalStatus,
    CurrentPlanStatus,
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
from jobclaim.errors import InvalidInput
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
        inputs = claim_inputs(self.name, operation, schema.metadata.generation, ctx.binding)
        if inputs is not None and operation == _APPLY:
            plan = schema.status.plan if schema.status else None
            if plan is None:
                return None
            inputs["plan"] = {"name": plan.name, "uid": plan.uid, "fingerprint": plan.fingerprint}
        return inputs

    # -- authorize and stage -----------------------------------------------------------

    def authorize(self, ctx: PassContext[PtahSchema]) -> Stop | Authorized:
        schema = ctx.subject
        # A proof runs before suspension: a suspended schema still owes its account.
        suspended = schema.spec.suspend and not (ctx.proof_outstanding and ctx.info.serves_proof)
        stop = retire_moved(ctx, "the schema is suspended" if suspended else None)
        if stop is not None:
            return stop
        if ctx.operation.type != _APPLY:
            return Authorized()
        # Read once: every check below reads the same schema and recorded plan.
        plan = schema.status.plan if schema.status else None
        assert plan is not None  # inputs_hold needs it
        found = self._read_plan(ctx, schema, plan)
        if isinstance(found, str):
            return retire_undispatched(ctx, found, drop_plan=True)
        held = _held_approval(ctx, plan)
        problem = _policy_problem(ctx, schema, plan) or self._approval_problem(
            ctx, schema, plan, held
        )
        if problem is not None:
            return retire_undispatched(ctx, problem, drop_plan=True)
        plan_object, chunks = found
        return Authorized(approval=held, plan=plan_object, chunks=tuple(chunks))

    def _read_plan(
        self, ctx: PassContext[PtahSchema], schema: PtahSchema, plan: CurrentPlanStatus
    ) -> tuple[PtahSchemaPlan, list[bytes]] | str:
        """The plan the claim records and its verified chunks, or why not."""
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
            return obj, load_plan(ctx.api, ctx.namespace, obj)
        except PlanUnverified as error:
            return f"plan {plan.name} cannot be verified: {error}"

    def _approval_problem(
        self,
        ctx: PassContext[PtahSchema],
        schema: PtahSchema,
        plan: CurrentPlanStatus,
        held: ObjectReference | None,
    ) -> str | None:
        if held is None:
            return (
                "the plan needs an approval the claim does not hold"
                if (approval_required(schema))
                else None
            )
        if held_schema_approval(ctx.api, schema, plan, held) is None:
            return f"approval {held.name} no longer authorizes this plan"
        return None

    def sequence(self, ctx: PassContext[PtahSchema]) -> tuple[str, ...]:
        return ()  # a schema Apply runs its projected plan, not a sequence

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
