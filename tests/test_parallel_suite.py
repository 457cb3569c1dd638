"""make unit's parallel run (`pytest -n 2 --dist loadgroup`) keeps the lab cluster's tests
together, in their order, and first.

The suite's real scheduler and ordering hook (tests/support/xdistrun.py and
tests/cluster/conftest.py) run over a small synthetic suite in a real pytest-xdist
session: a subprocess with two workers, where each test writes down which worker ran it
and when. The lab has one node per machine and the cluster fixture starts it once per
process, so every cluster test must run in one worker; they must start at once (beside the
rest, not after it), node tests before the fault scenarios, make run's tests, then the
teardown that stops the cluster. Each row changes one thing that must break that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each synthetic test appends "<worker> <nodeid>" to the file named by PTAH_RUN_LOG.
_RECORD = """\
import os
import pytest


@pytest.fixture(autouse=True)
def _record(request: pytest.FixtureRequest) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.environ["PTAH_RUN_LOG"], "a") as log:
        log.write(f"{worker} {request.node.nodeid}\\n")
"""

_CLUSTER_HOOKS = """\
from tests.cluster.conftest import pytest_collection_modifyitems
"""

_REST = "".join(f"def test_rest_{n}() -> None:\n    pass\n\n\n" for n in range(12))
_CLUSTER = """\
import pytest

pytestmark = pytest.mark.cluster


def test_one() -> None:
    pass


def test_two() -> None:
    pass
"""

# The suite's real files, in the synthetic tree: the cluster folder's file names matter
# (the faults, make run's and teardown are ordered by name).
CLUSTER_FILES = ("test_teardown.py", "test_make_run.py", "test_faults_kill.py", "test_node.py")
ORDER = ("test_node.py", "test_faults_kill.py", "test_make_run.py", "test_teardown.py")


def _suite(tmp_path: Path, *, cluster_hooks: bool) -> Path:
    """tests/ and tests/cluster/ as in the checkout (the scheduler goes by that path)."""
    suite = tmp_path / "suite"
    tests = suite / "tests"
    (tests / "cluster").mkdir(parents=True)
    (tests / "conftest.py").write_text(_RECORD)
    (tests / "cluster" / "conftest.py").write_text(_CLUSTER_HOOKS if cluster_hooks else "")
    (tests / "test_rest.py").write_text(_REST)
    for name in CLUSTER_FILES:
        (tests / "cluster" / name).write_text(_CLUSTER)
    (suite / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    cluster: on the lab cluster\naddopts = -p no:cacheprovider\n"
    )
    return suite


def problems(lines: list[str]) -> list[str]:
    """What is wrong with a run's record ("<worker> <nodeid>" in the order run)."""
    runs = [line.split(" ", 1) for line in lines]
    cluster = [(worker, nodeid) for worker, nodeid in runs if "/cluster/" in nodeid]
    found = []
    workers = sorted({worker for worker, _ in cluster})
    if len(workers) != 1:
        found.append(f"the cluster tests ran in {len(workers)} workers: {workers}")
    else:
        mine = [nodeid for worker, nodeid in runs if worker == workers[0]]
        if "/cluster/" not in mine[0]:
            found.append(f"the cluster's worker began with {mine[0]}, not a cluster test")
    files = [nodeid.split("::")[0].rsplit("/", 1)[-1] for _, nodeid in cluster]
    firsts = [name for n, name in enumerate(files) if name not in files[:n]]
    if firsts != list(ORDER):
        found.append(f"the cluster files ran in the order {firsts}")
    return found


# The scheduler, as tests/conftest.py registers it in the suite.
PLUGIN = "tests.support.xdistrun"


@dataclass(frozen=True)
class Row:
    name: str
    cluster_hooks: bool = True
    args: tuple[str, ...] = ("-p", PLUGIN, "-n", "2", "--dist", "loadgroup")
    expected: str = ""


ROWS = [
    Row("make unit's run: one worker, cluster first, in order"),
    Row(
        "without the scheduler the cluster tests spread over both workers",
        args=("-n", "2", "--dist", "loadgroup"),
        expected="the cluster tests ran in 2 workers",
    ),
    Row(
        "without the ordering hook the files run in collection order",
        cluster_hooks=False,
        expected="the cluster files ran in the order",
    ),
    Row(
        "serial (TEST_WORKERS=0): the rest first, so the cluster's worker begins elsewhere",
        args=("-p", PLUGIN, "-n", "0"),
        expected="the cluster's worker began with tests/test_rest.py",
    ),
]


@pytest.mark.integration
@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_the_cluster_tests_run_together_first_and_in_order(tmp_path: Path, row: Row) -> None:
    suite = _suite(tmp_path, cluster_hooks=row.cluster_hooks)
    log = tmp_path / "runs.log"
    env = {**os.environ, "PTAH_RUN_LOG": str(log), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *row.args, str(suite)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = problems(log.read_text().splitlines())
    if not row.expected:
        assert found == []
    else:
        assert any(problem.startswith(row.expected) for problem in found), found
