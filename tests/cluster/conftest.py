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
import ssl
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from lab.cluster import ClusterError, LocalCluster, ensure_tools
from lab.clusterrun import RUN_ERRORS, LabRun

T = TypeVar("T")

# Long enough for a Pod to be scheduled, its image pulled from the loopback
# registry and its sandbox and container started on a loaded 2-core machine;
# a healthy run needs a few seconds.
POD_DEADLINE = 120.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the cluster tests after all others, make run's after the node's, teardown last.

    The session's cluster then runs only while its own tests do, not beside
    the rest of the suite; the teardown tests stop it. The fault scenarios share
    make run's chart and run before its tests, which approve every pending plan.
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
    items[:] = rest + node + faults + chart + teardown


# The session's cluster, for what it cost in the terminal summary (CI's log keeps it).
_SESSION: list[LocalCluster] = []
# The fault scenarios' recovery figures, repeated in the terminal summary: pytest keeps
# a passing test's output to itself, and CI's log is where the figures are read.
_RECOVERIES: list[str] = []


def recovery(line: str) -> None:
    """Print how long a recovery took (a figure, never asserted), now and in the
    session's summary."""
    _RECOVERIES.append(line)
    print(f"# recovery: {line}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for lab in _SESSION:
        steps = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in lab.timings.items())
        terminalreporter.write_line(f"lab cluster: {steps}")
    for line in _RECOVERIES:
        terminalreporter.write_line(f"recovery: {line}")


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
    _RUNS.append(run)
    yield run
    close_lab_runs()
    shutil.rmtree(workdir)


# make run's environment, once started; the teardown test closes it before it stops
# the cluster (its PostgreSQL listens on the cluster's bridge).
_RUNS: list[LabRun] = []


def close_lab_runs() -> None:
    """Close make run's environment if this session started it (closing twice is a no-op)."""
    while _RUNS:
        _RUNS.pop().close()


def short_workdir() -> Path:
    """A work directory under /tmp: pytest's own are too deep for the kubelet's sockets."""
    return Path(tempfile.mkdtemp(prefix="ptah-lab-", dir="/tmp"))


class Api:
    """A thin JSON client for a lab cluster's API server."""

    def __init__(self, server: str, ca: str, token: str) -> None:
        self.server = server
        self.http = httpx.Client(
            base_url=server,
            verify=ssl.create_default_context(cafile=ca),
            headers={"Authorization": f"Bearer {token}"},
            timeout=30.0,
        )

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Api:
        """As the token user of a kubeconfig the lab wrote."""
        config = yaml.safe_load(path.read_text())
        entry = config["clusters"][0]["cluster"]
        return cls(
            entry["server"], entry["certificate-authority"], config["users"][0]["user"]["token"]
        )

    def get(self, path: str) -> Any:
        response = self.http.get(path)
        response.raise_for_status()
        return response.json()

    def get_or_none(self, path: str) -> Any:
        response = self.http.get(path)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()

    def text(self, path: str, **params: str) -> str:
        response = self.http.get(path, params=params)
        response.raise_for_status()
        return response.text

    def create(self, path: str, body: dict[str, Any]) -> Any:
        response = self.http.post(path, json=body)
        if response.status_code >= 400:
            raise AssertionError(f"POST {path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def delete(self, path: str, **params: str) -> Any:
        response = self.http.delete(path, params=params)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="session")
def api(cluster: LocalCluster) -> Iterator[Api]:
    client = Api.from_kubeconfig(cluster.kubeconfig("admin"))
    yield client
    client.http.close()


def poll(what: str, check: Callable[[], T | None], timeout: float = POD_DEADLINE) -> T:
    """Call check until it returns something other than None; fail at the deadline."""
    deadline = time.monotonic() + timeout
    interval = 0.1
    while True:
        result = check()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(interval)  # the pause between polls, not a synchronization
        interval = min(interval * 2, 1.0)


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


def probe_job(name: str) -> dict[str, Any]:
    """A Job no claim builds, for dry-run creates that only ask admission's answer."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "probe.invalid/none"}],
                }
            }
        },
    }


def pod_manifest(name: str, image: str, args: list[str], **spec: Any) -> dict[str, Any]:
    """A one-container Pod that runs the lab's probe image once."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            # The probe stops at once on SIGTERM; a long grace period would only
            # slow the deletion tests down.
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "probe", "image": image, "args": args}],
            **spec,
        },
    }


def pod_phase_in(api: Api, namespace: str, name: str, phases: set[str]) -> dict[str, Any] | None:
    pod: dict[str, Any] = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return pod if pod.get("status", {}).get("phase") in phases else None
