"""What a test module may import of tests: ``tests.support`` and its own folder's helpers.

A module under tests/ imports, of tests, only tests.support (the worlds, tables and
fixture plugins more than one folder uses) and non-test helpers of its own folder
(tests/lifecycle/backends.py for tests/lifecycle). Never a conftest (its fixtures reach
tests through pytest, shared ones from tests/conftest.py's plugins) and never a test_*
module (its tests would be collected again, and two files' changes tied). tests.support
imports only tests.support.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.layertable import ROOT, imports_of, module_name


def refusal_of_test_import(source: str, imported: str) -> str | None:
    """Why module ``source`` may not import module ``imported`` (both under tests). Pure."""
    leaf = imported.rsplit(".", 1)[-1]
    if leaf == "conftest":
        return f"{source} imports {imported}: a conftest reaches tests only through pytest"
    if leaf.startswith("test_"):
        return f"{source} imports {imported}: a test module is imported by nothing"
    if imported == "tests.support" or imported.startswith("tests.support."):
        return None
    if source.startswith("tests.support."):
        return f"{source} imports {imported}: tests.support imports only tests.support"
    if imported.rsplit(".", 1)[0] != source.rsplit(".", 1)[0]:
        return f"{source} imports {imported}: another folder's helper belongs in tests.support"
    return None


def imports_of_tests(root: Path) -> set[tuple[str, str]]:
    """Every (module, module of tests it imports) under ``root``/tests."""
    found: set[tuple[str, str]] = set()
    for path in sorted((root / "tests").rglob("*.py")):
        source = module_name(path, root)
        for imp in imports_of(path, root):
            if imp.target != "tests" and not imp.target.startswith("tests."):
                continue
            as_module = root / (imp.target.replace(".", "/") + ".py")
            found.add((source, imp.target if as_module.exists() else imp.module))
    return found


def test_tests_import_only_tests_support_and_their_own_folders_helpers() -> None:
    found = imports_of_tests(ROOT)
    # No exception: every import a test module makes of tests is allowed by the rule.
    assert sorted(pair for pair in found if refusal_of_test_import(*pair)) == []


TESTS_IMPORT_ROWS = [
    # The control row: a shared world from tests.support, a helper beside the test.
    ("tests.webhook.test_fuzz", "tests.support.claimworld", None),
    ("tests.lifecycle.test_driver", "tests.lifecycle.backends", None),
    ("tests.support.podworld", "tests.support.dispatchworld", None),
    # One change each, refused with its sentence.
    ("tests.lifecycle.test_driver", "tests.realapi.conftest", "reaches tests only through"),
    ("tests.lifecycle.test_driver", "tests.lifecycle.test_boundary", "is imported by nothing"),
    ("tests.lifecycle.test_driver", "tests.outcomes.recorder", "belongs in tests.support"),
    ("tests.support.podworld", "tests.outcomes.recorder", "imports only tests.support"),
]


@pytest.mark.parametrize(("source", "imported", "refusal"), TESTS_IMPORT_ROWS)
def test_the_tests_import_rule(source: str, imported: str, refusal: str | None) -> None:
    problem = refusal_of_test_import(source, imported)
    if refusal is None:
        assert problem is None, problem
    else:
        assert problem is not None and refusal in problem, problem
