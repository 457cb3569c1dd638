"""The layer table: which of our packages may import which, and the checker that reads it.

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

Here are the table's rows (``ALLOWED``, ``JOBCLAIM_PUBLIC``, the controller's rooms in
``CONTROLLER_ROOMS``) and the pure reading of a tree against them (``violations``,
``controller_upward``, ``controller_cycles``); ``tests/test_layers.py`` holds the real
tree and a synthetic one to them, and the wheel and standalone-program tests read the
same imports (``imports_of``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

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


def controller_upward(root: Path) -> set[tuple[str, str]]:
    """Each (file, module) a controller room imports against the arrows, none excused."""
    return {
        (imp.file, imp.module)
        for unit, path in checked_files(root)
        if unit == "controller"
        for imp in imports_of(path, root)
        if room_problems(imp, module_name(path, root), frozenset())
    }


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
