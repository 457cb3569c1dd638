"""``python3 -I -m runner.install DIR``: the runner, made to run anywhere.

The operation Pod's main container is the stock ptah image, which may hold nothing
but ptah: no shell, no Python, no C library (docs/architecture.md, "The operation
Job's layout"). So the init container from the manager's image copies into ``DIR``
(an in-memory volume) a runner that needs none of them:

    DIR/lib/ld.so                 the dynamic loader this interpreter runs under
    DIR/lib/<shared objects>      every library mapped into this process, by its names
    DIR/bin/python3               the interpreter
    DIR/lib/python3.X/            the standard library (no tests, no GUI, no installers),
                                  and beside it the runner, jobclaim and what they import

and the main container starts it through the copied loader,
``DIR/lib/ld.so --library-path DIR/lib DIR/bin/python3 -I -m runner``, so
nothing of the executor image's own filesystem is used but ptah itself. The
interpreter finds its library from its own path (``lib/python3.X/os.py`` beside
``bin/``), the way CPython locates its prefix. The packages sit in that directory
itself, not in a ``site-packages`` below it: the directory is on ``sys.path`` from the
prefix alone, while ``site-packages`` is added by the ``site`` module, which
distributions patch (Debian's, the manager image's Python, adds only ``dist-packages``
directories, so a runner there failed with "No module named runner").

The libraries are the ones this process has mapped after importing the whole
runner: what the runner needs is exactly what this interpreter loaded to become it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from typing import Final

# Imported before the libraries are listed, so every extension (hashlib's libcrypto,
# pydantic_core) has mapped what it links against.
RUNNER_MODULES: Final = ("runner.run", "runner.__main__")
PACKAGES: Final = (
    "runner",
    "jobclaim",
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "annotated_types",
    "typing_inspection",
    "orjson",
)
SKIPPED_STDLIB: Final = frozenset(
    {
        "site-packages",
        "dist-packages",
        "test",
        "idlelib",
        "tkinter",
        "turtledemo",
        "ensurepip",
        "lib2to3",
        "pydoc_data",
        "distutils",
        # Optimized bytecode the runner never asks for, and test extension modules.
        "*.opt-1.pyc",
        "*.opt-2.pyc",
        "_test*",
        "_ctypes_test*",
        "xxlimited*",
        "config-*",
    }
)


def mapped_objects(maps: str) -> list[Path]:
    """The shared objects a /proc/<pid>/maps text lists, each once, in order."""
    found: dict[str, None] = {}
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in Path(parts[5]).name:
            found.setdefault(parts[5], None)
    return [Path(p) for p in found]


def names_of(library: Path) -> list[str]:
    """Every name a library is reached by in its directory (its soname among them)."""
    names = {library.name}
    try:
        for entry in library.parent.iterdir():
            same_stem = entry.name.startswith(library.name.split(".so", 1)[0] + ".so")
            if same_stem and entry.resolve() == library:
                names.add(entry.name)
    except OSError:
        pass
    return sorted(names)


def _copy_libraries(objects: Iterable[Path], lib: Path, skip: tuple[Path, ...]) -> None:
    for library in objects:
        if any(library.is_relative_to(root) for root in skip):
            continue  # an extension module: copied with its package
        names = names_of(library)
        if library.name.startswith(("ld-linux", "ld64")):
            names.append("ld.so")
        # One copy; its other names are links to it, as in the directory it came from.
        shutil.copy2(library, lib / names[0])
        for name in names[1:]:
            (lib / name).symlink_to(names[0])


def _copy_package(name: str, site: Path) -> None:
    module = importlib.import_module(name)
    origin = Path(module.__file__ or "")
    if origin.name == "__init__.py":
        source, target = origin.parent, site / name
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("tests"))
    else:
        shutil.copy2(origin, site / origin.name)


def install(target: Path) -> None:
    for name in RUNNER_MODULES:
        if name.endswith("__main__"):
            continue  # running it would run the runner
        importlib.import_module(name)
    for name in PACKAGES:
        importlib.import_module(name)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(
        sysconfig.get_path("stdlib", scheme="posix_prefix", vars={"base": sys.base_prefix})
    )
    lib, bin_dir = target / "lib", target / "bin"
    libpython = lib / version
    # Beside the standard library: on sys.path whatever a distribution's site.py does.
    site = libpython
    for directory in (lib, bin_dir, site):
        directory.mkdir(parents=True, exist_ok=True)
    maps = Path("/proc/self/maps").read_text()
    site_roots = tuple(Path(p).resolve() for p in sys.path if "site-packages" in p)
    _copy_libraries(mapped_objects(maps), lib, (stdlib.resolve(), *site_roots))
    shutil.copy2(Path(sys.executable).resolve(), bin_dir / "python3")
    ignored = shutil.ignore_patterns(*SKIPPED_STDLIB)
    shutil.copytree(stdlib, libpython, dirs_exist_ok=True, ignore=ignored, symlinks=False)
    for name in PACKAGES:
        _copy_package(name, site)
    # Readable by the Pod's user, writable by nobody once the init container is gone.
    for root, dirs, files in os.walk(target):
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                path.chmod(0o555 if os.access(path, os.X_OK) else 0o444)
        for name in dirs:
            (Path(root) / name).chmod(0o555)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].startswith("/"):
        print("usage: python3 -I -m runner.install /ABSOLUTE/DIR", file=sys.stderr)
        return 2
    install(Path(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
