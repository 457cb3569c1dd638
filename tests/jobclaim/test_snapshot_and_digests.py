"""The admission snapshot seal and the Pod template digest."""

from __future__ import annotations

import copy

import pytest

from jobclaim import canonical_json, seal, snapshot_problem, template_digest
from jobclaim.api.snapshot import BoundObject, LimitRangeBinding, PriorityClassBinding
from tests.jobclaim.world import schema_world, snapshot_for


def test_a_sealed_snapshot_validates_and_an_edited_one_does_not() -> None:
    snapshot = snapshot_for(schema_world().built["spec"]["template"])
    assert snapshot_problem(snapshot) is None
    edited = snapshot.model_copy(update={"always_pull_images_enabled": True})
    assert snapshot_problem(edited) == "the snapshot's digest does not cover its contents"
    assert snapshot_problem(seal(edited)) is None


def _range(name: str) -> LimitRangeBinding:
    return LimitRangeBinding(object=BoundObject(name=name, uid="u", resource_version="1"))


@pytest.mark.parametrize(
    ("update", "sentence"),
    [
        ({"limit_ranges": [_range("b"), _range("a")]}, "not sorted and unique"),
        ({"limit_ranges": [_range("a"), _range("a")]}, "not sorted and unique"),
        ({"priority_class": PriorityClassBinding(name="high")}, "without a bound object"),
        ({"priority_class": PriorityClassBinding(value=5)}, "without a bound object"),
    ],
)
def test_a_snapshot_that_breaks_a_rule_is_refused(update: dict[str, object], sentence: str) -> None:
    snapshot = snapshot_for(schema_world().built["spec"]["template"])
    problem = snapshot_problem(seal(snapshot.model_copy(update=update)))
    assert problem is not None and sentence in problem


def test_the_template_digest_ignores_only_what_the_api_server_adds() -> None:
    world = schema_world()
    built = world.built["spec"]["template"]
    stored = world.stored["spec"]["template"]
    assert template_digest(built) == template_digest(stored)
    renamed = copy.deepcopy(stored)
    renamed["spec"]["serviceAccount"] = "someone-else"
    assert template_digest(renamed) != template_digest(built)
    respelled = copy.deepcopy(built)
    respelled["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "0.1"
    assert template_digest(respelled) == template_digest(built)


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    with pytest.raises(ValueError, match="no canonical JSON form"):
        canonical_json({1: "non-string key"})
