"""What ``make run`` puts into the lab's registry: the images and the example artifacts.

Images come from ``make images`` as OCI archives (``build/images/NAME.oci.tar`` with
``NAME.digest`` beside it). crane pushes an OCI *layout directory*, not an archive, so
each archive is unpacked first; the digest crane reports must be the one the build
wrote, and everything downstream (the chart's values, the Jobs) names the image by that
digest, never by a tag a push could move.

The example artifacts (``examples/artifacts/``) are what ``examples/ptahschema.yaml``,
``examples/ptahschema-mysql.yaml``, ``examples/ptahmigration.yaml`` and
``examples/ptahmigration-mysql.yaml`` point at: the desired schemas of ``orders`` and
``inventory`` (one layer each) and the migrations of ``billing`` and ``catalog`` (one
layer per file, ``ptah.sum`` included), pushed with the lab executor's own OCI client
as ptah's artifact types.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lab.executor.documents import MIGRATIONS_ARTIFACT_TYPE, SCHEMA_ARTIFACT_TYPE
from lab.executor.oci import push_artifact

__all__ = [
    "ARTIFACTS_DIR",
    "EXECUTOR_ENV",
    "ArtifactError",
    "BuiltImage",
    "PushedImage",
    "built_image",
    "example_artifacts",
    "push_examples",
    "push_image",
    "run_crane",
]

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
BUILD_DIR: Final = REPO_ROOT / "build" / "images"
ARTIFACTS_DIR: Final = REPO_ROOT / "examples" / "artifacts"
# The lab's registry speaks plain HTTP on the node's address (not loopback, which a
# Pod cannot reach). The lab executor talks plain HTTP only to loopback unless told
# (its --plain-http flag, whose PTAH_PLAIN_HTTP twin the runner passes through to it),
# so the lab's copy of the executor image carries that setting: it is a property of
# this lab's registry, not of the executor.
EXECUTOR_ENV: Final = {"PTAH_PLAIN_HTTP": "true"}


class ArtifactError(Exception):
    """An image or artifact could not be read, pushed or checked."""


@dataclass(frozen=True)
class BuiltImage:
    """An archive ``make images`` wrote and the digest it recorded."""

    name: str
    archive: Path
    digest: str


@dataclass(frozen=True)
class PushedImage:
    repository: str
    digest: str

    @property
    def ref(self) -> str:
        return f"{self.repository}@{self.digest}"


def built_image(name: str, build_dir: Path = BUILD_DIR) -> BuiltImage | None:
    """The archive and digest of image ``name``, or None when it has not been built."""
    archive, digest_file = build_dir / f"{name}.oci.tar", build_dir / f"{name}.digest"
    if not (archive.is_file() and digest_file.is_file()):
        return None
    digest = digest_file.read_text().strip()
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise ArtifactError(f"{digest_file} does not hold a sha256 digest: {digest[:80]!r}")
    return BuiltImage(name, archive, digest)


def run_crane(crane: Path, *args: str, timeout: float = 300.0) -> str:
    """crane against the lab registry; what it printed. Raises ArtifactError."""
    # --insecure: the lab registry is plain HTTP on a non-loopback address.
    done = subprocess.run(
        [str(crane), "--insecure", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise ArtifactError(f"crane {args[0]} failed: {done.stderr.strip()[-1000:]}")
    return done.stdout.strip()


def push_image(
    crane: Path,
    image: BuiltImage,
    repository: str,
    workdir: Path,
    *,
    env: dict[str, str] | None = None,
) -> PushedImage:
    """Push ``image`` to ``repository``; with ``env``, a copy with those variables set."""
    layout = workdir / image.name
    shutil.rmtree(layout, ignore_errors=True)
    layout.mkdir(parents=True)
    with tarfile.open(image.archive) as archive:
        archive.extractall(layout, filter="data")
    pushed = run_crane(crane, "push", str(layout), f"{repository}:built").rsplit("@", 1)[-1]
    shutil.rmtree(layout)
    if pushed != image.digest:
        raise ArtifactError(
            f"crane pushed {image.archive.name} as {pushed}, but the build recorded {image.digest}"
        )
    if not env:
        return PushedImage(repository, pushed)
    flags = [arg for name, value in sorted(env.items()) for arg in ("--env", f"{name}={value}")]
    source, target = f"{repository}@{pushed}", f"{repository}:lab"
    mutated = run_crane(crane, "mutate", source, *flags, "-t", target)
    return PushedImage(repository, mutated.rsplit("@", 1)[-1])


def example_artifacts(root: Path = ARTIFACTS_DIR) -> dict[str, tuple[str, list[tuple[str, bytes]]]]:
    """Artifact name -> (artifact type, files) for every example artifact."""
    found: dict[str, tuple[str, list[tuple[str, bytes]]]] = {}
    # Every schema directory: orders' (PostgreSQL) and inventory's (MySQL).
    for directory in sorted(root.glob("*-schema")):
        schema = directory / "schema.sql"
        found[f"shop/{directory.name}"] = (
            SCHEMA_ARTIFACT_TYPE,
            [(schema.name, schema.read_bytes())],
        )
    # Every migration directory: billing's (PostgreSQL) and catalog's (MySQL).
    for directory in sorted(root.glob("*-migrations")):
        files = sorted(path for path in directory.iterdir() if path.is_file())
        found[f"shop/{directory.name}"] = (
            MIGRATIONS_ARTIFACT_TYPE,
            [(path.name, path.read_bytes()) for path in files],
        )
    return found


def push_examples(registry: str, tag: str = "lab") -> dict[str, str]:
    """Push the example artifacts; artifact name -> its reference pinned by digest."""
    pinned = {}
    for name, (artifact_type, files) in example_artifacts().items():
        digest = push_artifact(f"{registry}/{name}:{tag}", artifact_type, files, plain_http=True)
        pinned[name] = f"{registry}/{name}@{digest}"
    return pinned
