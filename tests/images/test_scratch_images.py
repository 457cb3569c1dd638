"""The two scratch database images ``make images`` writes, started as the Pod starts them.

Marked ``images`` (fail, never skip, when the archives are missing). Each image is
unpacked from its OCI archive and run under runc as the operator's sidecar runs: its
own user (65532), a read-only root, an empty in-memory volume at /var/lib/scratch, a
network namespace of its own (loopback only). In it, ``images/scratch/smoke.py`` (the
same check ``make images`` runs) starts the image's entry point, connects as
``scratch`` over 127.0.0.1 with the image's client, creates, fills and drops a table in
``scratch``, and stops the server with SIGTERM, which must end it with exit 0.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobclaim.builder import RUNNER_USER
from tests.images import runc
from tests.images.oci import BUILT, Archive
from tests.images.runc import Mount

pytestmark = pytest.mark.images

ROOT = Path(__file__).resolve().parents[2]
SMOKE = (ROOT / "images" / "scratch" / "smoke.py").read_text()
# archive name -> the engine its entry point serves, and what its server says it is
ENGINES = {
    "ptah-scratch-postgresql": ("postgresql", "PostgreSQL 15."),
    "ptah-scratch-mariadb": ("mariadb", "10.11."),
}
# What tests/images/conftest.py reads and unpacks for this module.
IMAGES = tuple(ENGINES)
DATA = "/var/lib/scratch"


@pytest.mark.parametrize("name", list(ENGINES))
def test_the_digest_file_names_the_archives_manifest(
    name: str, archives: dict[str, Archive]
) -> None:
    written = (BUILT / f"{name}.digest").read_text().strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", written), written
    assert written == archives[name].manifest_digest


@pytest.mark.parametrize("name", list(ENGINES))
def test_the_image_is_the_sidecars_user_and_entry_point(
    name: str, archives: dict[str, Archive], roots: dict[str, Path]
) -> None:
    archive = archives[name]
    engine, _ = ENGINES[name]
    assert archive.user == f"{RUNNER_USER}:{RUNNER_USER}"
    assert archive.entrypoint == ["/usr/local/bin/ptah-scratch", engine]
    assert (roots[name] / "usr/local/bin/ptah-scratch").is_file()
    # Small: no documentation and no package indexes shipped.
    assert not any((roots[name] / "usr/share/doc").iterdir())
    assert not any((roots[name] / "var/lib/apt/lists").iterdir())


@pytest.mark.parametrize("name", list(ENGINES))
def test_on_an_empty_memory_volume_it_serves_scratch_on_loopback_and_stops_on_sigterm(
    name: str, archives: dict[str, Archive], roots: dict[str, Path], work: Path
) -> None:
    archive = archives[name]
    engine, version = ENGINES[name]
    done = runc.run(
        archive,
        roots[name],
        work,
        ["python3", "-c", SMOKE, engine, *archive.entrypoint],
        mounts=(Mount(None, DATA),),
        cwd=DATA,
        own_network=True,
    )
    said = done.stdout.decode()
    assert done.returncode == 0, f"{said}\n{done.stderr.decode()[-3000:]}"
    lines = said.splitlines()
    assert lines[0].startswith("scratch@127.0.0.1/scratch answers: ") and version in lines[0]
    assert lines[1:] == [
        "created, filled and dropped a table as scratch",
        "stopped by SIGTERM, exit 0",
    ]
