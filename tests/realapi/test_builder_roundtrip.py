"""The Job builder writes every field the API server would default (issue 8, test 2).

The controller recognizes its own Job by comparing what it reads back with what it
would build (``jobclaim.match``). If the API server added a default the builder did
not write, every read-back would differ from its rebuild, and the controller would
take its own Job for someone else's. So the Job is created on a real kube-apiserver,
taken as the server stored it, and compared field for field with a fresh rebuild, after
removing only the identity the server generates (UID, selector, identity labels,
resourceVersion and friends). ``test_create.py`` in tests/apiconformance runs the
same four claims through ``match``; here the equality itself is the assertion, so a
new server default shows up as the field it added rather than a match verdict.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobclaim import build_job, match, migration_job_inputs, schema_job_inputs
from jobclaim.api import PtahMigration, PtahSchema
from jobclaim.apiserver import JOBS, Object
from jobclaim.template import generated_identity_problem, without_generated_identity
from kube.client import KubeApi
from lab import run as localrun
from lab.localplane import LocalControlPlane
from tests.support import claimworld as world
from tests.support.claimworld import BINDING, MANAGER, SEQUENCE
from tests.support.examples import examples

pytestmark = pytest.mark.controlplane

# What the API server writes into metadata on create and nothing else may: the
# object's identity, its version and the record of who wrote which field.
SERVER_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"}
)


@pytest.fixture
def admin(control_plane: LocalControlPlane) -> Iterator[KubeApi]:
    with KubeApi.from_kubeconfig(control_plane.kubeconfig("admin")) as api:
        yield api


def _world(
    family: str,
    operation: str,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    source: dict[str, Any] | None = None,
    registry_ca_digest: str | None = None,
    **knobs: Any,
) -> world.World:
    example = world.example

    def moved_here(name: str) -> dict[str, Any]:
        # The claim reserves the Job's namespace, so the resource moves, not the Job.
        raw = example(name)
        raw["metadata"]["namespace"] = namespace
        raw["spec"]["desired" if family == "schema" else "artifact"].update(source or {})
        return raw

    monkeypatch.setattr(world, "example", moved_here)
    if family == "schema":
        return world.schema_world(operation, registry_ca_digest=registry_ca_digest, **knobs)
    return world.migration_world(operation, registry_ca_digest=registry_ca_digest)


def _rebuild(made: world.World) -> Object:
    """The Job built again from the resource as the claim left it, as a later pass would."""
    resource = made.resource
    assert resource.status is not None and resource.status.active_operation is not None
    snapshot = resource.status.active_operation.admission_snapshot
    assert snapshot is not None
    if isinstance(resource, PtahSchema):
        inputs = schema_job_inputs(
            resource, binding=BINDING, manager=MANAGER, snapshot_digest=snapshot.digest
        )
    else:
        assert isinstance(resource, PtahMigration)
        inputs = migration_job_inputs(
            resource,
            binding=BINDING,
            manager=MANAGER,
            expected_sequence=SEQUENCE if made.operation == "Apply" else (),
            snapshot_digest=snapshot.digest,
        )
    return build_job(inputs)


def _stored(admin: KubeApi, namespace: str, job: Object) -> Object:
    """The Job as the API server stored it: the create's own answer, not a later read.

    The claim's owner (the PtahSchema or PtahMigration the world describes) does not
    exist on this server, so the garbage collector deletes the Job as soon as it sees
    it; a GET after the create lost that race under load ("not found"). The create's
    response is the object as written to storage, defaults included.
    """
    return admin.create(JOBS, namespace, copy.deepcopy(job))


def _as_built(stored: Object) -> Object:
    """The stored Job without what the API server generated on create."""
    assert generated_identity_problem(stored) is None
    job = without_generated_identity(stored)
    job["metadata"] = {k: v for k, v in job["metadata"].items() if k not in SERVER_METADATA}
    job.pop("status", None)
    return job


def _differences(left: Any, right: Any, path: str = "") -> list[str]:
    """Every path where two wire objects differ, so a failure names the field."""
    if isinstance(left, dict) and isinstance(right, dict):
        found: list[str] = []
        for key in sorted(set(left) | set(right)):
            where = f"{path}.{key}"
            if key not in left:
                found.append(f"{where}: added by the server as {right[key]!r}")
            elif key not in right:
                found.append(f"{where}: dropped by the server")
            else:
                found += _differences(left[key], right[key], where)
        return found
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            d
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if left == right else [f"{path}: built {left!r}, stored {right!r}"]


@pytest.mark.parametrize(
    ("family", "operation"),
    [("schema", "Apply"), ("schema", "Plan"), ("migration", "Apply")],
)
def test_the_stored_job_is_its_rebuild_field_for_field(
    admin: KubeApi,
    namespace: str,
    family: str,
    operation: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = _world(family, operation, namespace, monkeypatch)
    stored = _stored(admin, namespace, made.built)

    assert _differences(_rebuild(made), _as_built(stored)) == []
    # Both ways the controller holds a stored Job to its claim accept it.
    for mode in ("rebuild-stored", "envelope"):
        verdict = match(stored, made.claim(mode))
        assert verdict.matched, f"{mode}: {verdict.reason}"


# A private registry: its CA bundle and a DockerConfigJSON credential, as volumes.
PRIVATE_REGISTRY: Final = {
    "transport": {"caFrom": {"name": "registry-ca", "key": "ca.pem"}},
    "registryAuthFrom": {"name": "pull-secret", "mode": "DockerConfigJSON"},
}


@pytest.mark.parametrize(
    ("family", "operation"), [("schema", "Resolve"), ("schema", "Plan"), ("migration", "Apply")]
)
def test_a_job_reaching_a_private_registry_is_stored_as_built(
    admin: KubeApi,
    namespace: str,
    family: str,
    operation: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = _world(
        family,
        operation,
        namespace,
        monkeypatch,
        source=PRIVATE_REGISTRY,
        registry_ca_digest="sha256:" + "a" * 64,
    )
    volumes = {v["name"] for v in made.built["spec"]["template"]["spec"]["volumes"]}
    assert {"registry-ca", "registry-auth"} <= volumes
    stored = _stored(admin, namespace, made.built)
    assert _differences(_rebuild(made), _as_built(stored)) == []
    verdict = match(stored, made.claim("rebuild-stored"))
    assert verdict.matched, verdict.reason


@pytest.mark.parametrize(
    ("operation", "engine"), [("Plan", "PostgreSQL"), ("Observe", "PostgreSQL"), ("Plan", "MySQL")]
)
def test_a_job_with_the_provided_scratch_database_is_stored_as_built(
    admin: KubeApi,
    namespace: str,
    operation: str,
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The native sidecar (an init container with restartPolicy Always) and its
    # size-limited in-memory emptyDir: a default the server added to either would make
    # every provided reading's Job foreign to its claim.
    made = _world(
        "schema", operation, namespace, monkeypatch, dev=world.DEV_PROVIDED, engine=engine
    )
    init = made.built["spec"]["template"]["spec"]["initContainers"]
    assert init[-1]["name"] == "scratch-db" and init[-1]["restartPolicy"] == "Always"
    stored = _stored(admin, namespace, made.built)
    assert _differences(_rebuild(made), _as_built(stored)) == []
    for mode in ("rebuild-stored", "envelope"):
        verdict = match(stored, made.claim(mode))
        assert verdict.matched, f"{mode}: {verdict.reason}"


def test_a_server_default_the_builder_left_out_is_named(
    admin: KubeApi, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control row: drop a default from the built Job and the comparison names it."""
    made = _world("schema", "Apply", namespace, monkeypatch)
    submitted = copy.deepcopy(made.built)
    # backoffLimit is defaulted to 6 by the API server when it is absent.
    del submitted["spec"]["backoffLimit"]
    stored = _stored(admin, namespace, submitted)
    differences = _differences(_rebuild(made), _as_built(stored))
    assert differences == [
        f".spec.backoffLimit: built {made.built['spec']['backoffLimit']!r}, stored 6"
    ]
    assert not match(stored, made.claim("rebuild-stored")).matched


# -- generated execution blocks -------------------------------------------------------
#
# What a user may write in spec.execution, empty values included (as a Helm values file
# writes them), within what the API server validates for a Job: the built Job, stored
# and read back, is its claim's Job in all three modes of ``match``.

_label_keys = st.sampled_from(["disk", "zone", "example.com/pool"])
_label_values = st.sampled_from(["", "ssd", "a-1"])
_maybe_empty_map = st.dictionaries(_label_keys, _label_values, max_size=2)


@st.composite
def _toleration(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(["", "dedicated", "example.com/gpu"]))
    # An empty key tolerates every taint, which only Exists may say.
    operator = "Exists" if key == "" else draw(st.sampled_from([None, "Exists", "Equal"]))
    toleration: dict[str, Any] = {"key": key}
    if operator is not None:
        toleration["operator"] = operator
    if operator != "Exists":
        toleration["value"] = draw(_label_values)
    effect = draw(st.sampled_from([None, "NoSchedule", "NoExecute"]))
    if effect is not None:
        toleration["effect"] = effect
    if effect == "NoExecute" and draw(st.booleans()):
        toleration["tolerationSeconds"] = draw(st.integers(0, 600))
    return toleration


@st.composite
def _requirement(draw: st.DrawFn) -> dict[str, Any]:
    operator = draw(st.sampled_from(["Exists", "DoesNotExist", "In", "NotIn"]))
    requirement: dict[str, Any] = {"key": draw(_label_keys), "operator": operator}
    if operator in ("In", "NotIn"):
        requirement["values"] = draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2))
    elif draw(st.booleans()):
        requirement["values"] = []
    return requirement


@st.composite
def _affinity(draw: st.DrawFn) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        term: dict[str, Any] = {"matchExpressions": draw(st.lists(_requirement(), max_size=2))}
        if draw(st.booleans()):
            term["matchFields"] = []
        node: dict[str, Any] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
        if draw(st.booleans()):
            node["preferredDuringSchedulingIgnoredDuringExecution"] = []
        affinity["nodeAffinity"] = node
    if draw(st.booleans()):
        selector: dict[str, Any] = {"matchLabels": draw(_maybe_empty_map.map(_non_empty_values))}
        if draw(st.booleans()):
            selector["matchExpressions"] = []
        weighted = {
            "weight": draw(st.integers(1, 100)),
            "podAffinityTerm": {
                "labelSelector": selector,
                "topologyKey": "kubernetes.io/hostname",
                "namespaces": draw(st.sampled_from([[], ["shop"]])),
            },
        }
        affinity["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [weighted]
        }
    return affinity


def _non_empty_values(labels: dict[str, str]) -> dict[str, str]:
    return {k: v or "x" for k, v in labels.items()}


@st.composite
def _resources(draw: st.DrawFn) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if draw(st.booleans()):
        resources["limits"] = draw(st.sampled_from([{}, {"cpu": "500m", "memory": "256Mi"}]))
    if draw(st.booleans()):
        resources["requests"] = draw(st.sampled_from([{}, {"cpu": "100m", "memory": "64Mi"}]))
    return resources


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(_ABSENT), strategy)


_ABSENT: Final = object()


@st.composite
def executions(draw: st.DrawFn) -> dict[str, Any]:
    """A ``spec.execution`` block, every field absent, empty or set."""
    fields = {
        "nodeSelector": draw(_optional(_maybe_empty_map)),
        "tolerations": draw(_optional(st.lists(_toleration(), max_size=2))),
        "imagePullSecrets": draw(
            _optional(st.lists(st.sampled_from([{"name": "pull-a"}, {"name": ""}]), max_size=2))
        ),
        "resources": draw(_optional(_resources())),
        "priorityClassName": draw(_optional(st.sampled_from(["", "ptah-low"]))),
        "affinity": draw(_optional(_affinity())),
    }
    return {k: v for k, v in fields.items() if v is not _ABSENT}


@settings(
    # Each example is a create and a read on the real server; a few dozen cover the
    # empty and non-empty shapes of every field without making CI slow.
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(execution=executions(), family=st.sampled_from(["schema", "migration"]))
def test_any_execution_block_builds_the_job_the_api_server_stores(
    admin: KubeApi,
    monkeypatch: pytest.MonkeyPatch,
    execution: dict[str, Any],
    family: str,
) -> None:
    # A namespace per example: the claim's Job name is fixed by the world.
    namespace = f"ex-{uuid.uuid4().hex[:10]}"
    localrun.prepare_namespace(admin, namespace)
    example = world.example

    def with_execution(name: str) -> dict[str, Any]:
        raw = example(name)
        raw["spec"]["execution"] = {"activeDeadlineSeconds": 900, **execution}
        return raw

    with monkeypatch.context() as patched:
        patched.setattr(world, "example", with_execution)
        made = _world(family, "Apply", namespace, patched)
    stored = _stored(admin, namespace, made.built)

    assert _differences(_rebuild(made), _as_built(stored)) == []
    for mode in ("rebuild-stored", "rebuild-submitted", "envelope"):
        verdict = match(stored, made.claim(mode))
        assert verdict.matched, f"{mode}: {verdict.reason}"
