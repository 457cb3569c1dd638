"""How a Pod reaches a private registry: the CA bundle the claim pinned
(``transport.caFrom``) and a DockerConfigJSON credential, each only in the container
that reaches the registry; and the spec combinations that are refused."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import ValidationError

from jobclaim import BuildRefused, build_job
from jobclaim.api import PtahSchema
from jobclaim.api.common import (
    CA_WITHOUT_TLS,
    CREDENTIAL_IN_CLEAR,
    OCIArtifactSourceSpec,
)
from tests.support.claimworld import EVERY_OPERATION, World, job_inputs

PINNED = "sha256:" + "a" * 64
CA = {"name": "registry-ca", "key": "ca.pem"}

# Which container of each operation's Pod reaches the registry: Resolve's and Verify's
# own; the fetch step of the others; none for a schema Apply, which reads its plan.
REACHES_REGISTRY = {
    "Resolve": ["ptah"],
    "Verify": ["ptah"],
    "Observe": ["fetch-schema"],
    "Plan": ["fetch-schema"],
    "History": ["fetch-migrations"],
}


def reaching(name: str) -> list[str]:
    operation = name.split()[1]
    if operation == "Apply":
        return ["fetch-migrations"] if name.startswith("migration") else []
    return REACHES_REGISTRY[operation]


def with_source(world: World, digest: str | None = PINNED, **source: Any) -> World:
    """The world with its artifact source changed and its claim pinning ``digest``."""
    resource: Any = world.resource
    field = "desired" if isinstance(resource, PtahSchema) else "artifact"
    wire = {**getattr(resource.spec, field).to_wire(), **source}
    spec = resource.spec.model_copy(update={field: OCIArtifactSourceSpec.model_validate(wire)})
    status = resource.status
    claim = status.active_operation.model_copy(update={"registry_ca_digest": digest})
    changed = resource.model_copy(
        update={"spec": spec, "status": status.model_copy(update={"active_operation": claim})}
    )
    return dataclasses.replace(world, resource=changed)


def containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    spec = job["spec"]["template"]["spec"]
    return [*spec["initContainers"], *spec["containers"]]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def mounts_of(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


@pytest.mark.parametrize("name", EVERY_OPERATION)
def test_the_ca_bundle_reaches_only_the_container_that_reaches_the_registry(name: str) -> None:
    job = build_job(job_inputs(with_source(EVERY_OPERATION[name](), transport={"caFrom": CA})))
    told = [c["name"] for c in containers(job) if "PTAH_OCI_CA_FILE" in env_of(c)]
    mounted = [c["name"] for c in containers(job) if "registry-ca" in mounts_of(c)]
    assert told == mounted == reaching(name)
    for container in containers(job):
        if container["name"] in told:
            assert env_of(container)["PTAH_OCI_CA_FILE"] == "/registry-ca/ca.pem"
            assert mounts_of(container)["registry-ca"] == "/registry-ca"
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    if told:
        # The key the spec names, read-only, under the name ptah is told.
        assert volumes["registry-ca"]["configMap"] == {
            "name": "registry-ca",
            "items": [{"key": "ca.pem", "path": "ca.pem"}],
            "defaultMode": 0o440,
        }
    else:
        assert "registry-ca" not in volumes
    # The pin goes to the runner, which checks the bundle before ptah reads it, wherever
    # the runner itself reaches the registry; it never reaches ptah's own fetch step.
    pinned = [c["name"] for c in containers(job) if "PTAH_EXPECTED_OCI_CA_DIGEST" in env_of(c)]
    assert pinned == (told if told == ["ptah"] else [])
    if pinned:
        assert env_of(containers(job)[-1])["PTAH_EXPECTED_OCI_CA_DIGEST"] == PINNED


@pytest.mark.parametrize("name", EVERY_OPERATION)
def test_a_docker_config_credential_reaches_only_the_container_that_reaches_the_registry(
    name: str,
) -> None:
    auth = {"registryAuthFrom": {"name": "pull-secret", "mode": "DockerConfigJSON"}}
    job = build_job(job_inputs(with_source(EVERY_OPERATION[name](), digest=None, **auth)))
    told = [c["name"] for c in containers(job) if "DOCKER_CONFIG" in env_of(c)]
    mounted = [c["name"] for c in containers(job) if "registry-auth" in mounts_of(c)]
    assert told == mounted == reaching(name)
    for container in containers(job):
        # No key of the Secret becomes a variable: ptah reads docker's config.json.
        assert not any(n.startswith("PTAH_OCI_") for n in env_of(container))
        if container["name"] in told:
            assert env_of(container)["DOCKER_CONFIG"] == "/registry-auth"
            assert "PTAH_DB_URL" not in env_of(container)
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    if told:
        assert volumes["registry-auth"]["secret"] == {
            "secretName": "pull-secret",
            "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
            "defaultMode": 0o440,
        }
    else:
        assert "registry-auth" not in volumes


def test_the_default_mode_is_the_environment_credential_of_today() -> None:
    world = EVERY_OPERATION["schema Resolve"]()
    explicit = {"registryAuthFrom": {"name": "orders-registry", "mode": "Environment"}}
    today = build_job(job_inputs(world))
    assert build_job(job_inputs(with_source(world, digest=None, **explicit))) == today
    assert "PTAH_OCI_REGISTRY" in json.dumps(today)


# A control row, then one change per row, refused with its sentence.
BUILD_ROWS: list[tuple[str, str, Any, str | None]] = [
    ("a Resolve claim that pinned the bundle", "schema Resolve", PINNED, None),
    (
        "a Resolve claim that pinned nothing",
        "schema Resolve",
        None,
        "the Resolve claim pins no digest of its registry CA bundle "
        "(ConfigMap registry-ca key ca.pem)",
    ),
    (
        "a Plan claim whose fetch step would trust an unpinned bundle",
        "schema Plan",
        None,
        "the Plan claim pins no digest of its registry CA bundle "
        "(ConfigMap registry-ca key ca.pem)",
    ),
    (
        "a migration Apply claim whose fetch step would trust an unpinned bundle",
        "migration Apply",
        None,
        "the Apply claim pins no digest",
    ),
    ("a pin that is not a digest", "migration History", "sha256:short", "pins no digest"),
    # A schema Apply runs its approved plan and never reaches the registry.
    ("a schema Apply, which reaches no registry", "schema Apply", None, None),
]


@pytest.mark.parametrize(
    ("row", "name", "digest", "refusal"), BUILD_ROWS, ids=[r[0] for r in BUILD_ROWS]
)
def test_a_job_is_built_only_from_a_claim_that_pinned_its_ca_bundle(
    row: str, name: str, digest: str | None, refusal: str | None
) -> None:
    world = with_source(EVERY_OPERATION[name](), digest=digest, transport={"caFrom": CA})
    if refusal is None:
        build_job(job_inputs(world))
        return
    with pytest.raises(BuildRefused) as refused:
        build_job(job_inputs(world))
    assert refusal in str(refused.value)


def test_the_pinned_digest_is_part_of_the_job() -> None:
    world = EVERY_OPERATION["schema Verify"]()
    first = build_job(job_inputs(with_source(world, transport={"caFrom": CA})))
    other = build_job(
        job_inputs(with_source(world, digest="sha256:" + "b" * 64, transport={"caFrom": CA}))
    )
    assert first != other
    assert PINNED in json.dumps(first) and PINNED not in json.dumps(other)


SOURCE = {"ociRef": "registry.example.com/shop/orders-schema:1.4.0"}
MODEL_ROWS: list[tuple[str, dict[str, Any], str | None]] = [
    ("a CA bundle over TLS", {"transport": {"caFrom": CA}}, None),
    (
        "a DockerConfigJSON credential over TLS",
        {"registryAuthFrom": {"name": "pull", "mode": "DockerConfigJSON"}},
        None,
    ),
    (
        "a CA bundle for a plain-HTTP registry",
        {"transport": {"plainHTTP": True, "caFrom": CA}},
        CA_WITHOUT_TLS,
    ),
    (
        "a DockerConfigJSON credential sent in clear",
        {
            "transport": {"plainHTTP": True},
            "registryAuthFrom": {"name": "pull", "mode": "DockerConfigJSON"},
        },
        CREDENTIAL_IN_CLEAR,
    ),
    (
        "a mode nobody defined",
        {"registryAuthFrom": {"name": "pull", "mode": "Netrc"}},
        "Input should be 'Environment' or 'DockerConfigJSON'",
    ),
    ("a CA bundle without its key", {"transport": {"caFrom": {"name": "ca"}}}, "key"),
]


@pytest.mark.parametrize(("row", "source", "refusal"), MODEL_ROWS, ids=[r[0] for r in MODEL_ROWS])
def test_registry_access_combinations(
    row: str, source: dict[str, Any], refusal: str | None
) -> None:
    # Both families' sources are this one model (desired, artifact).
    if refusal is None:
        OCIArtifactSourceSpec.model_validate({**SOURCE, **source})
        return
    with pytest.raises(ValidationError) as refused:
        OCIArtifactSourceSpec.model_validate({**SOURCE, **source})
    assert refusal in str(refused.value)
