"""The shell around the phase machine: read the records, decide, publish, claim.

A pass that holds no claim, owes no proof and has its execution binding in force
ends here (``advance``). It reduces the resource to ``phasemachine.Facts``, asks
``phasemachine.decide``, and then makes at most one kind of write:

- a claim (``claimwrites.claim_operation``: the finalizer, then the claim), whose status
  patch also carries the phase, the conditions, and, on a spec change, the plan
  discarded (its approvals are marked Stale first, so a stop in between leaves
  stale approvals beside a plan the next pass discards again, never a live
  approval of a discarded plan);
- or, when nothing is claimed, the phase, the conditions and
  ``status.nextReconciliationTime`` (``standing.published``), only when they differ
  from what is stored, so a quiet resource costs no write per pass. A reading's
  retirement has usually written them already (``standing.standing_update``).

The Apply is claimed with the approval ``Family.next_claim`` finds, which re-reads
the plan and the approvals uncached; the machine only says when to ask.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.context.passcontext import Approval, PassContext
from controller.mutationlifecycle import Stop
from controller.pieces.freshness import history_refusal
from controller.pieces.phasemachine import Decision, Event, Facts, decide
from controller.pieces.planpolicy import approval_required
from controller.stages.approvalstaleness import mark_plan_approvals_stale
from controller.stages.claimwrites import claim_operation
from controller.stages.standing import PLAN_EVENTS, due_at, facts_of, published
from jobclaim import verified_as_asked
from jobclaim.api import PtahMigration, PtahMigrationStatus, PtahSchema, PtahSchemaStatus


def schema_facts(schema: PtahSchema, status: PtahSchemaStatus, epoch: str | None) -> Facts:
    """A schema's records reduced to the machine's facts (``Family.facts``). Pure."""
    source = status.source
    digest = source.digest if source else None
    verification = status.verification
    observation = status.observation
    read = observation is not None and observation.artifact_digest == digest
    plan = status.plan
    return Facts(
        "schema",
        resolved=source is not None,
        verified=verified_as_asked(
            schema.spec.desired.verification_policy_from, source, verification
        ),
        plan=plan is not None and plan.execution_binding_id == epoch,
        apply_never=schema.spec.policy.apply == "Never",
        needs_approval=approval_required(schema),
        read=read,
        changes=read and observation is not None and observation.drift,
    )


def migration_facts(migration: PtahMigration, status: PtahMigrationStatus) -> Facts:
    """A migration's records reduced to the machine's facts (``Family.facts``). Pure."""
    artifact = status.artifact
    verification = status.verification
    history = status.history
    record = status.unresolved_run
    refuses = history_refusal(history) is not None
    return Facts(
        "migration",
        resolved=artifact is not None,
        verified=verified_as_asked(
            migration.spec.artifact.verification_policy_from, artifact, verification
        ),
        run_unresolved=record is not None,
        plan=status.plan is not None,
        apply_never=migration.spec.policy.apply == "Never",
        needs_approval=migration.spec.policy.apply != "Always",
        read=history is not None,
        changes=history is not None and history.pending_count > 0,
        refuses=refuses,
    )


def _decided(ctx: PassContext) -> tuple[Decision, Approval | None, Stop | None]:
    facts = facts_of(ctx)
    decision = decide(facts)
    if decision.event not in PLAN_EVENTS:
        return decision, None, None
    # The plan stands: the family re-reads it and the approvals uncached.
    wanted = ctx.family.next_claim(ctx)
    if isinstance(wanted, tuple):
        return decide(replace(facts, approval_found=True)), wanted[1], None
    if decision.claim is not None:
        # The machine would apply, the family's re-read refuses: say why, claim nothing.
        return decision, None, wanted or Stop("the plan cannot be applied now")
    return decision, None, None


def advance(ctx: PassContext) -> Stop:
    """Decide what comes next for a resource with no claim, and write it."""
    status = ctx.status
    assert status is not None
    decision, approval, refused = _decided(ctx)
    if refused is not None:
        return refused
    due = due_at(ctx, decision)
    update: dict[str, Any] = {}
    if decision.discard_plan and status.plan is not None:
        marked = mark_plan_approvals_stale(
            ctx,
            status.plan.uid,
            reason="PlanInputsMoved",
            message="the spec changed after the plan was made; the plan was discarded",
        )
        ctx.crossed("PlanDiscarded", f"plan {status.plan.name} was discarded ({marked} stale)")
        update["plan"] = None
    update.update(published(ctx, status.model_copy(update=update), decision))
    if decision.claim is not None:
        return claim_operation(ctx, decision.claim, approval, update=update)
    standing = status.model_copy(update=update)
    if standing != status:
        ctx.write_status(standing)
    wait = (due - ctx.now()).total_seconds() if due else None
    reason = f"nothing to claim: {decision.event.value}"
    if decision.event is Event.AWAITING_APPROVAL:
        reason = "the plan awaits an approval"
    return Stop(
        reason,
        requeue_after=max(0.0, wait) if wait is not None else None,
    )
