"""The admission snapshot seal and the Pod template digest."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobclaim import canonical_json, seal, snapshot_problem, template_digest
from jobclaim.api.snapshot import BoundObject, LimitRangeBinding, PriorityClassBinding
from jobclaim.template import without_generated_identity, without_generated_labels
from tests.jobclaim.world import World, migration_world, schema_world, snapshot_for


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


GENERATED = ["batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"]
GENERATED += ["controller-uid", "job-name"]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([schema_world("Apply"), schema_world("Plan"), migration_world("History")]),
    st.sets(st.sampled_from(GENERATED)),
    st.sampled_from([None, "default", "someone-else"]),
    st.sampled_from([None, "2026-12-02T12:00:00Z", "absent"]),
    st.booleans(),
)
def test_a_template_as_read_digests_as_its_normalized_copy(
    world: World, dropped: set[str], alias: str | None, created: str | None, bare: bool
) -> None:
    # match digests the Job's template as read in either mode, so the digest itself
    # must ignore exactly what normalizing the Job would remove.
    job = world.stored
    template = job["spec"]["template"]
    for key in dropped:
        template["metadata"]["labels"].pop(key)
    if bare:
        template["metadata"]["labels"] = {
            k: v for k, v in template["metadata"]["labels"].items() if k in GENERATED
        }
    if alias is None:
        template["spec"].pop("serviceAccount")
    else:
        template["spec"]["serviceAccount"] = alias
    if created != "absent":
        template["metadata"]["creationTimestamp"] = created
    normalized = without_generated_identity(job)["spec"]["template"]
    assert template_digest(template) == template_digest(normalized)


@given(st.dictionaries(st.sampled_from([*GENERATED, "team", "app", "job-name-x"]), st.text()))
def test_only_the_generated_identity_labels_are_stripped(labels: dict[str, str]) -> None:
    assert without_generated_labels(labels) == {
        k: v for k, v in labels.items() if k not in GENERATED
    }
    assert without_generated_labels(None) == {}
