"""What the wheel ships: the packages the layer table calls shipping, and nothing
checkout-only (``lab``, ``tests``, ``benchmarks``, the in-memory double ``kube.fake``);
and what the runner image's copy of the runner needs beside it: nothing but jobclaim,
pydantic and the standard library.

The package list is computed by setuptools' own finder from pyproject.toml's include
and exclude patterns, the rule the wheel build applies, so the check costs no build.
``tests/test_layers.py`` holds the other half: no shipping module imports what is left
out.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from types import ModuleType
from typing import Any

import pytest
from setuptools import find_packages  # type: ignore[import-untyped]

from tests.support.layertable import ALLOWED, ROOT, imports_of

CHECKOUT_ONLY = ("lab", "tests", "benchmarks", "kube.fake")


def find_config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        found: dict[str, Any] = tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]
    return found


def packages(include: list[str], exclude: list[str]) -> list[str]:
    found: list[str] = find_packages(where=str(ROOT), include=include, exclude=exclude)
    return found


def checkout_only(found: list[str]) -> list[str]:
    return sorted(p for p in found for c in CHECKOUT_ONLY if p == c or p.startswith(f"{c}."))


def test_the_wheel_holds_no_checkout_only_package() -> None:
    config = find_config()
    found = packages(config["include"], config.get("exclude", []))
    assert "kube" in found  # the adapter ships; only its double stays behind
    assert checkout_only(found) == []


def test_the_wheel_ships_exactly_the_layer_tables_shipping_units() -> None:
    config = find_config()
    tops = {p.split(".")[0] for p in packages(config["include"], config.get("exclude", []))}
    assert tops == {u for u in ALLOWED if "." not in u and u != "lab"}


def test_without_the_exclude_the_double_would_ship() -> None:
    # The control: the finder sees kube.fake, so the first test's empty list is the
    # exclude's doing and not a finder that sees nothing.
    found = packages(find_config()["include"], [])
    assert checkout_only(found) == ["kube.fake"]


def _inputs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_inputs", ROOT / "images" / "inputs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_manager_images_inputs_are_the_wheels_files() -> None:
    # A change to the double must not rebuild the manager image, which does not hold it.
    inputs = _inputs()
    files: list[str] = inputs.input_files(inputs.input_paths("manager"))
    assert "kube/client.py" in files
    assert [f for f in files if f.startswith(("kube/fake/", "lab/", "tests/"))] == []


def fault_injection_in(top: str) -> list[str]:
    """Modules under ``top`` that name a lab fault variable or are the fault hooks."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / top).rglob("*.py")
        if "PTAH_LAB_" in path.read_text() or path.stem == "labfaults"
    )


@pytest.mark.parametrize(
    ("top", "holds"),
    # The control: the lab holds the fault hooks, so the scan finds them where they are.
    [("lab", True), *((top, False) for top in ("manager", "controller", "webhook", "kube"))],
)
def test_the_fault_hooks_are_the_labs_and_ship_nowhere(top: str, holds: bool) -> None:
    assert bool(fault_injection_in(top)) is holds, fault_injection_in(top)


def test_the_runner_imports_only_jobclaim_pydantic_and_the_standard_library() -> None:
    # The runner is copied into the executor's container as one directory; whatever
    # it imports must be in that directory (runner.install.PACKAGES).
    allowed = {"jobclaim", "pydantic", "pydantic_core"} | set(sys.stdlib_module_names)
    runner = ROOT / "runner"
    found = {
        str(f.relative_to(ROOT)): sorted(
            m
            for m in {i.module for i in imports_of(f, ROOT)}
            if m.split(".")[0] not in allowed and not m.startswith("runner")
        )
        for f in sorted(runner.rglob("*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {}
