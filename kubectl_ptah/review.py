"""What a person reviews before deciding: a plan's statements, and why a decision is owed.

Pure: every function takes objects already read and returns what to show. The plan's
bytes come from its chunks through ``jobclaim.projection.chunk_object_problem``, the
reading the controller uses before an Apply, so a person is shown exactly the bytes
an approval would authorize.

A plan's bytes are the SQL Ptah computed. When they are Ptah's saved-plan document
(JSON, ``format_version`` 1, ``statements`` with ``sql``, ``severity`` and
``reason``) each statement keeps Ptah's own severity; plain SQL text is split into
statements and each is classified by its leading words (``jobclaim.statements``, the
reading admission judges an Apply by), and the view says which of the two it is
(``classifiedBy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jobclaim import (
    ClassifiedBy,
    PlanUnreadable,
    Statement,
    chunk_object_problem,
    plan_geometry_problem,
    statements_of,
)
from jobclaim.api import (
    CurrentPlanStatus,
    DatabaseTargetSpec,
    ObjectReference,
    PtahMigration,
    PtahMigrationPlan,
    PtahSchema,
    PtahSchemaPlan,
)

Severity = Literal["safe", "privilege", "destructive"]
Which = Literal["pending", "applied"]


@dataclass(frozen=True, slots=True)
class PlanView:
    """One resource's pending plan, as a reviewer is shown it."""

    kind: str
    namespace: str
    name: str
    resource_uid: str
    plan_name: str
    plan_uid: str
    fingerprint: str
    epoch: str
    target: dict[str, Any]
    destructive: bool  # what the plan itself records
    privilege_changes: tuple[str, ...]
    statements: tuple[Statement, ...] = ()
    classified_by: ClassifiedBy = "kubectl-ptah"
    migrations: tuple[dict[str, Any], ...] = ()
    history_fingerprint: str = ""
    approvals: tuple[dict[str, Any], ...] = field(default=())
    # A schema plan's bytes as stored (verified against its chunks), for ``-o sql``.
    data: bytes = field(default=b"", repr=False)
    # The plan awaiting a decision, or the one the last confirmed Apply ran.
    which: Which = "pending"

    @property
    def pin(self) -> tuple[str, str, str]:
        """What an approval binds: the plan by name and UID, and its fingerprint."""
        return (self.plan_name, self.plan_uid, self.fingerprint)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.resource_uid,
            "plan": {"name": self.plan_name, "uid": self.plan_uid},
            "fingerprint": self.fingerprint,
            "executionBindingID": self.epoch,
            "target": self.target,
            "destructive": self.destructive or any(s.destructive for s in self.statements),
            "privilegeChanges": list(self.privilege_changes),
            "approvals": list(self.approvals),
            "which": self.which,
        }
        if self.kind == "PtahSchema":
            out["classifiedBy"] = self.classified_by
            out["statements"] = [s.to_json() for s in self.statements]
        else:
            out["historyFingerprint"] = self.history_fingerprint
            out["migrations"] = list(self.migrations)
        return out


def target_view(target: DatabaseTargetSpec) -> dict[str, Any]:
    """The database a plan is for: engine, realm and where its URL comes from."""
    out: dict[str, Any] = {"engine": target.engine}
    if target.coordination_key is not None:
        out["coordinationKey"] = target.coordination_key
    if target.realm_ref is not None:
        out["realmRef"] = target.realm_ref.name
    out["urlFrom"] = {"secret": target.url_from.name, "key": target.url_from.key}
    return out


def plan_bytes(plan: PtahSchemaPlan, chunks: Mapping[str, Mapping[str, Any] | None]) -> bytes:
    """The plan's bytes from its stored chunks (by name), each held to the plan."""
    problem = plan_geometry_problem(plan)
    if problem is not None:
        raise PlanUnreadable(f"plan {plan.metadata.name}: {problem}")
    out = b""
    for chunk in sorted(plan.spec.chunks, key=lambda c: c.index):
        stored = chunks.get(chunk.name)
        if stored is None:
            raise PlanUnreadable(f"plan {plan.metadata.name}: chunk {chunk.name} does not exist")
        data, problem = chunk_object_problem(plan, chunk, stored)
        if data is None:
            raise PlanUnreadable(f"plan {plan.metadata.name}: {problem}")
        out += data
    return out


def schema_plan_view(
    schema: PtahSchema,
    plan: PtahSchemaPlan,
    chunks: Mapping[str, Mapping[str, Any] | None],
    approvals: Sequence[dict[str, Any]] = (),
    *,
    applied: CurrentPlanStatus | None = None,
) -> PlanView:
    """The schema's pending plan (``status.plan``), or with ``applied`` the plan the
    last confirmed Apply ran (``status.applied``), held to the stored plan it names."""
    current = applied or _current(schema)
    field_name = "status.applied" if applied else "status.plan"
    meta = plan.metadata
    if (meta.name, meta.uid) != (current.name, current.uid):
        raise PlanUnreadable(f"{field_name} names {current.name}, which is not the stored plan")
    if plan.spec.fingerprint != current.fingerprint:
        raise PlanUnreadable(f"plan {current.name} is not the fingerprint {field_name} records")
    data = plan_bytes(plan, chunks)
    statements, classified_by = statements_of(data, engine=schema.spec.target.engine)
    return PlanView(
        kind="PtahSchema",
        namespace=schema.metadata.namespace or "",
        name=schema.metadata.name or "",
        resource_uid=schema.metadata.uid or "",
        plan_name=current.name,
        plan_uid=current.uid,
        fingerprint=current.fingerprint,
        epoch=current.execution_binding_id,
        target=target_view(schema.spec.target),
        destructive=plan.spec.destructive,
        privilege_changes=tuple(plan.spec.privilege_changes),
        statements=statements,
        classified_by=classified_by,
        approvals=tuple(approvals),
        data=data,
        which="applied" if applied else "pending",
    )


def _current(schema: PtahSchema) -> CurrentPlanStatus:
    status = schema.status
    if status is None or status.plan is None:
        raise PlanUnreadable(
            f"PtahSchema {schema.metadata.namespace}/{schema.metadata.name} has no pending plan"
        )
    return status.plan


def migration_plan_view(
    migration: PtahMigration,
    plan: PtahMigrationPlan,
    approvals: Sequence[dict[str, Any]] = (),
    *,
    applied: ObjectReference | None = None,
) -> PlanView:
    """The migration's pending plan: the ordered migrations it would run; with
    ``applied`` (the plan its last confirmed run's approval names), that plan."""
    status = migration.status
    ref = applied or (status.plan if status is not None else None)
    if ref is None:
        raise PlanUnreadable(
            f"PtahMigration {migration.metadata.namespace}/{migration.metadata.name} "
            "has no pending plan"
        )
    if (plan.metadata.name, plan.metadata.uid) != (ref.name, ref.uid):
        named_by = "the approval of the last run" if applied else "status.plan"
        raise PlanUnreadable(f"{named_by} names {ref.name}, which is not the stored plan")
    return PlanView(
        kind="PtahMigration",
        namespace=migration.metadata.namespace or "",
        name=migration.metadata.name or "",
        resource_uid=migration.metadata.uid or "",
        plan_name=ref.name,
        plan_uid=ref.uid,
        fingerprint=plan.spec.fingerprint,
        epoch=plan.spec.execution_binding_id,
        target=target_view(migration.spec.target),
        destructive=False,
        privilege_changes=(),
        migrations=tuple(m.to_wire() for m in plan.spec.migrations),
        history_fingerprint=plan.spec.history_fingerprint,
        approvals=tuple(approvals),
        which="applied" if applied else "pending",
    )


def moved(shown: PlanView, now: PlanView) -> str | None:
    """Why the plan now pending is not the one shown, or None."""
    if shown.resource_uid != now.resource_uid:
        return f"{shown.kind} {shown.namespace}/{shown.name} was replaced (another UID)"
    if shown.pin != now.pin:
        return (
            f"the plan moved since it was shown: {shown.plan_name} ({shown.fingerprint}) "
            f"is now {now.plan_name} ({now.fingerprint})"
        )
    return None
