"""Merge patches, label-selector lists and immutable ConfigMaps.

Finalizers and claims' labels are written by JSON merge patch, where null removes a
key and a list is replaced whole (a finalizer is removed by sending the list without
it). Approvals and projections are found by label selector, uncached. A plan's
projection is an immutable ConfigMap, so a reader can trust one it finds.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim.apiserver import CONFIGMAPS, ApiClient, Invalid
from tests.support.kinds import WIDGETS, config_map, widget

# (id, field path, the patch, the value after)
PATCHES: list[tuple[str, tuple[str, str], Any, Any]] = [
    # Control row: a key is added beside the existing one.
    ("label-added", ("metadata", "labels"), {"added": "1"}, {"app": "conformance", "added": "1"}),
    ("label-removed", ("metadata", "labels"), {"app": None}, None),
    ("finalizers-replaced", ("metadata", "finalizers"), ["x.io/b"], ["x.io/b"]),
    ("finalizers-removed", ("metadata", "finalizers"), None, None),
    ("spec-key-removed", ("spec", "gone"), None, None),
    ("spec-nested-merged", ("spec", "nested"), {"b": 2}, {"a": 1, "b": 2}),
]


@pytest.mark.parametrize(
    ("path", "patch", "after"), [row[1:] for row in PATCHES], ids=[row[0] for row in PATCHES]
)
def test_a_merge_patch_merges_maps_and_replaces_lists(
    api: ApiClient, namespace: str, path: tuple[str, str], patch: Any, after: Any
) -> None:
    obj = widget(spec={"n": 1, "gone": "x", "nested": {"a": 1}})
    obj["metadata"]["finalizers"] = ["x.io/a", "x.io/b"]
    api.create(WIDGETS, namespace, obj)
    section, key = path
    if section == "metadata":
        written = api.patch_metadata(WIDGETS, namespace, "w", {key: patch})
    else:
        written = api.patch_spec(WIDGETS, namespace, "w", {key: patch})
    assert written[section].get(key) == after
    assert api.get(WIDGETS, namespace, "w")[section].get(key) == after


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        # Control row: no selector lists everything, ordered by name.
        ({}, ["a", "b", "c"]),
        ({"app": "ptah"}, ["a", "b"]),
        ({"app": "ptah", "tier": "db"}, ["a"]),
        ({"tier": "web"}, ["c"]),
        ({"app": "nobody"}, []),
    ],
    ids=["everything", "one-label", "two-labels", "other-label", "no-match"],
)
def test_a_label_selector_lists_exactly_the_matching_objects(
    api: ApiClient, namespace: str, selector: dict[str, str], names: list[str]
) -> None:
    api.create(CONFIGMAPS, namespace, config_map("b", {"app": "ptah"}))
    api.create(CONFIGMAPS, namespace, config_map("c", {"tier": "web"}))
    api.create(CONFIGMAPS, namespace, config_map("a", {"app": "ptah", "tier": "db"}))
    listed = api.list(CONFIGMAPS, namespace, label_selector=selector)
    assert [obj["metadata"]["name"] for obj in listed] == names
    assert all(obj["kind"] == "ConfigMap" for obj in listed)


def test_a_list_stays_in_its_namespace(api: ApiClient, namespace: str) -> None:
    api.create(WIDGETS, namespace, widget("mine"))
    assert [w["metadata"]["name"] for w in api.list(WIDGETS, namespace)] == ["mine"]
    every = api.list(WIDGETS, None, label_selector={"app": "conformance"})
    assert ("mine", namespace) in {
        (w["metadata"]["name"], w["metadata"]["namespace"]) for w in every
    }


@pytest.mark.parametrize(
    ("change", "allowed"),
    [
        # Control row: metadata of an immutable ConfigMap can still change.
        ({"metadata": {"labels": {"seen": "yes"}}}, True),
        ({"data": {"k": "changed"}}, False),
        ({"data": {"k": "v", "extra": "x"}}, False),
        ({"immutable": False}, False),
    ],
    ids=["labels", "data-changed", "data-added", "made-mutable"],
)
def test_an_immutable_configmap_keeps_its_data(
    api: ApiClient, namespace: str, change: dict[str, Any], allowed: bool
) -> None:
    created = api.create(CONFIGMAPS, namespace, config_map("p", immutable=True))
    replacement = {**created, **change}
    if "metadata" in change:
        replacement["metadata"] = {**created["metadata"], **change["metadata"]}
    if allowed:
        api.replace(CONFIGMAPS, namespace, replacement)
    else:
        with pytest.raises(Invalid):
            api.replace(CONFIGMAPS, namespace, replacement)
    assert api.get(CONFIGMAPS, namespace, "p")["data"] == {"k": "v"}
