"""No Job is created under an admission snapshot that does not pin its template
(issue 15, defect 5; docs/architecture.md, "The admission snapshot is re-resolved once").

The claim's input fingerprint does not cover the manager identity (controller image
and revision, runner image): it binds nothing, and the snapshot pins it. So a manager
that changes between the pass that made the snapshot durable and the pass that
creates the Job (a rollout, a new leader) builds a template the snapshot was not
resolved for. The snapshot step then re-resolves once, as its own boundary (the pass
returns), and refuses the second time, retiring the claim before dispatch.

- The table runs on both backends: no change; one change between the snapshot and the
  create (re-resolved, then the Job under the new snapshot); two changes (refused: the
  claim is retired before its mark, its approval unspent, and the next claim gets a Job).
- The property runs on the double: any sequence of manager changes between any passes
  leaves every Job carrying a template its claim's snapshot pins, and its digest.
- ``test_the_pin_check_bites`` runs the property's check against a snapshot step that
  trusts any persisted snapshot, and must find a Job the snapshot does not pin.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.mutationlifecycle import Driver
from controller.stages import dispatch_steps
from jobclaim import template_digest
from jobclaim.api import AdmissionSnapshot
from jobclaim.envelope import ANN_SNAPSHOT_DIGEST
from tests.lifecycle.backends import DOUBLE, Backend
from tests.lifecycle.worlds import MIGRATION, SCHEMA, Family, World
from tests.support.examples import examples

REFUSED: Final = "the Job's Pod template disagrees with its admission snapshot twice"


def _manager_moves(world: World, serial: int) -> None:
    """Another manager takes over: same execution binding, another runner image."""
    config = world.env.config
    image = f"registry.example.com/ptah-runner@sha256:{serial:064x}"
    world.env.config = dataclasses.replace(
        config, manager=config.manager.model_copy(update={"runner_image": image})
    )


def _snapshot_of(record: Any) -> AdmissionSnapshot | None:
    raw = (record or {}).get("admissionSnapshot")
    return AdmissionSnapshot.model_validate(raw) if raw else None


def _snapshots(world: World) -> Iterator[AdmissionSnapshot]:
    """Every snapshot the resource holds: its claim's and its records'."""
    held = world.holding()
    for record in (held.claim, held.records.get("pendingObservation")):
        snapshot = _snapshot_of(record)
        if snapshot is not None:
            yield snapshot


def unpinned_jobs(world: World) -> list[str]:
    """Jobs whose template and snapshot-digest annotation no held snapshot pins."""
    pins = {(s.template_digest, s.digest) for s in _snapshots(world)}
    problems = []
    for job in world.site.jobs():
        template = job["spec"]["template"]
        carried = job["metadata"]["annotations"].get(ANN_SNAPSHOT_DIGEST)
        if (template_digest(template), carried) not in pins:
            problems.append(job["metadata"]["name"])
    return problems


def _until_snapshot(world: World) -> None:
    """Passes until the claim's snapshot is durable and nothing is dispatched yet."""
    for _ in range(4):
        claim = world.holding().claim
        if claim.get("admissionSnapshot") and not claim.get("dispatchStarted"):
            return
        world.run()
    raise AssertionError("the claim never made its admission snapshot durable")


# (id, how many times the manager moves between a snapshot and its create)
ROWS: Final = [("control: no change", 0), ("one change: re-resolved", 1), ("two: refused", 2)]


@pytest.mark.parametrize(("row", "moves"), ROWS, ids=[r[0] for r in ROWS])
@pytest.mark.parametrize("family", [SCHEMA, MIGRATION], ids=["schema", "migration"])
def test_a_template_the_snapshot_does_not_pin_is_resolved_once_then_refused(
    family: Family, row: str, moves: int, backend: Backend
) -> None:
    world = World.make(family, Driver(), backend)
    stops: list[str] = []
    for serial in range(1, moves + 1):
        _until_snapshot(world)
        _manager_moves(world, serial)
        stops.append(world.run())
    for _ in range(6):
        stops.append(world.run())
        assert unpinned_jobs(world) == [], row
    held = world.holding()
    assert world.raised == []
    assert len(world.site.jobs()) == 1, row  # one Job, pinned, whatever happened
    assert held.claimed_job, f"{row}: the claim never reached its Job"
    assert held.claim.get("admissionSnapshotRefreshed", False) is (moves == 1), row
    if moves == 2:
        # The second disagreement retired that claim before its mark; a new one won.
        assert stops[1] == f"the claim was retired: {REFUSED}"
        assert world.api.job_creates()[0].name == held.claim["jobName"]


@settings(max_examples=examples(40), deadline=None)
@given(
    family=st.sampled_from([SCHEMA, MIGRATION]),
    moves=st.lists(st.booleans(), min_size=1, max_size=12),
)
def test_no_job_is_ever_created_under_a_snapshot_that_does_not_pin_it(
    family: Family, moves: list[bool]
) -> None:
    """Before each pass the manager moves or not; after each, every Job is pinned."""
    world = World.make(family, Driver(), DOUBLE)
    for serial, move in enumerate(moves, start=1):
        if move:
            _manager_moves(world, serial)
        world.run()
        assert unpinned_jobs(world) == []
    assert world.raised == []


def test_the_pin_check_bites(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot step that trusts any persisted snapshot creates a Job it does not pin,
    and the property's check says so: the property can fail."""
    monkeypatch.setattr(
        dispatch_steps,
        "snapshot_verdict",
        lambda snapshot, template, *, refreshed: "resolve" if snapshot is None else "valid",
    )
    world = World.make(SCHEMA, Driver(), DOUBLE)
    _until_snapshot(world)
    _manager_moves(world, 1)
    for _ in range(3):
        world.run()
    assert unpinned_jobs(world) != []
