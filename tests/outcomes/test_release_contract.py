"""The contract both families share, run against both.

- "May have dispatched": once the mark or a UID is durable, a missing Job is an
  unknown outcome, never a Job to create.
- The write that drops a claim stages the release in that same write exactly when a
  Lease is owed back: the stop right after that write shows what it carried.
- A release obligation stays (and so does the finalizer) until a release succeeds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.mutationlifecycle import may_have_dispatched
from jobclaim.apiserver import JOBS, LEASES, PTAHSCHEMAS, Unavailable
from kube.fake.inmemory import matching
from tests.support.dispatchworld import NS, Rig, make_rig
from tests.support.outcomeworld import (
    FAMILIES,
    MIGRATION,
    SCHEMA,
    FamilyCase,
    account,
    lease_holder_of,
    status_of,
)
from tests.support.podworld import (
    finish_job,
    harvest_with,
    job_of,
    result_for,
    start_pod,
)


@pytest.mark.parametrize(
    ("dispatch_started", "job_uid", "expected"),
    [(False, None, False), (True, None, True), (False, "u", True), (True, "u", True)],
)
def test_may_have_dispatched(dispatch_started: bool, job_uid: str | None, expected: bool) -> None:
    assert may_have_dispatched(dispatch_started=dispatch_started, job_uid=job_uid) is expected


# (id, what happens to the Job after the claim was written, does a create follow)
DISPATCH_ROWS: list[tuple[str, Callable[[Rig, Any], None], bool]] = [
    ("control: a claim with no mark proceeds", lambda rig, key: None, True),
    ("marked, the Job never stored", lambda rig, key: None, False),
    (
        "a UID recorded, the Job deleted",
        lambda rig, key: rig.api.delete(JOBS, NS, rig.claim(key)["jobName"]),
        False,
    ),
]


@pytest.mark.parametrize("family", FAMILIES, ids=str)
@pytest.mark.parametrize(
    ("row", "act", "creates"), DISPATCH_ROWS, ids=[r[0] for r in DISPATCH_ROWS]
)
def test_a_claim_that_may_have_dispatched_is_never_dispatched_again(
    family: FamilyCase, row: str, act: Callable[[Rig, Any], None], creates: bool
) -> None:
    rig = make_rig()
    key = family.add(rig)
    if row.startswith("marked"):
        rig.api.fail_before_write(matching("create", JOBS), Unavailable("lost"))
    if row.startswith("control"):
        rig.reconcile(key)  # the claim only
    else:
        rig.settle(key)
    before = rig.job_creates()
    act(rig, key)
    rig.api.clear_calls()
    rig.settle(key)
    assert (rig.job_creates() > 0) is creates
    if not creates:
        assert account(rig, key) == "unknown"
        assert before <= 1


def _retiring_write(resource: Any) -> Any:
    """The status patch that drops a claim: the first one whose body has none."""
    return matching("patch_status", resource, body=lambda b: "activeOperation" not in b)


# (id, family, how the claim is retired, whether its retiring write stages a release)
Retire = Callable[[Rig, Any], None]


def _suspend(rig: Rig, key: Any, family: FamilyCase) -> None:
    rig.api.patch_spec(family.resource, NS, key.name, {"suspend": True})


def _suspended(family: FamilyCase) -> Retire:
    return lambda rig, key: _suspend(rig, key, family)


def _applied(family: FamilyCase) -> Retire:
    def retire(rig: Rig, key: Any) -> None:
        harvest_with(rig, key, family.apply_op, family.applied)

    return retire


def _still_writing(rig: Rig, key: Any) -> None:
    job = job_of(rig, key)
    start_pod(rig, job, suffix="a")
    start_pod(rig, job, suffix="b", terminated=False)
    finish_job(rig, job["metadata"]["name"])


def _uncertain_but_stopped(rig: Rig, key: Any) -> None:
    job = job_of(rig, key)
    start_pod(
        rig,
        job,
        result=(
            result_for(
                rig, key, "migration-apply", operationId="sha256:" + "9" * 64, **MIGRATION.applied
            )
        ),
    )
    finish_job(rig, job["metadata"]["name"])


RELEASE_ROWS: list[tuple[str, FamilyCase, str, Retire, bool]] = [
    # A Lease held and nothing ran: the discard hands it back.
    ("schema: suspended after the Lease", SCHEMA, "lease", _suspended(SCHEMA), True),
    ("migration: suspended after the Lease", MIGRATION, "lease", _suspended(MIGRATION), True),
    # A schema's record keeps the realm for the proof.
    ("schema: an Apply read", SCHEMA, "dispatch", _applied(SCHEMA), False),
    ("schema: an Apply unknown", SCHEMA, "dispatch", _still_writing, False),
    # A migration releases once nothing can write.
    ("migration: an Apply read", MIGRATION, "dispatch", _applied(MIGRATION), True),
    ("migration: unknown, stopped", MIGRATION, "dispatch", _uncertain_but_stopped, True),
    ("migration: unknown, may still write", MIGRATION, "dispatch", _still_writing, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("row", "family", "until", "retire", "releases"),
    RELEASE_ROWS,
    ids=[r[0] for r in RELEASE_ROWS],
)
def test_the_retiring_write_stages_the_release_exactly_when_one_is_owed(
    row: str, family: FamilyCase, until: str, retire: Retire, releases: bool
) -> None:
    rig = make_rig()
    key = family.add(rig)
    if until == "lease":
        for _ in range(2):
            rig.reconcile(key)  # the claim, then the Lease and the snapshot
        assert rig.claim(key)["leaseEpoch"] and lease_holder_of(rig)
    else:
        rig.settle(key)
    retire(rig, key)
    rig.api.stop_after_write(_retiring_write(family.resource))
    rig.settle(key)
    assert rig.api.stopped
    status = status_of(rig, key)
    assert "activeOperation" not in status
    assert ("pendingLockRelease" in status) is releases
    rig.api.restart()
    rig.settle(key)
    # The next pass performs what was staged; nothing staged leaves the Lease held.
    assert "pendingLockRelease" not in status_of(rig, key)
    assert (lease_holder_of(rig) == "") is releases


@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_a_release_obligation_stays_until_a_release_succeeds(family: FamilyCase) -> None:
    rig = make_rig()
    key = family.add(rig)
    for _ in range(2):
        rig.reconcile(key)
    _suspend(rig, key, family)
    fault = rig.api.fail_before_write(matching(resource=LEASES), Unavailable("down"), times=None)
    for _ in range(3):
        rig.settle(key)
    status = status_of(rig, key)
    assert "activeOperation" not in status and "pendingLockRelease" in status
    # The finalizer stays while the release is owed, even through deletion.
    rig.api.delete(family.resource, NS, key.name)
    rig.settle(key)
    assert rig.api.peek(family.resource, NS, key.name) is not None
    assert lease_holder_of(rig) != ""
    fault.times = fault.fired  # the API server is back
    rig.settle(key)
    assert rig.api.peek(family.resource, NS, key.name) is None
    assert lease_holder_of(rig) == ""


def test_the_schema_record_names_the_claims_lease_epoch() -> None:
    rig = make_rig()
    key = SCHEMA.add(rig)
    rig.settle(key)
    epoch = rig.claim(key)["leaseEpoch"]
    harvest_with(rig, key, "apply", SCHEMA.applied)
    rig.settle(key)
    pending = status_of(rig, key)["pendingObservation"]
    assert pending["leaseEpoch"] == epoch and pending["applyPodCount"] == 1
    assert rig.api.peek(PTAHSCHEMAS, NS, key.name) is not None
