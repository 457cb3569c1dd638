"""A plan's unspent approvals marked stale: what a person approved no longer stands.

A plan's approvals say "apply this plan as it was made". When what the plan was made
from is retired (its execution binding) or moves under it (the database a waiting plan
was read from, the history a migration plan was made against), approving it again is
the person's to do: every approval that is neither consumed nor already stale gets a
``Stale`` condition naming why, so no later pass can spend it.

A stage, not a piece: it lists and writes the family's approval resources through the
pass's API client, and every caller (binding rotation, planning, a reading that moved,
a schema's records) is a stage or a family's records. A write that lost its
compare-and-swap is skipped: the next sweep decides from that write.
"""

from __future__ import annotations

from controller.context.passcontext import PassContext
from controller.pieces.approvals import CONSUMED, STALE
from jobclaim.apiserver import Conflict
from jobclaim.times import timestamp

__all__ = ["mark_plan_approvals_stale"]


def mark_plan_approvals_stale(
    ctx: PassContext,
    plan_uid: str,
    *,
    reason: str = "ExecutionBindingChanged",
    message: str = "the plan was made under an execution binding that was retired",
) -> int:
    """Mark every unspent approval of the plan ``plan_uid`` stale; how many were."""
    marked = 0
    for obj in ctx.api.list(ctx.family.approvals, ctx.namespace):
        spec = obj.get("spec") or {}
        if (spec.get("planRef") or {}).get("uid") != plan_uid:
            continue
        status = dict(obj.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
        if any(
            c.get("type") in (CONSUMED, STALE) and c.get("status") == "True" for c in conditions
        ):
            continue
        conditions.append(
            {
                "type": STALE,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": timestamp(ctx.now()),
            }
        )
        try:
            ctx.api.patch_status(
                ctx.family.approvals,
                ctx.namespace,
                obj["metadata"]["name"],
                {**status, "conditions": conditions},
                resource_version=obj["metadata"].get("resourceVersion", ""),
            )
        except Conflict:
            continue  # written since our read; the next sweep decides from that write
        marked += 1
    return marked
