"""Job CREATE: the exact Job the active claim reserved is admitted, and each single
change to the Job, its claim or what the claim reads is refused with its sentence.

The control row comes first in every table: if it were refused, no refused row below
would prove anything.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from jobclaim.api import ObjectReference, OCIArtifactAccessBinding, ScratchImages
from tests.support.claimworld import BINDING, NOW, OTHER_EPOCH, RESOLVED_MIGRATIONS
from tests.support.webhookscenes import (
    Obj,
    Scene,
    change_owner,
    job_create,
    owner_world,
    with_claim,
    with_status,
)
from tests.webhook.tables import Row, expect, unchanged
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


@pytest.mark.parametrize("row", SCHEMA_APPLY_ROWS, ids=str)
def test_a_schema_apply_job_is_admitted_only_exactly_as_its_claim_builds_it(row: Row) -> None:
    expect(row, job_create("schema", "Apply"))


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


@pytest.mark.parametrize("row", MIGRATION_APPLY_ROWS, ids=str)
def test_a_migration_apply_job_is_bound_to_its_plan(row: Row) -> None:
    expect(row, job_create("migration", "Apply"))


@pytest.mark.parametrize(
    ("family", "operation", "knobs"),
    [
        ("schema", "Resolve", {}),
        ("schema", "Verify", {}),
        ("schema", "Observe", {}),
        ("schema", "Plan", {}),
        ("schema", "Plan", {"attempt": 2}),
        # Empty values, as a values file writes them: the API server stores none of them
        # (Go's omitempty) and the builder writes none, so the Job admission sees is
        # still exactly the rebuild (tests/realapi/test_empty_execution.py).
        (
            "schema",
            "Plan",
            {"execution": {"nodeSelector": {}, "tolerations": [], "priorityClassName": ""}},
        ),
        (
            "schema",
            "Plan",
            {"execution": {"podMetadata": {"labels": {"team": "a"}, "annotations": {"x": "y"}}}},
        ),
        ("migration", "Resolve", {}),
        ("migration", "Verify", {}),
        ("migration", "History", {}),
    ],
)
def test_every_read_only_operation_creates_its_exact_job(
    family: str, operation: str, knobs: dict[str, Any]
) -> None:
    expect(Row("the exact Job", unchanged, None), job_create(family, operation, **knobs))


# -- the scratch database the operator provides (jobclaim.scratch) ---------------------

EVIL_SCRATCH = "evil.example.com/scratch@sha256:" + "9" * 64


def scratch(scene: Scene) -> Obj:
    (sidecar,) = [c for c in pod(scene)["initContainers"] if c["name"] == "scratch-db"]
    return sidecar


def runner_env(name: str, value: str) -> Any:
    def change(scene: Scene) -> None:
        for item in pod(scene)["containers"][0]["env"]:
            if item["name"] == name:
                item.clear()
                item.update(name=name, value=value)

    return change


def drop_scratch(scene: Scene) -> None:
    pod(scene)["initContainers"] = [
        c for c in pod(scene)["initContainers"] if c["name"] != "scratch-db"
    ]


def sidecar_on(operation: str) -> Any:
    """A provided Plan's sidecar, copied into ``operation``'s Job (as a forger would)."""
    sidecar = scratch(job_create("schema", "Plan", dev=PROVIDED))

    def change(scene: Scene) -> None:
        pod(scene)["initContainers"].append(sidecar)
        pod(scene)["volumes"].append(
            {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}}
        )

    return change


PROVIDED: Obj = {"provided": {}}
NOT_BUILT = "the Job's spec is not the one its claim builds"
# A provided Plan is admitted exactly as its claim builds it, scratch database included;
# each row changes one thing of it, and is refused.
SCRATCH_ROWS = [
    Row("the manager's own provided Plan", unchanged, None),
    Row(
        "the sidecar runs another scratch image",
        lambda s: scratch(s).update(image=EVIL_SCRATCH),
        OUTSIDE,
        NOT_BUILT,
    ),
    Row(
        "the sidecar keeps its data on the node's disk",
        lambda s: next(v for v in pod(s)["volumes"] if v["name"] == "scratch").update(emptyDir={}),
        OUTSIDE,
        NOT_BUILT,
    ),
    Row(
        "the sidecar runs as root",
        lambda s: scratch(s)["securityContext"].update(runAsUser=0, runAsNonRoot=False),
        OUTSIDE,
        NOT_BUILT,
    ),
    Row("the sidecar is left out", drop_scratch, OUTSIDE, NOT_BUILT),
    Row(
        "the runner's dev URL names another database",
        runner_env("PTAH_DEV_URL", "postgres://admin@db.example.com:5432/orders"),
        OUTSIDE,
        NOT_BUILT,
    ),
    Row(
        "the binding re-sealed over another scratch image",
        lambda s: change_owner(
            s,
            lambda owner: with_status(
                owner,
                execution_binding=owner.status.execution_binding.model_copy(
                    update={"scratch_images": ScratchImages(postgresql=EVIL_SCRATCH)}
                ),
            ),
        ),
        jobauthority.SCRATCH_NOT_PINNED,
        EVIL_SCRATCH,
    ),
]


@pytest.mark.parametrize("row", SCRATCH_ROWS, ids=str)
def test_a_provided_plan_runs_only_the_pinned_scratch_database(row: Row) -> None:
    expect(row, job_create("schema", "Plan", dev=PROVIDED))


# Only the comparisons carry it: an Apply, a Resolve, a Verify of a provided schema are
# admitted without one, and refused with one added.
@pytest.mark.parametrize("operation", ["Apply", "Resolve", "Verify"])
def test_no_other_operation_carries_the_scratch_database(operation: str) -> None:
    expect(Row("as built", unchanged, None), job_create("schema", operation, dev=PROVIDED))
    expect(
        Row("a sidecar added", sidecar_on(operation), OUTSIDE, NOT_BUILT),
        job_create("schema", operation, dev=PROVIDED),
    )


def test_a_dry_run_is_judged_exactly_like_a_real_create() -> None:
    forged = job_create("schema", "Plan")
    pod(forged)["containers"][0]["securityContext"]["privileged"] = True
    real = expect(Row("forged", unchanged, OUTSIDE), forged)
    forged.dry_run = True
    dry = expect(Row("forged, dry run", unchanged, OUTSIDE), forged)
    assert dry.decision.message == real.decision.message


def test_a_retry_under_a_new_attempt_is_its_own_job() -> None:
    first = job_create("schema", "Plan")
    retry = job_create("schema", "Plan", attempt=2)
    assert job(first)["metadata"]["name"] != job(retry)["metadata"]["name"]
    # The first attempt's Job, submitted while the claim reserves the retry, is refused.
    first.objects = retry.objects
    expect(Row("the first attempt's Job", unchanged, jobs.NOT_RESERVED), first)


def test_the_world_is_the_controllers_own() -> None:
    """The scene's owner and Job come from jobclaim's builder, not from a fixture."""
    world = owner_world("schema", "Apply")
    assert job_create("schema", "Apply").obj == world.submitted


# -- the registry's CA bundle (transport.caFrom): the claim pins it by digest ----------

CA_SOURCE: Obj = {"transport": {"caFrom": {"name": "registry-ca", "key": "ca.pem"}}}
PINNED_CA = "sha256:" + "a" * 64


def ca_volume(scene: Scene) -> Obj:
    volume: Obj = next(v for v in pod(scene)["volumes"] if v["name"] == "registry-ca")
    return volume


def env_of(container: Obj, name: str) -> Obj:
    found: Obj = next(e for e in container["env"] if e["name"] == name)
    return found


def database_container_mounts_the_ca(scene: Scene) -> None:
    pod(scene)["containers"][0]["volumeMounts"].append(
        {"name": "registry-ca", "mountPath": "/registry-ca", "readOnly": True}
    )


def ca_job(family: str, operation: str) -> Scene:
    return job_create(family, operation, source=CA_SOURCE, registry_ca_digest=PINNED_CA)


RESOLVE_CA_ROWS = [
    Row("the exact Job of a Resolve claim that pinned the CA bundle", unchanged, None),
    Row(
        "a Job trusting another CA ConfigMap",
        lambda s: ca_volume(s)["configMap"].update(name="attacker-ca"),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a Job trusting another key of the ConfigMap",
        lambda s: ca_volume(s)["configMap"]["items"][0].update(key="other.pem"),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a Job trusting other CA content than the claim pinned",
        lambda s: env_of(pod(s)["containers"][0], "PTAH_EXPECTED_OCI_CA_DIGEST").update(
            value="sha256:" + "b" * 64
        ),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a Job whose ptah reads a bundle the runner did not check",
        lambda s: env_of(pod(s)["containers"][0], "PTAH_OCI_CA_FILE").update(value="/tmp/ca.pem"),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a claim that pinned no CA bundle",
        claim(registry_ca_digest=None),
        jobs.CANNOT_REBUILD,
        "pins no digest of its registry CA bundle (ConfigMap registry-ca key ca.pem)",
    ),
]


@pytest.mark.parametrize("row", RESOLVE_CA_ROWS, ids=str)
def test_a_resolve_job_trusts_only_the_ca_bundle_its_claim_pinned(row: Row) -> None:
    expect(row, ca_job("schema", "Resolve"))


FETCH_CA_ROWS = [
    Row("the exact Job of a migration Apply whose fetch step trusts the CA", unchanged, None),
    Row(
        "a Job trusting another CA ConfigMap in its fetch step",
        lambda s: ca_volume(s)["configMap"].update(name="attacker-ca"),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a Job mounting the CA bundle where the database is opened",
        database_container_mounts_the_ca,
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
]


@pytest.mark.parametrize("row", FETCH_CA_ROWS, ids=str)
def test_a_fetch_step_trusts_only_the_ca_bundle_the_spec_names(row: Row) -> None:
    expect(row, ca_job("migration", "Apply"))


# -- a DockerConfigJSON credential (registryAuthFrom.mode) -------------------------------

DOCKER_SOURCE: Obj = {"registryAuthFrom": {"name": "pull-secret", "mode": "DockerConfigJSON"}}


def auth_volume(scene: Scene) -> Obj:
    volume: Obj = next(v for v in pod(scene)["volumes"] if v["name"] == "registry-auth")
    return volume


def database_container_reads_the_docker_config(scene: Scene) -> None:
    main = pod(scene)["containers"][0]
    main["volumeMounts"].append(
        {"name": "registry-auth", "mountPath": "/registry-auth", "readOnly": True}
    )
    main["env"].append({"name": "DOCKER_CONFIG", "value": "/registry-auth"})


DOCKER_CONFIG_ROWS = [
    Row("the exact Job of a migration Apply reading a DockerConfigJSON Secret", unchanged, None),
    Row(
        "a Job reading another Secret as its docker config",
        lambda s: auth_volume(s)["secret"].update(secretName="someone-elses-pull-secret"),
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a Job whose database container reads the docker config",
        database_container_reads_the_docker_config,
        OUTSIDE,
        "spec is not the one its claim builds",
    ),
]


@pytest.mark.parametrize("row", DOCKER_CONFIG_ROWS, ids=str)
def test_a_docker_config_credential_is_read_only_as_the_spec_names_it(row: Row) -> None:
    expect(row, job_create("migration", "Apply", source=DOCKER_SOURCE))
