"""What ``python -m manager.crdapply`` refuses: applying a CRD that drops a version or a
field objects are stored in. One row passes; each other changes one thing and is refused
with its sentence; which objects hold a dropped field (``holds``), and the CRDs it reads
(``read_crds``). tests/realapi/test_crd_upgrade.py applies the real CRDs with the
chart's grants on the real API server, and refuses only a field an object holds."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobclaim.crds import crds
from manager.crdapply import dropped, holds, read_crds

SCHEMAS = "ptahschemas.operator.ptah.run"


@functools.cache
def _parsed() -> dict[str, Any]:
    # Rendering and parsing every CRD is most of this file's cost (seconds each time):
    # done once per process, and each test edits its own deep copy.
    (crd,) = [
        parsed
        for parsed in (yaml.safe_load(text) for text in crds().values())
        if parsed["metadata"]["name"] == SCHEMAS
    ]
    return dict(crd)


def generated() -> dict[str, Any]:
    return copy.deepcopy(_parsed())


def stored(crd: dict[str, Any], *versions: str) -> dict[str, Any]:
    live = copy.deepcopy(crd)
    live["status"] = {"storedVersions": list(versions)}
    return live


def spec_properties(crd: dict[str, Any]) -> dict[str, Any]:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    properties: dict[str, Any] = schema["properties"]["spec"]["properties"]
    return properties


def test_the_same_crd_drops_nothing() -> None:
    crd = generated()
    assert dropped(stored(crd, "v1alpha1"), crd) == []


def test_a_new_field_drops_nothing() -> None:
    crd, new = generated(), generated()
    spec_properties(new)["fromTheFuture"] = {"type": "string"}
    assert dropped(stored(crd, "v1alpha1"), new) == []


def test_a_stored_field_the_new_crd_lacks_is_refused() -> None:
    live, new = generated(), generated()
    spec_properties(live)["fromTheFuture"] = {
        "type": "object",
        "properties": {"depth": {"type": "integer"}},
    }
    assert dropped(stored(live, "v1alpha1"), new) == [
        f"{SCHEMAS}: v1alpha1 field spec.fromTheFuture is stored and the new CRD drops it",
        f"{SCHEMAS}: v1alpha1 field spec.fromTheFuture.depth is stored and the new CRD drops it",
    ]


@pytest.mark.parametrize("served", [False, None], ids=["not served", "gone"])
def test_a_stored_version_the_new_crd_does_not_serve_is_refused(served: bool | None) -> None:
    live, new = generated(), generated()
    if served is None:
        new["spec"]["versions"][0]["name"] = "v1alpha2"
    else:
        new["spec"]["versions"][0]["served"] = served
    assert dropped(stored(live, "v1alpha1"), new) == [
        f"{SCHEMAS}: objects are stored as v1alpha1, which the new CRD does not serve"
    ]


def test_a_version_nothing_is_stored_in_may_go() -> None:
    live, new = generated(), generated()
    new["spec"]["versions"][0]["name"] = "v1alpha2"
    assert dropped(stored(live), new) == []


@pytest.mark.parametrize(
    ("obj", "field", "held"),
    [
        ({"spec": {"note": "x"}}, "spec.note", True),
        # An empty value is still a value the older schema would prune.
        ({"spec": {"note": ""}}, "spec.note", True),
        ({"spec": {}}, "spec.note", False),
        ({"spec": {"target": {"depth": 3}}}, "spec.target.depth", True),
        ({"spec": {"target": None}}, "spec.target.depth", False),
        ({"spec": {"steps": [{"name": "a"}, {}]}}, "spec.steps[].name", True),
        ({"spec": {"steps": [{}, {}]}}, "spec.steps[].name", False),
        ({"spec": {"steps": []}}, "spec.steps", True),
        ({"status": {"note": "x"}}, "spec.note", False),
    ],
)
def test_which_objects_hold_a_field(obj: dict[str, Any], field: str, held: bool) -> None:
    assert holds(obj, field) is held


def test_the_crds_come_from_a_directory_or_from_the_models(tmp_path: Path) -> None:
    models = read_crds(None)
    # The control: the models generate every kind, ptahschemas among them.
    assert SCHEMAS in {crd["metadata"]["name"] for crd in models}
    for crd in models:
        (tmp_path / f"{crd['metadata']['name']}.yaml").write_text(yaml.safe_dump(crd))
    (tmp_path / "README").write_text("not a CRD")
    assert read_crds(tmp_path) == sorted(models, key=lambda crd: crd["metadata"]["name"])
    with pytest.raises(FileNotFoundError):
        read_crds(tmp_path / "README")
