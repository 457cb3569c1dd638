"""``kubectl ptah`` installs on every supported Python: 3.11, 3.12 and 3.13.

Each row makes a fresh virtualenv with pyenv's interpreter of that version, installs
the project's wheel (built from this checkout) and its pinned dependencies from
``build/wheelhouse`` with ``pip install --no-index`` (no network, no compiler), and
runs the installed ``kubectl-ptah --version``. ``lab.wheelhouse`` fills the
wheelhouse from PyPI once (cold ~20 s; then cached under build/); without a Python or
a wheelhouse these tests fail, never skip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lab.wheelhouse import SUPPORTED, build_project, fill_dependencies, project_version, python_for

pytestmark = pytest.mark.pythons


@pytest.fixture(scope="module")
def project_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_project(tmp_path_factory.mktemp("wheel"))


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("minor", SUPPORTED)
def test_kubectl_ptah_installs_and_runs_on_python(
    minor: str, project_wheel: Path, tmp_path: Path
) -> None:
    python = python_for(minor)
    venv = tmp_path / "venv"
    made = _run(python, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    installed = _run(
        venv / "bin" / "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-index",
        "--find-links",
        fill_dependencies(minor),
        project_wheel,
    )
    assert installed.returncode == 0, installed.stderr
    ran = _run(venv / "bin" / "kubectl-ptah", "--version")
    assert (ran.returncode, ran.stdout, ran.stderr) == (
        0,
        f"kubectl-ptah {project_version()}\n",
        "",
    )
    # The control: the virtualenv really runs the Python this row is about.
    version = _run(venv / "bin" / "python", "-c", "import sys; print(sys.version_info[:2])")
    assert version.stdout.strip() == str(tuple(int(p) for p in minor.split(".")))
