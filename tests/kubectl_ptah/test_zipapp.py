"""The krew archive: one zipapp of our code that runs, and a manifest that names it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from kubectl_ptah.build_zipapp import main as build

# Builds the zipapp and runs it in a fresh interpreter: integration, left to `make test`.
pytestmark = pytest.mark.integration

VERSION = "9.9.9-test"  # not the installed version: --version proves the archive ran


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("krew")
    assert build([str(where), "--version", VERSION]) == 0
    return where


def run(out: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # Not from the checkout: the archive is the only copy of our code on sys.path
    # before the environment's own.
    return subprocess.run(
        [sys.executable, str(out / "kubectl-ptah"), *argv],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_archive_runs_its_own_code(out: Path) -> None:
    done = run(out, "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"kubectl-ptah {VERSION}\n", "")
    failed = run(out, "--kubeconfig", str(out / "none"), "status", "schema", "orders")
    assert (failed.returncode, failed.stderr) == (
        1,
        f"kubectl ptah: no kubeconfig at {out}/none (--kubeconfig)\n",
    )


def test_the_archive_holds_our_three_packages_and_no_double(out: Path) -> None:
    names = zipfile.ZipFile(out / "kubectl-ptah").namelist()
    assert {n.split("/")[0] for n in names} == {"__main__.py", "kubectl_ptah", "jobclaim", "kube"}
    assert "kubectl_ptah/VERSION" in names
    assert not [n for n in names if n.startswith("kube/fake/") or n.endswith(".pyc")]
    assert (out / "kubectl-ptah").read_bytes().startswith(b"#!/usr/bin/env python3\n")


def test_the_manifest_names_the_tarball_krew_unpacks(out: Path) -> None:
    tarball = out / "kubectl-ptah.tar.gz"
    with tarfile.open(tarball) as archive:
        (member,) = archive.getmembers()
        assert (member.name, member.mode) == ("kubectl-ptah", 0o755)
        extracted = archive.extractfile(member)
        assert extracted is not None
        assert extracted.read() == (out / "kubectl-ptah").read_bytes()
    plugin = yaml.safe_load((out / "ptah.yaml").read_text())
    assert (plugin["kind"], plugin["metadata"]["name"]) == ("Plugin", "ptah")
    assert plugin["spec"]["version"] == f"v{VERSION}"
    (platform,) = plugin["spec"]["platforms"]
    assert platform["sha256"] == hashlib.sha256(tarball.read_bytes()).hexdigest()
    assert platform["bin"] == "kubectl-ptah"
    assert platform["files"] == [{"from": "kubectl-ptah", "to": "."}]
