"""A status update scene and the changes the transition tables make to it (on the new
object, several at once, the claim within it): what the transition and artifact-evidence
tests build their rows from."""

from __future__ import annotations

import copy
from collections.abc import Callable

from jobclaim.apiserver import BY_KIND
from tests.support.webhookscenes import (
    MANAGER_USERNAME,
    OWNER_UIDS,
    Obj,
    Scene,
    owner_world,
    stored_object,
)

Change = Callable[[Scene], None]


def status_update(family: str, operation: str, before: Callable[[Obj], None]) -> Scene:
    """The manager's status UPDATE of a resource whose stored status ``before`` shapes;
    the new object starts equal to the old one."""
    world = owner_world(family, operation)
    old = stored_object(world.resource, OWNER_UIDS[family])
    before(old["status"])
    new = copy.deepcopy(old)
    kind = world.resource.kind
    return Scene(
        BY_KIND[kind], "UPDATE", new, [], old=old, username=MANAGER_USERNAME, subresource="status"
    )


def claim_of(obj: Obj) -> Obj:
    claim: Obj = obj["status"]["activeOperation"]
    return claim


def new(change: Callable[[Obj], None]) -> Change:
    def apply(scene: Scene) -> None:
        assert scene.obj is not None
        change(scene.obj)

    return apply


def both(*changes: Change) -> Change:
    def apply(scene: Scene) -> None:
        for change in changes:
            change(scene)

    return apply
