"""The alert rules in a real Prometheus, scraping the chart's manager on the lab cluster.

A real Prometheus (built from its Go module by ``make prometheus``; its HTTP API on
loopback only, its data in a temporary directory, stopped and removed at the end)
discovers the manager through the API server's EndpointSlices of the chart's metrics
Service, as a ServiceMonitor's Prometheus does, and evaluates the chart's own
PrometheusRule groups (rendered by helm; only the unknown outcome's hold time is
shortened). Then, on the chart's manager with the lab's fault points:

- a migration's Apply is stopped dead right after its mark (scenario 1's ``mark``
  row): the replacement manager records the run unresolved, ``Unknown``;
- ``PtahUnknownOutcome`` fires in Prometheus for ``kind="PtahMigration"``;
- the outcome gauges the manager serves read the same before its Pod is deleted and
  after the replacement's first passes (they are computed from stored status);
- a person's acknowledgment settles the run, and the alert resolves.

What is asserted is read from the API server and Prometheus's API, never from logs.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from jobclaim.apiserver import PODS, PTAHMIGRATIONS, Object
from kubectl_ptah import cli as kubectl_ptah
from lab import install
from lab.clusterrun import MANAGER_NAMESPACE, NAMESPACE, LabRun
from manager.metrics import GAUGE_HELP
from tests.cluster.clusterkit import Api, poll, recovery
from tests.cluster.faultcases import (
    RECOVERY_DEADLINE,
    Case,
    approve,
    awaiting_plan,
    create_case,
    get_case,
    lab_env,
    parked,
    promised_outcome,
    remove_case,
    sigkill,
    upgrade_chart,
)
from tests.cluster.managers import READY_DEADLINE
from tests.cluster.tenants import PLAN_DEADLINE
from tests.support.alertfile import rules_file
from tests.support.chartrender import VALUES, ToolUnavailable, build_prometheus_tool

pytestmark = pytest.mark.cluster

CASE: Final = Case("mark", "unknown", label="alert")
METRICS_PORT: Final = 8080
# Scrape and evaluate every 2 s: the whole test waits on a handful of cycles.
CYCLE: Final = "2s"
UNKNOWN_FOR: Final = "10s"
ALERT_DEADLINE: Final = 180.0
RESTART_DEADLINE: Final = 300.0
# The gauges read from stored status, which a replacement must report alike. Not the
# stored plans' figures: a manager lists plans at most once a minute (PLANS_TTL), so a
# plan the session's examples store just before the restart is in the replacement's
# first list and not yet in its predecessor's (seen: 1 plan before, 2 after, for good).
STORAGE_GAUGES: Final = frozenset({"stored_plans", "stored_plan_bytes"})
DOMAIN_GAUGES: Final = frozenset(f"ptah_{n}" for n in GAUGE_HELP if n not in STORAGE_GAUGES)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _rules(tmp: Path) -> Path:
    """The chart's PrometheusRule groups, as helm renders them for the lab's release."""
    argv = [
        str(install.HELM),
        "template",
        install.RELEASE,
        str(install.CHART),
        "--namespace",
        MANAGER_NAMESPACE,
        "--values",
        str(VALUES / "required.yaml"),
        "--show-only",
        "templates/prometheusrule.yaml",
        "--set",
        "monitoring.prometheusRule.enabled=true",
        "--set",
        f"monitoring.prometheusRule.thresholds.unknownOutcomeFor={UNKNOWN_FOR}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    (rule,) = [d for d in yaml.safe_load_all(done.stdout) if d]
    path = tmp / "rules.yaml"
    path.write_text(rules_file(rule))
    return path


def _config(run: LabRun, tmp: Path, rules: Path) -> Path:
    """Kubernetes service discovery against the lab's API server, as the admin: the
    chart's metrics Service's endpoints, labelled as a ServiceMonitor's targets are."""
    kubeconfig = yaml.safe_load(run.lab.kubeconfig("admin").read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    token = tmp / "token"
    token.write_text(kubeconfig["users"][0]["user"]["token"])
    token.chmod(0o600)
    config = {
        "global": {"scrape_interval": CYCLE, "scrape_timeout": CYCLE, "evaluation_interval": CYCLE},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "ptah-operator-metrics",
                "kubernetes_sd_configs": [
                    {
                        "role": "endpointslice",
                        "api_server": cluster["server"],
                        "namespaces": {"names": [MANAGER_NAMESPACE]},
                        "tls_config": {"ca_file": cluster["certificate-authority"]},
                        "authorization": {"credentials_file": str(token)},
                    }
                ],
                "relabel_configs": [
                    {
                        "source_labels": [
                            "__meta_kubernetes_service_name",
                            "__meta_kubernetes_endpointslice_port_name",
                        ],
                        "regex": "ptah-operator-metrics;http-metrics",
                        "action": "keep",
                    },
                    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                    {
                        "source_labels": ["__meta_kubernetes_service_name"],
                        "target_label": "service",
                    },
                    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                ],
            }
        ],
    }
    path = tmp / "prometheus.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Prometheus:
    """A Prometheus process on loopback; its HTTP API."""

    def __init__(self, binary: Path, config: Path, data: Path, log: Path) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}"
        self._log = log.open("wb")
        self.log = log
        self.process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
                "--log.level=warn",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=10.0)

    def ready(self) -> bool | None:
        if self.process.poll() is not None:
            pytest.fail(f"prometheus exited {self.process.returncode}: {self.log.read_text()}")
        try:
            return self.http.get("/-/ready").status_code == 200 or None
        except httpx.TransportError:
            return None

    def alerts(self, name: str) -> list[dict[str, Any]]:
        answer = self.http.get("/api/v1/alerts").json()
        return [a for a in answer["data"]["alerts"] if a["labels"].get("alertname") == name]

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.http.get("/api/v1/targets").json()["data"][
            "activeTargets"
        ]
        return active

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.http.close()
        self._log.close()


@pytest.fixture
def prometheus(lab_run: LabRun) -> Iterator[Prometheus]:
    try:
        binary = build_prometheus_tool("prometheus")
    except ToolUnavailable as error:
        pytest.fail(f"the alert test needs prometheus, which cannot be built: {error}")
    with tempfile.TemporaryDirectory(prefix="ptah-prometheus-") as scratch:
        tmp = Path(scratch)
        config = _config(lab_run, tmp, _rules(tmp))
        server = Prometheus(binary, config, tmp / "data", tmp / "prometheus.log")
        try:
            poll("prometheus ready", server.ready, timeout=60.0)
            yield server
        finally:
            server.stop()


@pytest.fixture
def alerting_case(lab_run: LabRun) -> Iterator[LabRun]:
    run = lab_run
    upgrade_chart(run, fault_points=True)
    assert lab_env(run) == {"PTAH_LAB_FAULT_POINTS": "true"}
    try:
        create_case(run, CASE)
        yield run
    finally:
        remove_case(run, CASE)
        upgrade_chart(run, fault_points=False)
        assert lab_env(run) == {}, "the chart's manager is back, with no lab variable"


def manager_pods(run: LabRun) -> list[Object]:
    selector = {"app.kubernetes.io/name": install.RELEASE, "app.kubernetes.io/component": "manager"}
    return run.admin.list(PODS, MANAGER_NAMESPACE, label_selector=selector)


def _gauges(run: LabRun) -> dict[str, float] | None:
    """The outcome gauges of the manager that leads, read from its /metrics."""
    for pod in manager_pods(run):
        address = (pod.get("status") or {}).get("podIP")
        if not address or pod["metadata"].get("deletionTimestamp"):
            continue
        try:
            text = httpx.get(f"http://{address}:{METRICS_PORT}/metrics", timeout=5.0).text
        except httpx.TransportError:
            continue
        samples = {
            f"{s.name}{json.dumps(s.labels, sort_keys=True)}": s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        if samples.get("ptah_controller_leader{}") == 1.0:
            return {k: v for k, v in samples.items() if k.split("{")[0] in DOMAIN_GAUGES}
    return None


def _firing(server: Prometheus, kind: str) -> dict[str, Any] | None:
    for alert in server.alerts("PtahUnknownOutcome"):
        if alert["state"] == "firing" and alert["labels"].get("kind") == kind:
            return alert
    return None


def _ptah(run: LabRun, *args: str) -> dict[str, Any]:
    verb, *rest = args
    out = io.StringIO()
    argv = ["--kubeconfig", str(run.lab.kubeconfig("admin")), "-n", NAMESPACE]
    argv += [verb, CASE.family, CASE.name, *rest, "--yes", "-o", "json"]
    assert kubectl_ptah.main(argv, stdin=io.StringIO(), stdout=out) == 0, f"{verb} refused"
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def test_an_unknown_outcome_fires_its_alert_survives_a_restart_and_resolves(
    alerting_case: LabRun, api: Api, prometheus: Prometheus
) -> None:
    run = alerting_case
    poll(
        "Prometheus scraping the manager",
        lambda: [t for t in prometheus.targets() if t["health"] == "up"] or None,
        timeout=ALERT_DEADLINE,
    )
    assert _firing(prometheus, "PtahMigration") is None, "the control: nothing is unknown yet"

    poll(f"{CASE.name}'s plan awaiting approval", lambda: awaiting_plan(run, CASE),
         timeout=PLAN_DEADLINE)  # fmt: skip
    print(f"# {CASE.name}: {approve(run, CASE)}")
    pod = parked(run, api, CASE)
    killed = sigkill(pod)
    api.delete(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{pod}", gracePeriodSeconds="0")
    final = poll(f"{CASE.name}'s run recorded unresolved", lambda: promised_outcome(run, CASE),
                 timeout=RECOVERY_DEADLINE)  # fmt: skip
    assert final["status"]["unresolvedRun"]["outcome"] == "Unknown"
    alert = poll("PtahUnknownOutcome firing in Prometheus",
                 lambda: _firing(prometheus, "PtahMigration"), timeout=ALERT_DEADLINE)  # fmt: skip
    recovery(f"{CASE.name}: killed after mark -> PtahUnknownOutcome firing "
             f"{time.monotonic() - killed:.1f}s")  # fmt: skip
    assert alert["annotations"]["runbook_url"].endswith("runbooks.md#ptahunknownoutcome")
    assert alert["labels"]["severity"] == "warning"

    # The gauges are stored status, not memory: a replacement reports the same. The
    # state before is read twice, a few cycles apart, so it is a settled one.
    def settled() -> dict[str, float] | None:
        first = _gauges(run)
        time.sleep(4.0)  # two scrapes' worth between the reads, not a synchronization
        return first if first is not None and _gauges(run) == first else None

    before = poll("the leader's outcome gauges settled", settled, timeout=ALERT_DEADLINE)
    key = 'ptah_unresolved_attempts{"kind": "PtahMigration", "outcome": "Unknown"}'
    assert before[key] >= 1.0, before
    (old,) = [
        p["metadata"]["name"]
        for p in manager_pods(run)
        if not p["metadata"].get("deletionTimestamp")
    ]
    api.delete(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{old}")
    restarted = time.monotonic()

    last: list[dict[str, float] | None] = [None]

    def same() -> dict[str, float] | None:
        names = [p["metadata"]["name"] for p in manager_pods(run)]
        if old in names:
            return None
        after = last[0] = _gauges(run)
        return after if after == before else None

    try:
        poll("the replacement's gauges equal to its predecessor's", same, timeout=RESTART_DEADLINE)
    except pytest.fail.Exception:
        # Which series differ, for whoever reads the failure (the poll says only that).
        after = last[0] or {}
        differ = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
                  if before.get(k) != after.get(k)}  # fmt: skip
        print(f"# gauges that differ (before, after): {differ}")
        raise
    recovery(f"outcome gauges equal after a manager restart: {time.monotonic() - restarted:.1f}s")

    # The acknowledgment is admitted by the webhook: the replacement must be Ready.
    install.wait_ready(
        run.admin,
        MANAGER_NAMESPACE,
        kubeconfig=run.lab.kubeconfig("admin"),
        report=print,
        timeout=READY_DEADLINE,
        check=run.lab.check,
    )
    operation_id = final["status"]["unresolvedRun"]["operationID"]
    print(f"# {_ptah(run, 'acknowledge', '--operation-id', operation_id)}")
    # The acknowledgment is read by the next History reading; as scenario 2 does, a
    # shorter interval makes it due at once rather than ten minutes after the record.
    run.admin.patch_spec(PTAHMIGRATIONS, NAMESPACE, CASE.name, {"interval": "20s"})
    poll(
        "the run settled by the acknowledgment",
        lambda: None if (get_case(run, CASE).get("status") or {}).get("unresolvedRun") else True,
        timeout=RECOVERY_DEADLINE,
    )
    poll(
        "PtahUnknownOutcome resolved in Prometheus",
        lambda: True if _firing(prometheus, "PtahMigration") is None else None,
        timeout=ALERT_DEADLINE,
    )
