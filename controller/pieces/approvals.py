"""Approvals: which one authorizes a claim, and spending it exactly once.

A person approves one plan of one resource by creating a PtahSchemaApproval or a
PtahMigrationApproval; admission stamps who approved, when, and the request that
created it. An approval authorizes a mutating claim only when it names the resource
and the plan by name and UID, carries the plan's fingerprint (which binds everything
else the plan was computed under) and carries admission's stamp. An approval being
deleted, marked Stale, or already Consumed authorizes nothing.

Consumption is evidence that a decision was spent, never permission. The dispatch
sequence spends the approval (the ``Consumed`` condition, reason ``DispatchCommitted``)
before it writes ``dispatchStarted``, and every claim looking for an approval skips a
consumed one, so one approval can never authorize a second dispatch. A claim that
already spent its approval and stopped before marking holds it by reference and
dispatches on the next pass: ``held_schema_approval`` and ``held_migration_approval``
re-read that one approval and accept it consumed.

Every read is uncached; the choices are pure functions over what was read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol, TypeVar

from pydantic import ValidationError

from controller.pieces.vocabulary import EventReason
from jobclaim import (
    CONSUMED,
    STALE,
    apply_approval_of,
    approval_stamp_problem,
    migration_approval_problem,
    schema_approval_problem,
)
from jobclaim.api import (
    CurrentPlanStatus,
    ObjectReference,
    PtahMigration,
    PtahMigrationApproval,
    PtahSchema,
    PtahSchemaApproval,
)
from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHSCHEMAAPPROVALS,
    ApiClient,
    ApiReader,
    NotFound,
    Object,
    Resource,
    compare_and_swap,
)
from jobclaim.errors import PtahError
from jobclaim.times import parse_time

__all__ = [
    "CONSUMED",
    "DISPATCH_COMMITTED",
    "STALE",
    "ApprovalGone",
    "approval_stamp_problem",
    "choose_migration_approval",
    "choose_schema_approval",
    "consume_approval",
    "find_migration_approval",
    "find_schema_approval",
    "held_migration_approval",
    "held_schema_approval",
    "migration_approval_problem",
    "note_skipped",
    "schema_approval_problem",
    "skipped_migration_approvals",
    "skipped_schema_approvals",
    "witness_apply_job",
]

DISPATCH_COMMITTED: Final = "DispatchCommitted"
_LATEST: Final = datetime.max.replace(tzinfo=UTC)

Approval = TypeVar("Approval", PtahSchemaApproval, PtahMigrationApproval)


class ApprovalGone(PtahError):
    """The approval a claim holds was deleted, replaced, or withdrawn before it was spent."""


def _created(approval: PtahSchemaApproval | PtahMigrationApproval) -> datetime:
    stamp = approval.metadata.creation_timestamp
    if not stamp:
        return _LATEST
    return parse_time(stamp) or _LATEST


def _decoded(kind: type[Approval], objects: Iterable[Mapping[str, Any]]) -> list[Approval]:
    out: list[Approval] = []
    for obj in objects:
        try:
            out.append(kind.model_validate(obj))
        except ValidationError:
            # An approval this operator cannot read (a newer version's field, say) may
            # carry a condition it does not know: it authorizes nothing here.
            continue
    return out


def _oldest(candidates: Sequence[Approval]) -> Approval | None:
    # Oldest first, then by name, so every pass and every replica picks the same one.
    ordered = sorted(candidates, key=lambda a: (_created(a), a.metadata.name or ""))
    return ordered[0] if ordered else None


def choose_schema_approval(
    objects: Iterable[Mapping[str, Any]], schema: PtahSchema, plan: CurrentPlanStatus
) -> PtahSchemaApproval | None:
    """The oldest approval among ``objects`` that authorizes ``plan``, or None."""
    name, uid = schema.metadata.name, schema.metadata.uid
    if not name or not uid:
        return None
    usable = [
        a
        for a in _decoded(PtahSchemaApproval, objects)
        if schema_approval_problem(a, schema_name=name, schema_uid=uid, plan=plan) is None
    ]
    return _oldest(usable)


def choose_migration_approval(
    objects: Iterable[Mapping[str, Any]],
    migration: PtahMigration,
    plan_ref: ObjectReference,
    plan_fingerprint: str,
) -> PtahMigrationApproval | None:
    name, uid = migration.metadata.name, migration.metadata.uid
    if not name or not uid:
        return None
    usable = [
        a
        for a in _decoded(PtahMigrationApproval, objects)
        if migration_approval_problem(
            a,
            migration_name=name,
            migration_uid=uid,
            plan_ref=plan_ref,
            plan_fingerprint=plan_fingerprint,
        )
        is None
    ]
    return _oldest(usable)


Skipped = tuple[str, str]  # an approval's name, and why its stamp is not believed


def skipped_schema_approvals(
    objects: Iterable[Mapping[str, Any]], schema: PtahSchema, plan: CurrentPlanStatus
) -> list[Skipped]:
    """The approvals of ``plan`` that would authorize it but for their stamp."""
    name, uid = schema.metadata.name or "", schema.metadata.uid or ""
    return [
        (a.metadata.name or "", problem)
        for a in _decoded(PtahSchemaApproval, objects)
        if schema_approval_problem(
            a, schema_name=name, schema_uid=uid, plan=plan, check_stamp=False
        )
        is None
        and (problem := approval_stamp_problem(a)) is not None
    ]


def skipped_migration_approvals(
    objects: Iterable[Mapping[str, Any]],
    migration: PtahMigration,
    plan_ref: ObjectReference,
    plan_fingerprint: str,
) -> list[Skipped]:
    """As ``skipped_schema_approvals``, for a migration's plan."""
    meta = migration.metadata
    return [
        (a.metadata.name or "", problem)
        for a in _decoded(PtahMigrationApproval, objects)
        if migration_approval_problem(
            a,
            migration_name=meta.name or "",
            migration_uid=meta.uid or "",
            plan_ref=plan_ref,
            plan_fingerprint=plan_fingerprint,
            check_stamp=False,
        )
        is None
        and (problem := approval_stamp_problem(a)) is not None
    ]


class Crossing(Protocol):
    """Where a pass notes what it saw (``PassContext.crossed``)."""

    def crossed(self, reason: EventReason, note: str, *, warning: bool = False) -> None: ...


def note_skipped(ctx: Crossing, skipped: Sequence[Skipped]) -> None:
    """A Warning Event per approval skipped for its stamp: a person who approved and
    sees nothing happen learns why (the webhooks were bypassed, or it was copied)."""
    for name, problem in skipped:
        ctx.crossed(
            "ApprovalUnstamped",
            f"approval {name} is skipped: {problem}; create it again through admission",
            warning=True,
        )


def find_schema_approval(
    api: ApiReader, schema: PtahSchema, plan: CurrentPlanStatus
) -> PtahSchemaApproval | None:
    """The approval that authorizes applying ``plan`` now, read uncached, or None."""
    namespace = schema.metadata.namespace
    if not namespace:
        return None
    return choose_schema_approval(api.list(PTAHSCHEMAAPPROVALS, namespace), schema, plan)


def find_migration_approval(
    api: ApiReader,
    migration: PtahMigration,
    plan_ref: ObjectReference,
    plan_fingerprint: str,
) -> PtahMigrationApproval | None:
    namespace = migration.metadata.namespace
    if not namespace:
        return None
    objects = api.list(PTAHMIGRATIONAPPROVALS, namespace)
    return choose_migration_approval(objects, migration, plan_ref, plan_fingerprint)


def _read(
    api: ApiReader, resource: Resource, namespace: str, ref: ObjectReference
) -> Object | None:
    try:
        found = api.get(resource, namespace, ref.name)
    except NotFound:
        return None
    return found if found.get("metadata", {}).get("uid") == ref.uid else None


def held_schema_approval(
    api: ApiReader, schema: PtahSchema, plan: CurrentPlanStatus, ref: ObjectReference
) -> PtahSchemaApproval | None:
    """The approval a claim holds by reference, if it still authorizes ``plan``.

    Consumed is accepted: the claim may have spent it on a pass that stopped before
    its mark. Gone, replaced (another UID), deleting, stale or no longer matching
    answers None, and the claim must not dispatch.
    """
    name, uid, namespace = schema.metadata.name, schema.metadata.uid, schema.metadata.namespace
    found = _read(api, PTAHSCHEMAAPPROVALS, namespace or "", ref) if namespace else None
    approvals = _decoded(PtahSchemaApproval, [found] if found else [])
    if not approvals or not name or not uid:
        return None
    problem = schema_approval_problem(
        approvals[0], schema_name=name, schema_uid=uid, plan=plan, consumed_ok=True
    )
    return approvals[0] if problem is None else None


def held_migration_approval(
    api: ApiReader,
    migration: PtahMigration,
    plan_ref: ObjectReference,
    plan_fingerprint: str,
    ref: ObjectReference,
) -> PtahMigrationApproval | None:
    """As ``held_schema_approval``, for a migration's claim."""
    meta = migration.metadata
    found = (
        _read(api, PTAHMIGRATIONAPPROVALS, meta.namespace or "", ref) if meta.namespace else None
    )
    approvals = _decoded(PtahMigrationApproval, [found] if found else [])
    if not approvals or not meta.name or not meta.uid:
        return None
    problem = migration_approval_problem(
        approvals[0],
        migration_name=meta.name,
        migration_uid=meta.uid,
        plan_ref=plan_ref,
        plan_fingerprint=plan_fingerprint,
        consumed_ok=True,
    )
    return approvals[0] if problem is None else None


def _conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return [dict(c) for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _is_true(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def consumed_status(obj: Mapping[str, Any], *, now: str, claim: str) -> dict[str, Any]:
    """The approval's status with ``Consumed=True`` and the claim that spent it added,
    everything else kept."""
    status = dict(obj.get("status") or {})
    status["consumedBy"] = claim
    kept = [c for c in _conditions(obj) if c.get("type") != CONSUMED]
    consumed: dict[str, Any] = {
        "type": CONSUMED,
        "status": "True",
        "reason": DISPATCH_COMMITTED,
        "message": "the approval authorized one dispatch and authorizes no other",
        "lastTransitionTime": now,
    }
    generation = obj.get("metadata", {}).get("generation")
    if isinstance(generation, int):
        consumed["observedGeneration"] = generation
    status["conditions"] = [*kept, consumed]
    return status


def consume_approval(
    api: ApiClient,
    resource: Resource,
    namespace: str,
    name: str,
    uid: str,
    *,
    now: str,
    claim: str,
) -> bool:
    """Spend the approval ``name`` with UID ``uid`` on ``claim`` (the claim's operation
    id): its ``Consumed`` condition and ``consumedBy``, written by a status patch at the
    resourceVersion read. Admission admits the claim's Job only on an approval its
    claim spent, and refuses any later change of the record.

    Idempotent: an approval already consumed by the same claim is left alone, so a
    pass that stopped after the write (or lost its answer) finds its own spending; one
    another claim spent raises ``ApprovalGone``. Answers whether this call wrote the
    spending: a mark withdrawn and made again passes here twice, and the approval was
    spent once (what is announced and counted is the write, not the pass).
    Raises ``ApprovalGone`` when the approval was deleted, replaced by another of the
    same name, is being deleted or was marked stale: it no longer authorizes anything,
    and the claim must be retired rather than dispatched.
    """

    def attempt() -> bool:
        try:
            current = api.get(resource, namespace, name)
        except NotFound as error:
            raise ApprovalGone(f"approval {name} no longer exists") from error
        meta = current.get("metadata", {})
        if meta.get("uid") != uid:
            raise ApprovalGone(f"approval {name} was replaced by another of the same name")
        conditions = _conditions(current)
        if _is_true(conditions, CONSUMED):
            spent_by = (current.get("status") or {}).get("consumedBy")
            if spent_by != claim:
                raise ApprovalGone(f"approval {name} was spent by another claim ({spent_by})")
            return False
        if meta.get("deletionTimestamp"):
            raise ApprovalGone(f"approval {name} is being deleted")
        if _is_true(conditions, STALE):
            raise ApprovalGone(f"approval {name} was marked stale")
        api.patch_status(
            resource,
            namespace,
            name,
            consumed_status(current, now=now, claim=claim),
            resource_version=str(meta.get("resourceVersion") or ""),
        )
        return True

    return compare_and_swap(attempt)


def witness_apply_job(
    api: ApiClient, owner: PtahSchema | PtahMigration, job_name: str, job_uid: str
) -> None:
    """Name the Apply Job ``job_name`` (UID ``job_uid``) in the approval it ran under.

    Written before the Job's cleanup TTL, which admission admits only once the
    approval names the Job: when the TTL has removed the Job, the approval still says
    it authorized one, and admission admits no second Job under it. Idempotent (an
    approval already naming this Job is left alone); an approval that is gone or was
    replaced authorizes nothing any more and needs no witness; one that names another
    Job raises ``ApprovalGone`` (it cannot be this run's).
    """
    ref = apply_approval_of(owner, job_name)
    if ref is None:
        return
    resource = PTAHSCHEMAAPPROVALS if isinstance(owner, PtahSchema) else PTAHMIGRATIONAPPROVALS
    namespace = owner.metadata.namespace or ""

    def attempt() -> None:
        try:
            current = api.get(resource, namespace, ref.name)
        except NotFound:
            return
        meta = current.get("metadata", {})
        if meta.get("uid") != ref.uid:
            return
        status = dict(current.get("status") or {})
        named = status.get("consumedJob")
        if named == {"name": job_name, "uid": job_uid}:
            return
        if named is not None:
            raise ApprovalGone(f"approval {ref.name} witnessed another Job ({named})")
        status["consumedJob"] = {"name": job_name, "uid": job_uid}
        api.patch_status(
            resource,
            namespace,
            ref.name,
            status,
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    compare_and_swap(attempt)
