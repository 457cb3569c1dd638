"""Forming a claim: the operation ID, the input fingerprint and the reserved Job name.

Pure functions; the reconciler persists what they return (finalizer first, then the
claim by status patch) before anything external happens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, TypeVar, Unpack

from jobclaim import digest_of, job_name, resolved_source
from jobclaim.api import (
    ActiveOperationStatus,
    ExecutionBindingStatus,
    MigrationOperationStatus,
    PtahMigration,
    PtahSchema,
)


def claim_inputs(
    family: str, operation: str, generation: int | None, binding: ExecutionBindingStatus | None
) -> dict[str, Any] | None:
    """What every family's claim is decided from: the family, the operation, the
    resource's generation (a spec edit, suspending included, moves it) and the
    execution binding's epoch; None without a binding. A family adds what only it has."""
    if binding is None:
        return None
    return {
        "family": family,
        "operation": operation,
        "generation": generation,
        "epoch": binding.epoch,
    }


def input_fingerprint(inputs: Mapping[str, Any]) -> str:
    """The digest of everything a claim of one type was decided from."""
    return digest_of(dict(inputs))


def operation_id(fingerprint: str, nonce: bytes) -> str:
    """A fresh operation ID: the same inputs claimed twice are still two operations."""
    if len(nonce) != 16:
        raise ValueError("an operation nonce is 16 random bytes")
    return digest_of({"inputFingerprint": fingerprint, "nonce": nonce.hex()})


_Operation = TypeVar("_Operation", ActiveOperationStatus, MigrationOperationStatus)


class ClaimFields(TypedDict):
    """What a new claim is formed from, the same for both families."""

    operation: str
    fingerprint: str
    epoch: str
    nonce: bytes
    started_at: str
    attempt: NotRequired[int]
    execution_not_after: NotRequired[str | None]


def _operation(
    model: type[_Operation],
    family: str,
    resource: PtahSchema | PtahMigration,
    fields: ClaimFields,
) -> _Operation:
    """The claim a resource writes before its Job exists, naming that Job."""
    fingerprint = fields["fingerprint"]
    epoch = fields["epoch"]
    attempt = fields.get("attempt", 1)
    op_id = operation_id(fingerprint, fields["nonce"])
    return model(
        type=fields["operation"],
        id=op_id,
        input_fingerprint=fingerprint,
        job_name=job_name(
            family=family,
            owner_name=resource.metadata.name or "",
            owner_uid=resource.metadata.uid or "",
            operation=fields["operation"],
            operation_id=op_id,
            epoch=epoch,
            input_fingerprint=fingerprint,
            attempt=attempt,
        ),
        started_at=fields["started_at"],
        attempt=attempt,
        execution_binding_id=epoch,
        execution_not_after=fields.get("execution_not_after"),
        target=resource.spec.target,
        source=resolved_source(resource, fields["operation"]),
    )


def schema_operation(schema: PtahSchema, **fields: Unpack[ClaimFields]) -> ActiveOperationStatus:
    """The claim a PtahSchema writes before its Job exists."""
    return _operation(ActiveOperationStatus, "schema", schema, fields)


def migration_operation(
    migration: PtahMigration, **fields: Unpack[ClaimFields]
) -> MigrationOperationStatus:
    """The claim a PtahMigration writes before its Job exists."""
    return _operation(MigrationOperationStatus, "migration", migration, fields)
