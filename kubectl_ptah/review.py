"""What a person reviews before deciding: a plan's statements, and why a decision is owed.

Pure: every function takes objects already read and returns what to show. The plan's
bytes come from its chunks through ``jobclaim.projection.chunk_object_problem``, the
reading the controller uses before an Apply, so a person is shown exactly the bytes
an approval would authorize.

A plan's bytes are the SQL Ptah computed. When they are Ptah's saved-plan document
(JSON, ``format_version`` 1, ``statements`` with ``sql``, ``severity`` and
``reason``) each statement keeps Ptah's own severity; plain SQL text is split into
statements here and each is classified by its leading words, and the view says
which of the two it is (``classifiedBy``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from jobclaim import chunk_object_problem, plan_geometry_problem
from jobclaim.api import (
    CurrentPlanStatus,
    DatabaseTargetSpec,
    PtahMigration,
    PtahMigrationPlan,
    PtahSchema,
    PtahSchemaPlan,
)

Severity = Literal["safe", "privilege", "destructive"]
ClassifiedBy = Literal["ptah", "kubectl-ptah"]

# Statements that lose data or structure: what a reviewer must not miss.
_DESTRUCTIVE: Final = re.compile(
    r"^\s*(DROP\b|TRUNCATE\b|DELETE\b|"
    r"ALTER\s+TABLE\b.*\b(DROP|RENAME)\b|ALTER\s+TABLE\b.*\bALTER\s+COLUMN\b.*\bTYPE\b)",
    re.IGNORECASE | re.DOTALL,
)
# Statements that change who may do what.
_PRIVILEGE: Final = re.compile(
    r"^\s*(GRANT\b|REVOKE\b|(CREATE|ALTER|DROP)\s+(ROLE|USER)\b)|\bOWNER\s+TO\b|"
    r"\bSECURITY\s+DEFINER\b",
    re.IGNORECASE | re.DOTALL,
)


class PlanUnreadable(Exception):
    """The plan cannot be shown as what an Apply would run: nothing may be approved."""


@dataclass(frozen=True, slots=True)
class Statement:
    index: int
    sql: str
    severity: str
    destructive: bool
    privilege: bool
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "sql": self.sql,
            "severity": self.severity,
            "destructive": self.destructive,
            "privilege": self.privilege,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


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


def split_sql(text: str) -> list[str]:
    """``text`` cut at each ``;`` outside quotes, dollar quotes and comments."""
    statements: list[str] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            while end != -1 and end + 1 < n and text[end + 1] == c:  # '' and "" escapes
                end = text.find(c, end + 2)
            i = n if end == -1 else end + 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end == -1 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
        elif c == "$" and (tag := re.match(r"\$[A-Za-z_0-9]*\$", text[i:])):
            end = text.find(tag.group(0), i + len(tag.group(0)))
            i = n if end == -1 else end + len(tag.group(0))
        elif c == ";":
            statements.append(text[start : i + 1].strip())
            start, i = i + 1, i + 1
        else:
            i += 1
    rest = text[start:].strip()
    if rest:
        statements.append(rest)
    return [s for s in statements if s and s != ";"]


def _comment_free(sql: str) -> str:
    without = re.sub(r"/\*.*?\*/", " ", sql, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", " ", without)


def classify(index: int, sql: str) -> Statement:
    """One statement, classified by its own words."""
    bare = _comment_free(sql)
    destructive = bool(_DESTRUCTIVE.search(bare))
    privilege = bool(_PRIVILEGE.search(bare))
    severity: Severity = "destructive" if destructive else "privilege" if privilege else "safe"
    return Statement(index, sql, severity, destructive, privilege)


def statements_of(data: bytes) -> tuple[tuple[Statement, ...], ClassifiedBy]:
    """The statements in a plan's bytes, and who classified them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanUnreadable("the plan's bytes are not UTF-8 text") from error
    document = _saved_plan(text)
    if document is None:
        return tuple(classify(i, s) for i, s in enumerate(split_sql(text), 1)), "kubectl-ptah"
    out: list[Statement] = []
    for i, entry in enumerate(document, 1):
        ours = classify(i, entry["sql"])
        severity = str(entry.get("severity") or ours.severity)
        destructive = ours.destructive or severity.lower() in ("destructive", "error", "high")
        reason = str(entry.get("reason") or "")
        out.append(Statement(i, entry["sql"], severity, destructive, ours.privilege, reason))
    return tuple(out), "ptah"


def _saved_plan(text: str) -> list[Mapping[str, Any]] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    statements = document.get("statements") if isinstance(document, dict) else None
    if document.get("format_version") != 1 or not isinstance(statements, list):
        return None
    if not all(isinstance(s, dict) and isinstance(s.get("sql"), str) for s in statements):
        return None
    return statements


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
) -> PlanView:
    """The schema's pending plan: ``status.plan``, held to the stored plan it names."""
    current = _current(schema)
    meta = plan.metadata
    if (meta.name, meta.uid) != (current.name, current.uid):
        raise PlanUnreadable(f"status.plan names {current.name}, which is not the stored plan")
    if plan.spec.fingerprint != current.fingerprint:
        raise PlanUnreadable(f"plan {current.name} is not the fingerprint status.plan records")
    statements, classified_by = statements_of(plan_bytes(plan, chunks))
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
    )


def _current(schema: PtahSchema) -> CurrentPlanStatus:
    status = schema.status
    if status is None or status.plan is None:
        raise PlanUnreadable(
            f"PtahSchema {schema.metadata.namespace}/{schema.metadata.name} has no pending plan"
        )
    return status.plan


def migration_plan_view(
    migration: PtahMigration, plan: PtahMigrationPlan, approvals: Sequence[dict[str, Any]] = ()
) -> PlanView:
    """The migration's pending plan: the ordered migrations it would run."""
    status = migration.status
    ref = status.plan if status is not None else None
    if ref is None:
        raise PlanUnreadable(
            f"PtahMigration {migration.metadata.namespace}/{migration.metadata.name} "
            "has no pending plan"
        )
    if (plan.metadata.name, plan.metadata.uid) != (ref.name, ref.uid):
        raise PlanUnreadable(f"status.plan names {ref.name}, which is not the stored plan")
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
