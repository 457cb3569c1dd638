"""The layer table: which of our packages may import which, and that the tree holds it.

Arrows point inward only. ``jobclaim`` is the contract both sides share, so it imports
nothing of ours; the Job's program (``runner``) ships in the runner image with only
that contract beside it; the in-memory double (``kube.fake``) and the checkout-only
tooling (``lab``) are never reached from code that ships, so a production path can
never run against a stand-in. A private module (``_name``) is its package's own
business: another package that reaches into it breaks when it moves. The same holds for
``jobclaim`` as a whole: the shipping packages use its public surface only (the names
``jobclaim/__init__.py`` lists in ``__all__`` and the few submodules named in
``JOBCLAIM_PUBLIC``), so its modules can be split, merged or renamed without a change on
either side, and a rule the contract holds is not re-derived from its internals.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Who may import whom. A unit is a top-level package, except ``kube.fake``, which is
# its own unit so that importing ``kube`` does not admit the double. Production units
# never import ``kube.fake``, ``lab`` or ``tests``: none lists them.
ALLOWED: dict[str, frozenset[str]] = {
    "jobclaim": frozenset(),
    # The Job's program: the operation tables and error types of the contract only.
    "runner": frozenset({"jobclaim"}),
    # Implementations of jobclaim.apiserver; the double may reuse the adapter's pieces.
    "kube": frozenset({"jobclaim"}),
    "kube.fake": frozenset({"jobclaim", "kube"}),
    # Certificates; the webhook configurations it rotates are reached through the
    # jobclaim.apiserver protocol, never through a concrete client.
    "certs": frozenset({"jobclaim"}),
    # The controller reads a Job's result through runner's record/summary protocol.
    "controller": frozenset({"jobclaim", "runner", "kube"}),
    # The webhook serves with certs' live TLS reload and reads through kube.client; it
    # judges result records (and takes them as evidence) through runner's protocol.
    "webhook": frozenset({"jobclaim", "kube", "certs", "runner"}),
    # The kubectl plugin people review and decide with: the contract and the adapter,
    # nothing of the controller's or the webhook's internals.
    "kubectl_ptah": frozenset({"jobclaim", "kube"}),
    # The composition root (filled by the manager issue).
    "manager": frozenset({"jobclaim", "runner", "kube", "controller", "webhook", "certs"}),
    # Checkout-only: may use everything that ships, and the double.
    "lab": frozenset(
        {
            "jobclaim",
            "runner",
            "kube",
            "kube.fake",
            "controller",
            "webhook",
            "certs",
            "manager",
            "kubectl_ptah",
        }
    ),
}
# Ours, but outside the table's rows: they may import anything above (and are never
# imported by it, since no row lists them).
UNCHECKED = frozenset({"tests", "benchmarks"})
OURS = frozenset({unit.split(".")[0] for unit in ALLOWED} | UNCHECKED)

# jobclaim's public surface beyond the names its ``__init__`` exports: the wire and CRD
# models, the API boundary every implementation and caller speaks, the error tree, and
# the one RFC 3339 format and clock. Everything else in jobclaim is reached through
# ``jobclaim`` itself. jobclaim's own modules and the checkout-only ``lab`` (like
# tests) are not held to it.
# jobclaim.crds: the CRDs the models generate, which the chart ships and the manager
# image's CRD upgrade hook (manager.crdapply) applies.
JOBCLAIM_PUBLIC = frozenset(
    {
        "jobclaim",
        "jobclaim.api",
        "jobclaim.apiserver",
        "jobclaim.crds",
        "jobclaim.errors",
        "jobclaim.times",
    }
)
SURFACE_EXEMPT = frozenset({"jobclaim", "lab"})

# The controller's rooms, innermost first, and the rooms each may import (its own
# always). ``controller`` itself is the package's ``__init__``: the surface the
# composition root and the lab import (its ``__all__``), which no room imports back.
# ``controller.families`` holds only its docstring. A module outside every room fails.
CONTROLLER_CORE = frozenset({"controller.mutationlifecycle", "controller.pieces"})
CONTROLLER_BELOW_STAGES = CONTROLLER_CORE | {"controller.context"}
CONTROLLER_BELOW_FAMILIES = CONTROLLER_BELOW_STAGES | {"controller.stages"}
CONTROLLER_FAMILIES = frozenset({"controller.families.schema", "controller.families.migration"})
CONTROLLER_ROOMS: dict[str, frozenset[str]] = {
    # The pure core: the dispatch order, the boundary, the release rule.
    "controller.mutationlifecycle": frozenset(),
    # What a pass is built from and that knows nothing of a pass.
    "controller.pieces": frozenset({"controller.mutationlifecycle"}),
    # One pass's environment: PassContext and the Family protocol.
    "controller.context": CONTROLLER_CORE,
    # The stages both families share; they ask the Family, never a family's module.
    "controller.stages": CONTROLLER_BELOW_STAGES,
    "controller.families": frozenset(),
    # Each family: its dispatch and its records; never the other family.
    "controller.families.schema": CONTROLLER_BELOW_FAMILIES,
    "controller.families.migration": CONTROLLER_BELOW_FAMILIES,
    # One pass in order, the manager loop, leader election.
    "controller.runtime": CONTROLLER_BELOW_FAMILIES | CONTROLLER_FAMILIES,
    "controller": frozenset(
        {"controller.runtime", "controller.families"} | CONTROLLER_BELOW_FAMILIES
    ),
}
# Upward imports the tree still holds, by file and module, so no file gains one; the
# list may only shrink. Empty since issue #28: a shared stage reaches a family only
# through the ``Family`` protocol and the records the pass gathered.
CONTROLLER_LEFT_UPWARD: frozenset[tuple[str, str]] = frozenset()


def unit_of(module: str) -> str | None:
    """The table's unit a dotted module name belongs to, or None when it is not ours."""
    parts = module.split(".")
    if parts[0] not in OURS:
        return None
    if parts[:2] == ["kube", "fake"]:
        return "kube.fake"
    return parts[0]


def is_private(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in module.split("."))


def room_of(module: str) -> str | None:
    """The controller room a dotted name belongs to (the longest row it starts with)."""
    rooms = [r for r in CONTROLLER_ROOMS if module == r or module.startswith(f"{r}.")]
    return max(rooms, key=len) if rooms else None


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    target: str  # the dotted name imported, ``from a.b import c`` giving ``a.b.c``
    module: str  # the module the import reads: ``a.b`` for ``from a.b import c``
    name: str | None = None  # ``c`` for ``from a.b import c``; None for ``import a.b``


def imports_of(path: Path, root: Path) -> list[Import]:
    """Every absolute import in a file (inside functions and TYPE_CHECKING too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = str(path.relative_to(root))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(Import(rel, node.lineno, alias.name, alias.name) for alias in node.names)
        # Relative imports stay inside their own package, which the table allows.
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend(
                Import(rel, node.lineno, f"{node.module}.{alias.name}", node.module, alias.name)
                for alias in node.names
            )
    return found


def checked_files(root: Path) -> list[tuple[str, Path]]:
    """Each module of a unit in the table, with its unit (tests and benchmarks are not)."""
    found: list[tuple[str, Path]] = []
    for top in sorted({unit.split(".")[0] for unit in ALLOWED}):
        for path in sorted((root / top).rglob("*.py")):
            unit = unit_of(".".join(path.relative_to(root).with_suffix("").parts))
            assert unit is not None
            found.append((unit, path))
    return found


def jobclaim_exports(root: Path, package: str = "jobclaim") -> frozenset[str]:
    """The names ``<package>/__init__.py`` lists in ``__all__`` (read, not imported)."""
    init = root / package / "__init__.py"
    if not init.is_file():
        return frozenset()
    for node in ast.parse(init.read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return frozenset(
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return frozenset()


def surface_problem(imp: Import, exports: frozenset[str]) -> str | None:
    """Why an import reaches past jobclaim's public surface, or None when it does not."""
    if imp.module.split(".")[0] != "jobclaim":
        return None
    if imp.module not in JOBCLAIM_PUBLIC:
        return f"{imp.module} is not jobclaim's public surface"
    if imp.module == "jobclaim" and imp.name is not None:
        submodule = f"jobclaim.{imp.name}"
        if imp.name not in exports and submodule not in JOBCLAIM_PUBLIC:
            return f"jobclaim.{imp.name} is not in jobclaim's __all__"
    return None


def controller_surface_problem(imp: Import, exports: frozenset[str]) -> str | None:
    """Why an import from outside ``controller`` reaches past its surface, or None."""
    if imp.module.split(".")[0] != "controller":
        return None
    if imp.module != "controller":
        return f"{imp.module} is past controller's surface (import it from controller)"
    if imp.name is not None and imp.name not in exports:
        return f"controller.{imp.name} is not in controller's __all__"
    return None


def room_problems(imp: Import, source: str, left: frozenset[tuple[str, str]]) -> list[str]:
    """Why an import inside ``controller`` goes against the rooms' arrows, if it does."""
    room = room_of(source)
    target = room_of(imp.target)
    if room is None or target is None or target == room or target in CONTROLLER_ROOMS[room]:
        return []
    if (imp.file, imp.module) in left:
        return []
    return [f"{imp.file}:{imp.line}: {room} may not import {imp.target}"]


def violations(
    root: Path,
    only: str | None = None,
    left: frozenset[tuple[str, str]] = CONTROLLER_LEFT_UPWARD,
) -> list[str]:
    """Each import in ``root``'s checked units that the table refuses, as a sentence."""
    problems: list[str] = []
    exports = jobclaim_exports(root)
    controller_exports = jobclaim_exports(root, "controller")
    for source_unit, path in checked_files(root):
        if only is not None and source_unit != only:
            continue
        own_package = source_unit.split(".")[0]
        source = module_name(path, root)
        if own_package == "controller" and room_of(source) == "controller" != source:
            problems.append(f"{path.relative_to(root)}:1: {source} is in no room of the controller")
        for imp in imports_of(path, root):
            if own_package == "controller":
                problems.extend(room_problems(imp, source, left))
            elif "controller" in ALLOWED[source_unit] and (
                problem := controller_surface_problem(imp, controller_exports)
            ):
                problems.append(f"{imp.file}:{imp.line}: {problem}")
            target_unit = unit_of(imp.target)
            if target_unit is None:
                continue
            where = f"{imp.file}:{imp.line}"
            if target_unit != source_unit and target_unit not in ALLOWED[source_unit]:
                problems.append(f"{where}: {source_unit} may not import {imp.target}")
            if imp.target.split(".")[0] != own_package and is_private(imp.target):
                problems.append(f"{where}: {imp.target} is private to its package")
            elif own_package not in SURFACE_EXEMPT and (problem := surface_problem(imp, exports)):
                problems.append(f"{where}: {problem}")
    return problems


def packages_on_disk(root: Path) -> set[str]:
    return {p.parent.name for p in root.glob("*/__init__.py")}


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


def controller_upward(root: Path) -> set[tuple[str, str]]:
    """Each (file, module) a controller room imports against the arrows, none excused."""
    return {
        (imp.file, imp.module)
        for unit, path in checked_files(root)
        if unit == "controller"
        for imp in imports_of(path, root)
        if room_problems(imp, module_name(path, root), frozenset())
    }


def test_the_controllers_left_upward_imports_are_exactly_the_list() -> None:
    # A stage that stops importing a family must leave the list, so it never regrows.
    assert controller_upward(ROOT) == CONTROLLER_LEFT_UPWARD


def surface_of(init: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """controller/__init__.py read, not imported: its TYPE_CHECKING imports (name to
    module), its ``_HOMES`` table and its ``__all__``."""
    imported: dict[str, str] = {}
    homes: dict[str, str] = {}
    exported: list[str] = []
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If):
            for sub in node.body:
                if isinstance(sub, ast.ImportFrom) and sub.module:
                    imported.update({a.asname or a.name: sub.module for a in sub.names})
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
        if isinstance(target, ast.Name) and node.value is not None:  # type: ignore[union-attr]
            value = ast.literal_eval(node.value)  # type: ignore[union-attr]
            if target.id == "_HOMES":
                homes = value
            elif target.id == "__all__":
                exported = value
    return imported, homes, exported


def test_the_controllers_surface_is_declared_once_for_types_and_once_for_use() -> None:
    imported, homes, exported = surface_of(ROOT / "controller" / "__init__.py")
    assert len(exported) > 10
    assert sorted(exported) == sorted(imported) == sorted(homes)
    assert homes == imported


def controller_cycles(root: Path) -> list[list[str]]:
    """Import cycles among the controller's modules, type-only imports included."""
    paths = {module_name(p, root): p for u, p in checked_files(root) if u == "controller"}

    def module_for(target: str) -> str | None:
        while target and target not in paths:
            target = target.rpartition(".")[0]
        return target or None

    edges = {
        name: {
            m
            for imp in imports_of(path, root)
            if (m := module_for(imp.target)) is not None
            and m != name
            # A package's __init__ runs before its modules: importing a sibling through
            # it is not a cycle of the modules themselves.
            and not name.startswith(f"{m}.")
        }
        for name, path in paths.items()
    }
    found: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for nxt in sorted(edges[name]):
            if state.get(nxt) == 1:
                found.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    return found


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


def _modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_runner_imports_only_jobclaim_pydantic_and_the_standard_library() -> None:
    # The runner is copied into the executor's container as one directory; whatever
    # it imports must be in that directory (runner.install.PACKAGES).
    allowed = {"jobclaim", "pydantic", "pydantic_core"} | set(sys.stdlib_module_names)
    runner = ROOT / "runner"
    found = {
        str(f.relative_to(ROOT)): sorted(
            m for m in _modules(f) if m.split(".")[0] not in allowed and not m.startswith("runner")
        )
        for f in sorted(runner.rglob("*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {}


# -- what a test module may import of tests ---------------------------------------------
# A module under tests/ imports, of tests, only tests.support (the worlds, tables and
# fixture plugins more than one folder uses) and non-test helpers of its own folder
# (tests/lifecycle/backends.py for tests/lifecycle). Never a conftest (its fixtures reach
# tests through pytest, shared ones from tests/conftest.py's plugins) and never a test_*
# module (its tests would be collected again, and two files' changes tied). tests.support
# imports only tests.support. The imports of test modules not yet moved into
# tests.support are listed one by one, so the list only shrinks.
TESTS_LEFT = frozenset(
    {
        ("tests.cluster.test_faults_alerts", "tests.cluster.test_faults_kill"),
        ("tests.cluster.test_faults_kill", "tests.cluster.test_faults_webhook"),
        ("tests.cluster.test_faults_podloss", "tests.cluster.test_faults_webhook"),
        ("tests.cluster.test_faults_upgrade", "tests.cluster.test_faults_podloss"),
        ("tests.gitops.test_kstatus", "tests.gitops.test_argocd_health"),
        ("tests.jobclaim.test_one_rule_each", "tests.jobclaim.test_plans_and_live_job"),
        ("tests.labexecutor.test_runner_contract", "tests.runner.test_built_job_e2e"),
        ("tests.labexecutor.test_runner_contract", "tests.runner.test_runner_e2e"),
        ("tests.labexecutor.test_standalone", "tests.test_layers"),
        ("tests.lifecycle.test_continuity_loss", "tests.lifecycle.test_dispatch_order"),
        ("tests.lifecycle.test_snapshot_pin", "tests.lifecycle.test_dispatch_order"),
        ("tests.outcomes.test_freshness_life", "tests.outcomes.test_planning_life"),
        ("tests.realapi.test_freshness_realapi", "tests.realapi.test_planning_realapi"),
        ("tests.realapi.test_watch_scope", "tests.realapi.test_manager_process"),
        ("tests.realapi.test_webhook_registered", "tests.webhook.test_real_apiserver"),
        ("tests.test_wheel", "tests.test_layers"),
        ("tests.webhook.test_realm_rule", "tests.webhook.test_decisions"),
        ("tests.webhook.test_rebuild_memo", "tests.webhook.test_job_create"),
    }
)


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
    refused = {pair for pair in found if refusal_of_test_import(*pair)}
    assert sorted(refused - TESTS_LEFT) == []
    assert sorted(TESTS_LEFT - refused) == [], "moved: take it off TESTS_LEFT"


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
