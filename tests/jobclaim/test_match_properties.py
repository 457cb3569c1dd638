"""Properties of the contract, over generated claims and single-field changes."""

from __future__ import annotations

import copy
import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobclaim import (
    MIGRATION_OPERATIONS,
    SCHEMA_OPERATIONS,
    LockRule,
    digest_of,
    is_dns_label,
    job_name,
    match,
    operation_info,
)
from jobclaim.api import PtahMigration, PtahSchema
from tests.support.claimworld import World, migration_world, schema_world
from tests.support.examples import examples

Path = tuple[Any, ...]

WORLDS = [schema_world(op) for op in SCHEMA_OPERATIONS] + [
    migration_world(op) for op in ("Resolve", "Verify", "History", "Apply")
]


def leaves(value: Any, path: Path = ()) -> list[Path]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaves(v, (*path, i))]
    return [path]


def claimed_leaves(job: dict[str, Any]) -> list[Path]:
    meta = job["metadata"]
    found = [("metadata", "labels", *p) for p in leaves(meta["labels"])]
    found += [("metadata", "annotations", *p) for p in leaves(meta["annotations"])]
    found += [("metadata", "ownerReferences", *p) for p in leaves(meta["ownerReferences"])]
    found += [("spec", *p) for p in leaves(job["spec"])]
    return found


def changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return str(value) + "x"


def with_change(job: dict[str, Any], path: Path) -> dict[str, Any]:
    out = copy.deepcopy(job)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = changed(node[path[-1]])
    return out


@st.composite
def world_and_leaf(draw: st.DrawFn) -> tuple[World, Path]:
    world = draw(st.sampled_from(WORLDS))
    path = draw(st.sampled_from(claimed_leaves(world.stored)))
    return world, path


@settings(max_examples=examples(400), deadline=None)
@given(world_and_leaf())
def test_any_single_change_to_what_a_claim_builds_is_refused(case: tuple[World, Path]) -> None:
    world, path = case
    verdict = match(with_change(world.stored, path), world.claim("rebuild-stored"))
    assert not verdict, f"changing {path} was accepted"


@settings(max_examples=examples(200), deadline=None)
@given(world_and_leaf())
def test_a_change_to_the_pod_template_fails_even_without_a_rebuild(
    case: tuple[World, Path],
) -> None:
    world, path = case
    if path[:2] != ("spec", "template"):
        return
    verdict = match(with_change(world.stored, path), world.claim("envelope"))
    assert not verdict, f"changing {path} was accepted without a rebuild"


def retypings(value: Any) -> list[Any]:
    """Values Python's == holds equal to ``value`` that JSON spells as another type."""
    if isinstance(value, bool):
        return [int(value), float(value)]
    if isinstance(value, int):
        return [float(value)] + ([bool(value)] if value in (0, 1) else [])
    return []


@st.composite
def world_and_retyped_leaf(draw: st.DrawFn) -> tuple[World, Path, Any]:
    world = draw(st.sampled_from(WORLDS))
    stored = world.stored
    paths = [p for p in claimed_leaves(stored) if retypings(_at(stored, p))]
    path = draw(st.sampled_from(paths))
    return world, path, draw(st.sampled_from(retypings(_at(stored, path))))


def _at(job: dict[str, Any], path: Path) -> Any:
    node: Any = job
    for key in path:
        node = node[key]
    return node


@settings(max_examples=examples(200), deadline=None)
@given(world_and_retyped_leaf())
def test_a_value_of_another_json_type_is_refused_though_python_calls_it_equal(
    case: tuple[World, Path, Any],
) -> None:
    """A bool is not an int and a float is not an int, in every mode that holds the
    field: the rebuild holds the whole Job, the envelope the Pod template's digest."""
    world, path, value = case
    job = copy.deepcopy(world.stored)
    parent = _at(job, path[:-1])
    assert parent[path[-1]] == value  # Python cannot tell them apart
    parent[path[-1]] = value
    assert not match(job, world.claim("rebuild-stored")), f"{path} as {value!r} was accepted"
    if path[:2] == ("spec", "template"):
        assert not match(job, world.claim("envelope")), f"{path} as {value!r} was accepted"


names = st.text(alphabet=string.ascii_lowercase + string.digits + "-", min_size=1, max_size=90)
digests = st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex())
epochs = st.binary(min_size=16, max_size=16).map(lambda b: "v1-" + b.hex())


@settings(max_examples=examples(300), deadline=None)
@given(
    name=names.filter(lambda n: n.strip("-")),
    uid=st.uuids().map(str),
    operation=st.sampled_from(sorted(SCHEMA_OPERATIONS)),
    op_id=digests,
    epoch=epochs,
    fingerprint=digests,
    attempt=st.integers(min_value=1, max_value=10_000),
    family=st.sampled_from(["schema", "migration"]),
)
def test_job_names_are_deterministic_dns_labels(
    name: str,
    uid: str,
    operation: str,
    op_id: str,
    epoch: str,
    fingerprint: str,
    attempt: int,
    family: str,
) -> None:
    if family == "migration" and operation in ("Observe", "Plan"):
        operation = "History"
    args = {
        "family": family,
        "owner_name": name,
        "owner_uid": uid,
        "operation": operation,
        "operation_id": op_id,
        "epoch": epoch,
        "input_fingerprint": fingerprint,
        "attempt": attempt,
    }
    first = job_name(**args)  # type: ignore[arg-type]
    assert first == job_name(**args)  # type: ignore[arg-type]
    assert is_dns_label(first) and len(first) <= 63
    assert job_name(**{**args, "attempt": attempt + 1}) != first  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6))
def test_digests_ignore_key_order(value: dict[str, Any]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert digest_of(value) == digest_of(reordered)


unknown_types = st.text(max_size=12).filter(
    lambda t: t not in SCHEMA_OPERATIONS and t not in MIGRATION_OPERATIONS
)


@given(unknown_types)
def test_an_unknown_operation_type_answers_no_everywhere(operation: str) -> None:
    for family in ("schema", "migration", "unknown"):
        info = operation_info(family, operation)
        assert not info.known
        assert not info.mutating
        assert not info.read_only
        assert not info.serves_proof
        assert not info.holds_lock(True)
        assert not info.holds_lock(False)
        assert info.lock is LockRule.NEVER
        assert info.phase == "" and info.runner_operation == ""


@settings(max_examples=examples(50), deadline=None)
@given(st.sampled_from(WORLDS), unknown_types)
def test_a_claim_of_an_unknown_type_matches_no_job(world: World, operation: str) -> None:
    claim = world.claim("rebuild-stored", operation=operation)
    assert not match(world.stored, claim)


def test_worlds_cover_both_families() -> None:
    kinds = {type(w.resource) for w in WORLDS}
    assert kinds == {PtahSchema, PtahMigration}
