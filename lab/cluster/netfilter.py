"""Removing the iptables chains and rules a lab cluster added, and nothing else.

kube-proxy, the kubelet and the CNI plugins each add chains (``KUBE-*``,
``CNI-*``) and the rules that jump to them, and the lab adds one rule of its
own (marked with its comment). None of them removes all of that on exit, and
chains left behind would keep rewriting this machine's traffic after the lab is
gone. The rule is: a chain that did not exist before the lab started is the
lab's; a rule is the lab's when it jumps to such a chain or carries the lab's
comment. Pure functions over ``iptables-save`` text; the adapter runs them.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "IPTABLES",
    "Ruleset",
    "cleanup_script",
    "lab_residue",
    "parse_save",
    "remove_lab_rules",
    "remove_residue",
    "save",
]

# Both families: kube-proxy and the kubelet write IPv6 chains too when the
# kernel has IPv6, even on a node whose pods are IPv4 only.
IPTABLES: Mapping[str, tuple[str, str]] = {
    "ipv4": ("iptables-save", "iptables-restore"),
    "ipv6": ("ip6tables-save", "ip6tables-restore"),
}


@dataclass
class Ruleset:
    """One family's tables: table -> chains, and table -> rule lines (``-A ...``)."""

    chains: dict[str, set[str]] = field(default_factory=dict)
    rules: dict[str, list[str]] = field(default_factory=dict)


def parse_save(text: str) -> Ruleset:
    """Parse ``iptables-save`` output; unknown lines are an error, not ignored."""
    ruleset = Ruleset()
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line or line.startswith("#") or line == "COMMIT":
            continue
        if line.startswith("*"):
            table = line[1:]
            ruleset.chains.setdefault(table, set())
            ruleset.rules.setdefault(table, [])
        elif not table:
            raise ValueError(f"line {number} of iptables-save output is outside any table")
        elif line.startswith(":"):
            ruleset.chains[table].add(line[1:].split(" ", 1)[0])
        elif line.startswith("-A "):
            ruleset.rules[table].append(line)
        else:
            raise ValueError(f"line {number} of iptables-save output is not understood: {line!r}")
    return ruleset


def _rule_chain_and_target(rule: str) -> tuple[str, str]:
    words = shlex.split(rule)
    chain = words[1]
    target = ""
    for flag in ("-j", "-g"):
        if flag in words:
            target = words[words.index(flag) + 1]
    return chain, target


def _has_comment(rule: str, comment: str) -> bool:
    words = shlex.split(rule)
    return any(words[i] == "--comment" and words[i + 1] == comment for i in range(len(words) - 1))


def cleanup_script(before: Ruleset, now: Ruleset, comment: str) -> str:
    """The ``iptables-restore --noflush`` input that removes what the lab added.

    Empty when there is nothing to remove. Rules in chains that stay are
    deleted one by one (``-D``); the lab's chains are flushed, then deleted,
    so chains that jump to each other go in any order.
    """
    out: list[str] = []
    for table in sorted(now.chains):
        old = before.chains.get(table, set())
        added = sorted(now.chains[table] - old)
        deletions = []
        for rule in now.rules.get(table, []):
            chain, target = _rule_chain_and_target(rule)
            if chain in added:
                continue  # goes with its chain
            if target in added or _has_comment(rule, comment):
                deletions.append("-D" + rule[2:])
        if not added and not deletions:
            continue
        out.append(f"*{table}")
        out.extend(deletions)
        out.extend(f"-F {chain}" for chain in added)
        out.extend(f"-X {chain}" for chain in added)
        out.append("COMMIT")
    return "\n".join(out) + "\n" if out else ""


def lab_residue(now: Ruleset, comment: str) -> list[str]:
    """What of a lab is in a ruleset: its comment, or a Kubernetes or CNI chain.

    Absolute rather than relative to a snapshot, so a test can ask it of a
    machine after the lab is gone.
    """
    found = []
    for table, chains in sorted(now.chains.items()):
        found += [f"{table} chain {c}" for c in sorted(chains) if c.startswith(("KUBE-", "CNI-"))]
        found += [f"{table} rule {r}" for r in now.rules.get(table, []) if _has_comment(r, comment)]
    return found


def save(family: str) -> Ruleset:
    """The family's current ruleset (empty when its tools are not installed)."""
    save_cmd, _ = IPTABLES[family]
    try:
        result = subprocess.run([save_cmd], capture_output=True, text=True, check=True, timeout=60)
    except FileNotFoundError:
        return Ruleset()
    return parse_save(result.stdout)


def _without_residue(now: Ruleset) -> Ruleset:
    """``now`` as it would be without Kubernetes' and CNI's chains."""
    return Ruleset(
        chains={
            table: {c for c in chains if not c.startswith(("KUBE-", "CNI-"))}
            for table, chains in now.chains.items()
        },
        rules=now.rules,
    )


def remove_residue(comment: str) -> list[str]:
    """Remove every Kubernetes and CNI chain and the lab's rules, with no snapshot.

    For a lab that died without its own teardown; a machine that runs another
    Kubernetes node must not use it.
    """
    return remove_lab_rules({f: _without_residue(save(f)) for f in IPTABLES}, comment)


def remove_lab_rules(before: Mapping[str, Ruleset], comment: str) -> list[str]:
    """Remove what the lab added since ``before``; returns problems, if any."""
    problems = []
    for family, (_, restore_cmd) in IPTABLES.items():
        script = cleanup_script(before.get(family, Ruleset()), save(family), comment)
        if not script:
            continue
        result = subprocess.run(
            [restore_cmd, "--noflush"],
            input=script,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if result.returncode != 0:
            problems.append(
                f"{restore_cmd} could not remove the lab's rules: {result.stderr.strip()}"
            )
    return problems
