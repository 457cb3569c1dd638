"""Reading an OCI archive the way a registry and a runtime do, independently of the build.

``make images`` writes ``build/images/<name>.oci.tar`` and ``<name>.digest``; these
helpers open the archive with nothing but the standard library, check every digest
it names against the bytes it holds, and unpack its layers (whiteouts applied) into a
root filesystem a runtime can start.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class Archive:
    path: Path
    manifest_digest: str
    manifest: dict[str, Any]
    config: dict[str, Any]

    @property
    def user(self) -> str:
        return str(self.config["config"].get("User", ""))

    @property
    def entrypoint(self) -> list[str]:
        return list(self.config["config"].get("Entrypoint") or [])

    @property
    def env(self) -> list[str]:
        return list(self.config["config"].get("Env") or [])


def _blob(tar: tarfile.TarFile, digest: str) -> bytes:
    algorithm, _, hexdigest = digest.partition(":")
    handle = tar.extractfile(f"blobs/{algorithm}/{hexdigest}")
    assert handle is not None, f"the archive holds no blob {digest}"
    data = handle.read()
    assert f"sha256:{hashlib.sha256(data).hexdigest()}" == digest, f"blob {digest} is corrupt"
    return data


def read_archive(path: Path) -> Archive:
    """The archive's one image: its manifest digest (as index.json names it) and config."""
    with tarfile.open(path) as tar:
        handle = tar.extractfile("index.json")
        assert handle is not None, f"{path} holds no index.json"
        index = json.load(handle)
        (entry,) = index["manifests"]
        manifest = json.loads(_blob(tar, entry["digest"]))
        config = json.loads(_blob(tar, manifest["config"]["digest"]))
    return Archive(path, entry["digest"], manifest, config)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def unpack(archive: Archive, root: Path) -> None:
    """Apply the layers in order into root, as a runtime's snapshotter would."""
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive.path) as outer:
        for layer in archive.manifest["layers"]:
            algorithm, _, hexdigest = layer["digest"].partition(":")
            blob = outer.extractfile(f"blobs/{algorithm}/{hexdigest}")
            assert blob is not None, f"the archive holds no layer {layer['digest']}"
            with tarfile.open(fileobj=blob, mode="r|*") as tar:
                for member in tar:
                    name = member.name.removeprefix("./").lstrip("/")
                    parent, base = posixpath.split(name)
                    if base == OPAQUE:
                        for child in (root / parent).iterdir():
                            _remove(child)
                    elif base.startswith(WHITEOUT):
                        _remove(root / parent / base[len(WHITEOUT) :])
                    else:
                        target = root / name
                        if target.is_symlink() or (target.exists() and not member.isdir()):
                            _remove(target)
                        # Our own archive, unpacked as root with its owners and modes.
                        tar.extract(member, root, numeric_owner=True, filter="fully_trusted")


# Where `make images` writes its archives.
BUILT = Path(__file__).resolve().parents[2] / "build" / "images"


def read_built(names: Iterable[str]) -> dict[str, Archive]:
    """The archives ``make images`` wrote for ``names``, each read and checked; a missing
    one fails with the command that builds it (never a skip)."""
    found = {}
    for name in names:
        path = BUILT / f"{name}.oci.tar"
        assert path.is_file(), f"{path} is missing: run `make images`"
        found[name] = read_archive(path)
    return found
