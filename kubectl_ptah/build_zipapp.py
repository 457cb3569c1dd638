"""Build ``kubectl ptah`` as one file for krew: ``python -m kubectl_ptah.build_zipapp OUT``.

Writes into OUT:

- ``kubectl-ptah``: a zipapp (``#!/usr/bin/env python3``) of ``kubectl_ptah``,
  ``jobclaim`` and ``kube`` (never ``kube.fake``, as the wheel never holds it), with
  the version it was built from in ``kubectl_ptah/VERSION``;
- ``kubectl-ptah.tar.gz``: that file alone, executable, as krew unpacks it;
- ``ptah.yaml``: ``kubectl_ptah/krew/ptah.yaml`` with the version, the archive's
  SHA-256, ``--homepage`` and ``--uri`` filled in.

Only our code travels. The dependencies do not: pydantic-core, orjson and pglast are
compiled for one platform and Python, so the archive runs on a Python 3.11 that has
ptah-operator's pinned runtime dependencies installed (the manifest's caveats say so).
Run from a checkout, with the project installed (its version comes from there).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import sys
import tarfile
import tempfile
import zipapp
from pathlib import Path
from string import Template

from kubectl_ptah.cli import version

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kubectl_ptah", "jobclaim", "kube")
EXCLUDED = (ROOT / "kube" / "fake",)  # the in-memory double never ships
PROGRAM = "kubectl-ptah"
# zipapp's own __main__ drops main()'s return value; the exit code is the contract.
MAIN = "import sys\n\nfrom kubectl_ptah.cli import main\n\nsys.exit(main())\n"
PLACEHOLDER = "https://example.invalid/ptah-operator"


def _ignore(directory: str, names: list[str]) -> set[str]:
    here = Path(directory)
    return {
        n
        for n in names
        if n == "__pycache__" or n.endswith(".pyc") or here / n in EXCLUDED or n == "krew"
    }


def build_zipapp(out: Path, version: str) -> Path:
    """The one-file program at ``out/kubectl-ptah``."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        for package in PACKAGES:
            shutil.copytree(ROOT / package, stage / package, ignore=_ignore)
        (stage / "kubectl_ptah" / "VERSION").write_text(version + "\n", encoding="utf-8")
        (stage / "__main__.py").write_text(MAIN, encoding="utf-8")
        target = out / PROGRAM
        zipapp.create_archive(stage, target, interpreter="/usr/bin/env python3", compressed=True)
    return target


def build_tarball(program: Path) -> Path:
    """``program`` alone in a tar.gz, mode 0755, owned by nobody in particular."""
    target = program.parent / f"{PROGRAM}.tar.gz"
    data = program.read_bytes()
    info = tarfile.TarInfo(PROGRAM)
    info.size, info.mode, info.mtime = len(data), 0o755, 0
    with tarfile.open(target, "w:gz") as archive:
        archive.addfile(info, io.BytesIO(data))
    return target


def manifest(tarball: Path, version: str, *, homepage: str, uri: str) -> Path:
    """The krew manifest for ``tarball``, beside it."""
    source = (ROOT / "kubectl_ptah" / "krew" / "ptah.yaml").read_text()
    # The template's own comments say how to fill it in; the filled manifest drops them.
    template = Template("".join(ln for ln in source.splitlines(True) if not ln.startswith("#")))
    sha256 = hashlib.sha256(tarball.read_bytes()).hexdigest()
    text = template.substitute(version=version, sha256=sha256, homepage=homepage, uri=uri)
    target = tarball.parent / "ptah.yaml"
    target.write_text(text, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubectl_ptah.build_zipapp")
    parser.add_argument("out", type=Path, help="the directory to write into")
    parser.add_argument("--version", dest="version_string", help="default: the installed one")
    parser.add_argument("--homepage", default=PLACEHOLDER)
    parser.add_argument("--uri", help="where the release publishes the tar.gz")
    args = parser.parse_args(argv)
    found = args.version_string or version()
    if found is None:
        sys.stderr.write("build_zipapp: no version: install ptah-operator or pass --version\n")
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    tarball = build_tarball(build_zipapp(args.out, found))
    uri = args.uri or f"{PLACEHOLDER}/releases/v{found}/{tarball.name}"
    written = manifest(tarball, found, homepage=args.homepage, uri=uri)
    sys.stdout.write(f"{args.out / PROGRAM}\n{tarball}\n{written}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
