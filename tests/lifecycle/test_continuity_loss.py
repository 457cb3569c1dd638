"""Continuity loss under a running Job, on both backends (issue 15, defect 1).

``tests/outcomes/test_continuity_loss.py`` holds every row on the double, where a
stand-in kubelet can leave a Pod log with a good frame behind, so a row proves the
frame was not read. Here the rows whose Job is still running run again on the real
API server as well, through the dispatch-order suite's worlds: a real Lease deleted,
taken over by another claimant through the real locker, or rewritten under another
epoch by the admin, while a real Job the controller created stands (no kubelet runs,
so it never ends). The next passes must end the claim as an unknown outcome, the
family's record, with no second Job, whatever the backend stores and answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import pytest

from controller.mutationlifecycle import Driver
from controller.pieces.targetlock import ANN_LEASE_EPOCH
from jobclaim import lease_name
from jobclaim.apiserver import LEASES
from tests.lifecycle.backends import Backend
from tests.lifecycle.worlds import MIGRATION, SCHEMA, Family, World

OTHER_EPOCH: Final = "v1-" + "e" * 32
PASSES: Final = 4


def _lease_name(world: World) -> str:
    return lease_name(str(world.holding().claim["coordinationDigest"]))


def lease_deleted(world: World) -> None:
    site = world.site
    site.api.delete(LEASES, site.lease_namespace, _lease_name(world))


def lease_taken(world: World) -> None:
    assert world.contend()


def epoch_changed(world: World) -> None:
    site = world.site
    lease = site.api.get(LEASES, site.lease_namespace, _lease_name(world))
    lease["metadata"]["annotations"][ANN_LEASE_EPOCH] = OTHER_EPOCH
    site.api.replace(LEASES, site.lease_namespace, lease)


def unchanged(world: World) -> None:
    del world


LOSSES: Final[list[tuple[str, Callable[[World], None]]]] = [
    ("control: the Lease unchanged", unchanged),
    ("Lease deleted", lease_deleted),
    ("Lease taken by another holder", lease_taken),
    ("epoch changed", epoch_changed),
]
UNKNOWN: Final = {"pendingObservation": "OutcomeUnknown", "unresolvedRun": "Unknown"}


@pytest.mark.parametrize(("row", "loss"), LOSSES, ids=[r[0] for r in LOSSES])
@pytest.mark.parametrize("family", [SCHEMA, MIGRATION], ids=["schema", "migration"])
def test_a_running_apply_whose_realm_changed_hands_is_recorded_unknown(
    family: Family, row: str, loss: Callable[[World], None], backend: Backend
) -> None:
    world = World.make(family, Driver(), backend)
    for _ in range(3):
        world.run()
    dispatched = world.holding()
    assert dispatched.claimed_job, "the control of the rig: the Apply has its Job"
    loss(world)
    for _ in range(PASSES):
        world.run()
    held = world.holding()
    assert world.raised == []
    assert list(held.job_uid_by_name) == [dispatched.claim["jobName"]]  # never a second
    if loss is unchanged:
        assert held.claim.get("jobUID") == dispatched.claimed_job
        assert family.record not in held.records
        return
    assert held.claim == {}, f"{row}: the claim still stands"
    record = held.records[family.record]
    assert record["outcome"] == UNKNOWN[family.record], row
    assert record.get("applyJobName", record.get("jobName")) == dispatched.claim["jobName"]
    if family is SCHEMA:
        stored = world.site.peek(family.resource, world.site.namespace, world.key.name) or {}
        assert "applied" not in stored.get("status", {})  # no Apply attributed
