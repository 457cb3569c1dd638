"""The refusals of ``jobclaim.owners``' two entry points, as the dispatch steps meet
them: ``active_job_inputs`` builds nothing without an execution binding (the Job's
credentials would be nobody's), and ``stored_claim`` matches no Job to an owner that
holds no claim (a Job would then be adopted on no evidence). Each table has a control
row that passes; every other row makes one change that must fail with its message."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobclaim import JobInputs, active_job_inputs, build_job, stored_claim
from jobclaim.api import PtahMigration, PtahSchema
from jobclaim.errors import BuildRefused, InvalidInput
from tests.support.claimworld import BINDING, MANAGER, SEQUENCE, migration_world, schema_world

Owner = PtahSchema | PtahMigration


def _schema() -> Owner:
    return schema_world("Apply").resource


def _migration() -> Owner:
    return migration_world("Apply").resource


def _without_claim(owner: Owner) -> Owner:
    """``owner`` with its ``status.activeOperation`` gone, nothing else changed."""
    assert owner.status is not None
    status = owner.status.model_copy(update={"active_operation": None})
    return owner.model_copy(update={"status": status})


INPUT_ROWS = [
    # control: each family's Apply builds its Job's inputs under its binding
    pytest.param(_schema, True, None, id="schema-control"),
    pytest.param(_migration, True, None, id="migration-control"),
    # no binding: refused, naming the family
    pytest.param(_schema, False, "the schema records no execution binding", id="schema-no-binding"),
    pytest.param(
        _migration, False, "the migration records no execution binding", id="migration-no-binding"
    ),
]


@pytest.mark.parametrize(("owner", "bound", "refusal"), INPUT_ROWS)
def test_active_job_inputs_refuses_an_owner_without_a_binding(
    owner: Callable[[], Owner], bound: bool, refusal: str | None
) -> None:
    subject = owner()
    sequence = SEQUENCE if isinstance(subject, PtahMigration) else ()

    def inputs() -> JobInputs:
        return active_job_inputs(
            subject,
            binding=BINDING if bound else None,
            manager=MANAGER,
            expected_sequence=sequence,
        )

    if refusal is None:
        assert build_job(inputs())["kind"] == "Job"
        return
    with pytest.raises(BuildRefused, match=refusal):
        inputs()


CLAIM_ROWS = [
    # control: each family's stored claim is made to match a Job to
    pytest.param(_schema, False, None, id="schema-control"),
    pytest.param(_migration, False, None, id="migration-control"),
    # no claim stored: refused, naming the kind and the owner
    pytest.param(_schema, True, "PtahSchema .* holds no claim to match", id="schema-no-claim"),
    pytest.param(
        _migration, True, "PtahMigration .* holds no claim to match", id="migration-no-claim"
    ),
]


@pytest.mark.parametrize(("owner", "drop_claim", "refusal"), CLAIM_ROWS)
def test_stored_claim_refuses_an_owner_that_holds_no_claim(
    owner: Callable[[], Owner], drop_claim: bool, refusal: str | None
) -> None:
    subject = _without_claim(owner()) if drop_claim else owner()
    if refusal is None:
        assert stored_claim(subject, built=None, binding=BINDING) is not None
        return
    with pytest.raises(InvalidInput, match=refusal):
        stored_claim(subject, built=None, binding=BINDING)
