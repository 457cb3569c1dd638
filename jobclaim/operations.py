"""Per-type answers for both families: one table each, and nothing else decides.

A resource written by a newer operator can carry an operation type this code does
not define. Such a type answers "no" to every question, and in particular is not
read-only: a site that acted on "not mutating" would otherwise treat unknown work as
harmless and run or discard it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Literal

Family = Literal["schema", "migration"]


class LockRule(enum.Enum):
    """When a claim of this type holds the database realm's Lease."""

    NEVER = "never"
    WHILE_PROVING = "while-proving"
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class OperationInfo:
    """What one operation type is. The zero value is the answer for an unknown type."""

    known: bool = False
    mutating: bool = False
    lock: LockRule = LockRule.NEVER
    serves_proof: bool = False
    phase: str = ""
    runner_operation: str = ""
    # The Job carries the cleanup TTL from its create instead of a patch after the
    # harvest. Only for a reading whose lost Job costs nothing but a new attempt: a
    # read-only claim whose recorded Job is gone runs again, while an Apply's lost
    # result is an unknown outcome, and a Plan's TTL is the webhook's evidence that
    # the Job was harvested before a plan is published from it. The TTL counts from
    # the Job's end and outlives any manager outage the chart allows, so in practice
    # the harvest still finds the Job; the saving is one API write per reading.
    cleanup_at_create: bool = False

    @property
    def read_only(self) -> bool:
        # An unknown type is neither read-only nor mutating.
        return self.known and not self.mutating

    def holds_lock(self, proof_outstanding: bool) -> bool:
        if not self.known:
            return False
        if self.lock is LockRule.ALWAYS:
            return True
        if self.lock is LockRule.WHILE_PROVING:
            return proof_outstanding
        return False


UNKNOWN_OPERATION: Final = OperationInfo()

SCHEMA_OPERATIONS: Final[dict[str, OperationInfo]] = {
    "Resolve": OperationInfo(True, False, LockRule.NEVER, False, "Resolving", "resolve", True),
    "Verify": OperationInfo(True, False, LockRule.NEVER, False, "Verifying", "verify", True),
    "Observe": OperationInfo(
        True, False, LockRule.WHILE_PROVING, True, "Observing", "observe", True
    ),
    "Plan": OperationInfo(True, False, LockRule.ALWAYS, True, "Planning", "plan"),
    "Apply": OperationInfo(True, True, LockRule.ALWAYS, False, "Applying", "apply"),
}

MIGRATION_OPERATIONS: Final[dict[str, OperationInfo]] = {
    "Resolve": OperationInfo(True, False, LockRule.NEVER, False, "Resolving", "resolve", True),
    "Verify": OperationInfo(True, False, LockRule.NEVER, False, "Verifying", "verify", True),
    "History": OperationInfo(
        True, False, LockRule.NEVER, False, "Reading", "migration-history", True
    ),
    "Apply": OperationInfo(True, True, LockRule.ALWAYS, False, "Applying", "migration-apply"),
}

_TABLES: Final[dict[str, dict[str, OperationInfo]]] = {
    "schema": SCHEMA_OPERATIONS,
    "migration": MIGRATION_OPERATIONS,
}

OWNER_KINDS: Final[dict[str, Family]] = {"PtahSchema": "schema", "PtahMigration": "migration"}


def operation_info(family: str, operation: str) -> OperationInfo:
    """The table's answer; the zero value for an unknown family or type."""
    table = _TABLES.get(family)
    if table is None:
        return UNKNOWN_OPERATION
    return table.get(operation, UNKNOWN_OPERATION)


def schema_operation(operation: str) -> OperationInfo:
    return operation_info("schema", operation)


def migration_operation(operation: str) -> OperationInfo:
    return operation_info("migration", operation)


def family_of_kind(kind: str) -> Family | None:
    """The family an owner kind dispatches for, or None for any other kind."""
    return OWNER_KINDS.get(kind)


def known_operations(family: str) -> tuple[str, ...]:
    return tuple(_TABLES.get(family, {}))
