"""``kubectl ptah --version``: the version the project declares, or one sentence."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from kubectl_ptah import main

ROOT = Path(__file__).resolve().parents[2]


def declared() -> str:
    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version


def test_the_version_is_the_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr() == (f"kubectl-ptah {declared()}\n", "")


def test_without_the_distribution_the_version_is_unknown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def absent(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", absent)
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 1
    assert capsys.readouterr() == (
        "",
        "kubectl ptah: the version is unknown: the ptah-operator distribution is not installed\n",
    )
