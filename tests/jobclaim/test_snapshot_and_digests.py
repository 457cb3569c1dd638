"""The admission snapshot seal and the Pod template digest."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobclaim import canonical_json, seal, snapshot_problem, template_digest
from jobclaim.api.snapshot import (
    AdmissionSnapshot,
    BoundObject,
    LimitRangeBinding,
    PriorityClassBinding,
    ServiceAccountBinding,
)
from jobclaim.template import without_generated_identity, without_generated_labels
from tests.support.claimworld import World, migration_world, schema_world, snapshot_for
from tests.support.examples import examples


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


@settings(max_examples=examples(200), deadline=None)
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


# Both digests are persisted: every admission snapshot in a cluster records a template
# digest and its own seal, and every later pass, by this operator version or the next,
# recomputes them. A change of either form, however it came about (a new serializer,
# a faster normalization), would make every in-flight Job fail its match and every
# mutating run an unknown outcome. These values were computed once and are fixed.
GOLDEN_TEMPLATE: dict[str, Any] = {
    "metadata": {
        "creationTimestamp": None,
        "labels": {"team": "shop", "job-name": "j", "batch.kubernetes.io/controller-uid": "u"},
        "annotations": {
            "operator.ptah.run/admission-snapshot-digest": "sha256:" + "1" * 64,
            "operator.ptah.run/operation-id": "op",
        },
    },
    "spec": {
        "serviceAccountName": "runner",
        "serviceAccount": "runner",
        "overhead": {"cpu": "0.25", "memory": "1Gi"},
        "initContainers": [
            {"name": "init", "image": "i", "resources": {"requests": {"cpu": "100m"}}}
        ],
        "containers": [
            {
                "name": "ptah",
                "image": "r",
                "resources": {
                    "limits": {"memory": "256Mi", "cpu": "1"},
                    "requests": {"memory": "134217728", "cpu": "0.1", "ephemeral-storage": "1e3"},
                },
            },
            {"name": "plain", "image": "p"},
        ],
        "volumes": [
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi", "medium": "Memory"}},
            {"name": "empty", "emptyDir": {}},
            {"name": "plan", "configMap": {"name": "c", "defaultMode": 292}},
        ],
        "restartPolicy": "Never",
    },
}

GOLDEN_TEMPLATE_DIGEST = "sha256:e2ed3fb9858ea60e312eceaf0faf5875a4fd97094447519129f181da01ab7010"
GOLDEN_SNAPSHOT_DIGEST = "sha256:f4ecbab9ab41fde1d5deba72f6d86b4ad53f7b4b4dbae6cacdfd48ec175e1e9d"


def test_the_template_digest_form_is_fixed() -> None:
    before = copy.deepcopy(GOLDEN_TEMPLATE)
    assert template_digest(GOLDEN_TEMPLATE) == GOLDEN_TEMPLATE_DIGEST
    assert before == GOLDEN_TEMPLATE  # digesting changes nothing it was handed


def test_the_snapshot_seal_form_is_fixed() -> None:
    snapshot = AdmissionSnapshot(
        digest="",
        template_digest="sha256:" + "2" * 64,
        service_account=ServiceAccountBinding(
            object=BoundObject(name="default", uid="u1", resource_version="7"),
            image_pull_secrets=["pull"],
        ),
        limit_ranges=[
            LimitRangeBinding(
                object=BoundObject(name="limits", uid="u2", resource_version="9"),
                default_requests={"cpu": "100m"},
                default_limits={"memory": "1Gi"},
            )
        ],
        priority_class=PriorityClassBinding(
            object=BoundObject(name="high", uid="u3", resource_version="3"),
            name="high",
            value=1000,
        ),
    )
    sealed = seal(snapshot)
    assert sealed.digest == GOLDEN_SNAPSHOT_DIGEST
    assert snapshot_problem(sealed) is None
