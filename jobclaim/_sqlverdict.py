"""What a parser's tree says one SQL statement does: the verdict both dialects return.

A statement is *additive* only when its tree proves it adds and nothing else: no
row deleted or updated, no object dropped, renamed or replaced, no privilege or
owner changed, no code run. Everything else carries at least one finding. A finding
is destructive, privileged, or both; what the parser cannot read or does not know is
both, so an unknown construct can never slip through as harmless under
``policy.apply: Always``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["destructive", "privilege", "both"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a statement's tree shows, and why it is not additive."""

    kind: Kind
    what: str

    @property
    def destructive(self) -> bool:
        return self.kind in ("destructive", "both")

    @property
    def privilege(self) -> bool:
        return self.kind in ("privilege", "both")


@dataclass(frozen=True, slots=True)
class Verdict:
    """A statement's findings (none: the tree proves it additive)."""

    findings: tuple[Finding, ...] = ()

    @property
    def destructive(self) -> bool:
        return any(f.destructive for f in self.findings)

    @property
    def privilege(self) -> bool:
        return any(f.privilege for f in self.findings)

    @property
    def additive(self) -> bool:
        return not self.findings

    @property
    def reason(self) -> str:
        """The findings as one sentence fragment, each said once, in order found."""
        seen: list[str] = []
        for f in self.findings:
            if f.what not in seen:
                seen.append(f.what)
        return "; ".join(seen)


def verdict(findings: Iterable[Finding]) -> Verdict:
    return Verdict(tuple(findings))


def destroys(what: str) -> Finding:
    return Finding("destructive", what)


def grants(what: str) -> Finding:
    return Finding("privilege", what)


def unknown(what: str) -> Finding:
    """Not known to be harmless: destructive and privileged, the fail-closed reading."""
    return Finding("both", what)


def unreadable(engine: str, error: str) -> Verdict:
    detail = " ".join(error.split())[:160]
    return Verdict((unknown(f"{engine}'s parser cannot read it ({detail})"),))
