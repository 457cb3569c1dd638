"""What ``kubectl ptah`` prints: plain text for people, YAML and SQL for tools.

JSON is ``json.dumps`` of the same document YAML is made from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from kubectl_ptah.review import PlanView

_MARK = {"destructive": "DESTRUCTIVE", "privilege": "PRIVILEGE", "safe": "safe"}


def _target(target: Mapping[str, Any]) -> str:
    realm = (
        f"coordinationKey {target['coordinationKey']}"
        if "coordinationKey" in target
        else f"realm {target.get('realmRef', '?')}"
    )
    url = target.get("urlFrom", {})
    return f"{target['engine']}, {realm}, URL from Secret {url.get('secret')} key {url.get('key')}"


def approvals_text(approvals: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    if not approvals:
        return "none"
    return "; ".join(
        f"{a['name']} by {a.get('by') or '?'} at {a.get('at') or '?'}"
        + (f" ({a['state']})" if a.get("state") else "")
        for a in approvals
    )


def plan_text(view: PlanView) -> str:
    """The plan as a reviewer reads it: what, where, which fingerprint, each statement."""
    title = f"{view.kind} {view.namespace}/{view.name}"
    if view.which == "applied":
        title += ": the plan the last confirmed Apply ran"
    lines = [
        title,
        f"  plan:         {view.plan_name} (uid {view.plan_uid})",
        f"  fingerprint:  {view.fingerprint}",
        f"  epoch:        {view.epoch}",
        f"  target:       {_target(view.target)}",
    ]
    if view.kind == "PtahSchema":
        destructive = [s for s in view.statements if s.destructive]
        privilege = [s for s in view.statements if s.privilege]
        lines.append(
            f"  statements:   {len(view.statements)} "
            f"({len(destructive)} destructive, {len(privilege)} privilege; "
            f"severity by {view.classified_by})"
        )
        recorded = "destructive" if view.destructive else "not destructive"
        changes = ", ".join(view.privilege_changes) or "none"
        lines.append(f"  plan records: {recorded}; privilege changes: {changes}")
    else:
        lines.append(f"  history:      {view.history_fingerprint}")
        lines.append(f"  migrations:   {len(view.migrations)}")
    lines.append(f"  approvals:    {approvals_text(view.approvals)}")
    lines.append("")
    if view.kind == "PtahSchema":
        width = len(str(len(view.statements)))
        for s in view.statements:
            mark = _MARK.get(s.severity, s.severity)
            flags = [
                f for f, on in (("destructive", s.destructive), ("privilege", s.privilege)) if on
            ]
            head = f"  {s.index:>{width}}  {mark:<11}"
            tail = f"  [{', '.join(flags)}]" if flags and mark.lower() not in flags else ""
            sql = s.sql.splitlines() or [""]
            lines.append(f"{head} {sql[0]}{tail}")
            lines.extend(f"  {'':>{width}}  {'':<11} {line}" for line in sql[1:])
            if s.reason:
                lines.append(f"  {'':>{width}}  {'':<11} -- {s.reason}")
            if s.findings:
                # What PostgreSQL's (or the MySQL dialect's) parse tree shows: why a
                # person must look at this statement.
                lines.append(f"  {'':>{width}}  {'':<11} -- parser: {s.findings}")
    else:
        for m in view.migrations:
            named = f" {m['name']}" if m.get("name") else ""
            lines.append(f"  {m['version']}{named}  {m['digest']}")
    return "\n".join(lines)


def record_text(title: str, fields: Mapping[str, Any]) -> str:
    """A heading and ``key: value`` lines, nested mappings flattened with dots."""
    lines = [title]

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                add(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list):
            lines.append(f"  {prefix}: {', '.join(str(v) for v in value) or '-'}")
        elif value is not None:
            lines.append(f"  {prefix}: {value}")

    add("", fields)
    return "\n".join(lines)


def yaml_text(document: Any) -> str:
    """The document ``-o json`` prints, as YAML: the same keys in the same order."""
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True)


def plan_sql(view: PlanView) -> str:
    """A schema plan's statements and nothing else, exactly as stored.

    Plain SQL bytes are printed as they are, byte for byte (their SHA-256 is the plan's
    ``contentDigest``), so what a tool reads is what the Apply runs. Ptah's saved-plan
    document stores each statement's text apart; each is printed as stored, one after
    the other, each ending a line.
    """
    if view.classified_by == "ptah":
        return "".join(f"{s.sql}\n" for s in view.statements)
    return view.data.decode("utf-8")
