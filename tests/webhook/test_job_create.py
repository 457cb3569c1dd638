"""Job CREATE: the exact Job the active claim reserved is admitted, and each single
change to the Job, its claim or what the claim reads is refused with its sentence.

The control row comes first in every table: if it were refused, no refused row below
would prove anything.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim.api import ScratchImages
from tests.support.webhookscenes import (
    Obj,
    Scene,
    change_owner,
    job_create,
    owner_world,
    with_status,
)
from tests.webhook.jobcreaterows import (
    MIGRATION_APPLY_ROWS,
    OUTSIDE,
    SCHEMA_APPLY_ROWS,
    claim,
    job,
    pod,
)
from tests.webhook.tables import Row, expect, unchanged
from webhook import jobauthority, jobs


@pytest.mark.parametrize("row", SCHEMA_APPLY_ROWS, ids=str)
def test_a_schema_apply_job_is_admitted_only_exactly_as_its_claim_builds_it(row: Row) -> None:
    expect(row, job_create("schema", "Apply"))


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
