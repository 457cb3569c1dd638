"""One protocol for the two owner families (jobclaim.owners): a reader that holds an
owner of either kind asks its family, and gets exactly what that family's twin gives."""

from __future__ import annotations

import pytest

from jobclaim import (
    MigrationOwner,
    SchemaOwner,
    build_job,
    migration_claim,
    migration_job_inputs,
    owner_family,
    schema_claim,
    schema_job_inputs,
)
from jobclaim.api import PtahMigration, PtahSchema
from tests.support.claimworld import BINDING, MANAGER, SEQUENCE, migration_world, schema_world


@pytest.mark.parametrize("operation", ["Apply", "Plan", "Observe"])
def test_a_schema_owner_answers_as_the_schema_twins(operation: str) -> None:
    schema = schema_world(operation).resource
    assert isinstance(schema, PtahSchema)
    family = owner_family(schema)
    assert isinstance(family, SchemaOwner) and family.family == "schema"
    expected = schema_job_inputs(schema, binding=BINDING, manager=MANAGER)
    assert family.job_inputs(binding=BINDING, manager=MANAGER) == expected
    built = build_job(expected)
    assert family.claim(built=built, stored=False, binding=BINDING) == schema_claim(
        schema, built=built, stored=False, binding=BINDING
    )


@pytest.mark.parametrize("operation", ["Apply", "History"])
def test_a_migration_owner_answers_as_the_migration_twins(operation: str) -> None:
    migration = migration_world(operation).resource
    assert isinstance(migration, PtahMigration)
    family = owner_family(migration)
    assert isinstance(family, MigrationOwner) and family.family == "migration"
    sequence = SEQUENCE if operation == "Apply" else ()
    expected = migration_job_inputs(
        migration, binding=BINDING, manager=MANAGER, expected_sequence=sequence
    )
    got = family.job_inputs(binding=BINDING, manager=MANAGER, expected_sequence=sequence)
    assert got == expected
    assert family.claim(stored=True, binding=BINDING) == migration_claim(
        migration, stored=True, binding=BINDING
    )
