"""The mutation lifecycle shared by both families: the dispatch order, the boundary,
and what a retirement owes. Decisions here are pure; families supply the I/O."""

from controller.mutationlifecycle.boundary import (
    CreateOutcome,
    classify_create,
    may_have_dispatched,
)
from controller.mutationlifecycle.driver import (
    DISPATCH_ORDER,
    ClaimView,
    DispatchSteps,
    Driver,
    MayHaveDispatched,
    Step,
    Stop,
    snapshot_is_first_write,
    steps_for,
)
from controller.mutationlifecycle.releaserule import (
    Disposition,
    RealmHolder,
    Retirement,
    owed_release,
    realm_held_by,
)

__all__ = [
    "DISPATCH_ORDER",
    "ClaimView",
    "CreateOutcome",
    "DispatchSteps",
    "Disposition",
    "Driver",
    "MayHaveDispatched",
    "RealmHolder",
    "Retirement",
    "Step",
    "Stop",
    "classify_create",
    "may_have_dispatched",
    "owed_release",
    "realm_held_by",
    "snapshot_is_first_write",
    "steps_for",
]
