"""docs/operations.md is held to the chart and the code, as docs/security.md is to its
tests: every value it tells a person to set is one the chart takes, every object it
names is one the chart renders, every ``kubectl ptah`` command and manager variable
exists, every test it cites is there, and its table of phases covers every phase the
two kinds can be in. A page that names a renamed value would send a person at 3 a.m.
to a knob that is gone."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from jobclaim.api import MIGRATION_FINALIZER, SCHEMA_FINALIZER
from jobclaim.api.migration import MigrationPhase
from jobclaim.api.schema import SchemaPhase
from kubectl_ptah import cli
from manager.config import VARIABLES
from tests.support.chartrender import CHART, VALUES, Helm, Object

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "operations.md"
TEXT = DOC.read_text()

TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
BACKTICKED = re.compile(r"`([^`\n]+)`")
VALUE_PATH = re.compile(r"^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)+$")
OBJECT_NAME = re.compile(r"\bptah-operator(?:-[a-z]+)*\b")
KUBECTL_PTAH = re.compile(r"kubectl ptah ([a-z]+)")
VARIABLE = re.compile(r"\bPTAH_[A-Z_]+\b")
FINALIZER = re.compile(r"operator\.ptah\.run/[a-z-]+-operation")
# Names the page uses that are not objects of the chart: the Helm release, the chart's
# directory, the install Job's name before its hash, the Lease the manager creates.
NOT_OBJECTS = {"ptah-operator-cert-init", "ptah-operator-leader"}


def section(title: str) -> str:
    return TEXT.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def value_paths() -> set[str]:
    top = set(yaml.safe_load((CHART / "values.yaml").read_text()))
    return {
        m.group(1)
        for m in BACKTICKED.finditer(TEXT)
        if VALUE_PATH.match(m.group(1)) and m.group(1).split(".")[0] in top
    }


def schema_has(path: str) -> bool:
    node: Any = yaml.safe_load((CHART / "values.schema.json").read_text())
    for key in path.split("."):
        node = (node.get("properties") or {}).get(key)
        if node is None:
            return False
    return True


def test_every_value_the_page_names_is_one_the_chart_takes() -> None:
    named = value_paths()
    # The control: the page names values, so the check below checks something.
    assert {"webhook.rotation.schedule", "webhook.certManager.issuerRef"} <= named
    assert [path for path in sorted(named) if not schema_has(path)] == []


def test_every_object_the_page_names_is_one_the_chart_renders(helm: Helm) -> None:
    objects: list[Object] = helm.render([VALUES / "required.yaml"])
    objects += helm.render([VALUES / "required.yaml"], {"webhook.certManager.enabled": "true"})
    rendered = {o["metadata"]["name"] for o in objects}
    named = set(OBJECT_NAME.findall(TEXT)) - NOT_OBJECTS
    # The control: the page names the chart's objects.
    assert {"ptah-operator-cert-rotator", "ptah-operator-webhook", "ptah-operator-stamp"} <= named
    # The rotator's Secret is the one object the chart names but never renders.
    assert sorted(named - rendered - {"ptah-operator-webhook-tls"}) == []
    rotator_args = [
        arg
        for o in objects
        if o["kind"] == "CronJob"
        for arg in o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    ]
    assert "--secret=ptah-operator-webhook-tls" in rotator_args


def test_every_kubectl_ptah_command_the_page_uses_exists() -> None:
    used = set(KUBECTL_PTAH.findall(TEXT))
    parser = cli._parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    assert used, "the page uses no kubectl ptah command: nothing below proves anything"
    assert used <= set(commands.choices), used - set(commands.choices)  # type: ignore[arg-type]


def test_every_manager_variable_the_page_names_exists() -> None:
    named = set(VARIABLE.findall(TEXT))
    assert {"PTAH_READY_WINDOW_SECONDS", "PTAH_READY_REFRESH_SECONDS"} <= named
    assert named <= {variable.name for variable in VARIABLES}


def test_the_finalizers_the_page_names_are_the_operators() -> None:
    assert set(FINALIZER.findall(TEXT)) == {SCHEMA_FINALIZER, MIGRATION_FINALIZER}


def test_the_phase_table_covers_every_phase_and_no_other() -> None:
    rows = [
        line.split("|")[1].strip().strip("`")
        for line in section("Debugging a stuck resource").splitlines()
        if line.startswith("| `")
    ]
    phases = set(get_args(SchemaPhase)) | set(get_args(MigrationPhase))
    assert sorted(rows) == sorted(phases)


def test_the_support_policy_states_what_the_chart_admits() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert f"`kubeVersion: {chart['kubeVersion']}`" in section("Versioning and support policy")


@pytest.mark.parametrize(
    "title",
    [
        "Install",
        "Upgrade and rollback",
        "GitOps",
        "Certificates",
        "Debugging a stuck resource",
        "Finalizers",
        "Network prerequisites",
        "Versioning and support policy",
    ],
)
def test_the_page_answers_each_operational_question(title: str) -> None:
    assert len(section(title).split()) > 80, title


def test_every_test_the_page_cites_exists() -> None:
    cited = [(m.group(1), m.group(2)) for m in TEST_REFERENCE.finditer(TEXT)]
    assert len(cited) >= 4
    missing: list[str] = []
    for path, name in cited:
        source = ROOT / path
        if not source.is_file():
            missing.append(path)
            continue
        if name is not None:
            tree = ast.parse(source.read_text())
            if name not in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}:
                missing.append(f"{path}::{name}")
    assert missing == []
