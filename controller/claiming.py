"""Forming a claim: the operation ID, the input fingerprint and the reserved Job name.

Pure functions; the reconciler persists what they return (finalizer first, then the
claim by status patch) before anything external happens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    """The claim a PtahSchema writes before its Job exists, naming that Job."""
    op_id = operation_id(fingerprint, nonce)
    return ActiveOperationStatus(
        type=operation,
        id=op_id,
        input_fingerprint=fingerprint,
        job_name=job_name(
            family="schema",
            owner_name=schema.metadata.name or "",
            owner_uid=schema.metadata.uid or "",
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
        target=schema.spec.target,
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
    """The claim a PtahMigration writes before its Job exists, naming that Job."""
    op_id = operation_id(fingerprint, nonce)
    return MigrationOperationStatus(
        type=operation,
        id=op_id,
        input_fingerprint=fingerprint,
        job_name=job_name(
            family="migration",
            owner_name=migration.metadata.name or "",
            owner_uid=migration.metadata.uid or "",
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
        target=migration.spec.target,
    )
