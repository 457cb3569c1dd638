"""The two owner families as one protocol: what the shared contract answers per family.

A PtahSchema and a PtahMigration make their claims and build their Jobs by twin
functions (``schema_claim``/``migration_claim``, ``schema_job_inputs``/
``migration_job_inputs``). A reader that holds an owner of either kind asks
``owner_family`` once and then the family, so no reader grows its own
``isinstance`` branch that a third kind, or a changed twin, would silently miss.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from jobclaim.api import ExecutionBindingStatus, ManagerRecord, PtahMigration, PtahSchema
from jobclaim.builder import JobInputs, migration_job_inputs, schema_job_inputs
from jobclaim.claim import Claim, migration_claim, schema_claim
from jobclaim.errors import BuildRefused, InvalidInput
from jobclaim.operations import Family


class OwnerFamily(Protocol):
    """One owner and the per-family answers about it."""

    @property
    def family(self) -> Family: ...

    def job_inputs(
        self,
        *,
        binding: ExecutionBindingStatus,
        manager: ManagerRecord,
        snapshot_digest: str | None = None,
        expected_sequence: tuple[str, ...] = (),
    ) -> JobInputs:
        """What the owner's active claim builds its Job from (``build_job``'s input)."""
        ...

    def claim(
        self,
        *,
        built: Mapping[str, Any] | None = None,
        stored: bool = True,
        binding: ExecutionBindingStatus | None = None,
    ) -> Claim | None:
        """The claim the owner's ``status.activeOperation`` makes, or None."""
        ...


@dataclass(frozen=True, slots=True)
class SchemaOwner:
    owner: PtahSchema
    family: Final[Family] = "schema"

    def job_inputs(
        self,
        *,
        binding: ExecutionBindingStatus,
        manager: ManagerRecord,
        snapshot_digest: str | None = None,
        expected_sequence: tuple[str, ...] = (),
    ) -> JobInputs:
        del expected_sequence  # a schema Apply runs its plan, not a sequence
        return schema_job_inputs(
            self.owner, binding=binding, manager=manager, snapshot_digest=snapshot_digest
        )

    def claim(
        self,
        *,
        built: Mapping[str, Any] | None = None,
        stored: bool = True,
        binding: ExecutionBindingStatus | None = None,
    ) -> Claim | None:
        return schema_claim(self.owner, built=built, stored=stored, binding=binding)


@dataclass(frozen=True, slots=True)
class MigrationOwner:
    owner: PtahMigration
    family: Final[Family] = "migration"

    def job_inputs(
        self,
        *,
        binding: ExecutionBindingStatus,
        manager: ManagerRecord,
        snapshot_digest: str | None = None,
        expected_sequence: tuple[str, ...] = (),
    ) -> JobInputs:
        return migration_job_inputs(
            self.owner,
            binding=binding,
            manager=manager,
            expected_sequence=expected_sequence,
            snapshot_digest=snapshot_digest,
        )

    def claim(
        self,
        *,
        built: Mapping[str, Any] | None = None,
        stored: bool = True,
        binding: ExecutionBindingStatus | None = None,
    ) -> Claim | None:
        return migration_claim(self.owner, built=built, stored=stored, binding=binding)


def owner_family(owner: PtahSchema | PtahMigration) -> OwnerFamily:
    """The family ``owner`` belongs to: the one place a reader branches on its kind."""
    if isinstance(owner, PtahSchema):
        return SchemaOwner(owner)
    return MigrationOwner(owner)


def active_job_inputs(
    owner: PtahSchema | PtahMigration,
    *,
    binding: ExecutionBindingStatus | None,
    manager: ManagerRecord,
    expected_sequence: tuple[str, ...] = (),
) -> JobInputs:
    """What ``owner``'s active claim builds its Job from under ``binding``, refused
    without one; the snapshot digest is the caller's to set (``_replace``)."""
    family = owner_family(owner)
    if binding is None:
        raise BuildRefused(f"the {family.family} records no execution binding")
    return family.job_inputs(binding=binding, manager=manager, expected_sequence=expected_sequence)


def stored_claim(
    owner: PtahSchema | PtahMigration,
    *,
    built: Mapping[str, Any] | None,
    binding: ExecutionBindingStatus | None,
) -> Claim:
    """The claim ``owner``'s stored ``status.activeOperation`` makes, for ``match``
    (with ``built``, the Job it was rebuilt as); refused when it holds none."""
    made = owner_family(owner).claim(built=built, stored=True, binding=binding)
    if made is None:
        raise InvalidInput(f"{owner.kind} {owner.metadata.name} holds no claim to match a Job to")
    return made
