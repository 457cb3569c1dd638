"""Manager processes on the real API server, started as the chart starts them: the
chart's environment (rendered by the real helm), a webhooked namespace, serving
certificates, the webhook configurations the replicas serve, and a Lease of the
test's own with durations short enough for a test.

The manager-process tests and the watch-scope test start their managers on this rig;
the ``chart_env`` fixture is imported by each. Every wait is a bounded poll.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.pieces.events import REPORTING_CONTROLLER
from jobclaim.apiserver import (
    EVENTS,
    JOBS,
    LEASES,
    PTAHSCHEMAS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    NotFound,
    Object,
)
from kube.client import KubeApi
from lab import run as localrun
from lab.localmanager import ManagerProcess, local_environment
from tests.support.chartrender import VALUES, Helm
from tests.support.realapioperator import Operator, Webhooked, webhooked_namespace
from webhook.serving import local_certificates

LEASE_NAMESPACE = localrun.MANAGER_NAMESPACE
DURATION, RENEW_DEADLINE, RETRY = 4, 3.0, 0.5
SHUTDOWN = 10.0
DEADLINE = 60.0


def until(condition: Callable[[], bool], what: str, deadline: float = DEADLINE) -> float:
    """Poll until ``condition`` holds; the seconds it took."""
    started = time.monotonic()
    localrun.until(condition, what, deadline=deadline)
    return time.monotonic() - started


@pytest.fixture(scope="module")
def chart_env(helm: Helm) -> dict[str, str]:
    """The values the chart's Deployment sets (the Downward API ones are filled per replica)."""
    objects = helm.render([VALUES / "required.yaml"])
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


@dataclass
class Rig:
    staged: Webhooked
    cert_dir: Path
    names: tuple[str, ...]
    lease: str
    chart: dict[str, str]
    tmp: Path

    @property
    def api(self) -> KubeApi:
        return self.staged.operator.admin

    @property
    def namespace(self) -> str:
        return self.staged.namespace

    def manager(self, identity: str, **overrides: str) -> ManagerProcess:
        plane = self.staged.operator.plane
        env = local_environment(
            self.chart,
            identity=identity,
            kubeconfig=plane.kubeconfig("manager"),
            cert_dir=self.cert_dir,
            configurations=self.names,
            watch_namespace=self.namespace,
            PTAH_LEADER_ELECTION_LEASE_NAME=self.lease,
            PTAH_LEADER_ELECTION_LEASE_DURATION_SECONDS=str(DURATION),
            PTAH_LEADER_ELECTION_RENEW_DEADLINE_SECONDS=str(RENEW_DEADLINE),
            PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS=str(RETRY),
            PTAH_SHUTDOWN_SECONDS=str(SHUTDOWN),
            **overrides,
        )
        return ManagerProcess(env, self.tmp / f"{identity}.log")

    def register(self, process: ManagerProcess) -> None:
        """The chart's configurations for this namespace, pointing at ``process``."""
        configurations = localrun.webhook_configurations(
            self.staged.prefix,
            process.url,
            process.ca_bundle,
            namespace_selector={"matchLabels": self.staged.label},
        )
        localrun.register_webhooks(
            self.staged.operator.plane, self.api, configurations, self.namespace
        )

    def holder(self) -> str:
        try:
            lease = self.api.get(LEASES, LEASE_NAMESPACE, self.lease)
        except NotFound:
            return ""
        return str(lease["spec"].get("holderIdentity") or "")

    def schema(self) -> Object:
        found: Object = self.api.get(PTAHSCHEMAS, self.namespace, "orders")
        return found

    def jobs(self) -> list[Object]:
        return list(self.api.list(JOBS, self.namespace))

    def reporters(self) -> set[str]:
        """Which managers sent the operator's Events here (other controllers' aside)."""
        return {
            str(e.get("reportingInstance"))
            for e in self.api.list(EVENTS, self.namespace)
            if e.get("reportingController") == REPORTING_CONTROLLER
        }


@contextmanager
def rig(operator: Operator, tmp_path: Path, chart: dict[str, str]) -> Iterator[Rig]:
    staged = webhooked_namespace(operator)
    cert_dir = tmp_path / "certs"
    local_certificates(cert_dir)
    names = (f"{staged.prefix}-controller-write", f"{staged.prefix}-manager-state")
    localrun.grant_webhook_configurations(operator.plane, names)
    made = Rig(staged, cert_dir, names, f"leader-{uuid.uuid4().hex[:8]}", chart, tmp_path)
    try:
        yield made
    finally:
        for name in names:
            with suppress(NotFound):
                operator.admin.delete(VALIDATING_WEBHOOK_CONFIGURATIONS, None, name)


def create_and_bind(made: Rig) -> None:
    """The example schema, once the leader has installed its execution binding."""
    made.api.create(PTAHSCHEMAS, made.namespace, localrun.example_schema(made.namespace))
    until(
        lambda: bool((made.schema().get("status") or {}).get("executionBinding")),
        "the leader to install the execution binding",
    )
