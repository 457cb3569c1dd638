"""The lab's own container images, built without a daemon and pushed to its registry.

Nothing can be pulled from outside this machine, so the images a lab cluster
runs are made here: static binaries from ``lab/images`` (Go, standard library
only) placed in a one-layer OCI image layout written by ``oci_layout``, then
pushed with ``crane`` to the lab registry, from which containerd pulls
them like any other image.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab.cluster.processes import run_checked

__all__ = [
    "IMAGES_DIR",
    "ImageBuildError",
    "LabImage",
    "build_binaries",
    "oci_layout",
    "push",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = REPO_ROOT / "lab" / "images"


class ImageBuildError(Exception):
    """An image's program cannot be built or its image cannot be pushed."""


@dataclass(frozen=True)
class LabImage:
    """A pushed image: its reference by tag and by digest."""

    name: str
    tag_ref: str
    digest: str

    @property
    def ref(self) -> str:
        """By digest: what a Pod names, so it runs exactly what was pushed."""
        return f"{self.tag_ref.rsplit(':', 1)[0]}@{self.digest}"


def build_binaries(out_dir: Path, timeout: float = 600.0) -> dict[str, Path]:
    """Build every program under lab/images/cmd, static, into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_checked(
        ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", f"{out_dir}/", "./cmd/..."],
        what="`go build` of lab/images",
        error=ImageBuildError,
        timeout=timeout,
        cwd=IMAGES_DIR,
        env=dict(os.environ, CGO_ENABLED="0", GOFLAGS="-p=2 -mod=readonly -buildvcs=false"),
    )
    programs = sorted(p.name for p in (IMAGES_DIR / "cmd").iterdir() if p.is_dir())
    return {name: out_dir / name for name in programs}


def _blob(layout: Path, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest.split(":", 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest, len(data)


def _layer(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """An uncompressed tar layer, byte-for-byte reproducible (fixed owners and times)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories = sorted({str(Path(p).parent) for p in files} - {"."})
        for directory in directories:
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def oci_layout(
    layout: Path, files: Mapping[str, tuple[bytes, int]], entrypoint: Sequence[str]
) -> str:
    """Write a one-layer linux/amd64 image as an OCI image layout; returns its manifest digest.

    ``files`` maps a path inside the image (no leading slash) to its content
    and mode.
    """
    for path in files:
        if path.startswith("/") or ".." in Path(path).parts:
            raise ValueError(f"image path {path!r} must be relative and inside the image")
    layer = _layer(files)
    layer_digest, layer_size = _blob(layout, layer)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config_digest, config_size = _blob(layout, json.dumps(config, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size,
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest,
                "size": layer_size,
            }
        ],
    }
    manifest_digest, manifest_size = _blob(layout, json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest_digest,
                "size": manifest_size,
            }
        ],
    }
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps(index))
    return manifest_digest


def push(crane: Path, layout: Path, tag_ref: str, digest: str, timeout: float = 120.0) -> LabImage:
    """Push an OCI layout to the lab registry (plain HTTP) with crane."""
    stdout = run_checked(
        [str(crane), "push", "--insecure", str(layout), tag_ref],
        what=f"`crane push` of {tag_ref}",
        error=ImageBuildError,
        timeout=timeout,
    )
    pushed = stdout.strip().rsplit("@", 1)[-1]
    if pushed != digest:
        raise ImageBuildError(f"crane pushed {tag_ref} as {pushed}, expected {digest}")
    return LabImage(
        name=tag_ref.rsplit("/", 1)[-1].split(":", maxsplit=1)[0], tag_ref=tag_ref, digest=digest
    )
