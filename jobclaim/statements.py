"""A plan's statements, read from its bytes by a real SQL parser: one reading for all.

A plan's destructiveness and privilege changes decide whether a person must approve
it (``approval_required``), and ``kubectl ptah plan`` shows a reviewer the same
reading. The plan object records both, but the plan is published by the manager, so
a compromised manager could record ``DROP TABLE`` as harmless and spend no approval
on it. The webhook therefore recomputes them here from the very bytes the Apply Pod
mounts, the controller records them from the same reading when it publishes a plan,
and the plugin shows it: what a reviewer is shown, what the controller decides and
what admission judges by cannot disagree.

Each statement is read by its engine's parser (PostgreSQL's own, through pglast; for
the MySQL family, sqlglot's MySQL dialect) and its whole tree walked: a statement is
*safe* only when the tree proves it additive. Anything that drops, deletes, updates,
renames, runs code or is not known is destructive; what changes privileges or owners
is privileged; what no parser can read is both (``jobclaim._sqlverdict``).

When the bytes are Ptah's saved-plan document (JSON, ``format_version`` 1,
``statements`` with ``sql``, ``severity`` and ``reason``) each statement is read the
same way and the worse of Ptah's severity and the parser's reading is kept. Pure: no
I/O. The parsers are imported on first use: the runner ships ``jobclaim`` into the
executor's container without them, and never classifies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from jobclaim._sqlverdict import Verdict, unknown

__all__ = [
    "ClassifiedBy",
    "PlanContent",
    "PlanUnreadable",
    "Statement",
    "approval_required",
    "classify",
    "plan_content",
    "privilege_changes_of",
    "recorded_content_problem",
    "split_sql",
    "statements_of",
]

ClassifiedBy = Literal["ptah", "kubectl-ptah"]

# Ptah's severities and ours, least to worst: the combined severity is the worse.
_RANK: Final = {"safe": 0, "info": 1, "warning": 2, "privilege": 3, "error": 4, "high": 4}
_DESTRUCTIVE_RANK: Final = 5
_RECORDED_PRIVILEGE_LINES: Final = 64


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
    # What the parser's tree shows (empty: it proves the statement additive).
    findings: str = ""

    @property
    def additive(self) -> bool:
        return not (self.destructive or self.privilege)

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
        if self.findings:
            out["findings"] = self.findings
        return out


def split_sql(text: str) -> list[str]:
    """``text`` cut at each ``;`` outside quotes, dollar quotes and comments.

    Only for showing a text no parser can read: where a statement ends is then a
    guess, so every piece is read as not additive (``_unparsed``).
    """
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


Reader = Callable[[str], list[tuple[str, Verdict]]]


def _reader(engine: str) -> tuple[Reader, Callable[[str], Verdict], type[Exception]] | None:
    """The engine's parser: read a text, read one statement, and its unreadable error."""
    if engine == "PostgreSQL":
        from jobclaim import _postgres_sql as pg  # noqa: PLC0415 (see the module's docstring)

        return pg.read, pg.classify_one, pg.SqlUnreadable
    if engine == "MySQL":
        from jobclaim import _mysql_sql as my  # noqa: PLC0415

        return my.read, my.classify_one, my.SqlUnreadable
    return None


def _read(engine: str, text: str) -> list[tuple[str, Verdict]]:
    """The statements of ``text`` with what the engine's parser makes of each."""
    reader = _reader(engine)
    if reader is None:
        finding = unknown(f"no SQL parser is known for the engine {engine!r}")
        return [(s, Verdict((finding,))) for s in split_sql(text)]
    read, _, unreadable_error = reader
    try:
        return read(text)
    except unreadable_error as error:
        # Not valid as a whole: the pieces are a guess at where statements end, so
        # none of them may count as additive, whatever it reads as alone.
        detail = " ".join(str(error).split())[:160]
        finding = unknown(f"the plan as a whole is not valid {engine} ({detail})")
        return [(s, Verdict((finding,))) for s in split_sql(text)]


def classify(index: int, sql: str, *, engine: str) -> Statement:
    """One statement (or one entry's text), classified by its engine's parser."""
    reader = _reader(engine)
    if reader is None:
        found = Verdict((unknown(f"no SQL parser is known for the engine {engine!r}"),))
    else:
        found = reader[1](sql)
    return _statement(index, sql, found)


def _statement(index: int, sql: str, found: Verdict) -> Statement:
    severity = "destructive" if found.destructive else "privilege" if found.privilege else "safe"
    return Statement(
        index, sql, severity, found.destructive, found.privilege, findings=found.reason
    )


def _worse(ptah: str, ours: str) -> str:
    def rank(severity: str) -> int:
        return _DESTRUCTIVE_RANK if severity == "destructive" else _RANK.get(severity, 4)

    return ptah if rank(ptah) >= rank(ours) else ours


def statements_of(data: bytes, *, engine: str) -> tuple[tuple[Statement, ...], ClassifiedBy]:
    """The statements in a plan's bytes, and whose severities they carry."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanUnreadable("the plan's bytes are not UTF-8 text") from error
    document = _saved_plan(text)
    if document is None:
        read = _read(engine, text)
        return tuple(_statement(i, s, v) for i, (s, v) in enumerate(read, 1)), "kubectl-ptah"
    out: list[Statement] = []
    for i, entry in enumerate(document, 1):
        ours = classify(i, entry["sql"], engine=engine)
        severity = _worse(str(entry.get("severity") or "safe"), ours.severity)
        destructive = ours.destructive or severity.lower() in ("destructive", "error", "high")
        reason = str(entry.get("reason") or "")
        out.append(
            Statement(i, entry["sql"], severity, destructive, ours.privilege, reason, ours.findings)
        )
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


def plan_content(data: bytes, *, engine: str) -> PlanContent:
    """The statements of a plan's bytes (``PlanUnreadable`` when they are not text)."""
    statements, classified_by = statements_of(data, engine=engine)
    return PlanContent(statements, classified_by)


def _first(statements: Sequence[Statement]) -> str:
    s = statements[0]
    sql = " ".join(s.sql.split())
    why = f" ({s.findings})" if s.findings else ""
    return f"statement {s.index}: {sql[:80]}{why}"


def privilege_changes_of(content: PlanContent) -> list[str]:
    """What a plan records as its privilege changes: one line per privileged statement.

    The controller records exactly this when it publishes a plan, so the plan's record
    and the webhook's reading of its bytes agree by construction.
    """
    lines = [f"statement {s.index}: {s.findings or s.severity}"[:256] for s in content.privilege]
    if len(lines) > _RECORDED_PRIVILEGE_LINES:
        # The plan object must fit the API server's size limit; the bytes keep them all.
        more = len(lines) - _RECORDED_PRIVILEGE_LINES + 1
        lines = [*lines[: _RECORDED_PRIVILEGE_LINES - 1], f"and {more} more"]
    return lines


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
    and grants nothing, which by the parser's reading means a plan whose every
    statement its tree proves additive; every other policy needs one. The controller
    asks it with the plan's record, the webhook with the record and the bytes' reading
    together.
    """
    if apply_policy != "Always":
        return True
    return destructive or privileged
