"""Every way ``kubectl ptah`` fails: one lower-case sentence on stderr, and its exit code.

0 done, 1 refused or failed, 2 usage, 3 nothing stored. The control row approves a
pending plan through a kubeconfig; each other row changes one thing and must end with
exactly the one line and code it names, and no output.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobclaim.apiserver import (
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    ApiClient,
    Refused,
    Resource,
    Unavailable,
)
from kubectl_ptah import main
from kubectl_ptah.cli import kubeconfig_of
from tests.kubectl_ptah.kubeconfigs import kubeconfig
from tests.support.dispatchworld import NS, Rig, add_schema, make_rig

ROOT = Path(__file__).resolve().parents[2]
APPROVE = ["approve", "schema", "orders", "--yes"]


@dataclass
class World:
    rig: Rig
    home: Path
    monkeypatch: pytest.MonkeyPatch

    def file(self, name: str, document: Any) -> Path:
        path = self.home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
        return path


class RefusingCreates:
    """The rig's API, whose admission refuses every create (a webhook's denial)."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def create(self, resource: Resource, namespace: str | None, obj: Any) -> Any:
        raise Refused(
            'admission webhook "decisions.operator.ptah.run" denied the request: the\n'
            "approver is the spec's last writer.",
            status=403,
        )


class Failing:
    """The rig's API, whose every read fails as a 503 would."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def get(self, *_args: Any) -> Any:
        raise Unavailable("the server is currently unable to handle the request", status=503)


Connector = Callable[[Any], Any]


def through(world: World, wrap: Callable[[ApiClient], Any] = lambda api: api) -> Connector:
    """Resolve the kubeconfig as ``connect`` does, then reach the rig's API."""

    def connector(args: Any) -> Any:
        kubeconfig_of(args)
        return wrap(world.rig.api)

    return connector


def boom(_args: Any) -> Any:
    raise RuntimeError("boom\nwith a second line")


# Each row: what to change (argv before the command, a connector or None for the real
# one), then the exit code and the one line on stderr ({home} is the test's home).
Change = Callable[[World], tuple[list[str], Connector | None]]


def control(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", kubeconfig()))], through(w)


def missing_file(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.home / "absent.yaml")], through(w)


def missing_default(w: World) -> tuple[list[str], Connector | None]:
    return [], through(w)


def missing_list(w: World) -> tuple[list[str], Connector | None]:
    w.monkeypatch.setenv("KUBECONFIG", f"{w.home}/a.yaml:{w.home}/b.yaml")
    return [], through(w)


def not_yaml(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", "clusters: [\n  - {name: x\n"))], through(w)


def not_a_mapping(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", "- one\n- two\n"))], through(w)


def a_directory(w: World) -> tuple[list[str], Connector | None]:
    (w.home / "dir").mkdir()
    return ["--kubeconfig", str(w.home / "dir")], through(w)


def unknown_context(w: World) -> tuple[list[str], Connector | None]:
    path = w.file("k.yaml", kubeconfig())
    return ["--kubeconfig", str(path), "--context", "nope"], through(w)


def no_current_context(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", kubeconfig(current=None)))], through(w)


def unknown_cluster(w: World) -> tuple[list[str], Connector | None]:
    document = kubeconfig()
    document["clusters"][0]["name"] = "elsewhere"
    return ["--kubeconfig", str(w.file("k.yaml", document))], through(w)


def unreachable(w: World) -> tuple[list[str], Connector | None]:
    # The real connector: nothing listens on port 1 of the loopback address.
    return ["--kubeconfig", str(w.file("k.yaml", kubeconfig()))], None


def server_failing(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", kubeconfig()))], through(w, Failing)


def missing_resource(w: World) -> tuple[list[str], Connector | None]:
    w.rig.api.delete(PTAHSCHEMAS, NS, "orders")
    return control(w)


def no_pending_plan(w: World) -> tuple[list[str], Connector | None]:
    stored = w.rig.api.get(PTAHSCHEMAS, NS, "orders")
    status = {k: v for k, v in stored["status"].items() if k != "plan"}
    w.rig.api.patch_status(
        PTAHSCHEMAS, NS, "orders", status, resource_version=stored["metadata"]["resourceVersion"]
    )
    return control(w)


def plan_gone(w: World) -> tuple[list[str], Connector | None]:
    plan = w.rig.api.get(PTAHSCHEMAS, NS, "orders")["status"]["plan"]["name"]
    w.rig.api.delete(PTAHSCHEMAPLANS, NS, plan)
    return control(w)


def write_refused(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", kubeconfig()))], through(w, RefusingCreates)


def unexpected(w: World) -> tuple[list[str], Connector | None]:
    return ["--kubeconfig", str(w.file("k.yaml", kubeconfig()))], boom


PLAN = "ptah-plan-"  # the plan's name is derived from its fingerprint
ROWS: list[tuple[Change, int, str]] = [
    (control, 0, ""),
    (missing_file, 1, "no kubeconfig at {home}/absent.yaml (--kubeconfig)"),
    (
        missing_default,
        1,
        "no kubeconfig at {home}/.kube/config (~/.kube/config); "
        "pass --kubeconfig or set KUBECONFIG",
    ),
    (
        missing_list,
        1,
        "none of the kubeconfig files $KUBECONFIG names exists ({home}/a.yaml, {home}/b.yaml)",
    ),
    (
        not_yaml,
        1,
        "the kubeconfig {home}/k.yaml is not valid YAML: "
        "expected the node content, but found '-' at line 2",
    ),
    (not_a_mapping, 1, "the kubeconfig {home}/k.yaml is not a mapping of kubeconfig fields"),
    (a_directory, 1, "cannot read the kubeconfig {home}/dir: is a directory"),
    (unknown_context, 1, "the kubeconfig {home}/k.yaml has no context named 'nope'"),
    (
        no_current_context,
        1,
        "the kubeconfig {home}/k.yaml sets no current context; pass --context",
    ),
    (
        unknown_cluster,
        1,
        "the context 'work' names the cluster 'lab', which the kubeconfig {home}/k.yaml "
        "does not define",
    ),
    (unreachable, 1, "the API server https://127.0.0.1:1 did not answer: connection refused"),
    (
        server_failing,
        1,
        "the API server https://127.0.0.1:1 failed (503): "
        "the server is currently unable to handle the request",
    ),
    (missing_resource, 3, "there is no PtahSchema orders in namespace shop"),
    (no_pending_plan, 3, "PtahSchema shop/orders has no pending plan"),
    (plan_gone, 3, "the plan {plan} that PtahSchema shop/orders names is not stored"),
    (
        write_refused,
        1,
        'the API server refused: admission webhook "decisions.operator.ptah.run" denied '
        "the request: the approver is the spec's last writer",
    ),
    (unexpected, 1, "unexpected RuntimeError: boom with a second line"),
]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    rig = make_rig()
    add_schema(rig, approve=False)
    return World(rig, tmp_path, monkeypatch)


@pytest.mark.parametrize(("change", "code", "message"), ROWS, ids=[r[0].__name__ for r in ROWS])
def test_each_failure_is_one_sentence_and_its_exit_code(
    world: World, capsys: pytest.CaptureFixture[str], change: Change, code: int, message: str
) -> None:
    plan = world.rig.api.get(PTAHSCHEMAS, NS, "orders")["status"]["plan"]["name"]
    argv, connector = change(world)
    out = io.StringIO()
    kwargs: dict[str, Any] = {} if connector is None else {"connector": connector}
    got = main([*argv, *APPROVE], stdin=io.StringIO(), stdout=out, **kwargs)
    err = capsys.readouterr().err
    if code == 0:
        assert (got, err) == (0, "")
        assert "created:" in out.getvalue()
        assert len(world.rig.api.list(PTAHSCHEMAAPPROVALS, NS)) == 1
        return
    expected = "kubectl ptah: " + message.format(home=world.home, plan=plan) + "\n"
    assert (got, err) == (code, expected)
    assert world.rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


USAGE: list[tuple[list[str], str]] = [
    (
        ["plan", "table", "orders"],
        "kubectl ptah plan: argument kind: invalid choice: 'table' "
        "(choose from 'schema', 'migration'); see 'kubectl ptah plan --help'",
    ),
    (
        ["settle", "schema", "orders"],
        "kubectl ptah settle: the following arguments are required: --reason; "
        "see 'kubectl ptah settle --help'",
    ),
    (["frobnicate"], "kubectl ptah: argument command: invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(("argv", "line"), USAGE)
def test_usage_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv, connector=boom)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith(line) and err.count("\n") == 1, err


def test_the_installed_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    # The whole program, as kubectl runs it: a missing kubeconfig, one line, exit 1.
    argv = ["--kubeconfig", str(tmp_path / "none"), "status", "schema", "orders"]
    done = subprocess.run(
        [sys.executable, "-m", "kubectl_ptah", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"kubectl ptah: no kubeconfig at {tmp_path}/none (--kubeconfig)\n"
