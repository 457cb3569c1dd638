"""Published plans: the one builder of PtahSchemaPlan, its chunks, and PtahMigrationPlan.

A plan is what an approval authorizes, so everything in it that the claim fixes (the
execution binding, the target, the resource it belongs to, the manager that published
it) is derived here and nowhere else, and its name is derived from a fingerprint over
all of it. The controller publishes with these builders and the webhook rebuilds a
submitted plan with them; a plan that differs from its rebuild in any field is one
neither side would have written. Only what the reading itself found (the statements'
digest and storage for a schema, the pending sequence for a migration) is taken from
the plan as given: nothing else could know it.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from jobclaim._canonical import digest_of, sha256_digest
from jobclaim.api._base import API_VERSION
from jobclaim.api.common import DatabaseTargetSpec, ExecutionBindingStatus, ManagerRecord
from jobclaim.api.meta import ObjectMeta, ObjectReference, OwnerReference
from jobclaim.api.migration import (
    MigrationSequenceEntry,
    PtahMigration,
    PtahMigrationPlan,
    PtahMigrationPlanSpec,
)
from jobclaim.api.schema import (
    PlanChunk,
    PtahSchema,
    PtahSchemaPlan,
    PtahSchemaPlanChunk,
    PtahSchemaPlanChunkSpec,
    PtahSchemaPlanSpec,
)
from jobclaim.claim import Owner
from jobclaim.envelope import OWNER_LABEL
from jobclaim.errors import InvalidInput
from jobclaim.naming import coordination_digest, migration_plan_name, plan_name, projection_names
from jobclaim.projection import LABEL_PLAN, LABEL_SCHEMA, chunk_problem
from jobclaim.semantic import json_equal
from jobclaim.statements import plan_content, privilege_changes_of

# Bumped when the fingerprinted fields change meaning: a plan fingerprinted under
# another contract names a different plan even with equal fields.
PLAN_CONTRACT_VERSION: Final = 1
_SERVER_ASSIGNED: Final = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
)


@dataclass(frozen=True, slots=True)
class SchemaPlanContent:
    """What only the Plan Job's reading knows: the statements and how they are stored."""

    content_digest: str
    statement_count: int
    destructive: bool
    privilege_changes: tuple[str, ...]
    # (digest, size) of each chunk, in index order.
    chunks: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, spec: PtahSchemaPlanSpec) -> SchemaPlanContent:
        return cls(
            content_digest=spec.content_digest,
            statement_count=spec.statement_count,
            destructive=spec.destructive,
            privilege_changes=tuple(spec.privilege_changes),
            chunks=tuple((c.digest, c.size) for c in sorted(spec.chunks, key=lambda c: c.index)),
        )


CHUNK_BYTES: Final = 512 * 1024
MAX_CHUNKS: Final = 16


def split_chunks(text: bytes) -> list[bytes]:
    """The plan's bytes in chunks of at most 512 KiB (``InvalidInput`` past 16)."""
    chunks = [text[i : i + CHUNK_BYTES] for i in range(0, len(text), CHUNK_BYTES)]
    if not 1 <= len(chunks) <= MAX_CHUNKS:
        raise InvalidInput(
            f"a plan of {len(text)} bytes does not fit 1 to {MAX_CHUNKS} chunks of 512 KiB"
        )
    return chunks


def reading_plan_content(
    text: bytes,
    *,
    content_digest: str,
    statement_count: int,
    reported_destructive: bool,
    engine: str,
) -> tuple[SchemaPlanContent, list[bytes]]:
    """What a Plan reading's text makes of a plan, with the bytes it stores.

    The one derivation the controller publishes by and the webhook judges by, both
    from the Plan Pod's own record: the text must be the content its digest names
    (the digest is what the Apply is later held to); destructiveness is the worse of
    the executor's report and the engine's parser over the bytes, and the privilege
    changes are the parser's. ``InvalidInput`` (or ``PlanUnreadable``) when the text
    cannot be a plan.
    """
    if sha256_digest(text) != content_digest:
        raise InvalidInput("the plan text is not the content its record's digest names")
    reading = plan_content(text, engine=engine)
    chunks = split_chunks(text)
    content = SchemaPlanContent(
        content_digest=content_digest,
        statement_count=statement_count,
        destructive=reported_destructive or bool(reading.destructive),
        privilege_changes=tuple(privilege_changes_of(reading)),
        chunks=tuple((sha256_digest(c), len(c)) for c in chunks),
    )
    return content, chunks


def _owner_metadata(owner: Owner, name: str, label: str) -> ObjectMeta:
    return ObjectMeta(
        name=name,
        namespace=owner.namespace,
        labels={label: owner.name},
        owner_references=[OwnerReference.model_validate(owner.reference())],
    )


def _target_coordination(target: DatabaseTargetSpec, namespace: str) -> str:
    return coordination_digest(
        engine=target.engine,
        namespace=namespace,
        coordination_key=target.coordination_key,
        realm=target.realm_ref.name if target.realm_ref else None,
    )


def build_schema_plan(
    schema: PtahSchema,
    *,
    binding: ExecutionBindingStatus,
    dispatched_by: ManagerRecord,
    content: SchemaPlanContent,
) -> dict[str, Any]:
    """The PtahSchemaPlan the schema's active Plan claim publishes, in wire form.

    ``dispatched_by`` is the manager record of the Plan Job the content came from.
    Raises ``InvalidInput`` when the schema holds no Plan claim under ``binding`` or
    the content cannot form a plan.
    """
    status = schema.status
    operation = status.active_operation if status else None
    if operation is None or operation.type != "Plan":
        raise InvalidInput("the schema has no active Plan operation to publish a plan from")
    if operation.execution_binding_id != binding.epoch:
        raise InvalidInput("the Plan operation was claimed under another execution epoch")
    owner = Owner.of("PtahSchema", schema.metadata)
    coordination = operation.coordination_digest or _target_coordination(
        operation.target or schema.spec.target, owner.namespace
    )
    bound: dict[str, Any] = {
        "schemaRef": {"name": owner.name, "uid": owner.uid},
        "contentDigest": content.content_digest,
        "coordinationDigest": coordination,
        "executionBindingID": binding.epoch,
        "controllerStateVersion": binding.controller_state_version,
        "ptahVersion": binding.ptah_version,
        "executorImage": binding.executor_image,
        "runnerProtocolVersion": binding.runner_protocol_version,
        "destructive": content.destructive,
        "privilegeChanges": list(content.privilege_changes),
        "statementCount": content.statement_count,
        "chunks": [
            {"index": i, "digest": digest, "size": size}
            for i, (digest, size) in enumerate(content.chunks)
        ],
    }
    if operation.target_identity_digest is not None:
        bound["targetIdentityDigest"] = operation.target_identity_digest
    fingerprint = digest_of(
        {"contractVersion": PLAN_CONTRACT_VERSION, "kind": "PtahSchemaPlan", **bound}
    )
    name = plan_name(fingerprint)
    if not 1 <= len(content.chunks) <= 16:
        raise InvalidInput("a plan has between 1 and 16 chunks")
    names = projection_names(name, len(content.chunks))
    try:
        spec = PtahSchemaPlanSpec(
            schema_ref=ObjectReference(name=owner.name, uid=owner.uid),
            fingerprint=fingerprint,
            content_digest=content.content_digest,
            coordination_digest=coordination,
            target_identity_digest=operation.target_identity_digest,
            execution_binding_id=binding.epoch,
            controller_state_version=binding.controller_state_version,
            ptah_version=binding.ptah_version,
            executor_image=binding.executor_image,
            runner_protocol_version=binding.runner_protocol_version,
            dispatched_by=dispatched_by,
            destructive=content.destructive,
            privilege_changes=list(content.privilege_changes),
            statement_count=content.statement_count,
            chunks=[
                PlanChunk(name=names[i], index=i, digest=digest, size=size)
                for i, (digest, size) in enumerate(content.chunks)
            ],
        )
    except ValidationError as error:
        raise InvalidInput(f"the plan content cannot form a plan: {_first(error)}") from error
    metadata = _owner_metadata(owner, name, OWNER_LABEL["schema"])
    return PtahSchemaPlan(metadata=metadata, spec=spec).to_wire()


def build_migration_plan(
    migration: PtahMigration,
    *,
    migrations: tuple[MigrationSequenceEntry, ...],
    created_at: str | None = None,
) -> dict[str, Any]:
    """The PtahMigrationPlan a migration's recorded History reading publishes.

    The reading in ``status.history``, the verified artifact in ``status.artifact``
    and the binding in force fix everything but the sequence itself, whose length
    must be the pending count the reading found. ``created_at`` is audit only.
    """
    status = migration.status
    binding = status.execution_binding if status else None
    history = status.history if status else None
    artifact = status.artifact if status else None
    if binding is None:
        raise InvalidInput("the migration records no execution binding in force")
    if history is None or history.fingerprint is None:
        raise InvalidInput("the migration records no history reading to plan from")
    if artifact is None:
        raise InvalidInput("the migration records no verified artifact to plan from")
    if len(migrations) != history.pending_count:
        raise InvalidInput(
            f"the plan's sequence holds {len(migrations)} migrations, "
            f"the history reading found {history.pending_count} pending"
        )
    owner = Owner.of("PtahMigration", migration.metadata)
    coordination = _target_coordination(migration.spec.target, owner.namespace)
    bound: dict[str, Any] = {
        "migrationRef": {"name": owner.name, "uid": owner.uid},
        "migrations": [m.to_wire() for m in migrations],
        "historyFingerprint": history.fingerprint,
        "artifactDigest": artifact.digest,
        "coordinationDigest": coordination,
        "executionBindingID": binding.epoch,
        "controllerStateVersion": binding.controller_state_version,
        "ptahVersion": binding.ptah_version,
        "executorImage": binding.executor_image,
        "runnerProtocolVersion": binding.runner_protocol_version,
    }
    if history.current_version is not None:
        bound["currentVersion"] = history.current_version
    if history.target_identity_digest is not None:
        bound["targetIdentityDigest"] = history.target_identity_digest
    fingerprint = digest_of(
        {"contractVersion": PLAN_CONTRACT_VERSION, "kind": "PtahMigrationPlan", **bound}
    )
    try:
        spec = PtahMigrationPlanSpec(
            migration_ref=ObjectReference(name=owner.name, uid=owner.uid),
            fingerprint=fingerprint,
            migrations=list(migrations),
            history_fingerprint=history.fingerprint,
            current_version=history.current_version,
            artifact_digest=artifact.digest,
            coordination_digest=coordination,
            target_identity_digest=history.target_identity_digest,
            execution_binding_id=binding.epoch,
            controller_state_version=binding.controller_state_version,
            ptah_version=binding.ptah_version,
            executor_image=binding.executor_image,
            runner_protocol_version=binding.runner_protocol_version,
            created_at=created_at,
        )
    except ValidationError as error:
        raise InvalidInput(f"the sequence cannot form a plan: {_first(error)}") from error
    metadata = _owner_metadata(owner, migration_plan_name(fingerprint), OWNER_LABEL["migration"])
    return PtahMigrationPlan(metadata=metadata, spec=spec).to_wire()


def _first(error: ValidationError) -> str:
    detail = error.errors()[0]
    where = ".".join(str(part) for part in detail["loc"])
    return f"{where}: {detail['msg']}".lower()


def build_plan_chunk(plan: PtahSchemaPlan, chunk: PlanChunk, data: bytes) -> dict[str, Any]:
    """The PtahSchemaPlanChunk that stores one chunk of a published plan, in wire form.

    Named, labelled and owned like the chunk's projection ConfigMap, so the two copies
    of the same bytes are found the same way. Raises ``InvalidInput`` when ``data`` is
    not the chunk the plan recorded.
    """
    problem = chunk_problem(chunk, data)
    if problem:
        raise InvalidInput(problem)
    meta = plan.metadata
    owner = OwnerReference(
        api_version=API_VERSION,
        kind="PtahSchemaPlan",
        name=meta.name or "",
        uid=meta.uid or "",
        controller=True,
        block_owner_deletion=True,
    )
    return PtahSchemaPlanChunk(
        metadata=ObjectMeta(
            name=chunk.name,
            namespace=meta.namespace,
            labels={LABEL_PLAN: meta.name or "", LABEL_SCHEMA: plan.spec.schema_ref.name},
            owner_references=[owner],
        ),
        spec=PtahSchemaPlanChunkSpec(
            plan_ref=ObjectReference(name=meta.name or "", uid=meta.uid or ""),
            index=chunk.index,
            data=base64.b64encode(data).decode("ascii"),
            digest=chunk.digest,
            size=chunk.size,
        ),
    ).to_wire()


def published_plan_problem(
    candidate: Mapping[str, Any], expected: Mapping[str, Any], *, what: str = "plan"
) -> str | None:
    """Why a submitted or stored plan or chunk (in wire form) is not its rebuild, or None.

    Server-assigned metadata is ignored; every other field must be equal as JSON, with
    its type (``jobclaim.semantic.json_equal``), so hand it the candidate as sent, never
    a leniently decoded model's re-serialization, which would read "28" as 28. The first
    differing spec field is named in sorted order, so the sentence is stable.
    """
    metadata = candidate.get("metadata")
    if not isinstance(metadata, dict):
        return f"the {what} has no metadata"
    scrubbed = {k: v for k, v in metadata.items() if k not in _SERVER_ASSIGNED}
    if not json_equal(scrubbed, expected.get("metadata")):
        return f"the {what}'s metadata is not the metadata its claim publishes"
    spec, wanted = candidate.get("spec"), expected.get("spec")
    if not isinstance(spec, dict) or not isinstance(wanted, dict):
        return f"the {what} has no spec"
    for key in sorted(set(spec) | set(wanted)):
        if key not in spec or key not in wanted or not json_equal(spec[key], wanted[key]):
            return f"the {what}'s spec.{key} is not the value its claim publishes"
    rest = {k: v for k, v in candidate.items() if k not in ("metadata", "spec", "status")}
    if not json_equal(
        rest, {k: v for k, v in expected.items() if k not in ("metadata", "spec", "status")}
    ):
        return f"the {what} is not of the kind its claim publishes"
    return None
