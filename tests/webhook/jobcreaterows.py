"""The Apply tables of the Job-create rule: the exact Job the active claim reserved
first, then each single change to the Job, its claim or what the claim reads, with the
sentence it must meet; and the helpers that make those changes.

``test_job_create`` judges each row (and, for the refusal-coverage test, exports the
tables); ``test_rebuild_memo`` judges every row again from the rule's memos.
"""

from __future__ import annotations

import base64
from typing import Any

from jobclaim.api import ObjectReference, OCIArtifactAccessBinding
from tests.support.claimworld import BINDING, NOW, OTHER_EPOCH, RESOLVED_MIGRATIONS
from tests.support.webhookscenes import (
    Obj,
    Scene,
    change_owner,
    with_claim,
    with_status,
)
from tests.webhook.tables import Row, unchanged
from webhook import jobauthority, jobs, objects

OUTSIDE = jobs.OUTSIDE_INTENT


def job(scene: Scene) -> Obj:
    assert scene.obj is not None
    return scene.obj


def pod(scene: Scene) -> Obj:
    spec: Obj = job(scene)["spec"]["template"]["spec"]
    return spec


def both_annotations(scene: Scene, key: str, value: str) -> None:
    """Change an annotation on the Job and its Pod template alike (as a forger would)."""
    for meta in (job(scene)["metadata"], job(scene)["spec"]["template"]["metadata"]):
        meta["annotations"][key] = value


def claim(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_claim(owner, **changes))


def status(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_status(owner, **changes))


def remove(kind: str, suffix: str = "") -> Any:
    def change(scene: Scene) -> None:
        scene.objects = [
            o
            for o in scene.objects
            if not (o["kind"] == kind and o["metadata"]["name"].endswith(suffix))
        ]

    return change


def stored(kind: str, change: Any, suffix: str = "") -> Any:
    def apply(scene: Scene) -> None:
        for obj in scene.objects:
            if obj["kind"] == kind and obj["metadata"]["name"].endswith(suffix):
                change(obj)

    return apply


def tampered_snapshot(owner: Any) -> Any:
    snapshot = owner.status.active_operation.admission_snapshot
    forged = snapshot.model_copy(update={"template_digest": "sha256:" + "e" * 64})
    return with_claim(owner, admission_snapshot=forged)


def second_owner(scene: Scene) -> None:
    refs = job(scene)["metadata"]["ownerReferences"]
    refs.append({**refs[0], "name": "other", "uid": "other-uid", "controller": False})


def deleting(obj: Obj) -> None:
    obj["metadata"].update(deletionTimestamp=NOW, finalizers=["operator.ptah.run/active-operation"])


def corrupt_chunk(obj: Obj) -> None:
    obj["binaryData"]["chunk"] = base64.b64encode(b"DROP TABLE a;\n").decode()


SCHEMA_APPLY_ROWS = [
    Row("the exact Job of the active Apply claim", unchanged, None),
    Row("a dry run of the exact Job", lambda s: setattr(s, "dry_run", True), None),
    Row(
        "a privileged container",
        lambda s: pod(s)["containers"][0]["securityContext"].update(privileged=True),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "another service account",
        lambda s: pod(s).update(serviceAccountName="admin", serviceAccount="admin"),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a declared label dropped",
        lambda s: job(s)["metadata"]["labels"].pop("team"),
        OUTSIDE,
        "labels or annotations are not the ones its claim builds",
    ),
    Row(
        "an extra annotation",
        lambda s: job(s)["metadata"]["annotations"].update(extra="1"),
        OUTSIDE,
        "labels or annotations are not the ones its claim builds",
    ),
    Row(
        "a forged selector",
        lambda s: job(s)["spec"]["selector"]["matchLabels"].update(
            {"batch.kubernetes.io/controller-uid": "someone-else"}
        ),
        OUTSIDE,
        "selector does not select the Job's own Pods",
    ),
    Row(
        "a finalizer on create",
        lambda s: job(s)["metadata"].update(finalizers=["example.com/hold"]),
        OUTSIDE,
        "metadata is not the metadata its claim builds",
    ),
    Row("a second owner", second_owner, objects.NO_OWNER, "Job"),
    Row(
        "an owner reference that does not control",
        lambda s: job(s)["metadata"]["ownerReferences"][0].update(controller=False),
        objects.NO_OWNER,
    ),
    Row(
        "an owner reference to a replaced schema",
        lambda s: job(s)["metadata"]["ownerReferences"][0].update(uid="replaced-uid"),
        objects.OWNER_REPLACED,
        "PtahSchema shop/orders",
    ),
    Row("an owner that does not exist", remove("PtahSchema"), objects.OWNER_MISSING),
    Row("an owner being deleted", stored("PtahSchema", deleting), objects.OWNER_DELETING),
    Row("a claim that already holds a Job UID", claim(job_uid="a-uid"), jobs.NOT_RESERVED),
    Row("a claim reserving another name", claim(job_name="ptah-apply-x"), jobs.NOT_RESERVED),
    Row("no active claim", status(active_operation=None), jobs.NOT_RESERVED),
    Row("a mutating claim not yet marked", claim(dispatch_started=False), jobs.NOT_MARKED),
    Row("no binding recorded", status(execution_binding=None), jobs.NO_BINDING, "PtahSchema"),
    Row(
        "a binding rotated after the claim",
        status(execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH})),
        jobs.CANNOT_REBUILD,
        "not the binding in force",
    ),
    Row("no plan in status", status(plan=None), jobs.CANNOT_REBUILD, "without status.plan"),
    Row(
        "a claim without its admission snapshot",
        claim(admission_snapshot=None),
        OUTSIDE,
        "admission snapshot is invalid: the claim has none",
    ),
    Row(
        "a snapshot edited after it was sealed",
        lambda s: change_owner(s, tampered_snapshot),
        OUTSIDE,
        "digest does not cover its contents",
    ),
    Row(
        "a controller image without a digest",
        lambda s: both_annotations(s, "operator.ptah.run/controller-image", "ptah:latest"),
        jobs.NO_RECORD,
        "controller image is not pinned",
    ),
    Row(
        "another pinned runner image",
        lambda s: pod(s)["initContainers"][0].update(image="evil.example.com/r@sha256:" + "9" * 64),
        jobauthority.RUNNER_NOT_PINNED,
        "evil.example.com/r@sha256:",
    ),
    Row(
        "another executor image",
        lambda s: pod(s)["containers"][0].update(image="evil.example.com/p@sha256:" + "9" * 64),
        OUTSIDE,
        "the Job's spec is not the one its claim builds",
    ),
    Row(
        "another controller revision",
        lambda s: both_annotations(s, "operator.ptah.run/controller-revision", "r2"),
        OUTSIDE,
        "Pod template does not match the persisted admission snapshot",
    ),
    Row("the plan is gone", remove("PtahSchemaPlan"), jobs.PLAN_MISSING),
    Row(
        "the plan was replaced",
        stored("PtahSchemaPlan", lambda o: o["metadata"].update(uid="new-plan-uid")),
        jobs.PLAN_NOT_RECORDED,
        "name or UID differs",
    ),
    Row(
        "the plan says something else",
        stored("PtahSchemaPlan", lambda o: o["spec"].update(contentDigest="sha256:" + "0" * 64)),
        jobs.PLAN_NOT_RECORDED,
        "content digest differs",
    ),
    Row("a projection is gone", remove("ConfigMap", "-001"), jobs.PROJECTION_MISSING, "-001"),
    Row(
        "a projection holds other bytes",
        stored("ConfigMap", corrupt_chunk, "-000"),
        jobs.PROJECTION_WRONG,
        "holds 14 bytes",
    ),
    Row(
        "a projection that can be changed",
        stored("ConfigMap", lambda o: o.update(immutable=False), "-000"),
        jobs.PROJECTION_WRONG,
        "contents are not the plan's chunk bytes",
    ),
    Row(
        "a status on create",
        lambda s: job(s).update(status={"active": 1}),
        objects.STATUS_ON_CREATE,
    ),
    Row(
        "an unknown metadata field",
        lambda s: job(s)["metadata"].update(shadow="1"),
        objects.UNDECODABLE,
        "unknown field request.object.metadata.shadow",
    ),
]


def migration_plan(change: Any) -> Any:
    return stored("PtahMigrationPlan", change)


# Migrations nobody approved, under the approved versions, in the same repository.
UNAPPROVED = "sha256:" + "9" * 64
UNAPPROVED_REF = "registry.example.com/shop/billing-migrations@" + UNAPPROVED

MIGRATION_APPLY_ROWS = [
    Row("the exact Job of the active migration Apply", unchanged, None),
    Row("a claim naming no plan", claim(plan_ref=None), jobs.NO_PLAN),
    Row("the plan is gone", remove("PtahMigrationPlan"), jobs.PLAN_MISSING),
    Row(
        "the plan was replaced",
        claim(plan_ref=ObjectReference(name="ptah-mplan-0123456789abcdef01234567", uid="x")),
        jobs.PLAN_NOT_RECORDED,
        "its UID differs",
    ),
    Row(
        "the plan belongs to another migration",
        migration_plan(lambda o: o["spec"]["migrationRef"].update(uid="other")),
        jobs.PLAN_NOT_RECORDED,
        "another migration",
    ),
    Row(
        "the plan was made under another epoch",
        migration_plan(lambda o: o["spec"].update(executionBindingID=OTHER_EPOCH)),
        jobs.PLAN_NOT_RECORDED,
        "another epoch",
    ),
    Row(
        "the claim pulls another artifact than its plan was made from",
        claim(source=OCIArtifactAccessBinding(reference=UNAPPROVED_REF, digest=UNAPPROVED)),
        jobs.PLAN_NOT_RECORDED,
        f"it was made from the artifact {RESOLVED_MIGRATIONS.digest}, not {UNAPPROVED}",
    ),
    Row(
        "the plan expects another sequence",
        migration_plan(lambda o: o["spec"]["migrations"].pop()),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "the migration is being deleted", stored("PtahMigration", deleting), objects.OWNER_DELETING
    ),
]
