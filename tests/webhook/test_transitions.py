"""The manager's own status writes, held to the lifecycle's transitions (issue 21).

A stolen manager identity passes ``manager-state`` (it is the manager's username), so
each row here is a status write the manager's identity can make: clear a dispatch
mark or a Job UID, rewrite or drop a marked claim, drop a pending proof, an
unresolved run or a staged release, un-spend an approval. Each is refused unless the
evidence that makes it legitimate stands in the API server; the control rows are the
writes the real controller makes.
"""

from __future__ import annotations

import copy
import uuid

import pytest

from jobclaim import (
    LABEL_OPERATION,
    LABEL_OPERATION_ID,
    lease_holder,
    lease_name,
    operation_id_label_value,
    sha256_digest,
)
from jobclaim.api import DatabaseTargetSpec
from jobclaim.apiserver import PTAHSCHEMAAPPROVALS
from jobclaim.naming import LEASE_EPOCH_ANNOTATION
from runner import RunnerResult
from tests.support.claimworld import JOB_UID, NOW
from tests.support.webhookscenes import (
    MANAGER_USERNAME,
    OWNER_UIDS,
    RUNNER_OPS,
    Obj,
    Scene,
    owner_world,
    pod_record,
    reading_result,
    terminal,
)
from tests.webhook.statuschanges import Change, both, claim_of, new, status_update
from tests.webhook.tables import Row, expect, unchanged
from webhook import transitions as t
from webhook.rules import DEFAULT_COORDINATION_NAMESPACE

SCHEMA_UID = OWNER_UIDS["schema"]
MIGRATION_UID = OWNER_UIDS["migration"]
COORDINATION = sha256_digest(b"coordination")
EPOCH = "v1-" + "e" * 32


def stands(obj: Obj) -> Change:
    return lambda scene: scene.objects.append(obj)


def marked(status: Obj) -> None:
    status["activeOperation"]["dispatchStarted"] = True


def marked_with_uid(status: Obj) -> None:
    marked(status)
    status["activeOperation"]["jobUID"] = JOB_UID


def job_of(scene: Scene, *, uid: str = JOB_UID, complete: bool = False) -> Obj:
    assert scene.old is not None
    claim = claim_of(scene.old)
    job: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": claim["jobName"],
            "namespace": scene.old["metadata"]["namespace"],
            "uid": uid,
        },
        "spec": {},
    }
    return terminal(job) if complete else job


def existing_job(scene: Scene) -> None:
    scene.objects.append(job_of(scene))


def _family(obj: Obj) -> str:
    return "schema" if obj["kind"] == "PtahSchema" else "migration"


def reading_completed(scene: Scene) -> None:
    """The reading the claim names ran to completion: the builder's Job for that claim,
    and the record its Pod wrote of a successful reading."""
    assert scene.old is not None
    claim = claim_of(scene.old)
    job = terminal(owner_world(_family(scene.old), claim["type"]).stored)
    scene.objects.append(job)
    scene.objects.append(pod_record(job, reading_result(claim, RUNNER_OPS[claim["type"]])))


def reading_completed_unrecorded(scene: Scene) -> None:
    """The claim's reading Job completed, and no record of its Pod's exists."""
    reading_completed(scene)
    scene.objects = [o for o in scene.objects if o["kind"] != "PtahResultRecord"]


def reading_recorded_a_failure(scene: Scene) -> None:
    """The reading's Pod recorded that it failed: a Complete Job read nothing."""
    assert scene.old is not None
    claim = claim_of(scene.old)
    job = terminal(owner_world(_family(scene.old), claim["type"]).stored)
    failed = reading_result(claim, RUNNER_OPS[claim["type"]]).to_wire()
    for section in ("plan", "observe", "migrationHistory"):
        failed.pop(section, None)
    failed.update(childExitCode=1, error={"code": "executor_failed", "message": "it failed"})
    scene.objects += [job, pod_record(job, RunnerResult.from_wire(failed))]


def an_unrelated_job_named(scene: Scene) -> None:
    """The claim names a finished Job of the namespace that no claim of this resource
    built (a team's own Job), by its name and UID."""
    scene.objects.append(job_of(scene, complete=True))


def the_apply_job_named(scene: Scene) -> None:
    """The reading claim names the unaccounted Apply's own finished Job."""
    assert scene.old is not None
    apply = terminal(owner_world(_family(scene.old), "Apply").stored)
    claim_of(scene.old).update(jobName=apply["metadata"]["name"], jobUID=apply["metadata"]["uid"])
    scene.objects.append(apply)


def pending(operation_id: str = "apply-1") -> Obj:
    return {
        "outcome": "OutcomeUnknown",
        "applyOperationID": operation_id,
        "applyJobName": "ptah-apply-orders-1",
        "coordinationDigest": COORDINATION,
        "leaseDurationSeconds": 60,
        "leaseEpoch": EPOCH,
    }


def into_pending(obj: Obj) -> None:
    claim = claim_of(obj)
    obj["status"]["pendingObservation"] = pending(claim["id"])
    del obj["status"]["activeOperation"]


def another_target(obj: Obj) -> None:
    target = DatabaseTargetSpec.model_validate(
        {**obj["spec"]["target"], "urlFrom": {"name": "orders-db", "key": "admin-url"}}
    )
    claim_of(obj)["target"] = target.to_wire()


SCHEMA_MARK = status_update("schema", "Apply", marked)
SCHEMA_MARK_ROWS = [
    Row(
        "the manager records the created Job's UID",
        new(lambda o: claim_of(o).update(jobUID=JOB_UID)),
        None,
    ),
    Row(
        "the mark withdrawn after a create refused before storing",
        new(lambda o: claim_of(o).update(dispatchStarted=False)),
        None,
    ),
    Row(
        "the mark cleared while the Job stands",
        both(new(lambda o: claim_of(o).update(dispatchStarted=False)), existing_job),
        t.MARK_CLEARED,
        "exists",
    ),
    Row(
        "the marked claim moved to a second attempt",
        new(lambda o: claim_of(o).update(attempt=2, jobName="ptah-apply-orders-second")),
        t.CLAIM_REWRITTEN,
        "job_name",
    ),
    Row(
        "the marked claim pointed at another Secret key",
        new(another_target),
        t.CLAIM_REWRITTEN,
        "target",
    ),
    Row(
        "the marked claim's registry CA pin rewritten",
        new(lambda o: claim_of(o).update(registryCADigest="sha256:" + "c" * 64)),
        t.CLAIM_REWRITTEN,
        "registry_ca_digest",
    ),
    Row(
        "the marked claim's approval dropped",
        new(
            lambda o: (
                o["status"]["plan"].pop("approval", None) or o["status"]["plan"].update(uid="x")
            )
        ),
        t.CLAIM_REWRITTEN,
        "plan",
    ),
    Row(
        "the marked claim dropped without its record",
        new(lambda o: o["status"].pop("activeOperation")),
        t.RETIRED_WITHOUT_RECORD,
        "pendingObservation",
    ),
    Row("the marked claim retired into its pendingObservation", new(into_pending), None),
]


@pytest.mark.parametrize("row", SCHEMA_MARK_ROWS, ids=str)
def test_a_marked_schema_claim_keeps_its_mark(row: Row) -> None:
    expect(row, SCHEMA_MARK, "manager-state")


SCHEMA_UID_ROWS = [
    Row("a status write that keeps the Job's UID", unchanged, None),
    Row(
        "the Job's UID cleared",
        new(lambda o: claim_of(o).pop("jobUID")),
        t.JOB_UID_CHANGED,
        JOB_UID,
    ),
    Row(
        "the mark cleared after the Job was recorded",
        new(lambda o: claim_of(o).update(dispatchStarted=False)),
        t.MARK_CLEARED,
        "was created",
    ),
]


@pytest.mark.parametrize("row", SCHEMA_UID_ROWS, ids=str)
def test_a_recorded_job_uid_stays(row: Row) -> None:
    expect(row, status_update("schema", "Apply", marked_with_uid), "manager-state")


def with_pending_and_plan_claim(status: Obj) -> None:
    status["pendingObservation"] = pending()
    status["activeOperation"]["jobUID"] = JOB_UID


def settlement(*, operation_id: str = "apply-1", stamped: bool = True) -> Obj:
    spec: Obj = {
        "schemaRef": {"name": "orders", "uid": SCHEMA_UID},
        "applyOperationID": operation_id,
    }
    if stamped:
        spec.update(
            settledBy={"username": "jane@example.com", "groups": []},
            settledAt=NOW,
            mutationRequestUID=str(uuid.UUID(int=9)),
        )
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahSchemaProofSettlement",
        "metadata": {
            "name": "settle-1",
            "namespace": "shop",
            "uid": "settle-uid",
            "creationTimestamp": NOW,
        },
        "spec": spec,
    }


def settled(obj: Obj) -> None:
    obj["status"].pop("pendingObservation")
    obj["status"]["settledProof"] = {
        "applyOperationID": "apply-1",
        "outcome": "OutcomeUnknown",
        "settlementRef": {"name": "settle-1", "uid": "settle-uid"},
        "settledBy": {"username": "jane@example.com", "groups": []},
        "settledAt": NOW,
    }


def proved(obj: Obj) -> None:
    obj["status"].pop("pendingObservation")
    obj["status"].pop("activeOperation")


PENDING = status_update("schema", "Plan", with_pending_and_plan_claim)
PENDING_ROWS = [
    Row("the proof's Plan reading completed", both(new(proved), reading_completed), None),
    Row(
        "the proof's Plan Job completed, and its Pod recorded nothing",
        both(new(proved), reading_completed_unrecorded),
        t.RECORD_DROPPED,
        "has no result record its Pod wrote",
    ),
    Row(
        "the proof's Plan Pod recorded a failed reading",
        both(new(proved), reading_recorded_a_failure),
        t.RECORD_DROPPED,
        "it records a failed reading",
    ),
    Row(
        "a team's unrelated finished Job named as the proof's reading",
        both(new(proved), an_unrelated_job_named),
        t.RECORD_DROPPED,
        "is not its claim's",
    ),
    Row(
        "the unaccounted Apply's own Job named as the proof's reading",
        both(new(proved), the_apply_job_named),
        t.RECORD_DROPPED,
        "is not its claim's",
    ),
    Row(
        "a person's stamped settlement of the Apply", both(new(settled), stands(settlement())), None
    ),
    Row(
        "the pending observation dropped with no evidence",
        new(lambda o: o["status"].pop("pendingObservation")),
        t.RECORD_DROPPED,
        "does not exist",
    ),
    Row(
        "dropped while the proof's reading still runs",
        both(new(proved), existing_job),
        t.RECORD_DROPPED,
        "has not completed",
    ),
    Row(
        "a settlement of another Apply",
        both(new(settled), stands(settlement(operation_id="apply-0"))),
        t.RECORD_DROPPED,
        "settles another run",
    ),
    Row(
        "a settlement nobody stamped",
        both(new(settled), stands(settlement(stamped=False))),
        t.RECORD_DROPPED,
        "no admission stamp",
    ),
]


@pytest.mark.parametrize("row", PENDING_ROWS, ids=str)
def test_a_pending_observation_goes_only_with_its_evidence(row: Row) -> None:
    expect(row, PENDING, "manager-state")


def owing_release(status: Obj) -> None:
    status["pendingLockRelease"] = {
        "coordinationDigest": COORDINATION,
        "operationID": "apply-1",
        "leaseDurationSeconds": 60,
        "leaseEpoch": EPOCH,
    }


def claim_pod(phase: str, *, operation_id: str = "apply-1", operation: str = "apply") -> Obj:
    """A Pod of a Job of the claim ``operation_id``, as the kubelet last reported it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"ptah-{operation_id}-pod",
            "namespace": "shop",
            "uid": f"pod-{operation_id}",
            "labels": {
                LABEL_OPERATION: operation,
                LABEL_OPERATION_ID: operation_id_label_value(operation_id),
            },
        },
        "spec": {"containers": []},
        "status": {"phase": phase},
    }


def lease(holder: str) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(COORDINATION),
            "namespace": DEFAULT_COORDINATION_NAMESPACE,
            "annotations": {LEASE_EPOCH_ANNOTATION: EPOCH},
        },
        "spec": {"holderIdentity": holder},
    }


RELEASE_ROWS = [
    Row(
        "the release done: the Lease has no holder",
        both(new(lambda o: o["status"].pop("pendingLockRelease")), stands(lease(""))),
        None,
    ),
    Row(
        "the release record dropped while the claim still holds the Lease",
        both(
            new(lambda o: o["status"].pop("pendingLockRelease")),
            stands(lease(lease_holder(SCHEMA_UID, "apply-1"))),
        ),
        t.RELEASE_DROPPED,
        EPOCH,
    ),
    Row(
        "the release done: the claim's Pod succeeded",
        both(
            new(lambda o: o["status"].pop("pendingLockRelease")),
            stands(lease("")),
            stands(claim_pod("Succeeded")),
        ),
        None,
    ),
    Row(
        "the release record dropped while the claim's Pod still runs (the Lease given up)",
        both(
            new(lambda o: o["status"].pop("pendingLockRelease")),
            stands(lease("")),
            stands(claim_pod("Running")),
        ),
        t.RELEASE_RUNNING,
        "its Pod ptah-apply-1-pod has not stopped (phase Running)",
    ),
    Row(
        "a reading's Pod of the claim still runs (it writes nothing to the database)",
        both(
            new(lambda o: o["status"].pop("pendingLockRelease")),
            stands(lease("")),
            stands(claim_pod("Running", operation="plan")),
        ),
        None,
    ),
    Row(
        "a Pod of another claim still runs",
        both(
            new(lambda o: o["status"].pop("pendingLockRelease")),
            stands(lease("")),
            stands(claim_pod("Running", operation_id="apply-2")),
        ),
        None,
    ),
]


@pytest.mark.parametrize("row", RELEASE_ROWS, ids=str)
def test_a_staged_release_goes_only_once_done(row: Row) -> None:
    expect(row, status_update("schema", "Plan", owing_release), "manager-state")


def unresolved(status: Obj) -> None:
    status["unresolvedRun"] = {
        "outcome": "Unknown",
        "operationID": "apply-7",
        "jobName": "ptah-apply-billing-7",
        "recordedAt": NOW,
    }


def acknowledgment(*, operation_id: str = "apply-7") -> Obj:
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahMigrationRunAcknowledgment",
        "metadata": {
            "name": "ack-1",
            "namespace": "shop",
            "uid": "ack-uid",
            "creationTimestamp": NOW,
        },
        "spec": {
            "migrationRef": {"name": "billing", "uid": MIGRATION_UID},
            "operationID": operation_id,
            "acknowledgedBy": {"username": "jane@example.com", "groups": []},
            "acknowledgedAt": NOW,
            "mutationRequestUID": str(uuid.UUID(int=11)),
        },
    }


def acknowledged(obj: Obj) -> None:
    obj["status"].pop("unresolvedRun")
    obj["status"]["resolvedRun"] = {
        "operationID": "apply-7",
        "outcome": "Unknown",
        "resolution": "Acknowledged",
        "acknowledgmentRef": {"name": "ack-1", "uid": "ack-uid"},
        "resolvedAt": NOW,
    }


def history_read(obj: Obj) -> None:
    obj["status"].pop("unresolvedRun")
    obj["status"].pop("activeOperation")
    obj["status"]["resolvedRun"] = {
        "operationID": "apply-7",
        "outcome": "Unknown",
        "resolution": "HistoryRead",
        "resolvedAt": NOW,
    }


def unresolved_with_history_claim(status: Obj) -> None:
    unresolved(status)
    status["activeOperation"]["jobUID"] = JOB_UID


UNRESOLVED_READING_ROWS = [
    Row("the run's History reading completed", both(new(history_read), reading_completed), None),
    Row(
        "the run's History Job completed, and its Pod recorded nothing",
        both(new(history_read), reading_completed_unrecorded),
        t.RECORD_DROPPED,
        "has no result record its Pod wrote",
    ),
    Row(
        "a team's unrelated finished Job named as the History reading",
        both(new(history_read), an_unrelated_job_named),
        t.RECORD_DROPPED,
        "is not its claim's",
    ),
    Row(
        "the unresolved Apply's own Job named as the History reading",
        both(new(history_read), the_apply_job_named),
        t.RECORD_DROPPED,
        "is not its claim's",
    ),
]


@pytest.mark.parametrize("row", UNRESOLVED_READING_ROWS, ids=str)
def test_an_unresolved_run_is_settled_only_by_its_own_reading(row: Row) -> None:
    expect(
        row, status_update("migration", "History", unresolved_with_history_claim), "manager-state"
    )


UNRESOLVED_ROWS = [
    Row(
        "a person's stamped acknowledgment of the run",
        both(new(acknowledged), stands(acknowledgment())),
        None,
    ),
    Row(
        "the unresolved run dropped with nothing that resolves it",
        new(lambda o: o["status"].pop("unresolvedRun")),
        t.RECORD_DROPPED,
        "no resolvedRun names it",
    ),
    Row(
        "an acknowledgment of another run",
        both(new(acknowledged), stands(acknowledgment(operation_id="apply-6"))),
        t.RECORD_DROPPED,
        "settles another run",
    ),
]


@pytest.mark.parametrize("row", UNRESOLVED_ROWS, ids=str)
def test_an_unresolved_run_goes_only_with_its_evidence(row: Row) -> None:
    expect(row, status_update("migration", "History", unresolved), "manager-state")


def migration_marked(status: Obj) -> None:
    marked_with_uid(status)


MIGRATION_ROWS = [
    Row(
        "the run's result recorded as its last run",
        new(
            lambda o: (
                o["status"].update(
                    lastRun={"outcome": "Applied", "jobName": claim_of(o)["jobName"]}
                )
                or o["status"].pop("activeOperation")
            )
        ),
        None,
    ),
    Row(
        "the marked migration claim dropped without a record",
        new(lambda o: o["status"].pop("activeOperation")),
        t.RETIRED_WITHOUT_RECORD,
        "lastRun",
    ),
    Row(
        "the marked migration claim re-pointed at another artifact",
        new(
            lambda o: claim_of(o).update(
                source={
                    "reference": "registry.example.com/shop/billing-migrations@" + OTHER_ARTIFACT,
                    "digest": OTHER_ARTIFACT,
                }
            )
        ),
        t.CLAIM_REWRITTEN,
        "the source of the marked claim",
    ),
    Row(
        "the marked migration claim moved to another plan",
        new(lambda o: claim_of(o).update(planRef={"name": "ptah-mplan-other", "uid": "x"})),
        t.CLAIM_REWRITTEN,
        "plan_ref",
    ),
    Row(
        "the marked migration claim's approval swapped",
        new(lambda o: claim_of(o).update(approvalRef={"name": "approve-2", "uid": "x"})),
        t.CLAIM_REWRITTEN,
        "approval_ref",
    ),
]
OTHER_ARTIFACT = "sha256:" + "9" * 64


@pytest.mark.parametrize("row", MIGRATION_ROWS, ids=str)
def test_a_marked_migration_claim_leaves_with_its_record(row: Row) -> None:
    expect(row, status_update("migration", "Apply", migration_marked), "manager-state")


def approval_status_write() -> Scene:
    consumed = {
        "type": "Consumed",
        "status": "True",
        "reason": "DispatchCommitted",
        "lastTransitionTime": NOW,
    }
    old: Obj = {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahSchemaApproval",
        "metadata": {
            "name": "approve-1",
            "namespace": "shop",
            "uid": "a-uid",
            "resourceVersion": "5",
            "creationTimestamp": NOW,
        },
        "spec": {
            "schemaRef": {"name": "orders", "uid": SCHEMA_UID},
            "planRef": {"name": "p", "uid": "p-uid"},
            "planFingerprint": "sha256:" + "c" * 64,
        },
        "status": {"conditions": [consumed], "consumedBy": "claim-1"},
    }
    return Scene(
        PTAHSCHEMAAPPROVALS,
        "UPDATE",
        copy.deepcopy(old),
        [],
        old=old,
        username=MANAGER_USERNAME,
        subresource="status",
    )


def stale(obj: Obj) -> None:
    obj["status"]["conditions"].append(
        {"type": "Stale", "status": "True", "reason": "Rotated", "lastTransitionTime": NOW}
    )


APPROVAL_ROWS: list[Row] = [
    Row("the spent approval marked stale as well", new(stale), None),
    Row(
        "the Consumed condition removed",
        new(lambda o: o["status"].update(conditions=[])),
        t.CONSUMED_CHANGED,
        "claim-1",
    ),
    Row(
        "the spending claim re-pointed",
        new(lambda o: o["status"].update(consumedBy="claim-2")),
        t.CONSUMED_CHANGED,
    ),
    Row(
        "the one Job it authorized named once",
        new(lambda o: o["status"].update(consumedJob={"name": "ptah-apply-1", "uid": "j-1"})),
        None,
    ),
    Row(
        "the named Job re-pointed",
        both(
            lambda s: s.old["status"].update(consumedJob={"name": "ptah-apply-1", "uid": "j-1"}),
            new(lambda o: o["status"].update(consumedJob={"name": "ptah-apply-1", "uid": "j-2"})),
        ),
        t.WITNESS_CHANGED,
        "ptah-apply-1",
    ),
    Row(
        "the named Job dropped",
        lambda s: s.old["status"].update(consumedJob={"name": "ptah-apply-1", "uid": "j-1"}),
        t.WITNESS_CHANGED,
    ),
    Row(
        "a Job named on an approval nobody spent",
        both(
            lambda s: s.old.update(status={}),
            new(lambda o: o.update(status={"consumedJob": {"name": "ptah-apply-1", "uid": "j-1"}})),
        ),
        t.WITNESS_UNSPENT,
    ),
]


@pytest.mark.parametrize("row", APPROVAL_ROWS, ids=str)
def test_a_spent_approval_stays_spent(row: Row) -> None:
    expect(row, approval_status_write(), "manager-state")
