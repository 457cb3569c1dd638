"""Which release a retirement owes: the one rule, as a table for both families."""

from __future__ import annotations

import pytest

from controller.mutationlifecycle import (
    Disposition,
    RealmHolder,
    Retirement,
    owed_release,
    realm_held_by,
)
from jobclaim import InvalidInput

PROOF, CLAIM, NONE = RealmHolder.PROOF, RealmHolder.CLAIM, RealmHolder.NONE
DISCARD, ACCOUNTED, UNACCOUNTED = (
    Disposition.DISCARD,
    Disposition.ACCOUNTED,
    Disposition.UNACCOUNTED,
)


@pytest.mark.parametrize(
    ("mutating", "serves_proof", "locked", "proving", "holder"),
    [
        (True, False, True, False, CLAIM),  # an Apply under its Lease
        (False, True, True, True, PROOF),  # a proof Plan while proof is owed
        (False, True, True, False, CLAIM),  # an ordinary Plan
        (False, False, True, False, NONE),  # a read-only claim that serves no proof
        (True, False, False, False, NONE),  # never locked: nothing to release
        (False, True, False, True, PROOF),
    ],
)
def test_who_holds_the_realm(
    mutating: bool, serves_proof: bool, locked: bool, proving: bool, holder: RealmHolder
) -> None:
    assert (
        realm_held_by(
            mutating=mutating, serves_proof=serves_proof, locked=locked, proof_outstanding=proving
        )
        is holder
    )


@pytest.mark.parametrize(
    ("retirement", "releases"),
    [
        # Control: a discarded claim that held the Lease gives it back.
        (Retirement(CLAIM, True, DISCARD), True),
        # Schema Apply: its pending observation holds the realm until proven.
        (Retirement(CLAIM, True, ACCOUNTED, record_holds_realm=True), False),
        (Retirement(CLAIM, True, UNACCOUNTED, record_holds_realm=True), False),
        # Migration Apply: released once nothing can still write.
        (Retirement(CLAIM, True, ACCOUNTED), True),
        (Retirement(CLAIM, True, UNACCOUNTED), True),
        (Retirement(CLAIM, True, UNACCOUNTED, may_still_write=True), False),
        (Retirement(CLAIM, True, ACCOUNTED, may_still_write=True), False),
        # Read-only claims give back what they held.
        (Retirement(CLAIM, False, ACCOUNTED), True),
        (Retirement(CLAIM, False, DISCARD, may_still_write=True), True),
        # A proof claim releases only in the write that ends the proof.
        (Retirement(PROOF, False, ACCOUNTED), False),
        (Retirement(PROOF, False, DISCARD), False),
        (Retirement(PROOF, False, ACCOUNTED, ends_proof=True), True),
        # Nothing held, nothing owed.
        (Retirement(NONE, True, UNACCOUNTED), False),
        (Retirement(NONE, False, DISCARD, ends_proof=True), False),
    ],
)
def test_the_release_a_retirement_owes(retirement: Retirement, releases: bool) -> None:
    assert retirement.releases() is releases


GOOD = {
    "coordination_digest": "sha256:" + "0" * 64,
    "operation_id": "op",
    "lease_duration_seconds": 960,
    "lease_epoch": "v1-" + "0" * 32,
}


def test_a_complete_binding_is_staged() -> None:
    staged = owed_release(**GOOD)  # type: ignore[arg-type]
    assert staged.to_wire() == {
        "coordinationDigest": GOOD["coordination_digest"],
        "operationID": "op",
        "leaseDurationSeconds": 960,
        "leaseEpoch": GOOD["lease_epoch"],
    }


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"coordination_digest": None}, "coordination digest"),
        ({"operation_id": ""}, "operation ID"),
        ({"lease_duration_seconds": 4}, "Lease duration"),
        ({"lease_duration_seconds": None}, "Lease duration"),
        ({"lease_epoch": "v1-short"}, "exact Lease epoch"),
    ],
)
def test_an_incomplete_binding_is_refused(change: dict[str, object], sentence: str) -> None:
    with pytest.raises(InvalidInput, match=sentence):
        owed_release(**{**GOOD, **change})  # type: ignore[arg-type]
