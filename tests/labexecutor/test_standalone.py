"""The lab executor runs alone in the executor image (as /usr/local/bin/ptah), where none
of the operator's packages are installed: it imports only itself among ours."""

from __future__ import annotations

from tests.support.layertable import ROOT, imports_of, unit_of


def test_the_executor_imports_only_itself_among_our_packages() -> None:
    files = sorted((ROOT / "lab" / "executor").rglob("*.py"))
    assert files
    outside = [
        f"{i.file}:{i.line}: {i.target}"
        for path in files
        for i in imports_of(path, ROOT)
        if unit_of(i.target) is not None and not i.target.startswith("lab.executor")
    ]
    assert outside == []
