"""The Argo CD health checks in docs/gitops, run by Debian's Lua 5.1 (the language
version of Argo CD's gopher-lua) over the statuses the operator publishes.

Every decision the phase machine can reach (``controller.pieces.phasemachine.decide`` over
every combination of its facts, for both families) is published as the operator
publishes it (``controller.stages.conditions.conditions_for``), and the script must say:
Healthy only when the phase is InSync and Ready is True, Degraded when the phase is
Failed or Stalled is True, Progressing otherwise. Hand rows cover what the machine
does not publish: no status yet, and a spec change the operator has not read.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.publishedstatus import published_objects

ROOT = Path(__file__).resolve().parents[2]
GITOPS = ROOT / "docs" / "gitops"
SCRIPT = GITOPS / "ptah-health.lua"
CONFIGMAP = GITOPS / "argocd-cm.yaml"
HEALTH_KEY = "resource.customizations.health."


def health_checks() -> dict[str, str]:
    """Each kind's script in the ConfigMap, by ``group_Kind``."""
    data = yaml.safe_load(CONFIGMAP.read_text())["data"]
    return {key.removeprefix(HEALTH_KEY): value for key, value in data.items()}


def lua_literal(value: Any) -> str:
    """A Python value (JSON-shaped) as a Lua expression; a list is 1-indexed."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(item) for item in value) + "}"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"[{lua_literal(k)}] = {lua_literal(v)}" for k, v in value.items())
            + "}"
        )
    raise TypeError(f"no Lua spelling for {value!r}")


def run_health(lua: Path, script: str, obj: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    """(status, message) as Argo CD would read them from ``script`` over ``obj``."""
    program = tmp_path / "health.lua"
    program.write_text(
        f"obj = {lua_literal(obj)}\n"
        f"local function check()\n{script}\nend\n"
        "local hs = check()\n"
        'io.write(hs.status, "\\n", hs.message or "", "\\n")\n'
    )
    done = subprocess.run([str(lua), str(program)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    status, message = done.stdout.split("\n", 1)
    return status, message.strip()


@pytest.fixture(scope="session")
def lua() -> Path:
    """Debian's lua5.1, installed by `make lua` when missing; fails, never skips."""
    done = subprocess.run(
        ["make", "--no-print-directory", "lua"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    binary = Path("/usr/bin/lua5.1")
    if done.returncode != 0 or not binary.exists():
        pytest.fail(f"the health checks need lua5.1 (`make lua`):\n{done.stdout}{done.stderr}")
    return binary


def expected(obj: dict[str, Any]) -> str:
    status = obj["status"]
    holds = {c["type"] for c in status["conditions"] if c["status"] == "True"}
    if status["phase"] == "Failed" or "Stalled" in holds:
        return "Degraded"
    if status["phase"] == "InSync" and "Ready" in holds:
        return "Healthy"
    return "Progressing"


def cases() -> Iterator[Any]:
    for label, obj in published_objects():
        yield pytest.param(obj["kind"], obj, id=label)


CASES = list(cases())


def test_every_kind_carries_the_one_script() -> None:
    checks = health_checks()
    assert set(checks) == {"operator.ptah.run_PtahSchema", "operator.ptah.run_PtahMigration"}
    for kind, script in checks.items():
        assert script == SCRIPT.read_text(), kind


def test_the_phase_machine_reaches_every_phase() -> None:
    # The control: the enumeration is not vacuous; each outcome is reached by both kinds.
    for kind in ("PtahSchema", "PtahMigration"):
        outcomes = {expected(case.values[1]) for case in CASES if case.values[0] == kind}
        assert outcomes == {"Healthy", "Degraded", "Progressing"}, kind
    phases = {case.values[1]["status"]["phase"] for case in CASES}
    assert {"InSync", "Failed", "Blocked", "AwaitingApproval", "Suspended", "Applying"} <= phases


@pytest.mark.parametrize(("kind", "obj"), CASES)
def test_the_health_of_every_published_status(
    lua: Path, tmp_path: Path, kind: str, obj: dict[str, Any]
) -> None:
    script = health_checks()[f"operator.ptah.run_{kind}"]
    status, message = run_health(lua, script, obj, tmp_path)
    assert status == expected(obj), message
    assert message.startswith(obj["status"]["phase"]), message


@pytest.mark.parametrize(
    ("kind", "status", "generation", "health", "message"),
    [
        ("PtahSchema", None, 1, "Progressing", "waiting for the operator to read it"),
        (
            "PtahMigration",
            {
                "observedGeneration": 2,
                "phase": "InSync",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
            3,
            "Progressing",
            "the operator has not read generation 3 yet",
        ),
        (
            "PtahSchema",
            {
                "observedGeneration": 3,
                "phase": "InSync",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
            3,
            "Healthy",
            "InSync",
        ),
        (
            "PtahSchema",
            {"observedGeneration": 3, "phase": "InSync", "conditions": []},
            3,
            "Progressing",
            "InSync",
        ),
    ],
    ids=["no status", "spec change unread", "control: in sync", "in sync without Ready"],
)
def test_what_the_phase_machine_does_not_publish(
    lua: Path,
    tmp_path: Path,
    kind: str,
    status: dict[str, Any] | None,
    generation: int,
    health: str,
    message: str,
) -> None:
    obj: dict[str, Any] = {"metadata": {"name": "orders", "generation": generation}}
    if status is not None:
        obj["status"] = status
    assert run_health(lua, health_checks()[f"operator.ptah.run_{kind}"], obj, tmp_path) == (
        health,
        message,
    )
