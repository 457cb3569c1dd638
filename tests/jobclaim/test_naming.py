"""Deterministic names: known values, refusals with sentences, DNS limits."""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim import (
    InvalidInput,
    coordination_digest,
    is_dns_label,
    job_name,
    lease_holder,
    lease_name,
    plan_name,
    projection_names,
)
from jobclaim.envelope import operation_id_label_value

BASE: dict[str, Any] = {
    "family": "schema",
    "owner_name": "orders",
    "owner_uid": "schema-uid",
    "operation": "Resolve",
    "operation_id": "operation-id",
    "epoch": "v1-" + "1" * 32,
    "input_fingerprint": "sha256:" + "8" * 64,
    "attempt": 1,
}


def test_a_known_job_name_and_operation_id_label() -> None:
    # Values worked out by hand from the naming rule: SHA-256 over the NUL-joined
    # inputs, the first 8 bytes in hex.
    assert job_name(**BASE) == "ptah-resolve-orders-dc027930a0d4f668"
    assert operation_id_label_value("operation-id") == "98a72a121758ba78"


def test_a_long_owner_name_is_shortened_to_a_dns_label() -> None:
    name = job_name(**{**BASE, "owner_name": "a" * 40 + "-" + "b" * 40})
    assert len(name) == 63 and is_dns_label(name)
    assert name.startswith("ptah-resolve-" + "a" * 33)


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"owner_name": "---"}, "cannot form a Job name"),
        ({"owner_name": ""}, "without a name and UID"),
        ({"owner_uid": ""}, "without a name and UID"),
        ({"operation": "Vacuum"}, "not a schema operation"),
        ({"operation_id": ""}, "empty operation ID"),
        ({"family": "migration", "operation": "History"}, "must be a sha256 digest"),
        ({"input_fingerprint": "sha256:abc"}, "input fingerprint must be a sha256 digest"),
        ({"epoch": "v1-xyz"}, "execution epoch must be"),
        ({"attempt": 0}, "attempt must be a whole number"),
        ({"attempt": True}, "attempt must be a whole number"),
        ({"owner_name": "Orders"}, "does not form a valid DNS label"),
        ({"family": "realm"}, "not a family that dispatches Jobs"),
    ],
)
def test_inputs_that_cannot_form_a_name_are_refused(change: dict[str, Any], sentence: str) -> None:
    with pytest.raises(InvalidInput, match=sentence):
        job_name(**{**BASE, **change})


def test_two_spellings_of_one_key_share_a_lease() -> None:
    one = coordination_digest(
        engine="PostgreSQL", namespace="shop", coordination_key="Orders", realm=None
    )
    two = coordination_digest(
        engine="postgresql", namespace="shop", coordination_key=" orders ", realm=None
    )
    other = coordination_digest(
        engine="PostgreSQL", namespace="other", coordination_key="orders", realm=None
    )
    assert one == two != other
    assert lease_name(one) == lease_name(two)
    assert len(lease_name(one)) == 59 and is_dns_label(lease_name(one))


def test_realm_and_key_are_exclusive() -> None:
    with pytest.raises(InvalidInput, match="exactly one"):
        coordination_digest(engine="MySQL", namespace="a", coordination_key="k", realm="r")
    with pytest.raises(InvalidInput, match="not a supported engine"):
        coordination_digest(engine="Oracle", namespace="a", coordination_key=None, realm="r")


def test_holders_differ_per_operation() -> None:
    assert lease_holder("uid", "op-1") != lease_holder("uid", "op-2")
    assert lease_holder("uid", "op-1").startswith("ptah-h-")
    with pytest.raises(InvalidInput):
        lease_holder("", "op")


def test_plan_and_projection_names() -> None:
    fingerprint = "sha256:" + "ab" * 32
    assert plan_name(fingerprint) == "ptah-plan-" + "ab" * 12
    assert projection_names("p", 3) == ("p-000", "p-001", "p-002")
    with pytest.raises(InvalidInput):
        projection_names("p", 17)
