"""What each image of ``make images`` is built from (read by images/build.sh).

    python images/inputs.py fingerprint IMAGE BASE_ID CONSTRAINTS
        sha256 over every file IMAGE is built from, the base image's ID, the
        packaging tables of pyproject.toml and the pinned versions: an image whose
        fingerprint is the one recorded beside its archive is not rebuilt (a warm
        ``make images`` says "cached").
    python images/inputs.py requirements lab-executor
        the executor's requirement lines, with the versions pyproject.toml pins.

The lab executor (``lab/executor``) is not in the wheel, so its image installs its
dependencies by name: the ``lab`` extra (psycopg) and the project dependencies it
imports, each at the version pyproject.toml pins, so the image runs exactly what the
tests ran. A dependency missing here fails the image's smoke check (``ptah version``
imports every command's module).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
IMAGES: Final = ("manager", "lab-executor", "lab-manager", "scratch-postgresql", "scratch-mariadb")
# The scratch database images hold no Python package of this project: Debian's server,
# and the entry point and init file of images/scratch. The pinned Python versions and
# pyproject.toml's packaging do not shape them, so a change there rebuilds neither.
SCRATCH_IMAGES: Final = ("scratch-postgresql", "scratch-mariadb")
# The lab layer the lab's manager image adds to the manager image.
LAB_MANAGER_FILES: Final = ("lab/__init__.py", "lab/manager.py", "lab/labfaults.py")
# What `python -m lab.executor` imports beyond the standard library and psycopg.
EXECUTOR_DISTRIBUTIONS: Final = ("pydantic", "httpx", "pyyaml")
# Both images are shaped by the build script and by this file.
COMMON_INPUTS: Final = ("images/build.sh", "images/inputs.py")
# Of pyproject.toml, only what decides what is installed: an edit to a test marker or
# a linter setting must not rebuild two images. The wheel's long description
# (README.md) is left out for the same reason: bytes no program reads.
PACKAGING_TABLES: Final = (("build-system",), ("project",), ("tool", "setuptools"))


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    if match is None:
        raise SystemExit(f"images: cannot read the requirement {requirement!r}")
    return match.group(0).lower().replace("_", "-")


def executor_requirements() -> list[str]:
    project = _pyproject()["project"]
    pinned = {_name(r): r for r in project["dependencies"]}
    missing = [name for name in EXECUTOR_DISTRIBUTIONS if name not in pinned]
    if missing:
        raise SystemExit(f"images: pyproject.toml pins no {', '.join(missing)}")
    return [*project["optional-dependencies"]["lab"], *(pinned[n] for n in EXECUTOR_DISTRIBUTIONS)]


def packaged_directories() -> list[str]:
    """The top-level packages the wheel holds, from pyproject.toml's include patterns."""
    patterns = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*").rstrip(".") for p in patterns})


def unpackaged_pathspecs() -> list[str]:
    """What the exclude patterns leave out of those packages (kube/fake), as git
    pathspecs: the wheel does not hold it, so a change to it rebuilds no image."""
    patterns = _pyproject()["tool"]["setuptools"]["packages"]["find"].get("exclude", [])
    return sorted({f":(exclude){p.rstrip('*').rstrip('.').replace('.', '/')}" for p in patterns})


def input_paths(image: str) -> list[str]:
    own = [f"images/{image}"]
    if image == "manager":
        return [*COMMON_INPUTS, *own, *packaged_directories(), *unpackaged_pathspecs()]
    if image == "lab-manager":
        # Built FROM the manager image: its inputs are the manager's and the lab layer.
        return [*input_paths("manager"), *own, *LAB_MANAGER_FILES]
    if image == "lab-executor":
        return [*COMMON_INPUTS, *own, "lab/__init__.py", "lab/executor"]
    if image in SCRATCH_IMAGES:
        return [*COMMON_INPUTS, *own, "images/scratch"]
    raise SystemExit(f"images: no image named {image!r} (known: {', '.join(IMAGES)})")


def input_files(paths: list[str]) -> list[str]:
    """Tracked and untracked-but-not-ignored files under paths (never caches, never .venv)."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "--", *paths],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return sorted({f for f in listed if f and (ROOT / f).is_file()})


def packaging() -> bytes:
    """The tables of pyproject.toml that decide what the images install, canonically."""
    project = _pyproject()
    chosen = {}
    for path in PACKAGING_TABLES:
        table: Any = project
        for key in path:
            table = table.get(key, {})
        chosen[".".join(path)] = table
    return json.dumps(chosen, sort_keys=True).encode()


def fingerprint(image: str, base_id: str, constraints: Path) -> str:
    digest = hashlib.sha256()
    digest.update(f"image {image}\nbase {base_id}\n".encode())
    if image not in SCRATCH_IMAGES:
        digest.update(packaging())
        digest.update(constraints.read_bytes())
    for name in input_files(input_paths(image)):
        digest.update(f"\0{name}\0".encode())
        digest.update((ROOT / name).read_bytes())
    return f"sha256:{digest.hexdigest()}"


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "fingerprint":
        print(fingerprint(argv[1], argv[2], Path(argv[3])))
        return 0
    if argv == ["requirements", "lab-executor"]:
        print("\n".join(executor_requirements()))
        return 0
    print(
        "usage: inputs.py fingerprint IMAGE BASE_ID CONSTRAINTS | requirements lab-executor",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
