"""The installed runner runs where nothing else is: an empty root, no shell, no Python.

The operation Pod's main container is the stock ptah image, which may hold nothing
but ptah. So the runner the install container copies must run from its directory
alone, through its own loader; this test gives it a root holding only that
directory (a new user and mount namespace, ``unshare --root``) and reads its summary.
There is no API server in that root, so the runner (its HTTPS client and TLS included)
starts, says why no record could be written, and leaves the termination summary.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from jobclaim.builder import INSTALL_COMMAND, RUNNER_COMMAND, RUNNER_DIR
from runner import RUNNER_PROTOCOL_VERSION
from runner.install import mapped_objects, names_of
from runner.summary import parse_summary_for
from tests.support.runnerrig import POD_IDENTITY_ENV

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_runner_accounts_in_an_empty_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    installer = [sys.executable, *INSTALL_COMMAND[1:-1], str(root / RUNNER_DIR.lstrip("/"))]
    subprocess.run(installer, check=True, cwd=ROOT, timeout=300)
    (root / "dev").mkdir()
    (root / "dev" / "termination-log").touch()
    (root / "tmp").mkdir()
    assert sorted(p.name for p in root.iterdir()) == ["dev", "runner", "tmp"]
    env = {
        "PTAH_OPERATION": "resolve",
        "PTAH_OPERATION_ID": "op-1",
        "PTAH_RUNNER_PROTOCOL_VERSION": str(RUNNER_PROTOCOL_VERSION),
        "PTAH_BINARY": "/usr/local/bin/ptah",
        "PTAH_VERSION": "v0.4.0",
        "PTAH_EXPECTED_DATABASE_ENGINE": "PostgreSQL",
        "PTAH_REQUESTED_REFERENCE": "registry.example/a:v1",
        **POD_IDENTITY_ENV,
    }
    unshare = shutil.which("unshare")
    assert unshare, "util-linux unshare is required"
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", f"--root={root}", *RUNNER_COMMAND],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert b"no result record could be written: the kubelet gave no API server" in done.stderr
    summary = parse_summary_for((root / "dev" / "termination-log").read_text(), "resolve", "op-1")
    # The root holds no ptah: the runner ran, and says the executor could not start.
    assert summary.error_code == "executor_unavailable"


def test_the_libraries_are_read_from_the_process_maps(tmp_path: Path) -> None:
    maps = (
        "7f00-7f01 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f01-7f02 r-xp 00001000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 rw-p 00000000 00:00 0 [heap]\n"
        "7f03-7f04 r--p 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libz.so.1.2.13\n"
        "7f04-7f05 r--p 00000000 08:01 3 /usr/lib/locale/C.utf8/LC_CTYPE\n"
    )
    assert [p.name for p in mapped_objects(maps)] == ["libc.so.6", "libz.so.1.2.13"]
    (tmp_path / "libz.so.1.2.13").write_bytes(b"\x7fELF")
    (tmp_path / "libz.so.1").symlink_to("libz.so.1.2.13")
    (tmp_path / "libzstd.so.1").symlink_to("libz.so.1.2.13")  # another library's name
    assert names_of(tmp_path / "libz.so.1.2.13") == ["libz.so.1", "libz.so.1.2.13"]


def test_the_installed_runner_imports_without_the_site_module(tmp_path: Path) -> None:
    # Distributions patch site.py (Debian's adds only dist-packages directories): the
    # runner must be importable from the prefix's own path, with no site module at all.
    root = tmp_path / "root"
    installer = [sys.executable, *INSTALL_COMMAND[1:-1], str(root / RUNNER_DIR.lstrip("/"))]
    subprocess.run(installer, check=True, cwd=ROOT, timeout=300)
    unshare = shutil.which("unshare")
    assert unshare, "util-linux unshare is required"
    loader, *rest = RUNNER_COMMAND
    python = [loader, *rest[: rest.index("-I")], "-I", "-S"]
    done = subprocess.run(
        [
            unshare,
            "--user",
            "--map-root-user",
            f"--root={root}",
            *python,
            "-c",
            "import runner.run",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
