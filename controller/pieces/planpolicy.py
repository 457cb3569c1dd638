"""Two rules a plan is held to wherever it is decided on: whether its Apply needs an
approval, and the digest its verification policy is bound by. Pure.

They sit apart from the dispatch code so the readings that publish a plan and the
phase machine that decides from it ask the same rule the Apply's authorization asks.
"""

from __future__ import annotations

from jobclaim import approval_required as plan_needs_approval
from jobclaim import sha256_digest
from jobclaim.api import PtahSchema


def approval_required(schema: PtahSchema) -> bool:
    """Always needs no approval only for a plan that destroys nothing and grants nothing
    (``jobclaim.statements.approval_required``, the rule admission also judges by)."""
    plan = schema.status.plan if schema.status else None
    if plan is None:
        return True
    return plan_needs_approval(
        schema.spec.policy.apply,
        destructive=plan.destructive,
        privileged=bool(plan.privilege_changes),
    )


def policy_digest(data: str) -> str:
    """The digest a plan binds its verification policy by: SHA-256 of the key's text."""
    return sha256_digest(data.encode("utf-8"))
