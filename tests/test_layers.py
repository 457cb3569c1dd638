"""The layer table (``tests/support/layertable.py``) holds: on the real tree, and, so that
its checker is known to refuse, on a synthetic tree with one forbidden import per row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.layertable import (
    ALLOWED,
    CONTROLLER_LEFT_UPWARD,
    ROOT,
    UNCHECKED,
    checked_files,
    controller_cycles,
    controller_upward,
    imports_of,
    packages_on_disk,
    surface_of,
    violations,
)

# --- the real tree ------------------------------------------------------------------


def test_every_package_has_a_row() -> None:
    # A new top-level package must be placed in the table before it can hold code.
    assert packages_on_disk(ROOT) - set(ALLOWED) - UNCHECKED == set()


EXISTING = sorted(u for u in ALLOWED if (ROOT / u.replace(".", "/")).is_dir())


@pytest.mark.parametrize("unit", EXISTING)
def test_the_tree_holds_the_table(unit: str) -> None:
    assert any(u == unit for u, _ in checked_files(ROOT)), f"{unit} has no modules to check"
    assert violations(ROOT, only=unit) == []


def test_only_kube_client_imports_the_kubernetes_client() -> None:
    importers = {
        i.file
        for _, path in checked_files(ROOT)
        for i in imports_of(path, ROOT)
        if i.target.split(".")[0] == "kubernetes"
    }
    assert importers == {"kube/client.py"}


def test_the_controllers_left_upward_imports_are_exactly_the_list() -> None:
    # A stage that stops importing a family must leave the list, so it never regrows.
    assert controller_upward(ROOT) == CONTROLLER_LEFT_UPWARD


def test_the_controllers_surface_is_declared_once_for_types_and_once_for_use() -> None:
    imported, homes, exported = surface_of(ROOT / "controller" / "__init__.py")
    assert len(exported) > 10
    assert sorted(exported) == sorted(imported) == sorted(homes)
    assert homes == imported


def test_the_controller_has_no_import_cycle_not_even_a_type_only_one() -> None:
    assert controller_cycles(ROOT) == []


# --- the checker, on a synthetic tree -------------------------------------------------

CONTROL = {
    "jobclaim/__init__.py": 'import orjson\n__all__ = ["build_job", "match"]\n',
    "jobclaim/_canonical.py": "import hashlib\n",
    "jobclaim/builder.py": "from jobclaim._canonical import digest_of\n",
    "runner/run.py": "from jobclaim import build_job\nfrom jobclaim.errors import PtahError\n",
    "kube/client.py": "import kubernetes\nfrom jobclaim.apiserver import ApiError\n",
    "kube/fake/inmemory.py": "from kube.fake.rules import r\nfrom jobclaim import apiserver\n",
    "controller/stages/steps.py": (
        "from runner import parse_result_for\nfrom kube.client import KubeApi\n"
        "from controller.context.passcontext import PassContext\n"
    ),
    "controller/__init__.py": (
        '__all__ = ["Reconciler"]\nfrom controller.runtime.loop import Reconciler\n'
    ),
    "controller/mutationlifecycle/driver.py": "import enum\n",
    "controller/pieces/targetlock.py": "from controller.mutationlifecycle.driver import Step\n",
    "controller/context/passcontext.py": "from controller.pieces.targetlock import TargetLock\n",
    "controller/families/__init__.py": "",
    "controller/families/schema/dispatch.py": "from controller.stages.steps import lease\n",
    "controller/families/migration/dispatch.py": "from controller.stages import steps\n",
    "controller/runtime/loop.py": (
        "from controller.families.schema.dispatch import SCHEMA\n"
        "from controller.families.migration import dispatch\n"
        "from controller.stages.steps import lease\n"
    ),
    "manager/main.py": "from controller import Reconciler\n",
    "webhook/wiring.py": "from kube.client import KubeApi\nimport certs\n",
    "lab/run.py": (
        "from kube.fake.inmemory import InMemoryApi\nimport webhook, controller\n"
        "from jobclaim.stamps import STAMPED\n"
    ),
    "tests/test_x.py": "from lab import run\nfrom jobclaim._canonical import digest_of\n",
}

# One upward (or sideways, or private) import per row, and the sentence it earns.
REFUSED = [
    (
        "jobclaim/match.py",
        "from controller.stages.claimwrites import c\n",
        "jobclaim may not import",
    ),
    ("jobclaim/match.py", "import webhook\n", "jobclaim may not import webhook"),
    ("runner/run.py", "from kube.client import KubeApi\n", "runner may not import kube"),
    ("runner/run.py", "import controller.stages.jobaccount\n", "runner may not import controller"),
    ("kube/client.py", "from kube.fake import inmemory\n", "kube may not import kube.fake"),
    ("kube/client.py", "from controller import x\n", "kube may not import controller"),
    ("certs/_x.py", "from kube.client import KubeApi\n", "certs may not import kube"),
    (
        "controller/stages/steps.py",
        "from kube.fake.inmemory import I\n",
        "may not import kube.fake",
    ),
    ("controller/stages/steps.py", "from kube import fake\n", "may not import kube.fake"),
    ("controller/stages/steps.py", "import webhook.app\n", "controller may not import webhook"),
    (
        "controller/stages/steps.py",
        "from lab.run import seed_plan\n",
        "controller may not import lab",
    ),
    ("webhook/app.py", "from tests.jobclaim import world\n", "webhook may not import tests"),
    ("webhook/app.py", "from controller.stages.claimwrites import c\n", "webhook may not import"),
    ("webhook/app.py", "from lab import localplane\n", "webhook may not import lab"),
    ("manager/main.py", "from lab.run import main\n", "manager may not import lab"),
    ("manager/main.py", "import kube.fake.faults\n", "manager may not import kube.fake"),
    (
        "controller/stages/steps.py",
        "from jobclaim._canonical import is_digest\n",
        "jobclaim._canonical.is_digest is private",
    ),
    (
        "lab/run.py",
        "from certs._files import atomic_write\n",
        "certs._files.atomic_write is private",
    ),
    (
        "controller/stages/steps.py",
        "def f():\n    import webhook\n",
        "controller may not import webhook",
    ),
    # Past jobclaim's public surface: a submodule that is not public, by any spelling.
    (
        "controller/stages/steps.py",
        "from jobclaim.builder import RUNNER_CONTAINER\n",
        "jobclaim.builder is not jobclaim's public surface",
    ),
    (
        "webhook/app.py",
        "from jobclaim.api.schema import PlanChunk\n",
        "jobclaim.api.schema is not jobclaim's public surface",
    ),
    ("runner/run.py", "import jobclaim.envelope\n", "jobclaim.envelope is not jobclaim's public"),
    (
        "kube/client.py",
        "from jobclaim import stamps\n",
        "jobclaim.stamps is not in jobclaim's __all__",
    ),
    (
        "manager/main.py",
        "from jobclaim import seal\n",
        "jobclaim.seal is not in jobclaim's __all__",
    ),
    # The controller's rooms: each arrow pointing outward, type-only ones too.
    (
        "controller/mutationlifecycle/driver.py",
        "from controller.pieces.targetlock import Lease\n",
        "controller.mutationlifecycle may not import controller.pieces.targetlock.Lease",
    ),
    (
        "controller/pieces/targetlock.py",
        "from controller.context.passcontext import PassContext\n",
        "controller.pieces may not import controller.context.passcontext.PassContext",
    ),
    (
        "controller/context/passcontext.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from controller.stages.jobaccount import Harvest\n",
        "controller.context may not import controller.stages.jobaccount.Harvest",
    ),
    (
        "controller/stages/steps.py",
        "from controller.families.schema.records import restart_proof\n",
        "controller.stages may not import controller.families.schema.records.restart_proof",
    ),
    (
        "controller/stages/steps.py",
        "from controller.runtime import loop\n",
        "controller.stages may not import controller.runtime.loop",
    ),
    (
        "controller/families/schema/dispatch.py",
        "from controller.families.migration.dispatch import MIGRATION\n",
        "controller.families.schema may not import controller.families.migration.dispatch",
    ),
    (
        "controller/families/migration/dispatch.py",
        "from controller.runtime.loop import FAMILIES\n",
        "controller.families.migration may not import controller.runtime.loop.FAMILIES",
    ),
    # The surface is for manager and lab; a room importing it imports everything.
    (
        "controller/stages/steps.py",
        "from controller import Reconciler\n",
        "controller.stages may not import controller.Reconciler",
    ),
    ("controller/loose.py", "import enum\n", "controller.loose is in no room of the controller"),
    # Past the controller's surface, from the composition root or the lab.
    (
        "manager/main.py",
        "from controller.runtime.loop import Reconciler\n",
        "controller.runtime.loop is past controller's surface",
    ),
    (
        "lab/run.py",
        "import controller.pieces.targetlock\n",
        "controller.pieces.targetlock is past controller's surface",
    ),
    (
        "manager/main.py",
        "from controller import lease\n",
        "controller.lease is not in controller's __all__",
    ),
]


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_control_tree_passes(tmp_path: Path) -> None:
    write_tree(tmp_path, CONTROL)
    assert violations(tmp_path) == []


@pytest.mark.parametrize(("file", "added", "message"), REFUSED)
def test_one_forbidden_import_fails_the_check(
    tmp_path: Path, file: str, added: str, message: str
) -> None:
    write_tree(tmp_path, {**CONTROL, file: CONTROL.get(file, "") + added})
    problems = violations(tmp_path)
    assert len(problems) == 1, problems
    assert message in problems[0]
    assert problems[0].startswith(f"{file}:")


def test_a_package_without_a_row_fails(tmp_path: Path) -> None:
    write_tree(tmp_path, {**CONTROL, "newroom/__init__.py": ""})
    assert packages_on_disk(tmp_path) - set(ALLOWED) - UNCHECKED == {"newroom"}


CYCLES = [
    # (file, text added to it, the cycle it closes); the first row is the control.
    ("controller/pieces/vocabulary.py", "import enum\n", None),
    (
        "controller/pieces/targetlock.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from controller.pieces.lockstate import State\n",
        ["controller.pieces.lockstate", "controller.pieces.targetlock"],
    ),
]


@pytest.mark.parametrize(("file", "added", "cycle"), CYCLES)
def test_a_type_only_cycle_inside_a_room_fails(
    tmp_path: Path, file: str, added: str, cycle: list[str] | None
) -> None:
    lockstate = "from controller.pieces.targetlock import TargetLock\n"
    tree = {**CONTROL, "controller/pieces/lockstate.py": lockstate}
    write_tree(tmp_path, {**tree, file: tree.get(file, "") + added})
    found = controller_cycles(tmp_path)
    assert violations(tmp_path) == []  # the rooms allow it; only the cycle check refuses
    if cycle is None:
        assert found == []
    else:
        assert len(found) == 1
        assert sorted(set(found[0])) == cycle
