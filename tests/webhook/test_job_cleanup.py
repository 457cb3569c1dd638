"""Job UPDATE: only the exact none-to-300 cleanup TTL, on a finished Job its owner's
record names by name and UID, held to what the claim fixes without a rebuild."""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim import CLEANUP_TTL_SECONDS
from jobclaim.api.schema import BindingRetirementStatus, RetiredJobStatus
from tests.support.claimworld import BINDING, EPOCH, JOB_UID, NOW, OTHER_EPOCH
from tests.support.webhookscenes import (
    Obj,
    Scene,
    change_owner,
    holding_approval,
    job_cleanup,
    owner_world,
    pending_apply_cleanup,
    put_owner,
    retired_read_only_cleanup,
    spent_approval,
    terminal,
    with_claim,
    with_status,
    with_ttl,
    world_of,
)
from tests.webhook.tables import Row, expect, unchanged
from webhook import cleanup, objects

OUTSIDE = cleanup.OUTSIDE_CLAIM


def new(scene: Scene) -> Obj:
    assert scene.obj is not None
    return scene.obj


def old(scene: Scene) -> Obj:
    assert scene.old is not None
    return scene.old


def on_both(change: Any) -> Any:
    """A change made to the Job before the update: old and new carry it alike."""

    def apply(scene: Scene) -> None:
        change(new(scene))
        change(old(scene))

    return apply


def both_annotations(key: str, value: str) -> Any:
    def change(job: Obj) -> None:
        for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
            meta["annotations"][key] = value

    return on_both(change)


def claim(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_claim(owner, **changes))


def status(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_status(owner, **changes))


def deleting_owner(scene: Scene) -> None:
    scene.objects[0]["metadata"].update(
        deletionTimestamp=NOW, finalizers=["operator.ptah.run/active-operation"]
    )


ROWS = [
    Row("the cleanup TTL on the finished Plan Job", unchanged, None),
    Row("the cleanup TTL as a dry run", lambda s: setattr(s, "dry_run", True), None),
    Row("the cleanup TTL while the owner is being deleted", deleting_owner, None),
    Row(
        "a Job carrying declared Pod metadata",
        on_both(
            lambda j: [
                m["labels"].update(team="shop")
                for m in (j["metadata"], j["spec"]["template"]["metadata"])
            ]
        ),
        None,
    ),
    Row(
        "another namespace",
        lambda s: old(s)["metadata"].update(namespace="elsewhere"),
        cleanup.NOT_PRESERVED,
    ),
    Row("another UID", lambda s: new(s)["metadata"].update(uid="other-uid"), cleanup.NOT_PRESERVED),
    Row(
        "the TTL already set",
        lambda s: old(s)["spec"].update(ttlSecondsAfterFinished=CLEANUP_TTL_SECONDS),
        cleanup.NOT_THE_TTL,
    ),
    Row(
        "a TTL one second longer",
        lambda s: new(s)["spec"].update(ttlSecondsAfterFinished=CLEANUP_TTL_SECONDS + 1),
        cleanup.NOT_THE_TTL,
    ),
    Row(
        "a TTL of true",
        lambda s: new(s)["spec"].update(ttlSecondsAfterFinished=True),
        cleanup.NOT_THE_TTL,
    ),
    Row(
        "the TTL removed",
        lambda s: new(s)["spec"].pop("ttlSecondsAfterFinished"),
        cleanup.NOT_THE_TTL,
    ),
    Row(
        "a label added beside the TTL",
        lambda s: new(s)["metadata"]["labels"].update(extra="1"),
        cleanup.OTHER_CHANGES,
    ),
    Row(
        "the deadline raised beside the TTL",
        lambda s: new(s)["spec"].update(activeDeadlineSeconds=86400),
        cleanup.OTHER_CHANGES,
    ),
    Row(
        "a finalizer added beside the TTL",
        lambda s: new(s)["metadata"].update(finalizers=["example.com/keep"]),
        cleanup.OTHER_CHANGES,
    ),
    Row("a Job the claim did not record", claim(job_uid="other-uid"), cleanup.NOT_NAMED),
    Row("no claim and no record", status(active_operation=None), cleanup.NOT_NAMED, "PtahSchema"),
    Row("a Job still running", on_both(lambda j: j.update(status={})), cleanup.NOT_TERMINAL),
    Row(
        "a Job whose completion is not yet true",
        on_both(lambda j: j["status"]["conditions"][0].update(status="False")),
        cleanup.NOT_TERMINAL,
    ),
    Row("no binding recorded", status(execution_binding=None), cleanup.NO_BINDING),
    Row(
        "a rewritten manager record",
        both_annotations("operator.ptah.run/controller-image", "ptah:latest"),
        OUTSIDE,
        "controller image is not pinned",
    ),
    Row(
        "an undeclared reserved label",
        on_both(lambda j: j["metadata"]["labels"].update({"example.kubernetes.io/x": "1"})),
        OUTSIDE,
        "is a reserved key the claim does not fix",
    ),
    Row(
        "a Pod template that drifted",
        on_both(lambda j: j["spec"]["template"]["spec"].update(hostNetwork=True)),
        OUTSIDE,
        "Pod template does not match the persisted admission snapshot",
    ),
    Row(
        "another epoch on the Job",
        both_annotations("operator.ptah.run/execution-binding-id", OTHER_EPOCH),
        OUTSIDE,
        "another execution epoch",
    ),
    Row(
        "an owner reference to a replaced schema",
        on_both(lambda j: j["metadata"]["ownerReferences"][0].update(uid="replaced")),
        objects.OWNER_REPLACED,
    ),
    Row(
        "no oldObject",
        lambda s: setattr(s, "old", None),
        objects.UPDATE_WITHOUT_OLD,
    ),
    Row(
        "an unknown field in the old Job",
        lambda s: old(s)["metadata"].update(shadow="x"),
        objects.UNDECODABLE,
        "unknown field request.oldObject.metadata.shadow",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_only_the_exact_cleanup_ttl_on_the_recorded_finished_job(row: Row) -> None:
    expect(row, job_cleanup("schema", "Plan"))


MIGRATION_ROWS = [
    Row("the cleanup TTL on the finished migration Apply", unchanged, None),
    Row(
        "a migration Apply still running",
        on_both(lambda j: j.update(status={})),
        cleanup.NOT_TERMINAL,
    ),
    Row(
        "a migration claim of a retired epoch",
        status(execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH})),
        cleanup.RETIRED_NOT_FENCED,
    ),
]


@pytest.mark.parametrize("row", MIGRATION_ROWS, ids=str)
def test_a_migration_job_gets_only_the_cleanup_ttl(row: Row) -> None:
    expect(row, job_cleanup("migration", "Apply"))


RUNNING_APPLY_ROWS = [
    Row("the cleanup TTL on the running current Apply", unchanged, None),
    Row(
        "the running Apply, mutated beside the TTL",
        lambda s: new(s)["spec"]["template"]["spec"].update(hostPID=True),
        cleanup.OTHER_CHANGES,
    ),
    Row(
        "the running Apply of a retired epoch",
        status(execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH})),
        cleanup.RETIRED_NOT_FENCED,
    ),
]


@pytest.mark.parametrize("row", RUNNING_APPLY_ROWS, ids=str)
def test_the_running_current_apply_may_get_its_ttl_early(row: Row) -> None:
    expect(row, job_cleanup("schema", "Apply", running=True))


def test_a_running_read_only_job_may_not() -> None:
    expect(
        Row("running Plan", unchanged, cleanup.NOT_TERMINAL),
        job_cleanup("schema", "Plan", running=True),
    )


def retirement(**changes: Any) -> Any:
    def apply(scene: Scene) -> None:
        owner: Any = world_of(scene)
        record = owner.status.pending_binding_retirement
        job = record.job.model_copy(update=changes.pop("job", {}))
        changed = record.model_copy(update={**changes, "job": job})
        change_owner(scene, lambda o: with_status(o, pending_binding_retirement=changed))

    return apply


def pending(**changes: Any) -> Any:
    def apply(scene: Scene) -> None:
        owner: Any = world_of(scene)
        changed = owner.status.pending_observation.model_copy(update=changes)
        change_owner(scene, lambda o: with_status(o, pending_observation=changed))

    return apply


PENDING_ROWS = [
    Row("the retired Apply's Job, recorded OutcomeUnknown", unchanged, None),
    Row(
        "a Job the pending observation does not name",
        pending(apply_job_uid="other-uid"),
        cleanup.NOT_NAMED,
    ),
    Row(
        "an Apply already accounted for",
        pending(outcome="ApplySucceeded"),
        cleanup.PENDING_NOT_RETIRED,
    ),
    Row(
        "no retirement record", status(pending_binding_retirement=None), cleanup.PENDING_NOT_RETIRED
    ),
    Row(
        "a retirement naming another Job",
        retirement(job={"uid": "other-uid"}),
        cleanup.PENDING_NOT_RETIRED,
    ),
    Row(
        "a retirement naming a read-only Job",
        retirement(job={"operation": "Plan"}),
        cleanup.PENDING_NOT_RETIRED,
    ),
    Row(
        "a retirement of another epoch",
        retirement(retired_epoch="v1-" + "c" * 32),
        cleanup.PENDING_NOT_RETIRED,
    ),
    Row(
        "the retired epoch still in force",
        status(execution_binding=BINDING),
        cleanup.PENDING_NOT_RETIRED,
    ),
    Row(
        "a pending Apply still running",
        on_both(lambda j: j.update(status={})),
        cleanup.NOT_TERMINAL,
    ),
    Row(
        "a pending Apply whose template drifted",
        on_both(lambda j: j["spec"]["template"]["spec"].update(hostIPC=True)),
        OUTSIDE,
        "Pod template does not match the persisted admission snapshot",
    ),
    Row(
        "a pending Apply carrying another plan",
        both_annotations("operator.ptah.run/plan-fingerprint", "sha256:" + "0" * 64),
        OUTSIDE,
        "plan-fingerprint is not the claim's value",
    ),
]


@pytest.mark.parametrize("row", PENDING_ROWS, ids=str)
def test_the_retired_unaccounted_apply_gets_its_ttl_only_as_recorded(row: Row) -> None:
    expect(row, pending_apply_cleanup())


RETIRED_ROWS = [
    Row("the retired read-only claim's Job the retirement names", unchanged, None),
    Row(
        "no retirement record", status(pending_binding_retirement=None), cleanup.RETIRED_NOT_FENCED
    ),
    Row(
        "a retirement naming another Job",
        retirement(job={"uid": "other-uid"}),
        cleanup.RETIRED_NOT_FENCED,
    ),
    Row(
        "a retirement of another epoch",
        retirement(retired_epoch="v1-" + "c" * 32),
        cleanup.RETIRED_NOT_FENCED,
    ),
]


@pytest.mark.parametrize("row", RETIRED_ROWS, ids=str)
def test_a_retired_read_only_claim_is_cleaned_up_only_under_its_retirement(row: Row) -> None:
    expect(row, retired_read_only_cleanup())


def test_a_retired_apply_still_in_the_claim_is_never_cleaned_up() -> None:
    scene = job_cleanup("schema", "Apply")
    record = BindingRetirementStatus(
        retired_epoch=EPOCH,
        job=RetiredJobStatus(operation="Apply", name=new(scene)["metadata"]["name"], uid=JOB_UID),
    )
    change_owner(
        scene,
        lambda o: with_status(
            o,
            pending_binding_retirement=record,
            execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH}),
        ),
    )
    expect(Row("retired Apply", unchanged, cleanup.RETIRED_NOT_FENCED), scene)


def test_cleanup_never_rebuilds_the_job() -> None:
    """The claim's inputs moved since dispatch (here: the spec's deadline and pod
    metadata), so a rebuild would differ; the cleanup is still admitted."""
    scene = job_cleanup("schema", "Plan")
    moved = owner_world(
        "schema",
        "Plan",
        execution={"activeDeadlineSeconds": 1800, "podMetadata": {"labels": {"team": "b"}}},
    )
    moved_owner: Any = moved.resource
    current: Any = world_of(scene)
    change_owner(scene, lambda _: current.model_copy(update={"spec": moved_owner.spec}))
    expect(Row("inputs moved", unchanged, None), scene)


def test_a_failed_job_is_terminal_too() -> None:
    scene = job_cleanup("schema", "Plan")
    scene.old = terminal(scene.old or {}, "Failed")
    scene.obj = with_ttl(scene.old)
    expect(Row("failed", unchanged, None), scene)


def approved_apply_cleanup(family: str) -> Scene:
    """The cleanup TTL on a finished Apply whose claim holds a person's spent approval,
    which names no Job yet."""
    scene = job_cleanup(family, "Apply")
    owner = holding_approval(world_of(scene))
    put_owner(scene, owner)
    plan = {
        "metadata": {"name": "plan-1", "uid": "plan-uid"},
        "spec": {"fingerprint": "sha256:" + "c" * 64},
    }
    scene.objects.append(spent_approval(owner, plan))
    return scene


def this_job(scene: Scene) -> Obj:
    return {"name": new(scene)["metadata"]["name"], "uid": new(scene)["metadata"]["uid"]}


def approval_of(scene: Scene) -> Obj:
    return next(o for o in scene.objects if o["kind"].endswith("Approval"))


WITNESS_ROWS = [
    Row(
        "the approval names this Job as the one it authorized",
        lambda s: approval_of(s)["status"].update(consumedJob=this_job(s)),
        None,
    ),
    Row(
        "the approval is gone: it authorizes nothing any more",
        lambda s: s.objects.remove(approval_of(s)),
        None,
    ),
    Row("the approval names no Job yet", unchanged, cleanup.NOT_WITNESSED, "names no Job"),
    Row(
        "the approval names another Job",
        lambda s: approval_of(s)["status"].update(consumedJob={"name": "other", "uid": "u-9"}),
        cleanup.NOT_WITNESSED,
        "it authorized Job other (u-9), not this one",
    ),
]


@pytest.mark.parametrize("family", ["schema", "migration"])
@pytest.mark.parametrize("row", WITNESS_ROWS, ids=str)
def test_an_apply_leaves_only_once_its_approval_witnesses_it(family: str, row: Row) -> None:
    expect(row, approved_apply_cleanup(family))
