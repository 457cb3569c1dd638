"""The two images ``make images`` writes, checked from their archives as a cluster gets them.

Marked ``images``: these fail, never skip, when the archives are missing; ``make unit``
runs ``make images`` first (a warm run reuses both, so it costs seconds). Each image
is unpacked from its OCI archive (nothing of buildah's storage is read) and started
under runc with a read-only root filesystem, its own user and no shell in it; then
the Job's two halves are joined as a cluster joins them: the manager image's install
container copies the runner into a volume, and the executor image's main container
starts it, and it runs ``/usr/local/bin/ptah`` against a registry on loopback.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from jobclaim.builder import (
    INSTALL_COMMAND,
    PTAH_BINARY,
    RUNNER_COMMAND,
    RUNNER_DIR,
    RUNNER_USER,
    WORK_DIR,
)
from lab.executor import IDENTITY
from runner import config, result
from runner.summary import parse_summary_for
from tests.images import runc
from tests.images.oci import BUILT, Archive
from tests.images.runc import Mount
from tests.support.registry import CRANE

pytestmark = pytest.mark.images

ROOT = Path(__file__).resolve().parents[2]
MANAGER, EXECUTOR = "ptah-operator", "ptah-lab-executor"
# What tests/images/conftest.py reads and unpacks for this module.
IMAGES = (MANAGER, EXECUTOR)
SHELLS = ("bin/sh", "bin/bash", "bin/dash", "usr/bin/sh", "usr/bin/bash", "usr/bin/dash")
PROBE = """
import errno, os
try:
    open("/tmp/probe", "w")
    refused = "written"
except OSError as error:
    refused = errno.errorcode[error.errno]
print(os.getuid(), os.getgid(), refused)
"""


def owned_by_runner(path: Path, *, directory: bool) -> Path:
    """A volume the Pod's user may write, as an emptyDir with fsGroup would be."""
    if directory:
        path.mkdir()
    else:
        path.touch()
    os.chown(path, RUNNER_USER, RUNNER_USER)
    return path


@pytest.mark.parametrize("name", [MANAGER, EXECUTOR])
def test_the_digest_file_names_the_archives_manifest(
    name: str, archives: dict[str, Archive]
) -> None:
    written = (BUILT / f"{name}.digest").read_text().strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", written), written
    # read_archive checked every blob against its digest; this is the manifest's.
    assert written == archives[name].manifest_digest


@pytest.mark.parametrize("name", [MANAGER, EXECUTOR])
def test_the_image_is_non_root_exec_form_and_holds_no_shell(
    name: str, archives: dict[str, Archive], roots: dict[str, Path]
) -> None:
    archive = archives[name]
    assert archive.user == f"{RUNNER_USER}:{RUNNER_USER}"
    entry = archive.entrypoint
    assert entry and entry[0].startswith("/"), f"the entry point {entry} is not an exec form"
    assert (roots[name] / entry[0].lstrip("/")).is_file()
    present = [s for s in SHELLS if os.path.lexists(roots[name] / s)]
    assert present == [], f"{name} still holds {present}"


@pytest.mark.parametrize(
    ("name", "argv", "says"),
    [
        (MANAGER, ["--help"], "usage: "),
        (EXECUTOR, ["version"], f"{IDENTITY} "),
        (EXECUTOR, ["--version"], f"{IDENTITY} "),
    ],
)
def test_the_entry_point_runs_as_65532_on_a_read_only_root_with_no_shell(
    name: str,
    argv: list[str],
    says: str,
    archives: dict[str, Archive],
    roots: dict[str, Path],
    work: Path,
) -> None:
    archive = archives[name]
    done = runc.run(archive, roots[name], work, [*archive.entrypoint, *argv])
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(says), done.stdout
    # Who runs, and that the root is read-only: the image's /tmp is world-writable, so
    # only the read-only mount refuses this write (the Job mounts an emptyDir there).
    probe = runc.run(archive, roots[name], work, ["python3", "-c", PROBE])
    assert probe.stdout.decode().split() == [str(RUNNER_USER), str(RUNNER_USER), "EROFS"], (
        probe.stderr
    )


def test_the_runner_from_the_manager_image_runs_ptah_in_the_executor_image(
    archives: dict[str, Archive], roots: dict[str, Path], work: Path, registry: str
) -> None:
    manager, executor = archives[MANAGER], archives[EXECUTOR]
    # What `make run` does with the archive: a layout pushed to a registry, which must
    # keep the digest the chart pins.
    layout = work / "layout"
    layout.mkdir()
    with tarfile.open(manager.path) as tar:
        tar.extractall(layout, filter="data")
    reference = f"{registry}/ptah-operator:dev"
    subprocess.run(
        [str(CRANE), "push", "--insecure", str(layout), reference],
        check=True,
        capture_output=True,
        timeout=300,
    )
    kept = subprocess.run(
        [str(CRANE), "digest", "--insecure", reference],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    assert kept == manager.manifest_digest

    # The install container: the manager image, the Job's command, /runner writable.
    volume = owned_by_runner(work / "runner-volume", directory=True)
    install = runc.run(
        manager,
        roots[MANAGER],
        work,
        list(INSTALL_COMMAND),
        mounts=(Mount(volume, RUNNER_DIR), Mount(None, WORK_DIR)),
    )
    assert install.returncode == 0, install.stderr

    # The main container: the executor image, the runner started through its own
    # loader from the read-only volume, everything it writes on /tmp (an emptyDir).
    summary = owned_by_runner(work / "termination-log", directory=False)
    env = {
        config.ENV_OPERATION: "resolve",
        config.ENV_OPERATION_ID: "op-images",
        config.ENV_PROTOCOL: str(result.RUNNER_PROTOCOL_VERSION),
        config.ENV_PTAH_BINARY: PTAH_BINARY,
        config.ENV_PTAH_VERSION: "v0.4.0",  # the build the runner tests declare
        config.ENV_ENGINE: "PostgreSQL",
        config.ENV_REQUESTED_REFERENCE: reference,
    }
    main = runc.run(
        executor,
        roots[EXECUTOR],
        work,
        list(RUNNER_COMMAND),
        env=env,
        cwd=WORK_DIR,
        mounts=(
            Mount(volume, RUNNER_DIR, read_only=True),
            Mount(None, WORK_DIR),
            Mount(summary, "/dev/termination-log"),
        ),
    )
    # No API server here: the runner resolves, cannot create its record (the cluster
    # scenarios read records from these same images), and leaves its summary.
    assert main.returncode == 3, main.stderr
    assert b"resolve op-images succeeded" in main.stderr
    assert b"no result record could be written" in main.stderr
    resolved = parse_summary_for(summary.read_text(), "resolve", "op-images")
    assert resolved.error_code is None and resolved.result_digest.startswith("sha256:")
