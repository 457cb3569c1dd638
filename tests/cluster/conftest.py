"""Fixtures for tests on the lab's real single-node cluster (``lab.cluster``).

One cluster per test session: starting one costs tens of seconds, and every
test isolates itself in its own namespace. When the cluster cannot be built or
started the tests fail rather than skip: a green run that quietly left out
every node test would prove nothing.

Waits are bounded polls: a kubelet, a Job controller and a scheduler act on
their own time (sync loops, watches, backoffs), so a test polls the API for
the state it expects, with a deadline that turns "never" into a failure
naming what it last saw.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from lab.cluster import ClusterError, LocalCluster, ensure_tools
from lab.clusterrun import RUN_ERRORS, LabRun
from tests.cluster.clusterkit import RECOVERIES, RUNS, Api, close_lab_runs, poll, short_workdir
from tests.support.xdistrun import WORKER_SUMMARY


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run make run's tests after the node's and the fault scenarios, teardown last; the
    cluster tests after all others in one process, before them under xdist.

    The session's cluster then runs only while its own tests do; the teardown tests
    stop it. The fault scenarios share make run's chart and run before its tests, which
    approve every pending plan. Under xdist (``make unit``: ``-n 2 --dist loadgroup``;
    tests/support/xdistrun.py makes them one unit of work) the cluster's tests are the
    longest unit, mostly waiting on a real node, so they go first: one worker starts on
    them at once and the other runs the rest of the suite beside them. Last, they would
    start only when the other worker was nearly done, and run alone.
    """
    cluster = [item for item in items if item.get_closest_marker("cluster")]
    teardown = [item for item in cluster if item.path.name == "test_teardown.py"]
    # The chart installed by make run's tests stays on the session's cluster; the
    # node's own tests run before it, on a cluster that holds only what they made.
    chart = [item for item in cluster if item.path.name == "test_make_run.py"]
    # The freshness scenarios work on make run's chart too, in tenants of their own.
    faults = [
        item
        for item in cluster
        if item.path.name.startswith("test_faults") or item.path.name == "test_freshness.py"
    ]
    rest = [item for item in items if item not in cluster]
    node = [item for item in cluster if item not in teardown + chart + faults]
    ordered = node + faults + chart + teardown
    # A worker process has workerinput (xdist's), the controller and a serial run do not.
    items[:] = ordered + rest if hasattr(config, "workerinput") else rest + ordered


# The session's cluster, for what it cost in the terminal summary (CI's log keeps it).
_SESSION: list[LocalCluster] = []


def _summary_lines() -> list[str]:
    lines = []
    for lab in _SESSION:
        steps = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in lab.timings.items())
        lines.append(f"lab cluster: {steps}")
    return lines + [f"recovery: {line}" for line in RECOVERIES]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker, hand the lines to the controller, which prints them
    (tests/support/xdistrun.py; a worker's own terminal is not shown)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output.setdefault(WORKER_SUMMARY, []).extend(_summary_lines())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _summary_lines():
        terminalreporter.write_line(line)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """The lab cluster, shared by the session and torn down at its end."""
    try:
        ensure_tools()
    except ClusterError as exc:
        pytest.fail(f"the cluster tests need the lab cluster, which cannot be built: {exc}")
    # SIGTERM unwinds like Ctrl-C, so pytest's session teardown stops the
    # cluster instead of leaving containers and mounts behind.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    lab = LocalCluster(short_workdir())
    try:
        lab.start()
    except ClusterError as exc:
        pytest.fail(f"the lab cluster did not start (its logs: {lab.workdir}/logs): {exc}")
    _SESSION.append(lab)
    try:
        yield lab
    finally:
        try:
            lab.stop()
        finally:
            signal.signal(signal.SIGTERM, previous)
        # Kept when stopping failed, for its logs.
        shutil.rmtree(lab.workdir)


@pytest.fixture(scope="session")
def lab_run(cluster: LocalCluster) -> Iterator[LabRun]:
    """make run's environment on the session's cluster: the chart, PostgreSQL, the examples.

    One per session: the chart is cluster-wide (its webhooks, its CRDs), so the fault
    scenarios and make run's own tests share it rather than installing it twice.
    """
    workdir = Path(tempfile.mkdtemp(prefix="ptah-run-", dir="/tmp"))
    run = LabRun(workdir, say=print, cluster=cluster)
    try:
        run.start()
    except RUN_ERRORS as exc:
        pytest.fail(f"make run's environment did not come up on the lab cluster: {exc}")
    RUNS.append(run)
    yield run
    close_lab_runs()
    shutil.rmtree(workdir)


@pytest.fixture(scope="session")
def api(cluster: LocalCluster) -> Iterator[Api]:
    client = Api.from_kubeconfig(cluster.kubeconfig("admin"))
    yield client
    client.http.close()


@pytest.fixture
def namespace(api: Api) -> str:
    """A fresh namespace whose default service account exists (Pods need it)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    api.create("/api/v1/namespaces", {"metadata": {"name": name}})
    # The service-account controller creates it moments after the namespace.
    poll(
        f"the default service account of {name}",
        lambda: api.get_or_none(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
    )
    return name
