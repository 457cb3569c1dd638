"""Forming a claim: the operation ID, the input fingerprint and the reserved Job name.

Pure functions; the reconciler persists what they return (finalizer first, then the
claim by status patch) before anything external happens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from jobclaim import digest_of, job_name
from jobclaim.api import (
    ActiveOperationStatus,
    MigrationOperationStatus,
    PtahMigration,
    PtahSchema,
)


def input_fingerprint(inputs: Mapping[str, Any]) -> str:
    """The digest of everything a claim of one type was decided from."""
    return digest_of(dict(inputs))


def operation_id(fingerprint: str, nonce: bytes) -> str:
    """A fresh operation ID: the same inputs claimed twice are still two operations."""
    if len(nonce) != 16:
        raise ValueError("an operation nonce is 16 random bytes")
    return digest_of({"inputFingerprint": fingerprint, "nonce": nonce.hex()})


_Operation = TypeVar("_Operation", ActiveOperationStatus, MigrationOperationStatus)


def _operation(
    model: type[_Operation],
    family: str,
    resource: PtahSchema | PtahMigration,
    *,
    operation: str,
    fingerprint: str,
    epoch: str,
    nonce: bytes,
    started_at: str,
    attempt: int,
    execution_not_after: str | None,
) -> _Operation:
    """The claim a resource writes before its Job exists, naming that Job."""
    op_id = operation_id(fingerprint, nonce)
    return model(
        type=operation,
        id=op_id,
        input_fingerprint=fingerprint,
        job_name=job_name(
            family=family,
            owner_name=resource.metadata.name or "",
            owner_uid=resource.metadata.uid or "",
            operation=operation,
            operation_id=op_id,
            epoch=epoch,
            input_fingerprint=fingerprint,
            attempt=attempt,
        ),
        started_at=started_at,
        attempt=attempt,
        execution_binding_id=epoch,
        execution_not_after=execution_not_after,
        target=resource.spec.target,
    )


def schema_operation(
    schema: PtahSchema,
    *,
    operation: str,
    fingerprint: str,
    epoch: str,
    nonce: bytes,
    started_at: str,
    attempt: int = 1,
    execution_not_after: str | None = None,
) -> ActiveOperationStatus:
    """The claim a PtahSchema writes before its Job exists."""
    return _operation(
        ActiveOperationStatus,
        "schema",
        schema,
        operation=operation,
        fingerprint=fingerprint,
        epoch=epoch,
        nonce=nonce,
        started_at=started_at,
        attempt=attempt,
        execution_not_after=execution_not_after,
    )


def migration_operation(
    migration: PtahMigration,
    *,
    operation: str,
    fingerprint: str,
    epoch: str,
    nonce: bytes,
    started_at: str,
    attempt: int = 1,
    execution_not_after: str | None = None,
) -> MigrationOperationStatus:
    """The claim a PtahMigration writes before its Job exists."""
    return _operation(
        MigrationOperationStatus,
        "migration",
        migration,
        operation=operation,
        fingerprint=fingerprint,
        epoch=epoch,
        nonce=nonce,
        started_at=started_at,
        attempt=attempt,
        execution_not_after=execution_not_after,
    )
