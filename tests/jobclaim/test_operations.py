"""The operation tables, row by row, as the spec states them."""

from __future__ import annotations

import pytest

from jobclaim import LockRule, migration_operation, operation_info, schema_operation

# type: (mutating, lock, serves proof, phase, runner operation)
SCHEMA = {
    "Resolve": (False, LockRule.NEVER, False, "Resolving", "resolve"),
    "Verify": (False, LockRule.NEVER, False, "Verifying", "verify"),
    "Observe": (False, LockRule.WHILE_PROVING, True, "Observing", "observe"),
    "Plan": (False, LockRule.ALWAYS, True, "Planning", "plan"),
    "Apply": (True, LockRule.ALWAYS, False, "Applying", "apply"),
}
MIGRATION = {
    "Resolve": (False, LockRule.NEVER, False, "Resolving", "resolve"),
    "Verify": (False, LockRule.NEVER, False, "Verifying", "verify"),
    "History": (False, LockRule.NEVER, False, "Reading", "migration-history"),
    "Apply": (True, LockRule.ALWAYS, False, "Applying", "migration-apply"),
}


@pytest.mark.parametrize(
    ("family", "operation", "row"),
    [("schema", k, v) for k, v in SCHEMA.items()]
    + [("migration", k, v) for k, v in MIGRATION.items()],
)
def test_each_known_type_answers_as_the_spec_says(
    family: str, operation: str, row: tuple[bool, LockRule, bool, str, str]
) -> None:
    mutating = row[0]
    info = operation_info(family, operation)
    assert info.known
    assert (info.mutating, info.lock, info.serves_proof, info.phase, info.runner_operation) == row
    assert info.read_only is (not mutating)


def test_the_lock_rules() -> None:
    assert schema_operation("Apply").holds_lock(False)
    assert schema_operation("Plan").holds_lock(False)
    assert schema_operation("Observe").holds_lock(True)
    assert not schema_operation("Observe").holds_lock(False)
    assert not schema_operation("Resolve").holds_lock(True)
    assert migration_operation("Apply").holds_lock(False)
    assert not migration_operation("History").holds_lock(True)


def test_types_do_not_cross_families() -> None:
    assert not migration_operation("Plan").known
    assert not schema_operation("History").known
