"""Which kubeconfig, context and namespace ``kubectl ptah`` uses, as kubectl would.

The command runs over the API double (the connector is injected), so a row shows the
namespace it resolved by whether it finds the schema seeded in ``shop``: the control
row does, and each change that resolves another namespace, or no kubeconfig at all,
does not.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobclaim.apiserver import ApiClient
from kubectl_ptah import main
from kubectl_ptah.kubeconfig import load
from tests.kubectl_ptah.kubeconfigs import kubeconfig
from tests.support.dispatchworld import NS, Rig, add_schema, make_rig


@pytest.fixture
def rig() -> Rig:
    world = make_rig()
    add_schema(world, approve=False)
    return world


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory of the test's own, and no KUBECONFIG from whoever runs it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return tmp_path


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def run(api: ApiClient, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), connector=lambda _args: api, stdin=io.StringIO(), stdout=out)
    return code, out.getvalue()


Setup = Callable[[Path, pytest.MonkeyPatch], list[str]]


def default_file(home: Path, _mp: pytest.MonkeyPatch) -> list[str]:
    write(home / ".kube" / "config", kubeconfig())
    return []


def flag_file(home: Path, _mp: pytest.MonkeyPatch) -> list[str]:
    # --kubeconfig wins over $KUBECONFIG and ~/.kube/config.
    write(home / ".kube" / "config", kubeconfig(current="other"))
    _mp.setenv("KUBECONFIG", str(write(home / "env.yaml", kubeconfig(current="other"))))
    return ["--kubeconfig", str(write(home / "flag.yaml", kubeconfig()))]


def env_list(home: Path, mp: pytest.MonkeyPatch) -> list[str]:
    # A missing file in the list is skipped; the first current-context wins, as in
    # kubectl (the kubernetes client's loader would take the last one's).
    first = write(home / "a.yaml", kubeconfig())
    second = write(home / "b.yaml", kubeconfig(current="other"))
    mp.setenv("KUBECONFIG", os.pathsep.join([str(home / "missing.yaml"), str(first), str(second)]))
    return []


def env_merged(home: Path, mp: pytest.MonkeyPatch) -> list[str]:
    # The first file defines "work" (namespace shop); a later "work" changes nothing.
    first = write(home / "a.yaml", kubeconfig(current=None))
    second = write(home / "b.yaml", kubeconfig(contexts={"work": "default"}))
    mp.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    return []


def context_flag(home: Path, _mp: pytest.MonkeyPatch) -> list[str]:
    write(home / ".kube" / "config", kubeconfig(current="other"))
    return ["--context", "work"]


def namespace_flag(home: Path, _mp: pytest.MonkeyPatch) -> list[str]:
    write(home / ".kube" / "config", kubeconfig(current="other"))
    return ["-n", NS]


FOUND = [default_file, flag_file, env_list, env_merged, context_flag, namespace_flag]


@pytest.mark.parametrize("setup", FOUND)
def test_the_namespace_comes_from_the_context_kubectl_would_use(
    rig: Rig, home: Path, monkeypatch: pytest.MonkeyPatch, setup: Setup
) -> None:
    code, text = run(rig.api, *setup(home, monkeypatch), "plan", "schema", "orders")
    assert code == 0, text
    assert text.startswith(f"PtahSchema {NS}/orders\n")


def test_without_a_namespace_in_the_context_it_is_default(
    rig: Rig, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(home / ".kube" / "config", kubeconfig(current="other"))
    code, text = run(rig.api, "plan", "schema", "orders")
    assert (code, text) == (3, "")
    assert (
        capsys.readouterr().err
        == "kubectl ptah: there is no PtahSchema orders in namespace default\n"
    )


def test_the_resolution_names_files_context_and_server(home: Path) -> None:
    first = write(home / "a.yaml", "")  # empty: defines nothing, and is not handed on
    second = write(home / "b.yaml", kubeconfig(server="https://10.0.0.1:6443"))
    found = load(None, None, {"KUBECONFIG": f"{first}{os.pathsep}{second}"}, home)
    assert (found.files, found.source, found.context) == ((second,), "$KUBECONFIG", "work")
    assert (found.namespace, found.server, found.location) == (
        NS,
        "https://10.0.0.1:6443",
        str(second),
    )
