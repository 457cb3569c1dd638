"""The one builder of operation Jobs, used by the controller and the webhook alike.

It writes every field the API server would default, so a Job read back equals its
rebuild and the Pod template digest computed before the Job existed still holds
after the API server stored it. Any field left to the server's defaulting would make
a later API server version's default a reason to refuse the controller's own Job.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final, NamedTuple

from jobclaim._canonical import is_digest, is_epoch
from jobclaim.api.common import (
    DatabaseTargetSpec,
    ExecutionBindingStatus,
    ExecutionSpec,
    ManagerRecord,
    OCIArtifactAccessBinding,
    OCIArtifactSourceSpec,
)
from jobclaim.api.meta import ConfigMapKeySelector, SecretKeySelector
from jobclaim.api.migration import MigrationOperationStatus, PtahMigration
from jobclaim.api.schema import ActiveOperationStatus, CurrentPlanStatus, PtahSchema
from jobclaim.claim import CLEANUP_TTL_SECONDS, Owner
from jobclaim.envelope import (
    ANN_CONTROLLER_IMAGE,
    ANN_CONTROLLER_REVISION,
    ANN_EPOCH,
    ANN_INPUT_FINGERPRINT,
    ANN_OPERATION_ID,
    ANN_PLAN_CONTENT_DIGEST,
    ANN_PLAN_FINGERPRINT,
    ANN_PTAH_VERSION,
    ANN_SNAPSHOT_DIGEST,
    ANN_STATE_VERSION,
    MUTATING_MARKS,
    claimed_labels,
    declared_metadata_problem,
)
from jobclaim.errors import BuildRefused, InvalidInput
from jobclaim.naming import job_name, projection_names
from jobclaim.operations import operation_info
from jobclaim.projection import CHUNK_KEY
from jobclaim.recordpod import identity_env, token_mount, token_volume
from jobclaim.scratch import (
    COMPARING_OPERATIONS,
    scratch_container,
    scratch_env,
    scratch_image,
    scratch_volume,
)

# The layout (docs/architecture.md, "The operation Job's layout"): the stock ptah
# image runs the main container; the runner, a self-contained Python with its own
# loader and libraries, is copied into an in-memory volume by an init container
# from the manager's image, and started through that loader, so the executor image
# needs no shell, no Python and no C library of its own.
RUNNER_CONTAINER: Final = "ptah"
INSTALL_CONTAINER: Final = "install-runner"
FETCH_SCHEMA_CONTAINER: Final = "fetch-schema"
FETCH_MIGRATIONS_CONTAINER: Final = "fetch-migrations"
RUNNER_USER: Final = 65532
PTAH_BINARY: Final = "/usr/local/bin/ptah"
RUNNER_DIR: Final = "/runner"
PLAN_MOUNT: Final = "/plan"
SOURCE_DIR: Final = "/source"
SCHEMA_FILE: Final = "/source/schema.hcl"
MIGRATIONS_DIR: Final = "/source/migrations"
POLICY_DIR: Final = "/policy"
POLICY_FILE: Final = "/policy/policy"
# The registry's CA bundle (transport.caFrom) and a DockerConfigJSON credential, each
# mounted only into the one container of a Pod that reaches the registry.
REGISTRY_CA_DIR: Final = "/registry-ca"
REGISTRY_CA_FILE: Final = "/registry-ca/ca.pem"
REGISTRY_AUTH_DIR: Final = "/registry-auth"
# Kubernetes' key of a kubernetes.io/dockerconfigjson Secret, and the file name docker
# (and so ptah) looks for in the directory DOCKER_CONFIG names.
DOCKER_CONFIG_KEY: Final = ".dockerconfigjson"
DOCKER_CONFIG_FILE: Final = "config.json"
WORK_DIR: Final = "/tmp"
RUNNER_MODULE: Final = "runner"
RUNNER_COMMAND: Final = (
    f"{RUNNER_DIR}/lib/ld.so",
    "--library-path",
    f"{RUNNER_DIR}/lib",
    f"{RUNNER_DIR}/bin/python3",
    "-I",
    "-m",
    RUNNER_MODULE,
)
INSTALL_COMMAND: Final = ("python3", "-I", "-m", f"{RUNNER_MODULE}.install", RUNNER_DIR)
ARTIFACT_TYPES: Final = {
    "schema": "application/vnd.stokaro.ptah.schema.v1",
    "migration": "application/vnd.stokaro.ptah.migrations.v1",
}
DEFAULT_GRACE_SECONDS: Final = 30
# The operations that read the artifact Resolve pinned (a schema Apply reads its plan).
PINNED_READS: Final = frozenset(
    {"verify", "observe", "plan", "migration-history", "migration-apply"}
)
# The registry Secret's keys and the variables they reach ptah as. The grant key is
# fixed so the Secret's owner, not a resource author, names the registry it is for.
REGISTRY_GRANT_KEY: Final = "registry"
REGISTRY_KEYS: Final = (
    ("PTAH_OCI_REGISTRY", REGISTRY_GRANT_KEY),
    ("PTAH_OCI_USERNAME", "username"),
    ("PTAH_OCI_PASSWORD", "password"),
    ("PTAH_OCI_TOKEN", "token"),
)
# Read-only projections: the plan's chunks, the verification policy, the registry's CA
# bundle and its DockerConfigJSON credential.
READ_ONLY_MODE: Final = 0o440
# The operations whose own container reaches the registry; the ones that read the
# artifact from a database's side get it from their fetch step instead.
REGISTRY_READS: Final = frozenset({"resolve", "verify"})
FETCH_READS: Final = frozenset({"observe", "plan", "migration-history", "migration-apply"})


class JobInputs(NamedTuple):
    """Everything one operation Job is built from; nothing else is read.

    A named tuple, not a frozen dataclass: it is as immutable, and the webhook builds
    one on every Job-create review, where a frozen dataclass pays an
    ``object.__setattr__`` call for each of its fields.
    """

    owner: Owner
    operation: str
    operation_id: str
    input_fingerprint: str
    attempt: int
    job_name: str
    epoch: str
    binding: ExecutionBindingStatus
    manager: ManagerRecord
    execution: ExecutionSpec
    target: DatabaseTargetSpec
    execution_not_after: str | None = None
    termination_grace_period_seconds: int = DEFAULT_GRACE_SECONDS
    plan: CurrentPlanStatus | None = None
    expected_sequence: tuple[str, ...] = ()
    snapshot_digest: str | None = None
    # What ptah reads: the artifact (as requested, and as resolved), its policy,
    # the realm, and the policy's knobs that reach ptah as flags or variables.
    source: OCIArtifactSourceSpec | None = None
    resolved: OCIArtifactAccessBinding | None = None
    coordination_digest: str | None = None
    exclude: tuple[str, ...] = ()
    protected_tables: tuple[str, ...] = ()
    transaction_mode: str = "all"
    lock_timeout: str = "30s"
    # The schema's scratch database, read from its spec (which the manager cannot
    # write), never from status: a manager that could name it could point a Job's
    # scratch work at any database whose Secret the namespace holds.
    dev_url_from: SecretKeySelector | None = None
    # The spec's dev says the operator provides the scratch database (jobclaim.scratch):
    # from spec too, so only the schema's owner decides that its Pods carry one.
    dev_provided: bool = False
    # The digest of the registry CA bundle the claim pinned when it was made (status,
    # which the manager writes; the ConfigMap key it names is the spec's).
    registry_ca_digest: str | None = None


def schema_job_inputs(
    schema: PtahSchema,
    *,
    binding: ExecutionBindingStatus,
    manager: ManagerRecord,
    snapshot_digest: str | None = None,
) -> JobInputs:
    """The inputs a PtahSchema's active claim builds its Job from."""
    status = schema.status
    operation = status.active_operation if status else None
    if status is None or operation is None:
        raise BuildRefused("the schema has no active operation to build a Job for")
    plan = status.plan if operation.type == "Apply" else None
    if operation.type == "Apply" and plan is None:
        raise BuildRefused("an Apply claim cannot build its Job without status.plan")
    policy = schema.spec.policy
    return _active_inputs(
        schema, operation, binding=binding, manager=manager, snapshot_digest=snapshot_digest
    )._replace(
        termination_grace_period_seconds=(
            operation.termination_grace_period_seconds or DEFAULT_GRACE_SECONDS
        ),
        plan=plan,
        source=schema.spec.desired,
        exclude=tuple(policy.exclude),
        protected_tables=tuple(policy.protected_tables),
        dev_url_from=schema.spec.dev.url_from if schema.spec.dev else None,
        dev_provided=schema.spec.dev is not None and schema.spec.dev.provided is not None,
    )


def migration_job_inputs(
    migration: PtahMigration,
    *,
    binding: ExecutionBindingStatus,
    manager: ManagerRecord,
    expected_sequence: tuple[str, ...] = (),
    snapshot_digest: str | None = None,
) -> JobInputs:
    """The inputs a PtahMigration's active claim builds its Job from."""
    status = migration.status
    operation = status.active_operation if status else None
    if operation is None:
        raise BuildRefused("the migration has no active operation to build a Job for")
    if operation.type == "Apply" and not expected_sequence:
        raise BuildRefused("a migration Apply cannot build its Job without its plan's sequence")
    return _active_inputs(
        migration, operation, binding=binding, manager=manager, snapshot_digest=snapshot_digest
    )._replace(expected_sequence=expected_sequence, source=migration.spec.artifact)


def _active_inputs(
    resource: PtahSchema | PtahMigration,
    operation: ActiveOperationStatus | MigrationOperationStatus,
    *,
    binding: ExecutionBindingStatus,
    manager: ManagerRecord,
    snapshot_digest: str | None,
) -> JobInputs:
    """What both families' Jobs read off their claim and spec alike; each family then
    sets the fields only it has (``_replace``), so a shared field is read in one place."""
    return JobInputs(
        owner=Owner.of(resource.kind, resource.metadata),
        operation=operation.type,
        operation_id=operation.id,
        input_fingerprint=operation.input_fingerprint,
        attempt=operation.attempt,
        job_name=operation.job_name,
        epoch=operation.execution_binding_id,
        binding=binding,
        manager=manager,
        execution=resource.spec.execution,
        target=operation.target or resource.spec.target,
        execution_not_after=operation.execution_not_after,
        snapshot_digest=snapshot_digest,
        resolved=operation.source,
        coordination_digest=operation.coordination_digest,
        transaction_mode=resource.spec.policy.transaction_mode,
        lock_timeout=resource.spec.policy.lock_timeout,
        registry_ca_digest=operation.registry_ca_digest,
    )


def _refuse_inputs(inputs: JobInputs) -> None:
    family = inputs.owner.family
    if family is None:
        raise BuildRefused(f"{inputs.owner.kind} is not a kind that dispatches Jobs")
    info = operation_info(family, inputs.operation)
    if not info.known:
        raise BuildRefused(f"{inputs.operation!r} is not an operation this operator defines")
    if not is_epoch(inputs.epoch) or inputs.epoch != inputs.binding.epoch:
        raise BuildRefused("the claim's execution epoch is not the binding in force")
    if inputs.snapshot_digest is not None and not is_digest(inputs.snapshot_digest):
        raise BuildRefused("the admission snapshot digest is not a sha256 digest")
    try:
        derived = job_name(
            family=family,
            owner_name=inputs.owner.name,
            owner_uid=inputs.owner.uid,
            operation=inputs.operation,
            operation_id=inputs.operation_id,
            epoch=inputs.epoch,
            input_fingerprint=inputs.input_fingerprint,
            attempt=inputs.attempt,
        )
    except InvalidInput as error:
        raise BuildRefused(f"the claim cannot name its Job: {error}") from error
    if derived != inputs.job_name:
        # The persisted name is what a restarted controller looks the Job up by; a Job
        # built under another name would be one no claim can find.
        raise BuildRefused("the claim's persisted Job name is not the one its inputs derive")
    if info.runner_operation in PINNED_READS and inputs.resolved is None:
        # Without the claim's resolution the Job could only read the reference as
        # written, and a tag that moved since Resolve would be verified or applied.
        raise BuildRefused(
            f"a {inputs.operation} claim records no resolved artifact to read "
            "(only Resolve reads the reference as written)"
        )
    ca = _registry_ca(inputs)
    if ca is not None and reaches_registry(info.runner_operation):
        digest = inputs.registry_ca_digest
        if digest is None or not is_digest(digest):
            # Without the pin the Pod would trust whatever the ConfigMap holds when it
            # starts, which anyone who may edit ConfigMaps here could choose.
            raise BuildRefused(
                f"the {inputs.operation} claim pins no digest of its registry CA bundle "
                f"(ConfigMap {ca.name} key {ca.key})"
            )
    if family == "schema" and inputs.operation == "Apply":
        plan = inputs.plan
        if plan is None:
            raise BuildRefused("an Apply claim cannot build its Job without its plan")
        if plan.execution_binding_id != inputs.epoch:
            raise BuildRefused("the plan was made under another execution epoch than its claim")
    # A provided dev with no image for its engine is refused here, with the chart value
    # that is missing, rather than as a Pod that never compares.
    _scratch_image(inputs)
    declared = inputs.execution.pod_metadata
    if declared is not None:
        for what in (declared.labels, declared.annotations):
            problem = declared_metadata_problem(what)
            if problem:
                raise BuildRefused(problem)


def labels_for(inputs: JobInputs) -> dict[str, str]:
    """The labels the claim fixes (user-declared labels are added under them)."""
    owner = inputs.owner
    return dict(
        claimed_labels(owner.family or "", owner.name, inputs.operation, inputs.operation_id)
    )


def annotations_for(inputs: JobInputs) -> dict[str, str]:
    """The operation envelope the claim fixes, plus the plan binding and mutating marks."""
    envelope = {
        ANN_OPERATION_ID: inputs.operation_id,
        ANN_INPUT_FINGERPRINT: inputs.input_fingerprint,
        ANN_PTAH_VERSION: inputs.binding.ptah_version,
        ANN_EPOCH: inputs.epoch,
        ANN_CONTROLLER_IMAGE: inputs.manager.controller_image,
        ANN_CONTROLLER_REVISION: inputs.manager.controller_revision,
        ANN_STATE_VERSION: str(inputs.binding.controller_state_version),
    }
    if inputs.snapshot_digest is not None:
        envelope[ANN_SNAPSHOT_DIGEST] = inputs.snapshot_digest
    if inputs.plan is not None:
        envelope[ANN_PLAN_FINGERPRINT] = inputs.plan.fingerprint
        envelope[ANN_PLAN_CONTENT_DIGEST] = inputs.plan.content_digest
    family = inputs.owner.family or ""
    if operation_info(family, inputs.operation).mutating:
        envelope.update(MUTATING_MARKS)
    return envelope


def _hardened_container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUNNER_USER,
        "runAsGroup": RUNNER_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container_defaults() -> dict[str, Any]:
    # The API server's container defaults, written so a read-back equals the rebuild.
    return {
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def sequence_document(versions: tuple[str, ...]) -> str:
    """ptah's ``--expect-sequence`` document for the approved versions, compact.

    ptah names a migration by its integer version and keeps the spelling it was
    written with as ``version_key``; the guard compares both, in order.
    """
    if not all(v.isascii() and v.isdigit() and int(v) > 0 for v in versions):
        raise BuildRefused("a migration version ptah can name is a positive integer")
    entries = [{"version": int(v), "version_key": v} for v in versions]
    return json.dumps({"migrations": entries}, separators=(",", ":"))


def repository_of(reference: str) -> str:
    """``host[:port]/path`` of an OCI reference: without its scheme, digest and tag, with
    Docker Hub's implied host and ``library/`` spelled out, the way a registry client
    resolves it (``postgres`` and ``docker.io/library/postgres`` are one repository)."""
    name = reference.removeprefix("oci://").split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    # A colon before the last slash is a registry's port, not a tag.
    name = name[:colon] if colon > slash else name
    first, _, rest = name.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        first, rest = "docker.io", name
    if first == "index.docker.io":
        first = "docker.io"
    if first == "docker.io" and "/" not in rest:
        rest = f"library/{rest}"
    return f"{first}/{rest}"


def _references(inputs: JobInputs) -> tuple[str, str]:
    """The artifact as requested, and as resolved (pinned by digest) when the claim knows.

    The resolution is status, which the manager writes; the repository is the spec's,
    which it cannot. A resolution from any other repository is refused, so a stolen
    manager identity can choose at most a digest of the repository a person named
    (and a migration plan binds even that), never another registry's artifact.
    """
    requested = inputs.source.oci_ref if inputs.source else ""
    resolved = inputs.resolved
    if resolved is None:
        # Resolve, or an operation that reads no artifact (_refuse_inputs).
        return requested, requested
    if inputs.source is not None and repository_of(resolved.reference) != repository_of(requested):
        raise BuildRefused(
            f"the resolved artifact {resolved.reference} is not from the spec's repository "
            f"{repository_of(requested)}"
        )
    pinned = resolved.reference
    if not pinned.endswith("@" + resolved.digest):
        pinned = f"{pinned.split('@', 1)[0]}@{resolved.digest}"
    return requested, pinned


def _value(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _from_secret(name: str, selector: SecretKeySelector) -> dict[str, Any]:
    # A URL with a password reaches the container from its Secret, never as a value
    # in the Job (which anyone who may read Jobs could read).
    return {
        "name": name,
        "valueFrom": {"secretKeyRef": {"name": selector.name, "key": selector.key}},
    }


def _registry_env(inputs: JobInputs) -> list[dict[str, Any]]:
    """The registry credential, for a container that reaches the registry, from its Secret.

    ptah reads ``PTAH_OCI_USERNAME``/``PASSWORD`` or ``TOKEN``; ``PTAH_OCI_REGISTRY`` is
    the Secret owner's grant (the fixed key ``registry``, which a resource author cannot
    choose), and the runner refuses a reference outside it. The grant is required, the
    credential keys optional (a Secret holds a password or a token).
    """
    auth = inputs.source.registry_auth_from if inputs.source else None
    if auth is None:
        return []
    if auth.mode == "DockerConfigJSON":
        # ptah reads docker's configuration (its docs/oci.md: DOCKER_CONFIG, then
        # config.json); the Secret is mounted there (_registry_volumes), and no key of
        # it becomes a variable.
        return [_value("DOCKER_CONFIG", REGISTRY_AUTH_DIR)]
    env = []
    for name, key in REGISTRY_KEYS:
        ref: dict[str, Any] = {"name": auth.name, "key": key}
        if key != REGISTRY_GRANT_KEY:
            ref["optional"] = True
        env.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    return env


def _transport_env(inputs: JobInputs) -> list[dict[str, Any]]:
    """The spec's registry transport, for a container that reaches the registry: ptah's
    ``--plain-http`` through its ``PTAH_PLAIN_HTTP`` twin (the runner passes it through),
    and the CA bundle as ``PTAH_OCI_CA_FILE``, the PEM file ptah trusts in addition to
    the system roots (ptah's docs/oci.md, "Reaching a private registry")."""
    transport = inputs.source.transport if inputs.source else None
    if transport is None:
        return []
    env = []
    if transport.plain_http:
        env.append(_value("PTAH_PLAIN_HTTP", "true"))
    if transport.ca_from is not None:
        env.append(_value("PTAH_OCI_CA_FILE", REGISTRY_CA_FILE))
    return env


def _registry_ca(inputs: JobInputs) -> ConfigMapKeySelector | None:
    transport = inputs.source.transport if inputs.source else None
    return transport.ca_from if transport else None


def reaches_registry(runner_operation: str) -> bool:
    """Whether some container of the operation's Pod talks to the registry."""
    return runner_operation in REGISTRY_READS or runner_operation in FETCH_READS


def _registry_volumes(inputs: JobInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The CA bundle and the DockerConfigJSON credential, as volumes and the mounts of the
    one container that reaches the registry; none for a Pod that never does."""
    runner = operation_info(inputs.owner.family or "", inputs.operation).runner_operation
    if not reaches_registry(runner):
        return [], []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    ca = _registry_ca(inputs)
    if ca is not None:
        items = [{"key": ca.key, "path": "ca.pem"}]
        config_map = {"name": ca.name, "items": items, "defaultMode": READ_ONLY_MODE}
        volumes.append({"name": "registry-ca", "configMap": config_map})
        mounts.append({"name": "registry-ca", "mountPath": REGISTRY_CA_DIR, "readOnly": True})
    auth = inputs.source.registry_auth_from if inputs.source else None
    if auth is not None and auth.mode == "DockerConfigJSON":
        items = [{"key": DOCKER_CONFIG_KEY, "path": DOCKER_CONFIG_FILE}]
        secret = {"secretName": auth.name, "items": items, "defaultMode": READ_ONLY_MODE}
        volumes.append({"name": "registry-auth", "secret": secret})
        mounts.append({"name": "registry-auth", "mountPath": REGISTRY_AUTH_DIR, "readOnly": True})
    return volumes, mounts


def _env(inputs: JobInputs) -> list[dict[str, Any]]:
    family = inputs.owner.family or ""
    info = operation_info(family, inputs.operation)
    runner = info.runner_operation
    requested, resolved = _references(inputs)
    env: list[dict[str, Any]] = [
        _value("PTAH_BINARY", PTAH_BINARY),
        _value("PTAH_EXPECTED_DATABASE_ENGINE", inputs.target.engine),
        _value("PTAH_OPERATION", runner),
        _value("PTAH_OPERATION_ID", inputs.operation_id),
        _value("PTAH_RUNNER_PROTOCOL_VERSION", str(inputs.binding.runner_protocol_version)),
        _value("PTAH_RUNNER_WORK_DIR", WORK_DIR),
        _value("PTAH_VERSION", inputs.binding.ptah_version),
        *identity_env(),
    ]
    if runner in REGISTRY_READS:
        env.extend(_registry_env(inputs))
        env.extend(_transport_env(inputs))
        if _registry_ca(inputs) is not None and inputs.registry_ca_digest is not None:
            # The runner's own input: it holds the mounted bundle to the claim's pin
            # before ptah reads it, and hands ptah a copy it checked.
            env.append(_value("PTAH_EXPECTED_OCI_CA_DIGEST", inputs.registry_ca_digest))
    if runner == "resolve":
        env.append(_value("PTAH_REQUESTED_REFERENCE", requested))
    elif runner == "verify":
        env.append(_value("PTAH_EXPECTED_ARTIFACT_TYPE", ARTIFACT_TYPES[family]))
        env.append(_value("PTAH_RESOLVED_REFERENCE", resolved))
        env.append(_value("PTAH_VERIFICATION_POLICY", POLICY_FILE))
    else:
        # Only a database operation holds the credential; the fetch step holds none.
        env.append(_from_secret("PTAH_DB_URL", inputs.target.url_from))
        env.append(_value("PTAH_CONNECT_TIMEOUT", inputs.execution.connect_timeout))
        env.append(_value("PTAH_LOCK_TIMEOUT", inputs.lock_timeout))
        env.append(_value("PTAH_TX_MODE", "all"))
        if inputs.coordination_digest is not None:
            env.append(_value("PTAH_COORDINATION_DIGEST", inputs.coordination_digest))
    if inputs.execution_not_after is not None:
        env.append(_value("PTAH_EXECUTION_NOT_AFTER", inputs.execution_not_after))
    if runner in ("observe", "plan"):
        env.append(_value("PTAH_SCHEMA_FILE", SCHEMA_FILE))
        # Only the comparisons get the scratch database: an Apply runs its approved
        # plan alone (ptah-cli.md), so it holds no second credential it never uses.
        if inputs.dev_url_from is not None:
            env.append(_from_secret("PTAH_DEV_URL", inputs.dev_url_from))
        elif _scratch_image(inputs) is not None:
            env.extend(scratch_env(inputs.target.engine))
    if runner == "plan":
        if inputs.exclude:
            env.append(_value("PTAH_EXCLUDE", ",".join(inputs.exclude)))
        if inputs.protected_tables:
            env.append(_value("PTAH_PROTECTED_TABLES", ",".join(inputs.protected_tables)))
    if inputs.plan is not None:
        env.append(_value("PTAH_EXPECTED_PLAN_CONTENT_DIGEST", inputs.plan.content_digest))
        if inputs.plan.target_identity_digest is not None:
            target = inputs.plan.target_identity_digest
            env.append(_value("PTAH_EXPECTED_TARGET_IDENTITY_DIGEST", target))
        env.append(_value("PTAH_PLAN_DIR", PLAN_MOUNT))
    if runner in ("migration-history", "migration-apply"):
        env.append(_value("PTAH_MIGRATIONS_DIR", MIGRATIONS_DIR))
    if runner == "migration-apply":
        document = sequence_document(inputs.expected_sequence)
        digest = "sha256:" + hashlib.sha256(document.encode()).hexdigest()
        env.append(_value("PTAH_EXPECTED_MIGRATION_SEQUENCE", document))
        env.append(_value("PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST", digest))
    if runner in ("apply", "migration-apply"):
        # The policy's transactionMode reaches ptah's --tx-mode (ptah-cli.md) through
        # the runner; the child's PTAH_TX_MODE stays all, the mode nothing else uses.
        env.append(_value("PTAH_TRANSACTION_MODE", inputs.transaction_mode))
    return sorted(env, key=lambda item: str(item["name"]))


def _fetch_container(inputs: JobInputs, resources: dict[str, Any]) -> dict[str, Any] | None:
    """The step that pulls the artifact, in a container that holds no database credential."""
    runner = operation_info(inputs.owner.family or "", inputs.operation).runner_operation
    _, resolved = _references(inputs)
    if runner in ("observe", "plan"):
        name, noun, out = FETCH_SCHEMA_CONTAINER, "schema", SCHEMA_FILE
    elif runner in ("migration-history", "migration-apply"):
        name, noun, out = FETCH_MIGRATIONS_CONTAINER, "migrations", MIGRATIONS_DIR
    else:
        return None
    # The fetch step is the one that holds the registry credential: the process that
    # runs SQL next never does. It reaches the registry, so it gets the transport too.
    # It runs ptah itself, so nothing holds its CA bundle to the claim's pin before
    # ptah reads it; it pulls by digest, which ptah checks against the bytes, so a
    # bundle swapped in can decide only whether the pull succeeds, never what it reads.
    registry = _registry_env(inputs) + _transport_env(inputs)
    _, registry_mounts = _registry_volumes(inputs)
    return {
        "name": name,
        "image": inputs.binding.executor_image,
        "command": [PTAH_BINARY, noun, "pull", resolved, "--out", out],
        **({"env": sorted(registry, key=lambda item: str(item["name"]))} if registry else {}),
        "resources": resources,
        "securityContext": _hardened_container_security(),
        "volumeMounts": [
            {"name": "source", "mountPath": SOURCE_DIR},
            {"name": "tmp", "mountPath": WORK_DIR},
            *registry_mounts,
        ],
        "workingDir": WORK_DIR,
        **_container_defaults(),
    }


def _scratch_image(inputs: JobInputs) -> str | None:
    """The scratch database image this Job runs beside ptah, if it carries one: only a
    comparison (Observe, Plan) of a schema whose spec.dev is provided; refused with its
    reason when the binding names no image for the target's engine."""
    runner = operation_info(inputs.owner.family or "", inputs.operation).runner_operation
    if not inputs.dev_provided or runner not in COMPARING_OPERATIONS:
        return None
    return scratch_image(inputs.binding, inputs.target.engine)


def _volumes_and_mounts(inputs: JobInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    runner = operation_info(inputs.owner.family or "", inputs.operation).runner_operation
    volumes: list[dict[str, Any]] = [
        # In memory: the runner is code the Pod runs, and nothing on the node's disk
        # should be able to stand in for it between the copy and the start.
        {"name": "runner", "emptyDir": {"medium": "Memory"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "runner", "mountPath": RUNNER_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": WORK_DIR},
    ]
    # Every operation writes its result record under its own Pod's bound token; the
    # mount is the runner container's alone (jobclaim.recordpod).
    volumes.append(token_volume(inputs.execution.active_deadline_seconds, READ_ONLY_MODE))
    mounts.append(token_mount())
    if runner in ("observe", "plan", "migration-history", "migration-apply"):
        volumes.append({"name": "source", "emptyDir": {}})
        mounts.append({"name": "source", "mountPath": SOURCE_DIR, "readOnly": True})
    if runner == "verify" and inputs.source and inputs.source.verification_policy_from:
        selector = inputs.source.verification_policy_from
        items = [{"key": selector.key, "path": "policy"}]
        config_map = {"name": selector.name, "items": items, "defaultMode": READ_ONLY_MODE}
        volumes.append({"name": "policy", "configMap": config_map})
        mounts.append({"name": "policy", "mountPath": POLICY_DIR, "readOnly": True})
    if _scratch_image(inputs) is not None:
        # The sidecar's alone: the runner reaches the database over loopback, never
        # through its files.
        volumes.append(scratch_volume())
    registry_volumes, registry_mounts = _registry_volumes(inputs)
    volumes.extend(registry_volumes)
    if runner in REGISTRY_READS:
        # Only Resolve's and Verify's own container reaches the registry; the others'
        # fetch step mounts these (_fetch_container), never the one that opens the database.
        mounts.extend(registry_mounts)
    if inputs.plan is not None:
        names = projection_names(inputs.plan.name, inputs.plan.chunk_count)
        sources = [
            {"configMap": {"name": name, "items": [{"key": CHUNK_KEY, "path": f"{i:03d}.plan"}]}}
            for i, name in enumerate(names)
        ]
        projected = {"sources": sources, "defaultMode": READ_ONLY_MODE}
        volumes.append({"name": "plan", "projected": projected})
        mounts.append({"name": "plan", "mountPath": PLAN_MOUNT, "readOnly": True})
    return volumes, mounts


# -- the user's execution values, as the API server stores them ------------------------
#
# The API server decodes a Job into Go structs and encodes it back with ``omitempty``:
# an optional map, list or string that is empty is stored as no field at all. A Job
# built with ``nodeSelector: {}`` or ``tolerations: []`` would differ from itself read
# back, so ``match`` would refuse the controller's own Job in every mode and the webhook
# would refuse its create, and a user who wrote ``tolerations: []`` in a values file
# would never get a Job. Each empty value here means what its absence means, so it is
# written as the server stores it: left out. (Pointers and structs are kept even when
# empty, as Go keeps them: ``affinity: {}`` and ``resources: {}`` survive.)

# Affinity's one list that is not omitempty (required non-empty, so a Job with it empty
# is refused by validation, never stored), and its one map (omitempty like the lists).
_AFFINITY_KEPT_EMPTY: Final = frozenset({"nodeSelectorTerms"})
_AFFINITY_MAPS: Final = frozenset({"matchLabels"})


def _stored_affinity(value: Any) -> Any:
    """Kubernetes' affinity as stored: null fields, empty lists and an empty
    ``matchLabels`` left out, at any depth; its strings are never omitempty."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None:
                continue
            stored = _stored_affinity(item)
            if stored == [] and key not in _AFFINITY_KEPT_EMPTY:
                continue
            if stored == {} and key in _AFFINITY_MAPS:
                continue
            out[key] = stored
        return out
    if isinstance(value, list):
        return [_stored_affinity(item) for item in value]
    return value


def _without_empty(wire: dict[str, Any]) -> dict[str, Any]:
    """A small object whose fields are all omitempty (a toleration, a pull-secret
    reference, resource requirements) as stored: empty strings and maps left out."""
    return {key: value for key, value in wire.items() if value not in ("", {}, [])}


def _execution_fields(execution: ExecutionSpec) -> dict[str, Any]:
    """The Pod spec fields the user's execution block sets, exactly as stored."""
    fields: dict[str, Any] = {}
    if execution.image_pull_secrets:
        fields["imagePullSecrets"] = [
            _without_empty(s.to_wire()) for s in execution.image_pull_secrets
        ]
    if execution.node_selector:
        fields["nodeSelector"] = dict(execution.node_selector)
    if execution.tolerations:
        fields["tolerations"] = [_without_empty(t.to_wire()) for t in execution.tolerations]
    if execution.affinity is not None:
        fields["affinity"] = _stored_affinity(execution.affinity)
    if execution.runtime_class_name is not None:
        fields["runtimeClassName"] = execution.runtime_class_name
    if execution.priority_class_name:
        fields["priorityClassName"] = execution.priority_class_name
    return fields


def _pod_spec(inputs: JobInputs) -> dict[str, Any]:
    execution = inputs.execution
    volumes, mounts = _volumes_and_mounts(inputs)
    resources = _without_empty(execution.resources.to_wire()) if execution.resources else {}
    runner = {
        "name": RUNNER_CONTAINER,
        # The stock ptah image: ptah at /usr/local/bin/ptah, whatever else it lacks.
        "image": inputs.binding.executor_image,
        "command": list(RUNNER_COMMAND),
        "env": _env(inputs),
        "resources": resources,
        "securityContext": _hardened_container_security(),
        "volumeMounts": mounts,
        "workingDir": WORK_DIR,
        **_container_defaults(),
    }
    install = {
        "name": INSTALL_CONTAINER,
        "image": inputs.manager.runner_image,
        "command": list(INSTALL_COMMAND),
        "resources": resources,
        "securityContext": _hardened_container_security(),
        "volumeMounts": [{"name": "runner", "mountPath": RUNNER_DIR}],
        **_container_defaults(),
    }
    fetch = _fetch_container(inputs, resources)
    init = [install] if fetch is None else [install, fetch]
    image = _scratch_image(inputs)
    if image is not None:
        # Last, so the database starts only once the runner and the artifact are in
        # place; a native sidecar, so the kubelet starts ptah's container beside it.
        init.append(scratch_container(image, resources, _container_defaults()))
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "containers": [runner],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": False,
        "initContainers": init,
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_USER,
            "runAsGroup": RUNNER_USER,
            "fsGroup": RUNNER_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "serviceAccountName": execution.service_account_name or "default",
        "terminationGracePeriodSeconds": inputs.termination_grace_period_seconds,
        "volumes": volumes,
    }
    spec.update(_execution_fields(execution))
    return spec


def build_job(inputs: JobInputs) -> dict[str, Any]:
    """The operation Job a claim may create, exactly as the API server will store it.

    One Pod, never retried (``backoffLimit: 0``, ``restartPolicy: Never``, a
    replacement only once a Pod has fully failed): a second executor of the same
    mutating claim is exactly what the lifecycle exists to prevent.
    """
    _refuse_inputs(inputs)
    declared = inputs.execution.pod_metadata
    labels = {**(declared.labels if declared else {}), **labels_for(inputs)}
    annotations = {**(declared.annotations if declared else {}), **annotations_for(inputs)}
    # A reading whose lost Job costs only a new attempt is born with its cleanup TTL
    # (``OperationInfo.cleanup_at_create``); an Apply or a Plan gets it by the one
    # patch after its harvest, so its Job cannot go before its result is read.
    cleanup: dict[str, Any] = {}
    if operation_info(inputs.owner.family or "", inputs.operation).cleanup_at_create:
        cleanup["ttlSecondsAfterFinished"] = CLEANUP_TTL_SECONDS
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": inputs.job_name,
            "namespace": inputs.owner.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [inputs.owner.reference()],
        },
        "spec": {
            "activeDeadlineSeconds": inputs.execution.active_deadline_seconds,
            "backoffLimit": 0,
            "completionMode": "NonIndexed",
            "completions": 1,
            # Written although false is the default: kube-apiserver 1.37 stores it, and a
            # rebuild without it would not equal the controller's own Job read back.
            "manualSelector": False,
            "parallelism": 1,
            "podReplacementPolicy": "Failed",
            "suspend": False,
            "template": {
                "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
                "spec": _pod_spec(inputs),
            },
            **cleanup,
        },
    }
