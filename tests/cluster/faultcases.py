"""The manager killed after a durable write: the cases, their resources, and the kill.

``test_faults_kill`` kills the chart's manager after each durable write of an Apply
(its ``CASES``) and ``test_faults_alerts`` reads what the alert rules make of such a
kill, both through this: the chart upgraded with the lab's fault points (the lab's
manager image), a case's database with the DDL audit, its Secret, policy and resource
annotated with the write to stop after, its plan approved as a person approves it, the
parked manager found and SIGKILLed from the host, and the outcome the spec's table
promises read back.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psycopg
import pytest

from jobclaim.apiserver import (
    CONFIGMAPS,
    PODS,
    PTAHMIGRATIONS,
    PTAHSCHEMAS,
    NotFound,
    Object,
    Resource,
)
from kubectl_ptah import cli as kubectl_ptah
from lab import install
from lab.clusterrun import (
    EXAMPLES,
    LAB_MANAGER_IMAGE,
    MANAGER_IMAGE,
    MANAGER_NAMESPACE,
    NAMESPACE,
    POLICY,
    SECRETS,
    LabRun,
)
from lab.labfaults import ANNOTATION, PARKED
from lab.progress import DONE, FAILED, failure_of, phase_of
from tests.cluster.clusterkit import Api, poll
from tests.cluster.managers import chart_upgraded
from tests.cluster.tenants import AUDIT

EXAMPLE: Final = {(e.cli_kind, e.engine): e for e in EXAMPLES}
RESOURCE: Final[dict[str, Resource]] = {"migration": PTAHMIGRATIONS, "schema": PTAHSCHEMAS}
PREFIX: Final = "kill"
RECOVERY_DEADLINE: Final = 600.0


@dataclass(frozen=True)
class Case:
    boundary: str
    # What the next pass makes of it, as the spec's table says: "run" (the one Job
    # runs to InSync) or "unknown" (no Job; the run is recorded as unresolved).
    outcome: str
    label: str = ""
    family: str = "migration"
    engine: str = "PostgreSQL"

    @property
    def id(self) -> str:
        mysql = "mysql-" if self.engine == "MySQL" else ""
        return f"{mysql}{self.family}-{self.label or self.boundary}"

    @property
    def name(self) -> str:
        family = "my" if self.engine == "MySQL" else self.family[0]
        return f"{PREFIX}-{family}-{self.label or self.boundary}"

    @property
    def database(self) -> str:
        return self.name.replace("-", "_")

    @property
    def resource(self) -> Resource:
        return RESOURCE[self.family]

    @property
    def path(self) -> str:
        return f"/apis/operator.ptah.run/v1alpha1/namespaces/{NAMESPACE}/{self.resource.plural}"


# -- the chart's lab values ------------------------------------------------------------


def upgrade_chart(run: LabRun, *, fault_points: bool, swap: str = "") -> None:
    """The chart upgraded with the lab values, until the new manager alone runs: with
    any of them on, the lab's manager image (the shipped one holds no fault hook)."""
    image = run.images[LAB_MANAGER_IMAGE if fault_points or swap else MANAGER_IMAGE]
    chart_upgraded(
        run,
        {
            "image": {"repository": image.repository, "digest": image.digest},
            "lab": {"faultPoints": fault_points, "swapSteps": swap},
        },
    )


def lab_env(run: LabRun) -> dict[str, str]:
    deployment = run.admin.get(install.DEPLOYMENTS, MANAGER_NAMESPACE, install.RELEASE)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"] if "PTAH_LAB" in e["name"]}


# -- this file's own migrations ----------------------------------------------------------


def create_database(run: LabRun, name: str, audit: bool, engine: str = "PostgreSQL") -> str:
    """A role and its database (with the DDL audit when ``audit``); the URL Pods use.

    On MariaDB the general log is the audit, always on.
    """
    if engine == "MySQL":
        assert run.mariadb is not None
        password = secrets.token_urlsafe(18)
        run.mariadb.create_user(name, password)
        run.mariadb.create_database_named(name, owner=name)
        node_ip = str(run.lab.topology.node_ip)
        return run.mariadb.url(name, user=name, password=password, host=node_ip)
    assert run.postgres is not None
    pg = run.postgres
    password = secrets.token_urlsafe(18)
    pg.create_role(name, password)
    pg.create_database_named(name, owner=name)
    if audit:
        with psycopg.connect(pg.url(name), autocommit=True) as conn:
            conn.execute(AUDIT.encode())
    return pg.url(name, user=name, password=password, host=str(run.lab.topology.node_ip))


def create_secret(run: LabRun, name: str, url: str) -> dict[str, str]:
    run.admin.create(
        SECRETS,
        NAMESPACE,
        {"metadata": {"name": name}, "stringData": {"url": url}, "type": "Opaque"},
    )
    return {"name": name, "key": "url"}


def create_case(run: LabRun, case: Case) -> None:
    """The case's database with the DDL audit, its Secret and policy, and the resource."""
    example = EXAMPLE[case.family, case.engine]
    url = create_database(run, case.database, audit=True, engine=case.engine)
    target = create_secret(run, f"{case.name}-db", url)
    policy = f"{case.name}-policy"
    run.admin.create(
        CONFIGMAPS, NAMESPACE, {"metadata": {"name": policy}, "data": {"policy.json": POLICY}}
    )
    obj = example.load()
    annotations = {ANNOTATION: case.boundary} if case.boundary else {}
    obj["metadata"] = {"name": case.name, "annotations": annotations}
    spec = obj["spec"]
    spec["target"].pop("realmRef", None)
    spec["target"]["coordinationKey"] = f"{case.name}-primary"
    spec["target"]["urlFrom"] = target
    source = spec["desired" if case.family == "schema" else "artifact"]
    source["ociRef"] = run.pinned[example.artifact]
    source["verificationPolicyFrom"] = {"name": policy, "key": "policy.json"}
    if case.family == "schema":
        dev = create_database(run, f"{case.database}_dev", audit=False)
        # The whole of spec.dev: the example's is `provided: {}`, and dev names exactly
        # one of the two (kept beside it, the webhook refuses the create as malformed).
        spec["dev"] = {"urlFrom": create_secret(run, f"{case.name}-dev-db", dev)}
    run.admin.create(case.resource, NAMESPACE, obj)


def remove_case(run: LabRun, case: Case) -> None:
    """The migration (its Jobs go with it: they are owned), its Secret and policy."""
    for resource, name in (
        (case.resource, case.name),
        (SECRETS, f"{case.name}-db"),
        (SECRETS, f"{case.name}-dev-db"),
        (CONFIGMAPS, f"{case.name}-policy"),
    ):
        with contextlib.suppress(NotFound):
            run.admin.delete(resource, NAMESPACE, name)


def get_case(run: LabRun, case: Case) -> Object:
    obj = run.admin.get(case.resource, NAMESPACE, case.name)
    # An unknown outcome is published as a failure of the run; a run that was to
    # succeed must not fail.
    if phase_of(obj) in FAILED and case.outcome == "run":
        pytest.fail(f"{case.name} failed: {failure_of(obj)}")
    return obj


def awaiting_plan(run: LabRun, case: Case) -> Object | None:
    obj = get_case(run, case)
    plan = ((obj.get("status") or {}).get("plan") or {}).get("name")
    return obj if phase_of(obj) == "AwaitingApproval" and plan else None


def approve(run: LabRun, case: Case) -> str:
    out = io.StringIO()
    argv = ["--kubeconfig", str(run.lab.kubeconfig("admin")), "-n", NAMESPACE]
    argv += ["approve", case.family, case.name, "--yes", "-o", "json"]
    assert kubectl_ptah.main(argv, stdin=io.StringIO(), stdout=out) == 0
    made = json.loads(out.getvalue())
    return f"{made['kind']} {made['name']} stamped by {made['stampedBy']}"


# -- the kill ----------------------------------------------------------------------------


def manager_pods(run: LabRun) -> list[Object]:
    selector = {"app.kubernetes.io/name": install.RELEASE, "app.kubernetes.io/component": "manager"}
    return run.admin.list(PODS, MANAGER_NAMESPACE, label_selector=selector)


def parked_pod(run: LabRun, api: Api, case: Case) -> str | None:
    """The manager Pod whose log says it parked after the case's write (synchronization
    only: what is asserted is read from the API server and the database)."""
    line = PARKED.format(boundary=case.boundary) + f" of {NAMESPACE}/{case.name}"
    for pod in manager_pods(run):
        name = pod["metadata"]["name"]
        try:
            log = api.text(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{name}/log")
        except Exception:  # a Pod not started yet has no log
            continue
        if line in log:
            return str(name)
    return None


def host_pid(pod: str) -> int:
    """The manager process of ``pod`` as the host sees it: its environment names the Pod."""
    wanted = f"POD_NAME={pod}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile, or a kernel thread
        # The lab's manager program (lab.manager, in the lab's manager image) runs the
        # fault points; ptah-manager is the shipped one.
        if wanted in environ and any(p in cmdline for p in (b"lab.manager", b"ptah-manager")):
            found.append(int(entry.name))
    assert len(found) == 1, f"the host sees {len(found)} manager processes of {pod}"
    return found[0]


def parked(run: LabRun, api: Api, case: Case) -> str:
    """The Pod whose manager parked after the case's write; the annotation is then taken
    off, so the replacement does not stop at the same write again."""
    pod = poll(f"the manager parked after {case.name}'s {case.boundary} write",
               lambda: parked_pod(run, api, case), timeout=300.0)  # fmt: skip
    api.http.patch(
        f"{case.path}/{case.name}",
        json={"metadata": {"annotations": {ANNOTATION: None}}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).raise_for_status()
    return pod


def sigkill(pod: str) -> float:
    os.kill(host_pid(pod), signal.SIGKILL)
    return time.monotonic()


def promised_outcome(run: LabRun, case: Case) -> Object | None:
    obj = get_case(run, case)
    status = obj.get("status") or {}
    if any(status.get(record) for record in ("activeOperation", "pendingLockRelease",
                                              "pendingObservation")):  # fmt: skip
        return None
    if case.outcome == "run":
        return obj if phase_of(obj) == DONE else None
    return obj if status.get("unresolvedRun") else None
