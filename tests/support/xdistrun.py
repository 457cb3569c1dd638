"""make unit's parallel run: `pytest -n 2 --dist loadgroup`, the lab cluster's tests in one
worker, started first, and everything else in the other worker beside them.

The cluster part of the suite is mostly waiting on a real node (Pods scheduled, a manager
killed and replaced, Leases expiring), so it can run beside the CPU-bound rest instead of
after it. Three rules make that safe:

- every test under tests/cluster/ is one unit of work, so one worker runs them all, in
  tests/cluster/conftest.py's order (node, fault scenarios, make run's, teardown): the
  machine holds one lab node (/run/ptah-lab.lock), and the session's cluster fixture
  starts it once per process;
- that unit is handed out first (the largest unit; the worker's collection also puts it
  first), so the cluster starts at once instead of when the other worker is nearly done;
- a test marked ``cluster`` outside tests/cluster/ is refused at collection: it would run
  in the other worker and wait for the lock the first one holds for the whole session.

xdist's own ``xdist_group`` mark cannot do the first: pytest 9.2 builds a node id from its
structured ``_id``, so the ``@group`` suffix xdist 3.8 writes into ``_nodeid`` is lost and
each grouped test goes out alone. The controller sees only node ids, so this scheduler
groups by the cluster folder's path. `TEST_WORKERS=0 make test` runs the suite serially.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling

# The node-id prefix of the tests on the lab cluster (node ids are relative to the
# checkout root, where pyproject.toml is).
CLUSTER_DIR = "tests/cluster/"
CLUSTER_UNIT = "lab-cluster"

# What workers hand the controller for its terminal summary (a worker's own terminal is
# not shown): lines under this key of their workeroutput, e.g. the lab cluster's step
# timings and the fault scenarios' recoveries (tests/cluster/conftest.py).
WORKER_SUMMARY = "ptah_summary_lines"
_FROM_WORKERS: list[str] = []


class ClusterUnitScheduling(LoadGroupScheduling):
    """xdist's loadgroup, with every test under tests/cluster/ in one unit of work.

    Every other test is a unit of its own (as under ``load``), so the second worker takes
    them one after another while the first runs the cluster's; when it is done, the first
    joins in. LoadScopeScheduling hands out the largest units first (its default
    reorder), so the cluster's goes out at once.
    """

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(CLUSTER_DIR):
            return CLUSTER_UNIT
        return str(super()._split_scope(nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Any:
    """``--dist loadgroup`` (make unit's): the cluster's tests as one unit; any other
    distribution is xdist's own (make check's ``-n auto`` is ``load``)."""
    if config.getvalue("dist") == "loadgroup":
        return ClusterUnitScheduling(config, log)
    return None


def cluster_outside(items: list[pytest.Item]) -> list[str]:
    """The ``cluster``-marked tests outside tests/cluster/ (their node ids)."""
    return [
        item.nodeid
        for item in items
        if item.get_closest_marker("cluster") and not item.nodeid.startswith(CLUSTER_DIR)
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a cluster test the scheduler would not keep with the others (tryfirst: before
    ``-m`` deselects it, so make check refuses it too)."""
    strays = cluster_outside(items)
    if strays:
        raise pytest.UsageError(
            f"tests marked cluster belong under {CLUSTER_DIR} (make unit runs them all in one "
            f"xdist worker, which holds the lab's one node): {', '.join(strays)}"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller, when a worker ends: keep the summary lines it handed over."""
    _FROM_WORKERS.extend(getattr(node, "workeroutput", {}).get(WORKER_SUMMARY, []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _FROM_WORKERS:
        terminalreporter.write_line(line)
