"""A plan's statements, read from its bytes: one classification for every reader.

A plan's destructiveness and privilege changes decide whether a person must approve
it (``approval_required``), and ``kubectl ptah plan`` shows a reviewer the same
reading. The plan object records both, but the plan is published by the manager, so
a compromised manager could record ``DROP TABLE`` as harmless and spend no approval
on it. The webhook therefore recomputes them here from the very bytes the Apply Pod
mounts, and the plugin classifies with the same function: what a reviewer is shown
and what admission judges by cannot disagree.

When the bytes are Ptah's saved-plan document (JSON, ``format_version`` 1,
``statements`` with ``sql``, ``severity`` and ``reason``) each statement keeps Ptah's
own severity (a higher one is never lowered); plain SQL text is split into statements
here and each is classified by its leading words. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "ClassifiedBy",
    "PlanContent",
    "PlanUnreadable",
    "Statement",
    "approval_required",
    "classify",
    "plan_content",
    "recorded_content_problem",
    "split_sql",
    "statements_of",
]

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
    severity = "destructive" if destructive else "privilege" if privilege else "safe"
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


@dataclass(frozen=True, slots=True)
class PlanContent:
    """What a plan's bytes say about it, whatever the plan object records."""

    statements: tuple[Statement, ...]
    classified_by: ClassifiedBy

    @property
    def destructive(self) -> Sequence[Statement]:
        return [s for s in self.statements if s.destructive]

    @property
    def privilege(self) -> Sequence[Statement]:
        return [s for s in self.statements if s.privilege]


def plan_content(data: bytes) -> PlanContent:
    """The statements of a plan's bytes (``PlanUnreadable`` when they are not text)."""
    statements, classified_by = statements_of(data)
    return PlanContent(statements, classified_by)


def _first(statements: Sequence[Statement]) -> str:
    s = statements[0]
    sql = " ".join(s.sql.split())
    return f"statement {s.index}: {sql[:80]}"


def recorded_content_problem(
    content: PlanContent, *, destructive: bool, privilege_changes: Sequence[str]
) -> str | None:
    """Why what a plan records about itself understates its bytes, or None.

    Only an understatement refuses: a plan recorded destructive whose bytes read as
    harmless still asks for an approval, which costs a person a look and runs nothing
    nobody saw.
    """
    if content.destructive and not destructive:
        return f"it records no destructive statement, but has {_first(content.destructive)}"
    if content.privilege and not privilege_changes:
        return f"it records no privilege change, but has {_first(content.privilege)}"
    return None


def approval_required(apply_policy: str, *, destructive: bool, privileged: bool) -> bool:
    """Whether a person must approve a plan before it runs: the one rule.

    ``policy.apply: Always`` waives the approval only for a plan that destroys nothing
    and grants nothing; every other policy needs one. The controller asks it with the
    plan's record, the webhook with the record and the bytes' reading together.
    """
    if apply_policy != "Always":
        return True
    return destructive or privileged
