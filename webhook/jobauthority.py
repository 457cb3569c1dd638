"""Job CREATE, judged by what the manager cannot write.

``job-create`` holds a Job to the claim the manager wrote in status; this rule holds
that claim to what a stolen manager identity cannot forge. The manager's RBAC lets
it write status, so everything status says is the manager's word: the target, the
execution binding, the plan's record of itself, the approval it reserved. Each is
checked here against a source outside the manager's reach:

- the resource's spec, which the manager may not change (RBAC grants no update and
  the chart's ValidatingAdmissionPolicy refuses the manager's patches of anything
  but finalizers and the unresolved-run annotation): the target and its Secret
  (``execution`` and the service account are already built from spec);
- the images and Ptah version the webhook's own configuration pins (the chart's
  values, in the webhook's environment), never the request's or status's;
- for a mutating claim, the stamped approval a person created for exactly this
  plan's fingerprint, spent by exactly this claim (``consumedBy``), unless the
  spec's policy waives it for a plan that destroys and grants nothing;
- the plan's destructiveness and privilege changes, recomputed from the bytes the
  Apply Pod mounts by a real SQL parser (``jobclaim.statements``), not taken from the
  plan's record;
- no Apply at all where the spec's ``policy.apply`` is Never (the owner's word,
  which an approval given earlier does not overrule);
- no earlier Apply of the resource still unaccounted for (a pending observation or
  an unresolved run), and one attempt per mutating claim: a second Apply Job beside
  a first that may still run is the double run the lifecycle exists to prevent.
"""

from __future__ import annotations

from typing import Final

from jobclaim import (
    PlanUnreadable,
    approval_required,
    approval_stamp_problem,
    consumed_by,
    coordination_digest,
    migration_approval_problem,
    plan_content,
    recorded_content_problem,
    schema_approval_problem,
)
from jobclaim.api import (
    ExecutionBindingStatus,
    ManagerRecord,
    ObjectReference,
    PtahMigration,
    PtahMigrationApproval,
    PtahMigrationPlan,
    PtahSchema,
    PtahSchemaApproval,
    PtahSchemaPlan,
)
from jobclaim.apiserver import PTAHMIGRATIONAPPROVALS, PTAHSCHEMAAPPROVALS
from jobclaim.errors import InvalidInput
from webhook.objects import stored
from webhook.rules import CONTROLLER_WRITE, ReadKey, Reads, Settings, Trail, read, rule

AUTHORITY: Final = rule(
    "job-authority",
    (CONTROLLER_WRITE,),
    "Job CREATE: judged by what the manager cannot write",
    description="""
    Status is the manager's word, so a stolen manager identity could write any claim
    there. A Job create is therefore also held to what the manager cannot write. The
    webhook's own configuration (the chart's values) pins the executor image, the
    scratch images and the Ptah version the execution binding names, and the runner
    and manager images the Job's manager record names; with no pins configured no
    Job is admitted. The claim's target must be the resource's spec.target (which the manager cannot
    change), and its coordination digest the one that target derives. A mutating
    claim runs only when the spec's policy.apply is not Never, one attempt, and none
    while the resource still records an earlier Apply nobody accounted for (a
    schema's pendingObservation, a migration's unresolvedRun). For a schema Apply
    the plan's statements are taken from the very projections the Pod mounts and
    read by the engine's SQL parser (jobclaim.statements: PostgreSQL's own grammar,
    every node of each statement's tree walked; only what the tree proves additive
    counts as harmless, and the unreadable is destructive and privileged): a plan
    that records no destructive statement or no privilege change while its bytes
    hold one is refused. Unless the
    spec's policy.apply is Always for a plan that destroys and grants nothing (by
    that reading), a mutating claim must hold an approval, read directly: one that
    names this resource and this plan by name, UID and fingerprint, carries
    admission's stamp, and is Consumed by this very claim (status.consumedBy is the
    claim's operation id), so no approval authorizes two runs and no run happens
    without one.
    """,
    admits="nothing by itself: a Job that passes goes on to be rebuilt and matched",
)
NO_PINS: Final = AUTHORITY.refuses(
    "the webhook's configuration pins no images, so it admits no operation Job"
)
EXECUTOR_NOT_PINNED: Final = AUTHORITY.refuses(
    "the execution binding's executor image {image} is not the image the webhook's "
    "configuration pins"
)
VERSION_NOT_PINNED: Final = AUTHORITY.refuses(
    "the execution binding's ptah version {version} is not the version the webhook's "
    "configuration pins"
)
SCRATCH_NOT_PINNED: Final = AUTHORITY.refuses(
    "the execution binding's scratch images ({images}) are not the images the webhook's "
    "configuration pins (execution.scratchImages)"
)
RUNNER_NOT_PINNED: Final = AUTHORITY.refuses(
    "the Job's runner image {image} is not the image the webhook's configuration pins"
)
MANAGER_NOT_PINNED: Final = AUTHORITY.refuses(
    "the Job's manager image {image} is not the image the webhook's configuration pins"
)
TARGET_NOT_SPEC: Final = AUTHORITY.refuses(
    "the claim's target is not the {kind}'s spec.target: a Job runs against the database "
    "its resource names"
)
COORDINATION_NOT_SPEC: Final = AUTHORITY.refuses(
    "the claim's coordination digest is not the one the {kind}'s spec.target derives"
)
APPLY_NEVER: Final = AUTHORITY.refuses(
    "the {kind}'s spec.policy.apply is Never: it runs no Apply, approved or not"
)
SECOND_ATTEMPT: Final = AUTHORITY.refuses(
    "a mutating claim runs one attempt; attempt {attempt} would be a second Apply Job"
)
EARLIER_APPLY: Final = AUTHORITY.refuses(
    "the {kind} still records an earlier Apply nobody accounted for ({record}): its Job "
    "may still run"
)
PLAN_UNREADABLE: Final = AUTHORITY.refuses(
    "the Apply's plan {key} cannot be read as statements: {reason}"
)
PLAN_UNDERSTATED: Final = AUTHORITY.refuses(
    "the Apply's plan {key} understates its statements: {reason}"
)
NO_APPROVAL: Final = AUTHORITY.refuses(
    "the {kind}'s plan needs an approval and the claim holds none"
)
APPROVAL_MISSING: Final = AUTHORITY.refuses("the approval {key} the claim holds does not exist")
APPROVAL_NOT_FOR_PLAN: Final = AUTHORITY.refuses(
    "the approval {key} does not authorize this plan: {reason}"
)
APPROVAL_NOT_SPENT: Final = AUTHORITY.refuses(
    "the approval {key} was not spent by this claim (consumedBy: {by})"
)
APPROVAL_RAN: Final = AUTHORITY.refuses(
    "the approval {key} already authorized Job {job} ({uid}): one approval runs one Job"
)


def hold_pins(
    settings: Settings, binding: ExecutionBindingStatus, record: ManagerRecord, trail: Trail
) -> None:
    """The binding and the Job's manager record name exactly the configured images."""
    pins = settings.pins
    if pins is None:
        raise trail.deny(NO_PINS)
    if binding.executor_image != pins.executor_image:
        raise trail.deny(EXECUTOR_NOT_PINNED, image=binding.executor_image)
    if binding.ptah_version != pins.ptah_version:
        raise trail.deny(VERSION_NOT_PINNED, version=binding.ptah_version)
    if binding.scratch_images != pins.scratch_images:
        # The rebuild puts the binding's scratch image in the Pod; held here to the
        # chart's, a manager cannot bind a provided dev to an image of its choosing.
        named = binding.scratch_images.to_wire() if binding.scratch_images else {}
        images = ", ".join(f"{engine} {image}" for engine, image in named.items()) or "none"
        raise trail.deny(SCRATCH_NOT_PINNED, images=images)
    if record.runner_image != pins.runner_image:
        raise trail.deny(RUNNER_NOT_PINNED, image=record.runner_image)
    if record.controller_image != pins.manager_image:
        raise trail.deny(MANAGER_NOT_PINNED, image=record.controller_image)
    trail.passed(
        "executor, scratch, runner and manager images and the ptah version are the pinned ones"
    )


def hold_target(owner: PtahSchema | PtahMigration, trail: Trail) -> None:
    """The claim's target and coordination are the spec's."""
    status = owner.status
    operation = status.active_operation if status else None
    if operation is None:
        return
    target = owner.spec.target
    if operation.target is not None and operation.target != target:
        raise trail.deny(TARGET_NOT_SPEC, kind=owner.kind)
    if operation.coordination_digest is not None:
        try:
            derived = coordination_digest(
                engine=target.engine,
                namespace=owner.metadata.namespace or "",
                coordination_key=target.coordination_key,
                realm=target.realm_ref.name if target.realm_ref else None,
            )
        except InvalidInput as error:
            raise trail.deny(COORDINATION_NOT_SPEC, kind=owner.kind) from error
        if derived != operation.coordination_digest:
            raise trail.deny(COORDINATION_NOT_SPEC, kind=owner.kind)
    trail.passed("the claim's target is the resource's spec.target")


def hold_policy(owner: PtahSchema | PtahMigration, trail: Trail) -> None:
    """A mutating claim runs only where the spec lets an Apply run at all. The controller
    claims no Apply under Never; an approval a person once gave does not overrule the
    owner's later word that nothing is applied."""
    if owner.spec.policy.apply == "Never":
        raise trail.deny(APPLY_NEVER, kind=owner.kind)
    trail.passed(f"spec.policy.apply {owner.spec.policy.apply} lets an Apply run")


def hold_single_run(owner: PtahSchema | PtahMigration, trail: Trail) -> None:
    """A mutating claim: attempt 1, and no earlier Apply still unaccounted for."""
    status = owner.status
    operation = status.active_operation if status else None
    if status is None or operation is None:
        return
    if operation.attempt != 1:
        raise trail.deny(SECOND_ATTEMPT, attempt=operation.attempt)
    record: str | None = None
    if isinstance(owner, PtahSchema) and owner.status and owner.status.pending_observation:
        record = f"pendingObservation of {owner.status.pending_observation.apply_job_name}"
    if isinstance(owner, PtahMigration) and owner.status and owner.status.unresolved_run:
        record = f"unresolvedRun of {owner.status.unresolved_run.job_name}"
    if record is not None:
        raise trail.deny(EARLIER_APPLY, kind=owner.kind, record=record)
    trail.passed("one attempt, and no earlier Apply left unaccounted for")


def schema_plan_needs_approval(
    schema: PtahSchema, plan: PtahSchemaPlan, data: bytes, key: ReadKey, trail: Trail
) -> bool:
    """Read the plan's statements from its mounted bytes; whether it needs approving."""
    try:
        content = plan_content(data, engine=schema.spec.target.engine)
    except PlanUnreadable as error:
        raise trail.deny(PLAN_UNREADABLE, key=key, reason=str(error)) from error
    spec = plan.spec
    problem = recorded_content_problem(
        content, destructive=spec.destructive, privilege_changes=spec.privilege_changes
    )
    if problem:
        raise trail.deny(PLAN_UNDERSTATED, key=key, reason=problem)
    trail.passed(f"{len(content.statements)} statements read from the mounted bytes")
    return approval_required(
        schema.spec.policy.apply,
        destructive=spec.destructive or bool(content.destructive),
        privileged=bool(spec.privilege_changes) or bool(content.privilege),
    )


def hold_schema_approval(
    schema: PtahSchema, plan: PtahSchemaPlan, required: bool, trail: Trail
) -> Reads[None]:
    """The schema Apply's claim holds an approval of this plan, spent by this claim."""
    status = schema.status
    record = status.plan if status else None
    operation = status.active_operation if status else None
    held = record.approval if record else None
    if record is None or operation is None:
        return
    if held is None:
        if required:
            raise trail.deny(NO_APPROVAL, kind=schema.kind)
        trail.passed("policy.apply Always waives the approval of a plan that is harmless")
        return
    key = ReadKey(PTAHSCHEMAAPPROVALS, schema.metadata.namespace or "", held.name)
    fetched = yield from read(key)
    approval = stored(fetched, key, PtahSchemaApproval, trail)
    if approval is None or approval.metadata.uid != held.uid:
        raise trail.deny(APPROVAL_MISSING, key=key)
    # The plan as stored, not as status records it: the fingerprint is what the
    # person approved, and the stored plan is the one the Pod's bytes were held to.
    pinned = record.model_copy(
        update={"fingerprint": plan.spec.fingerprint, "name": plan.metadata.name or ""}
    )
    problem = schema_approval_problem(
        approval,
        schema_name=schema.metadata.name or "",
        schema_uid=schema.metadata.uid or "",
        plan=pinned,
        consumed_ok=True,
    )
    _hold_spent(approval, problem, operation.id, key, trail)


def hold_migration_approval(
    migration: PtahMigration, plan: PtahMigrationPlan, trail: Trail
) -> Reads[None]:
    """The migration Apply's claim holds an approval of this plan, spent by this claim."""
    status = migration.status
    operation = status.active_operation if status else None
    if operation is None:
        return
    held = operation.approval_ref
    if held is None:
        if migration.spec.policy.apply != "Always":
            raise trail.deny(NO_APPROVAL, kind=migration.kind)
        trail.passed("policy.apply Always waives the approval")
        return
    key = ReadKey(PTAHMIGRATIONAPPROVALS, migration.metadata.namespace or "", held.name)
    fetched = yield from read(key)
    approval = stored(fetched, key, PtahMigrationApproval, trail)
    if approval is None or approval.metadata.uid != held.uid:
        raise trail.deny(APPROVAL_MISSING, key=key)
    problem = migration_approval_problem(
        approval,
        migration_name=migration.metadata.name or "",
        migration_uid=migration.metadata.uid or "",
        plan_ref=ObjectReference(name=plan.metadata.name or "", uid=plan.metadata.uid or ""),
        plan_fingerprint=plan.spec.fingerprint,
        consumed_ok=True,
    )
    _hold_spent(approval, problem, operation.id, key, trail)


def _hold_spent(
    approval: PtahSchemaApproval | PtahMigrationApproval,
    problem: str | None,
    claim: str,
    key: ReadKey,
    trail: Trail,
) -> None:
    problem = problem or approval_stamp_problem(approval)
    if problem:
        raise trail.deny(APPROVAL_NOT_FOR_PLAN, key=key, reason=problem)
    spent = consumed_by(approval)
    if spent != claim:
        raise trail.deny(APPROVAL_NOT_SPENT, key=key, by=spent or "not consumed")
    witnessed = approval.status.consumed_job if approval.status else None
    if witnessed is not None:
        # Its Job was created (and may since be gone): one approval, one run, forever.
        raise trail.deny(APPROVAL_RAN, key=key, job=witnessed.name, uid=witnessed.uid)
    trail.passed(f"{key}: stamped, this plan's fingerprint, spent by this claim, no Job run")
