"""Offline installs of the project on every supported Python: a wheelhouse per version.

``pip install`` of the project needs its pinned dependencies as wheels built for the
Python it installs into (pglast, orjson, pydantic-core and cryptography are compiled),
and the machines that run the tests must not need PyPI to prove an install works.
So this fills, once, ``build/wheelhouse/<python>/`` with every dependency's wheel for
that Python and ``build/wheelhouse/backend/`` with the build backend pyproject.toml
pins (``pip download``, from PyPI: the one online step). Afterwards the project's own
wheel is built from the checkout with ``--no-index`` (its isolated build environment
installed from ``backend/``), and an install is ``pip install --no-index
--find-links ...``: no network.

    python -m lab.wheelhouse            # fill what is missing; cold: ~1 min, warm: instant

The Pythons are pyenv's (``$PYENV_ROOT/versions/3.X.*``, else ``~/.pyenv``): the
project supports every minor version in ``SUPPORTED``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
WHEELHOUSE: Final = ROOT / "build" / "wheelhouse"
BACKEND: Final = WHEELHOUSE / "backend"
SUPPORTED: Final = ("3.11", "3.12", "3.13")
# Written last into a directory that is complete, so a download that stopped midway is
# not taken for a wheelhouse.
COMPLETE: Final = ".complete"


class WheelhouseError(RuntimeError):
    """A wheelhouse cannot be filled, or a Python it needs is missing."""


def pyenv_root() -> Path:
    found = shutil.which("pyenv")
    if found is not None:
        done = subprocess.run([found, "root"], capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return Path.home() / ".pyenv"


def python_for(minor: str) -> Path:
    """The newest pyenv interpreter of ``minor`` (``3.12`` -> .../3.12.1/bin/python3.12)."""
    versions = sorted(
        (pyenv_root() / "versions").glob(f"{minor}.*"),
        key=lambda p: tuple(int(part) for part in p.name.split(".") if part.isdigit()),
    )
    for version in reversed(versions):
        interpreter = version / "bin" / f"python{minor}"
        if interpreter.is_file():
            return interpreter
    raise WheelhouseError(
        f"no Python {minor} in {pyenv_root() / 'versions'} (install it with pyenv)"
    )


def dependencies() -> list[str]:
    """The project's pinned runtime dependencies, as pyproject.toml names them."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        found: list[str] = tomllib.load(handle)["project"]["dependencies"]
    return found


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        version: str = tomllib.load(handle)["project"]["version"]
    return version


def _pip(python: Path | str, command: str, *args: str | Path) -> list[str | Path]:
    return [python, "-m", "pip", command, "--quiet", "--disable-pip-version-check", *args]


def _run(argv: Sequence[str | Path], what: str) -> None:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise WheelhouseError(f"{what} failed:\n{tail}")


def fill_dependencies(minor: str) -> Path:
    """``build/wheelhouse/<minor>``: every dependency wheel for that Python."""
    directory = WHEELHOUSE / minor
    if (directory / COMPLETE).is_file():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    python = python_for(minor)
    _run(
        _pip(python, "download", "--only-binary=:all:", "--dest", directory, *dependencies()),
        f"downloading the dependency wheels for Python {minor}",
    )
    (directory / COMPLETE).write_text("")
    return directory


def fill_backend() -> Path:
    """``build/wheelhouse/backend``: the build backend pyproject.toml requires."""
    if (BACKEND / COMPLETE).is_file():
        return BACKEND
    BACKEND.mkdir(parents=True, exist_ok=True)
    with (ROOT / "pyproject.toml").open("rb") as handle:
        requires: list[str] = tomllib.load(handle)["build-system"]["requires"]
    _run(
        _pip(sys.executable, "download", "--only-binary=:all:", "--dest", BACKEND, *requires),
        "downloading the build backend",
    )
    (BACKEND / COMPLETE).write_text("")
    return BACKEND


def build_project(out: Path) -> Path:
    """The project's wheel, built from this checkout into ``out`` with no network."""
    _run(
        _pip(
            sys.executable,
            "wheel",
            *("--no-deps", "--no-index", "--find-links", fill_backend()),
            *("--wheel-dir", out, ROOT),
        ),
        "building the project's wheel",
    )
    return out / f"ptah_operator-{project_version()}-py3-none-any.whl"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.wheelhouse", description="Fill build/wheelhouse for offline installs."
    )
    parser.add_argument("--python", action="append", choices=SUPPORTED, help="only these")
    args = parser.parse_args(argv)
    try:
        fill_backend()
        for minor in args.python or SUPPORTED:
            print(f"{fill_dependencies(minor)}")
    except WheelhouseError as error:
        print(f"wheelhouse: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
