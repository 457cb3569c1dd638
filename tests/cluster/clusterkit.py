"""What the cluster tests share besides fixtures: a JSON client for the lab cluster's API
server, bounded polls, the manifests the tests create, and the session's recovery figures
and make run environments. Fixtures stay in conftest.py, which nothing imports."""

from __future__ import annotations

import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from jobclaim.apiserver import PTAHSCHEMAS, NotFound
from lab.clusterrun import LabRun

T = TypeVar("T")


# Long enough for a Pod to be scheduled, its image pulled from the loopback
# registry and its sandbox and container started on a loaded 2-core machine;
# a healthy run needs a few seconds.
POD_DEADLINE = 120.0


# The fault scenarios' recovery figures, repeated in the terminal summary: pytest keeps
# a passing test's output to itself, and CI's log is where the figures are read.
RECOVERIES: list[str] = []


def recovery(line: str) -> None:
    """Print how long a recovery took (a figure, never asserted), now and in the
    session's summary."""
    RECOVERIES.append(line)
    print(f"# recovery: {line}")


# make run's environment, once started; the teardown test closes it before it stops
# the cluster (its PostgreSQL listens on the cluster's bridge).
RUNS: list[LabRun] = []


def close_lab_runs() -> None:
    """Close make run's environment if this session started it (closing twice is a no-op)."""
    while RUNS:
        RUNS.pop().close()


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


def poll(
    what: str, check: Callable[[], T | None], timeout: float = POD_DEADLINE, period: float = 1.0
) -> T:
    """Call check until it returns something other than None; fail at the deadline. The
    pause grows from 0.1 s to ``period``: a caller that must catch a short-lived state
    (a claim in flight) asks for a shorter one."""
    deadline = time.monotonic() + timeout
    interval = min(0.1, period)
    while True:
        result = check()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(interval)  # the pause between polls, not a synchronization
        interval = min(interval * 2, period)


def schema_gone(run: LabRun, namespace: str, name: str) -> bool | None:
    """For ``poll``: True once the PtahSchema is gone (its finalizer removed), else None."""
    try:
        run.admin.get(PTAHSCHEMAS, namespace, name)
    except NotFound:
        return True
    return None


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
