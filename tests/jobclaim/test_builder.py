"""The builder: what every operation Job carries, and what it refuses to build."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobclaim import (
    CLEANUP_TTL_SECONDS,
    BuildRefused,
    build_job,
    match,
    schema_job_inputs,
)
from jobclaim.api import PodMetadataSpec, PtahSchema, RegistryTransportSpec
from jobclaim.api._base import WireModel
from jobclaim.api.common import ExecutionSpec, ResourceRequirements
from jobclaim.envelope import ENVELOPE_KEYS, MUTATING_MARKS
from tests.jobclaim.jobcommands import INSTALL_COMMAND, RUNNER_COMMAND
from tests.support.claimworld import (
    BINDING,
    DEV_PROVIDED,
    DEV_URL_FROM,
    EVERY_OPERATION,
    MANAGER,
    OTHER_EPOCH,
    job_inputs,
    migration_world,
    schema_world,
)


def pod(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_one_pod_never_retried() -> None:
    spec = schema_world().built["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["parallelism"] == 1 and spec["completions"] == 1
    assert spec["podReplacementPolicy"] == "Failed"
    assert pod(schema_world().built)["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 900


# Which Jobs are born with the cleanup TTL: the readings whose lost Job is only a new
# attempt. An Apply's result, and the Plan Job a plan is published from, must outlive
# their harvest, so those get the TTL by the one patch after it.
TTL_ON_CREATE: dict[str, int | None] = {
    "schema Resolve": CLEANUP_TTL_SECONDS,
    "schema Verify": CLEANUP_TTL_SECONDS,
    "schema Observe": CLEANUP_TTL_SECONDS,
    "schema Plan": None,
    "schema Apply": None,
    "migration Resolve": CLEANUP_TTL_SECONDS,
    "migration Verify": CLEANUP_TTL_SECONDS,
    "migration History": CLEANUP_TTL_SECONDS,
    "migration Apply": None,
}


@pytest.mark.parametrize("operation", list(EVERY_OPERATION))
def test_only_a_reading_a_lost_job_cannot_hurt_is_born_with_its_cleanup_ttl(
    operation: str,
) -> None:
    spec = EVERY_OPERATION[operation]().built["spec"]
    assert spec.get("ttlSecondsAfterFinished") == TTL_ON_CREATE[operation]


def test_the_pod_is_hardened() -> None:
    spec = pod(schema_world().built)
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    for container in spec["containers"] + spec["initContainers"]:
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["runAsNonRoot"] is True


def test_the_owner_is_the_one_controller() -> None:
    refs = schema_world().built["metadata"]["ownerReferences"]
    assert len(refs) == 1
    assert refs[0]["controller"] is True and refs[0]["blockOwnerDeletion"] is True
    assert refs[0]["kind"] == "PtahSchema" and refs[0]["uid"] == "schema-uid-1"


@pytest.mark.parametrize(
    ("world", "count", "marked"),
    [
        (lambda: schema_world("Apply"), 11, True),
        (lambda: schema_world("Plan"), 8, False),
        (lambda: migration_world("Apply"), 9, True),
        (lambda: migration_world("History"), 8, False),
    ],
)
def test_the_envelope_annotations(world: Any, count: int, marked: bool) -> None:
    job = world().built
    annotations = job["metadata"]["annotations"]
    assert len(annotations) == count
    assert set(ENVELOPE_KEYS) <= set(annotations)
    assert (set(MUTATING_MARKS) <= set(annotations)) is marked
    template = job["spec"]["template"]["metadata"]
    assert template["annotations"] == annotations
    assert template["labels"] == job["metadata"]["labels"]


def test_an_apply_mounts_its_projections() -> None:
    volumes = pod(schema_world("Apply").built)["volumes"]
    (projected,) = [v["projected"] for v in volumes if v["name"] == "plan"]
    plan = schema_world("Apply").resource.status.plan  # type: ignore[union-attr]
    assert plan is not None
    assert projected["defaultMode"] == 0o440
    assert projected["sources"] == [
        {
            "configMap": {
                "name": f"{plan.name}-{i:03d}",
                "items": [{"key": "chunk", "path": f"{i:03d}.plan"}],
            }
        }
        for i in range(2)
    ]


def test_only_the_runner_holds_the_pods_short_lived_token() -> None:
    """The bound token the runner writes its record with: projected into the runner's
    container alone, expiring soon after the Job's deadline, never under the floor."""
    built = pod(schema_world("Apply").built)
    (volume,) = [v for v in built["volumes"] if v["name"] == "record-token"]
    token, ca = volume["projected"]["sources"]
    deadline = schema_world("Apply").built["spec"]["activeDeadlineSeconds"]
    assert token == {
        "serviceAccountToken": {"expirationSeconds": max(600, deadline + 300), "path": "token"}
    }
    assert ca["configMap"]["name"] == "kube-root-ca.crt"
    mounted = [
        c["name"]
        for c in built["containers"] + built["initContainers"]
        if any(m["name"] == "record-token" for m in c.get("volumeMounts", []))
    ]
    assert mounted == ["ptah"]
    assert built["automountServiceAccountToken"] is False
    env = {e["name"]: e for e in built["containers"][0]["env"]}
    assert env["PTAH_POD_UID"]["valueFrom"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}
    }
    assert env["PTAH_JOB_UID"]["valueFrom"] == {
        "fieldRef": {
            "apiVersion": "v1",
            "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']",
        }
    }


def test_the_database_url_comes_from_its_secret_only() -> None:
    env = {e["name"]: e for e in pod(schema_world().built)["containers"][0]["env"]}
    assert env["PTAH_DB_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "orders-db",
        "key": "url",
    }
    assert "value" not in env["PTAH_DB_URL"]


WORLDS = EVERY_OPERATION
# The operations that compare a schema, and so get the schema's dev database.
COMPARISONS = ("schema Observe", "schema Plan")


@pytest.mark.parametrize("name", WORLDS)
def test_only_the_comparisons_get_the_dev_database_and_only_from_its_secret(name: str) -> None:
    world = WORLDS[name]()
    env = {e["name"]: e for e in pod(world.built)["containers"][0]["env"]}
    if name not in COMPARISONS:
        assert "PTAH_DEV_URL" not in env
        return
    assert isinstance(world.resource, PtahSchema) and world.resource.spec.dev is not None
    assert env["PTAH_DEV_URL"] == {
        "name": "PTAH_DEV_URL",
        "valueFrom": {"secretKeyRef": {"name": "orders-dev-db", "key": "url"}},
    }


@pytest.mark.parametrize("name", COMPARISONS)
def test_a_schema_that_names_no_dev_database_gets_a_job_without_one(name: str) -> None:
    world = WORLDS[name]()
    assert isinstance(world.resource, PtahSchema)
    spec = world.resource.spec.model_copy(update={"dev": None})
    schema = world.resource.model_copy(update={"spec": spec})
    job = build_job(schema_job_inputs(schema, binding=BINDING, manager=MANAGER))
    names = {e["name"] for e in pod(job)["containers"][0]["env"]}
    assert "PTAH_DEV_URL" not in names and "PTAH_DB_URL" in names


@pytest.mark.parametrize("mode", ["rebuild-submitted", "rebuild-stored", "envelope"])
def test_a_job_pointing_ptah_at_another_dev_database_is_not_its_claims(mode: str) -> None:
    # The dev database is the spec's: a Job (a manager's, say) that reads another
    # Secret for it is refused by the one predicate the webhook and controller share.
    world = schema_world("Plan")
    job = world.job(mode)
    for item in pod(job)["containers"][0]["env"]:
        if item["name"] == "PTAH_DEV_URL":
            item["valueFrom"]["secretKeyRef"]["name"] = "orders-db"
    verdict = match(job, world.claim(mode))
    assert not verdict
    assert "Pod template" in verdict.reason or "spec is not the one" in verdict.reason


# Which init containers each operation's Pod runs before the runner.
INIT: dict[str, list[str]] = {
    "schema Resolve": ["install-runner"],
    "schema Verify": ["install-runner"],
    "schema Observe": ["install-runner", "fetch-schema"],
    "schema Plan": ["install-runner", "fetch-schema"],
    "schema Apply": ["install-runner"],
    "migration Resolve": ["install-runner"],
    "migration Verify": ["install-runner"],
    "migration History": ["install-runner", "fetch-migrations"],
    "migration Apply": ["install-runner", "fetch-migrations"],
}


@pytest.mark.parametrize("name", WORLDS)
def test_the_layout_runs_the_stock_ptah_image_with_the_installed_runner(name: str) -> None:
    spec = pod(WORLDS[name]().built)
    (main,) = spec["containers"]
    assert main["image"] == BINDING.executor_image
    assert main["command"] == RUNNER_COMMAND
    assert [c["name"] for c in spec["initContainers"]] == INIT[name]
    install = spec["initContainers"][0]
    assert install["image"] == MANAGER.runner_image
    assert install["command"] == INSTALL_COMMAND
    (runner_volume,) = [v for v in spec["volumes"] if v["name"] == "runner"]
    assert runner_volume["emptyDir"] == {"medium": "Memory"}
    for fetch in spec["initContainers"][1:]:
        # The fetch step runs ptah itself and holds no database credential.
        assert fetch["image"] == BINDING.executor_image
        assert fetch["command"][:3] == ["/usr/local/bin/ptah", fetch["name"].split("-")[1], "pull"]
        assert {e["name"] for e in fetch["env"]} == REGISTRY_VARIABLES
    env = {e["name"] for e in main["env"]}
    assert ("PTAH_DB_URL" in env) is ("Resolve" not in name and "Verify" not in name)


REGISTRY_VARIABLES = {
    "PTAH_OCI_REGISTRY",
    "PTAH_OCI_USERNAME",
    "PTAH_OCI_PASSWORD",
    "PTAH_OCI_TOKEN",
}


@pytest.mark.parametrize("name", WORLDS)
def test_the_registry_credential_reaches_only_the_containers_that_reach_the_registry(
    name: str,
) -> None:
    spec = pod(WORLDS[name]().built)
    resource: Any = WORLDS[name]().resource
    source = resource.spec.desired if isinstance(resource, PtahSchema) else resource.spec.artifact
    secret = source.registry_auth_from.name
    holders = []
    for container in [*spec["initContainers"], *spec["containers"]]:
        env = {e["name"]: e for e in container.get("env", [])}
        credential = REGISTRY_VARIABLES & env.keys()
        if not credential:
            continue
        holders.append(container["name"])
        assert credential == REGISTRY_VARIABLES
        # From the Secret only; the grant is required, the credential keys optional.
        for variable in credential:
            ref = env[variable]["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret and "value" not in env[variable]
            assert ref.get("optional", False) is (variable != "PTAH_OCI_REGISTRY")
        # Never beside the database credential: the SQL process holds none.
        assert "PTAH_DB_URL" not in env
    expected = {
        "Resolve": ["ptah"],
        "Verify": ["ptah"],
        "Observe": ["fetch-schema"],
        "Plan": ["fetch-schema"],
        "History": ["fetch-migrations"],
        "Apply": ["fetch-migrations"] if name.startswith("migration") else [],
    }
    assert holders == expected[name.split()[1]]


@pytest.mark.parametrize("name", WORLDS)
def test_plain_http_reaches_only_the_containers_that_reach_the_registry(name: str) -> None:
    world = WORLDS[name]()
    resource: Any = world.resource
    field = "desired" if isinstance(resource, PtahSchema) else "artifact"
    source = getattr(resource.spec, field).model_copy(
        update={"registry_auth_from": None, "transport": RegistryTransportSpec(plain_http=True)}
    )
    spec = resource.spec.model_copy(update={field: source})
    plain = dataclasses.replace(world, resource=resource.model_copy(update={"spec": spec}))
    built = pod(build_job(job_inputs(plain)))
    told = [
        c["name"]
        for c in [*built["initContainers"], *built["containers"]]
        if {"name": "PTAH_PLAIN_HTTP", "value": "true"} in c.get("env", [])
    ]
    expected = {
        "Resolve": ["ptah"],
        "Verify": ["ptah"],
        "Observe": ["fetch-schema"],
        "Plan": ["fetch-schema"],
        "History": ["fetch-migrations"],
        "Apply": ["fetch-migrations"] if name.startswith("migration") else [],
    }
    assert told == expected[name.split()[1]]
    # The control: without the transport no container is told.
    assert "PTAH_PLAIN_HTTP" not in json.dumps(pod(world.built))


def test_a_migration_apply_carries_ptahs_expected_sequence_document() -> None:
    main = pod(migration_world("Apply").built)["containers"][0]
    env = {e["name"]: e.get("value") for e in main["env"]}
    document = env["PTAH_EXPECTED_MIGRATION_SEQUENCE"]
    assert document == (
        '{"migrations":[{"version":20260101000000,"version_key":"20260101000000"},'
        '{"version":20260102000000,"version_key":"20260102000000"}]}'
    )
    assert env["PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST"] == (
        "sha256:" + hashlib.sha256(document.encode()).hexdigest()
    )


def _with_transaction_mode(mode: str) -> PtahSchema:
    schema = schema_world("Apply").resource
    assert isinstance(schema, PtahSchema)
    policy = schema.spec.policy.model_copy(update={"transaction_mode": mode})
    spec = schema.spec.model_copy(update={"policy": policy})
    return schema.model_copy(update={"spec": spec})


@pytest.mark.parametrize("mode", ["all", "file", "none"])
def test_a_schema_apply_carries_the_policys_transaction_mode(mode: str) -> None:
    job = build_job(
        schema_job_inputs(_with_transaction_mode(mode), binding=BINDING, manager=MANAGER)
    )
    env = {e["name"]: e.get("value") for e in pod(job)["containers"][0]["env"]}
    assert env["PTAH_TRANSACTION_MODE"] == mode
    # ptah's own variable stays all; the runner turns the mode into --tx-mode.
    assert env["PTAH_TX_MODE"] == "all"


@pytest.mark.parametrize("mode", ["rebuild-submitted", "rebuild-stored", "envelope"])
def test_a_job_with_another_transaction_mode_is_not_its_claims(mode: str) -> None:
    # The mode is the spec's and the Pod template the claim's snapshot pins carries
    # it, so a Job that would run the plan outside one transaction is refused.
    world = schema_world("Apply")
    job = world.job(mode)
    for item in pod(job)["containers"][0]["env"]:
        if item["name"] == "PTAH_TRANSACTION_MODE":
            item["value"] = "none"
    verdict = match(job, world.claim(mode))
    assert not verdict
    assert "Pod template" in verdict.reason or "spec is not the one" in verdict.reason


def test_only_the_writes_carry_a_transaction_mode() -> None:
    for name, world in WORLDS.items():
        env = {e["name"] for e in pod(world().built)["containers"][0]["env"]}
        assert ("PTAH_TRANSACTION_MODE" in env) == name.endswith("Apply"), name


def test_building_is_deterministic() -> None:
    builds = [schema_world().built for _ in range(8)]
    assert all(b == builds[0] for b in builds)


def test_declared_pod_metadata_sits_under_the_envelope() -> None:
    labels = schema_world().built["metadata"]["labels"]
    assert labels["team"] == "shop"


def _inputs(**changes: Any) -> Any:
    world = schema_world()
    assert world.resource.kind == "PtahSchema"
    inputs = schema_job_inputs(world.resource, binding=BINDING, manager=MANAGER)  # type: ignore[arg-type]
    return inputs._replace(**changes)


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        ({"job_name": "ptah-apply-orders-0000000000000000"}, "persisted Job name is not"),
        ({"epoch": OTHER_EPOCH}, "not the binding in force"),
        ({"snapshot_digest": "sha256:short"}, "snapshot digest is not"),
        ({"operation": "Vacuum"}, "not an operation this operator defines"),
        ({"plan": None}, "without its plan"),
        (
            {"execution": None},
            "declares the reserved key",
        ),
    ],
)
def test_the_builder_refuses_what_it_cannot_build(changes: dict[str, Any], sentence: str) -> None:
    if changes.get("execution", 1) is None:
        execution = schema_world().resource.spec.execution.model_copy(
            update={"pod_metadata": PodMetadataSpec(labels={"job-name": "x"})}
        )
        changes = {"execution": execution}
    with pytest.raises(BuildRefused, match=sentence):
        build_job(_inputs(**changes))


@pytest.mark.parametrize(
    ("resolved", "refused"),
    [
        # control: the digest the Resolve reading found, in the spec's repository
        ("registry.example.com/shop/orders-schema@sha256:" + "5" * 64, False),
        ("registry.example.com/shop/orders-schema:1.4.0@sha256:" + "5" * 64, False),
        ("evil.example.net/shop/orders-schema@sha256:" + "5" * 64, True),
        ("registry.example.com/shop/other@sha256:" + "5" * 64, True),
        ("registry.example.com:444/shop/orders-schema@sha256:" + "5" * 64, True),
    ],
)
def test_the_artifact_is_pulled_only_from_the_specs_repository(
    resolved: str, refused: bool
) -> None:
    # The resolution is status (the manager's word); the repository is the spec's.
    world = schema_world()
    inputs = job_inputs(world)
    assert inputs.resolved is not None
    forged = inputs._replace(resolved=inputs.resolved.model_copy(update={"reference": resolved}))
    if not refused:
        build_job(forged)
        return
    with pytest.raises(BuildRefused) as refusal:
        build_job(forged)
    assert str(refusal.value) == (
        f"the resolved artifact {resolved} is not from the spec's repository "
        "registry.example.com/shop/orders-schema"
    )


@pytest.mark.parametrize("name", WORLDS)
def test_a_job_that_reads_the_artifact_needs_the_claims_resolution(name: str) -> None:
    # Only Resolve reads the reference as written; every other reader of the artifact
    # is refused without the digest its claim recorded, never given the tag.
    world = WORLDS[name]()
    inputs = job_inputs(world)
    assert (inputs.resolved is None) is (world.operation == "Resolve")
    unresolved = inputs._replace(resolved=None)
    if world.operation == "Resolve" or name == "schema Apply":
        build_job(unresolved)
    else:
        with pytest.raises(BuildRefused, match="records no resolved artifact"):
            build_job(unresolved)


_QUANTITIES = st.none() | st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=4)


@given(limits=_QUANTITIES, requests=_QUANTITIES)
def test_resources_are_written_exactly_as_model_dump_writes_them(
    limits: dict[str, str] | None, requests: dict[str, str] | None
) -> None:
    resources = ResourceRequirements(limits=limits, requests=requests)
    written = resources.to_wire()
    assert written == WireModel.to_wire(resources)
    assert list(written) == list(WireModel.to_wire(resources))


def _built_with(execution: dict[str, Any]) -> dict[str, Any]:
    world = schema_world("Plan")
    schema = world.resource
    declared = ExecutionSpec.model_validate({"activeDeadlineSeconds": 900, **execution})
    schema = schema.model_copy(
        update={"spec": schema.spec.model_copy(update={"execution": declared})}
    )
    assert isinstance(schema, PtahSchema)
    return pod(build_job(schema_job_inputs(schema, binding=BINDING, manager=MANAGER)))


_TERM = {"key": "disk", "operator": "Exists"}


def _node_affinity(requirement: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": [requirement]}
    required = {"nodeSelectorTerms": [term]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


# (id, the execution fields, the Pod spec field, what the builder writes: ABSENT for none)
ABSENT = object()
EMPTY_VALUE_ROWS: list[tuple[str, dict[str, Any], str, Any]] = [
    ("control: a selector", {"nodeSelector": {"disk": "ssd"}}, "nodeSelector", {"disk": "ssd"}),
    ("nodeSelector: {}", {"nodeSelector": {}}, "nodeSelector", ABSENT),
    ("tolerations: []", {"tolerations": []}, "tolerations", ABSENT),
    ("imagePullSecrets: []", {"imagePullSecrets": []}, "imagePullSecrets", ABSENT),
    ('priorityClassName: ""', {"priorityClassName": ""}, "priorityClassName", ABSENT),
    (
        'a toleration with key: ""',
        {"tolerations": [{"key": "", "operator": "Exists"}]},
        "tolerations",
        [{"operator": "Exists"}],
    ),
    (
        "an affinity term with values: []",
        {"affinity": _node_affinity({**_TERM, "values": []})},
        "affinity",
        _node_affinity(_TERM),
    ),
    ("affinity: {} (a pointer: kept)", {"affinity": {}}, "affinity", {}),
]


@pytest.mark.parametrize(
    ("row", "execution", "field", "written"),
    EMPTY_VALUE_ROWS,
    ids=[r[0] for r in EMPTY_VALUE_ROWS],
)
def test_an_empty_execution_value_is_written_as_the_api_server_stores_it(
    row: str, execution: dict[str, Any], field: str, written: Any
) -> None:
    """The API server drops empty optional values (tests/realapi/test_empty_execution.py
    shows it); the builder writes each as stored, so a read-back equals its rebuild."""
    spec = _built_with(execution)
    assert spec.get(field, ABSENT) == written, row


def test_empty_resource_maps_are_written_as_stored() -> None:
    spec = _built_with({"resources": {"limits": {}, "requests": {"cpu": "100m"}}})
    for container in spec["containers"] + spec["initContainers"]:
        assert container["resources"] == {"requests": {"cpu": "100m"}}
    # No requirement at all is still a resources object: a struct, which Go keeps.
    spec = _built_with({"resources": {"limits": {}}})
    assert spec["containers"][0]["resources"] == {}


# -- the scratch database the operator provides (jobclaim.scratch) ---------------------

SCRATCH = BINDING.scratch_images
assert SCRATCH is not None and SCRATCH.postgresql and SCRATCH.mysql
NO_MYSQL = BINDING.model_copy(update={"scratch_images": SCRATCH.model_copy(update={"mysql": None})})
NO_SCRATCH = BINDING.model_copy(update={"scratch_images": None})
PG_URL = "postgres://scratch@127.0.0.1:5432/scratch?sslmode=disable"
MY_URL = "mysql://scratch@127.0.0.1:3306/scratch"

# (id, operation, dev, engine, binding, the sidecar's image and PTAH_DEV_URL, or the
# refusal). The control row carries it; each other row changes one thing.
SCRATCH_ROWS: list[tuple[str, str, dict[str, Any], str, Any, tuple[str, str] | str | None]] = [
    (
        "a provided Plan carries it",
        "Plan",
        DEV_PROVIDED,
        "PostgreSQL",
        BINDING,
        (SCRATCH.postgresql, PG_URL),
    ),
    (
        "a provided Observe carries it",
        "Observe",
        DEV_PROVIDED,
        "PostgreSQL",
        BINDING,
        (SCRATCH.postgresql, PG_URL),
    ),
    (
        "a MySQL target gets the MySQL image",
        "Plan",
        DEV_PROVIDED,
        "MySQL",
        BINDING,
        (SCRATCH.mysql, MY_URL),
    ),
    ("an Apply never does", "Apply", DEV_PROVIDED, "PostgreSQL", BINDING, None),
    ("a Resolve never does", "Resolve", DEV_PROVIDED, "PostgreSQL", BINDING, None),
    ("a Verify never does", "Verify", DEV_PROVIDED, "PostgreSQL", BINDING, None),
    ("a dev the schema names gets none", "Plan", DEV_URL_FROM, "PostgreSQL", BINDING, None),
    (
        "no image for the engine",
        "Plan",
        DEV_PROVIDED,
        "MySQL",
        NO_MYSQL,
        "the schema's spec.dev is provided, and the execution binding names no MySQL scratch "
        "image (the chart's execution.scratchImages.mysql)",
    ),
    (
        "no scratch images at all",
        "Observe",
        DEV_PROVIDED,
        "PostgreSQL",
        NO_SCRATCH,
        "the schema's spec.dev is provided, and the execution binding names no PostgreSQL "
        "scratch image (the chart's execution.scratchImages.postgresql)",
    ),
]


@pytest.mark.parametrize(
    ("operation", "dev", "engine", "binding", "expected"),
    [r[1:] for r in SCRATCH_ROWS],
    ids=[r[0] for r in SCRATCH_ROWS],
)
def test_only_a_provided_comparison_carries_the_scratch_database(
    operation: str,
    dev: dict[str, Any],
    engine: str,
    binding: Any,
    expected: tuple[str, str] | str | None,
) -> None:
    inputs = job_inputs(schema_world(operation, dev=dev, engine=engine))
    inputs = inputs._replace(binding=binding)
    if isinstance(expected, str):
        with pytest.raises(BuildRefused) as refused:
            build_job(inputs)
        assert str(refused.value) == expected
        return
    spec = pod(build_job(inputs))
    sidecars = [c for c in spec["initContainers"] if c["name"] == "scratch-db"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    scratch_volumes = [v for v in spec["volumes"] if v["name"] == "scratch"]
    if expected is None:
        assert sidecars == [] and scratch_volumes == [] and "PTAH_DEV_PROVIDED" not in env
        assert "value" not in env.get("PTAH_DEV_URL", {})
        return
    image, url = expected
    (sidecar,) = sidecars
    # Last, a native sidecar, alone on its in-memory volume; the runner only has the URL.
    assert spec["initContainers"][-1] is sidecar and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"] == image
    assert scratch_volumes == [
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "512Mi"}}
    ]
    assert sidecar["volumeMounts"] == [{"name": "scratch", "mountPath": "/var/lib/scratch"}]
    assert all(m["name"] != "scratch" for m in spec["containers"][0]["volumeMounts"])
    assert env["PTAH_DEV_URL"] == {"name": "PTAH_DEV_URL", "value": url}
    assert env["PTAH_DEV_PROVIDED"] == {"name": "PTAH_DEV_PROVIDED", "value": "1"}
