"""A terminal Job is not an outcome: the account comes from its Pod's own record.

Each row sets up what the kubelet and the runner left behind for an Apply's Job and
says what the next passes conclude, for both families: ``succeeded`` when the record
was read and bound to this attempt and this database, ``unknown`` otherwise. A Job's
exit status and conditions never decide: a Failed Job with a good record is
accounted, a Complete Job with no record is not; a Pod gone after it wrote its record
takes nothing with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.stages.claimsupervision import HARVEST_PENDING
from jobclaim import CLEANUP_TTL_SECONDS
from jobclaim.apiserver import JOBS, PODS
from runner.result import RunnerResult
from tests.support.dispatchworld import NS, Rig, add_migration, make_rig
from tests.support.outcomeworld import FAMILIES, FamilyCase, account, lease_holder_of, status_of
from tests.support.podworld import (
    finish_job,
    job_of,
    result_for,
    start_pod,
    summary_message,
    write_record,
)

OTHER = "sha256:" + "9" * 64


def _good(rig: Rig, key: Any, family: FamilyCase, **override: Any) -> RunnerResult:
    return result_for(rig, key, family.apply_op, **{**family.applied, **override})


Setup = Callable[[Rig, Any, FamilyCase], None]


def one_pod(**override: Any) -> Setup:
    def setup(rig: Rig, key: Any, family: FamilyCase) -> None:
        job = job_of(rig, key)
        start_pod(rig, job, result=_good(rig, key, family, **override))
        finish_job(rig, job["metadata"]["name"])

    return setup


def suspended_while_it_ran(rig: Rig, key: Any, family: FamilyCase) -> None:
    """Suspending is a spec edit: the terminal pass finds the inputs moved and records
    the run without reading its result, however good the frame."""
    rig.api.patch_spec(family.resource, NS, key.name, {"suspend": True})
    one_pod()(rig, key, family)


def two_pods(rig: Rig, key: Any, family: FamilyCase) -> None:
    job = job_of(rig, key)
    # The second Pod's create of the Job's record would be refused: it exists.
    start_pod(rig, job, suffix="a", result=_good(rig, key, family))
    start_pod(rig, job, suffix="b")
    finish_job(rig, job["metadata"]["name"])


def pod_gone_after_its_record(rig: Rig, key: Any, family: FamilyCase) -> None:
    job = job_of(rig, key)
    pod = start_pod(rig, job, result=_good(rig, key, family))
    rig.api.delete(PODS, NS, pod["metadata"]["name"])
    finish_job(rig, job["metadata"]["name"])


def failed_job_good_record(rig: Rig, key: Any, family: FamilyCase) -> None:
    job = job_of(rig, key)
    start_pod(rig, job, result=_good(rig, key, family))
    finish_job(rig, job["metadata"]["name"], kind="Failed")


def complete_job_no_pod(rig: Rig, key: Any, family: FamilyCase) -> None:
    finish_job(rig, job_of(rig, key)["metadata"]["name"])


def foreign_envelope(rig: Rig, key: Any, family: FamilyCase) -> None:
    job = job_of(rig, key)
    pod = start_pod(rig, job, result=_good(rig, key, family))
    annotations = dict(pod["metadata"]["annotations"])
    annotations["operator.ptah.run/operation-id"] = OTHER
    rig.api.patch_metadata(PODS, NS, pod["metadata"]["name"], {"annotations": annotations})
    finish_job(rig, job["metadata"]["name"])


# (id, setup, what the account is)
ROWS: list[tuple[str, Setup, str]] = [
    ("control: one Pod, its record", one_pod(), "succeeded"),
    ("a record of another attempt", one_pod(operationId=OTHER), "unknown"),
    ("a record about another realm", one_pod(coordinationDigest=OTHER), "unknown"),
    ("two Pods: two runs", two_pods, "unknown"),
    ("a Pod outside the envelope", foreign_envelope, "unknown"),
    ("a Failed Job whose record reports success", failed_job_good_record, "succeeded"),
    ("a Complete Job with no Pod", complete_job_no_pod, "unknown"),
    ("the Pod deleted after it wrote its record", pod_gone_after_its_record, "succeeded"),
    ("suspended while it ran", suspended_while_it_ran, "unknown"),
]


@pytest.mark.parametrize("family", FAMILIES, ids=str)
@pytest.mark.parametrize(("row", "setup", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_what_a_terminal_job_accounts_for(
    family: FamilyCase, row: str, setup: Setup, expected: str
) -> None:
    rig = make_rig()
    key = family.add(rig)
    rig.settle(key)
    name = rig.claim(key)["jobName"]
    setup(rig, key, family)
    rig.settle(key)
    assert account(rig, key) == expected
    # Never a second Apply (a schema's proof goes on to its read-only Observe).
    assert [j["metadata"]["name"] for j in rig.jobs() if "apply" in j["metadata"]["name"]] == [name]
    # A harvested Job gets the cleanup TTL, whatever it accounted for.
    assert rig.api.get(JOBS, NS, name)["spec"]["ttlSecondsAfterFinished"] == CLEANUP_TTL_SECONDS
    status = status_of(rig, key)
    if family.name == "schema" and row.startswith("two Pods"):
        assert status["pendingObservation"]["applyPodCount"] == 2


@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_a_record_still_arriving_is_read_again_then_given_up(family: FamilyCase) -> None:
    rig = make_rig()
    key = family.add(rig)
    rig.settle(key)
    job = job_of(rig, key)
    pod = start_pod(rig, job)  # its create not landed yet
    finish_job(rig, job["metadata"]["name"])
    assert rig.reconcile(key).reason == HARVEST_PENDING
    assert account(rig, key) == "live"
    # The record lands within the window: it is read.
    rig.clocks.advance(10)
    write_record(rig, pod, _good(rig, key, family))
    rig.settle(key)
    assert account(rig, key) == "succeeded"


@pytest.mark.parametrize("family", FAMILIES, ids=str)
def test_a_record_that_never_arrives_is_unknown_unless_a_summary_stands_in(
    family: FamilyCase,
) -> None:
    for with_summary in (False, True):
        rig = make_rig()
        key = family.add(rig)
        rig.settle(key)
        job = job_of(rig, key)
        result = result_for(rig, key, family.apply_op, **family.applied)
        message = summary_message(result) if with_summary else None
        start_pod(rig, job, message=message)
        finish_job(rig, job["metadata"]["name"])
        rig.settle(key)
        rig.clocks.advance(31)
        rig.settle(key)
        # Only a migration Apply may be read from its termination summary.
        stands_in = with_summary and family.name == "migration"
        assert account(rig, key) == ("succeeded" if stands_in else "unknown")


def test_a_migration_that_may_still_write_leaves_its_lease_to_expire() -> None:
    """The control row releases; a Pod still running under a terminal Job does not."""
    for running in (False, True):
        rig = make_rig()
        key = add_migration(rig)
        rig.settle(key)
        job = job_of(rig, key)
        start_pod(rig, job, suffix="a")
        if running:
            start_pod(rig, job, suffix="b", terminated=False)
        else:
            start_pod(rig, job, suffix="b")
        finish_job(rig, job["metadata"]["name"])
        rig.settle(key)
        status = status_of(rig, key)
        assert "unresolvedRun" in status and "activeOperation" not in status
        assert "pendingLockRelease" not in status
        assert (lease_holder_of(rig) != "") is running
        assert ("LeaseLeftToExpire" in rig.sink.reasons(key.name)) is running


def test_a_migration_lease_outlives_its_executor() -> None:
    """Lease duration = Apply window + the Job's deadline grace + a Lease grace."""
    rig = make_rig()
    key = add_migration(rig)
    rig.settle(key)
    window = rig.env.config.apply_window_seconds
    assert rig.claim(key)["leaseDurationSeconds"] == window + 60 + 60
