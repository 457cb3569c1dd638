"""A write of the claim alone keeps the family's records as gathered
(``PassContext.write_operation``): the write is made at the version the records were
read from (a Conflict otherwise) and changes nothing but ``status.activeOperation``,
so the stored version's records are the ones the pass holds, provided no family keeps
a record in its claim. This is that proviso, per family: whatever a claim write
changes, ``Family.records`` reads the same; the control row changes a record itself
and must be seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.context.passcontext import Family
from controller.families.migration.dispatch import MIGRATION
from controller.families.schema.dispatch import SCHEMA
from jobclaim import sha256_digest
from jobclaim.api import (
    BindingRetirementStatus,
    PendingObservationStatus,
    PtahMigration,
    PtahSchema,
)
from tests.support.claimworld import EPOCH, migration_world, schema_world

Owner = PtahSchema | PtahMigration


def _schema_owing() -> Owner:
    """A schema whose records owe both: a proof and a rotation's retirement."""
    schema = schema_world("Apply").resource
    assert schema.status is not None
    pending = PendingObservationStatus(
        outcome="ApplySucceeded",
        apply_operation_id="op-1",
        apply_job_name="ptah-apply-1",
        coordination_digest=sha256_digest(b"coordination"),
        lease_duration_seconds=60,
        lease_epoch="v1-" + "e" * 32,
    )
    retirement = BindingRetirementStatus(retired_epoch=EPOCH)
    status = schema.status.model_copy(
        update={"pending_observation": pending, "pending_binding_retirement": retirement}
    )
    return schema.model_copy(update={"status": status})


def _migration() -> Owner:
    return migration_world("Apply").resource


def _claim(**update: Any) -> Callable[[Owner], Owner]:
    def change(owner: Owner) -> Owner:
        assert owner.status is not None and owner.status.active_operation is not None
        claim = owner.status.active_operation.model_copy(update=update)
        status = owner.status.model_copy(update={"active_operation": claim})
        return owner.model_copy(update={"status": status})

    return change


def _no_claim(owner: Owner) -> Owner:
    assert owner.status is not None
    status = owner.status.model_copy(update={"active_operation": None})
    return owner.model_copy(update={"status": status})


def _proof_settled(owner: Owner) -> Owner:
    assert owner.status is not None
    status = owner.status.model_copy(update={"pending_observation": None})
    return owner.model_copy(update={"status": status})


ROWS = [
    # control: a change to a record itself is seen (the comparison bites)
    pytest.param(SCHEMA, _schema_owing, _proof_settled, False, id="schema-record-changed"),
    # each claim write the dispatch steps make leaves the records as they were
    pytest.param(SCHEMA, _schema_owing, _claim(dispatch_started=True), True, id="schema-mark"),
    pytest.param(SCHEMA, _schema_owing, _claim(job_uid="u-1"), True, id="schema-record-uid"),
    pytest.param(SCHEMA, _schema_owing, _claim(lease_epoch="e-2"), True, id="schema-lease"),
    pytest.param(SCHEMA, _schema_owing, _no_claim, True, id="schema-claim-gone"),
    pytest.param(MIGRATION, _migration, _claim(dispatch_started=True), True, id="migration-mark"),
    pytest.param(MIGRATION, _migration, _claim(job_uid="u-1"), True, id="migration-record-uid"),
]


@pytest.mark.parametrize(("family", "owner", "change", "same"), ROWS)
def test_a_claim_write_leaves_the_family_records_as_gathered(
    family: Family, owner: Callable[[], Owner], change: Callable[[Owner], Owner], same: bool
) -> None:
    before = owner()
    after = change(before)
    assert (family.records(after) == family.records(before)) is same, (
        "a family's records moved with its claim: PassContext.write_operation "
        "would keep stale records"
    )
