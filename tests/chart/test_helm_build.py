"""helm comes from `make helm`, and its absence fails the chart tests instead of skipping them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.chartrender import ROOT, Helm, HelmUnavailable, build_helm


def test_the_built_helm_is_the_release_the_makefile_pins(helm: Helm) -> None:
    pinned = re.search(r"^HELM_VERSION\s*:=\s*(\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned is not None, "the Makefile no longer pins HELM_VERSION"
    result = helm.run("version", "--template", "{{ .Version }}")
    assert (result.returncode, result.stdout) == (0, pinned.group(1))


def test_a_machine_that_cannot_build_helm_gets_an_error_that_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # With nothing on PATH neither make nor go can run. The session fixture turns
    # this error into a failed test (pytest.fail), never a skip.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HelmUnavailable, match="make is not on PATH"):
        build_helm()
