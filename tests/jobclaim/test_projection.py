"""Plan projections: built once, held exactly."""

from __future__ import annotations

import copy

import pytest

from jobclaim import build_projection, chunk_problem, projection_problem, sha256_digest
from jobclaim.api.schema import PlanChunk

DATA = b"CREATE TABLE orders (id bigint primary key);\n"
CHUNK = PlanChunk(name="ptah-plan-abc-000", index=0, digest=sha256_digest(DATA), size=len(DATA))


def built() -> dict[str, object]:
    return build_projection(
        namespace="shop",
        schema_name="orders",
        plan_name="ptah-plan-abc",
        plan_uid="plan-uid",
        chunk=CHUNK,
        data=DATA,
    )


def test_the_projection_is_immutable_and_owned_by_the_plan() -> None:
    projection = built()
    assert projection["immutable"] is True
    owners = projection["metadata"]["ownerReferences"]  # type: ignore[index]
    assert [o["kind"] for o in owners] == ["PtahSchemaPlan"]


def test_a_stored_copy_matches_and_a_changed_one_does_not() -> None:
    stored = copy.deepcopy(built())
    stored["metadata"].update(uid="u", resourceVersion="3", creationTimestamp="x")  # type: ignore[attr-defined]
    assert projection_problem(stored, built()) is None
    stored["binaryData"] = {"chunk": "AAAA"}
    assert "not the plan's chunk bytes" in (projection_problem(stored, built()) or "")
    foreign = copy.deepcopy(built())
    foreign["metadata"]["labels"]["extra"] = "1"  # type: ignore[index]
    assert "metadata is not" in (projection_problem(foreign, built()) or "")


@pytest.mark.parametrize(
    ("data", "sentence"),
    [(DATA + b"x", "holds"), (DATA[:-1] + b"?", "does not have the digest")],
)
def test_chunk_bytes_must_be_the_recorded_ones(data: bytes, sentence: str) -> None:
    assert chunk_problem(CHUNK, DATA) is None
    assert sentence in (chunk_problem(CHUNK, data) or "")
