"""A fault scenario's subject on the session's chart: one resource of its own, with its
role, databases (the DDL audit and a ``gate`` table the test can hold a lock on), Secret,
policy and artifact, and what is read of it from the API server and PostgreSQL.

The pod-loss scenarios (``test_faults_podloss``) and the upgrade-mid-Apply scenarios
(``test_faults_upgrade``) each strike an Apply whose SQL waits on ``gate`` while the
test holds it (``gate_held``), then read the subject's Jobs, Pods, Lease and DDL.
"""

from __future__ import annotations

import io
import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import psycopg
import pytest

from controller.pieces.events import occurrences
from jobclaim.apiserver import (
    CONFIGMAPS,
    EVENTS,
    JOBS,
    LEASES,
    PODS,
    PTAHSCHEMAS,
    SECRETS,
    NotFound,
    Object,
    Resource,
)
from jobclaim.envelope import LABEL_OPERATION, OWNER_LABEL
from kubectl_ptah import cli as kubectl_ptah
from lab.clusterrun import NAMESPACE, POLICY, LabRun
from lab.executor.documents import MIGRATIONS_ARTIFACT_TYPE, SCHEMA_ARTIFACT_TYPE
from lab.executor.migrations import SUM_FILE, sum_text
from lab.executor.oci import push_artifact
from lab.progress import FAILED, failure_of, phase_of
from tests.cluster.clusterkit import poll
from tests.cluster.tenants import AUDIT, PLAN_DEADLINE

# The Apply waits on the test's lock far longer than any scenario takes to strike.
LOCK_TIMEOUT: Final = "10m"
GATE: Final = "CREATE TABLE gate (id bigint PRIMARY KEY)"
GATE_ALTER: Final = "ALTER TABLE gate ADD COLUMN note text"
SCHEMA_SQL: Final = b"CREATE TABLE gate (\n    id bigint PRIMARY KEY,\n    note text\n);\n"
MIGRATION_FILES: Final = {
    "0001_ledger.sql": (
        b"CREATE TABLE ledger (id bigint PRIMARY KEY);\n" + GATE_ALTER.encode() + b";\n"
    )
}

# What the migration's one run leaves in the DDL audit (the event trigger of
# scenario 3, ``AUDIT``): 0001's CREATE TABLE, its primary key's index, the ALTER.
MIGRATED: Final = [
    ("CREATE TABLE", "public.ledger"),
    ("CREATE INDEX", "public.ledger_pkey"),
    ("ALTER TABLE", "public.gate"),
]


class Subject:
    """One scenario's own resource, role, database and artifact."""

    def __init__(
        self, run: LabRun, resource: Resource, name: str, *, interval: str | None = None
    ) -> None:
        self.run = run
        self.resource = resource
        self.name = name
        # The reading interval (the API's default is ten minutes), when a scenario
        # needs readings while it runs.
        self.interval = interval
        self.family = "schema" if resource is PTAHSCHEMAS else "migration"
        self.database = name.replace("-", "_")
        self.manifest: Object = {}

    # -- set-up ---------------------------------------------------------------

    def create(self) -> None:
        """Role, database (with ``gate`` and the DDL audit), Secret, policy, artifact, resource."""
        run = self.run
        pg = run.postgres
        assert pg is not None
        node_ip = str(run.lab.topology.node_ip)
        password = secrets.token_urlsafe(18)
        pg.create_role(self.database, password)
        databases = [self.database] + ([f"{self.database}_dev"] if self.family == "schema" else [])
        for database in databases:
            pg.create_database_named(database, owner=self.database)
            url = pg.url(database, user=self.database, password=password, host=node_ip)
            run.admin.create(
                SECRETS,
                NAMESPACE,
                {"metadata": {"name": database.replace("_", "-")}, "stringData": {"url": url}},
            )
        self.superuser(f"{GATE}; ALTER TABLE gate OWNER TO {self.database};{AUDIT}")
        run.admin.create(
            CONFIGMAPS,
            NAMESPACE,
            {"metadata": {"name": f"{self.name}-policy"}, "data": {"policy.json": POLICY}},
        )
        repository = f"{run.lab.registry}/podloss/{self.name}"
        if self.family == "schema":
            files = [("schema.sql", SCHEMA_SQL)]
            kind = SCHEMA_ARTIFACT_TYPE
        else:
            files = [*MIGRATION_FILES.items(), (SUM_FILE, sum_text(MIGRATION_FILES).encode())]
            kind = MIGRATIONS_ARTIFACT_TYPE
        digest = push_artifact(f"{repository}:lab", kind, files, plain_http=True)
        source = {
            "ociRef": f"{repository}@{digest}",
            "verificationPolicyFrom": {"name": f"{self.name}-policy", "key": "policy.json"},
        }
        spec: dict[str, Any] = {
            "target": {
                "engine": "PostgreSQL",
                "coordinationKey": f"{self.name}-primary",
                "urlFrom": {"name": self.name, "key": "url"},
            },
            "policy": {"apply": "OnApproval", "lockTimeout": LOCK_TIMEOUT},
        }
        if self.interval is not None:
            spec["interval"] = self.interval
        if self.family == "schema":
            spec["desired"] = source
            spec["dev"] = {"urlFrom": {"name": f"{self.name}-dev", "key": "url"}}
        else:
            spec["artifact"] = source
        kind_name = "PtahSchema" if self.family == "schema" else "PtahMigration"
        self.manifest = {
            "apiVersion": "operator.ptah.run/v1alpha1",
            "kind": kind_name,
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": spec,
        }
        run.admin.create(self.resource, NAMESPACE, self.manifest)

    def superuser(self, sql: str) -> None:
        assert self.run.postgres is not None
        with psycopg.connect(self.run.postgres.url(self.database), autocommit=True) as conn:
            conn.execute(sql.encode())

    def query(self, sql: str) -> list[tuple[object, ...]]:
        return self.run.query(self.database, sql)

    # -- reads ----------------------------------------------------------------

    def get(self) -> Object:
        obj = self.run.admin.get(self.resource, NAMESPACE, self.name)
        if phase_of(obj) in FAILED:
            pytest.fail(f"{self.name} failed: {failure_of(obj)}")
        return obj

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.get().get("status") or {}
        return status

    def jobs(self, operation: str | None = None) -> list[Object]:
        selector = {OWNER_LABEL[self.family]: self.name}
        if operation is not None:
            selector[LABEL_OPERATION] = operation
        return self.run.admin.list(JOBS, NAMESPACE, label_selector=selector)

    def pods_created(self, job: str) -> int:
        """How many Pods the Job controller ever created for ``job``, from its Events."""
        return sum(
            occurrences(event)
            for event in self.run.admin.list(EVENTS, NAMESPACE)
            if (event.get("regarding") or {}).get("kind") == "Job"
            and (event.get("regarding") or {}).get("name") == job
            and event.get("reason") == "SuccessfulCreate"
        )

    def events(self, reason: str) -> list[Object]:
        return [
            event
            for event in self.run.admin.list(EVENTS, NAMESPACE)
            if (event.get("regarding") or {}).get("name") == self.name
            and event.get("reason") == reason
        ]

    def ddl(self) -> list[tuple[object, ...]]:
        return self.query(
            "SELECT tag, object FROM fault_audit.ddl WHERE object LIKE 'public.%' ORDER BY n"
        )

    def waiting_on_lock(self) -> int:
        rows = self.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            f"AND usename = '{self.database}' AND wait_event_type = 'Lock'"
        )
        return int(str(rows[0][0]))

    def sessions(self) -> int:
        rows = self.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            f"AND usename = '{self.database}'"
        )
        return int(str(rows[0][0]))

    # -- waits ----------------------------------------------------------------

    def until_phase(self, *phases: str, timeout: float = PLAN_DEADLINE) -> Object:
        def reached() -> Object | None:
            obj = self.get()
            return obj if phase_of(obj) in phases else None

        return poll(f"{self.name} {'/'.join(phases)}", reached, timeout=timeout)

    def awaiting_approval(self) -> dict[str, Any]:
        def awaiting() -> dict[str, Any] | None:
            status = self.status()
            plan = status.get("plan") or {}
            return (
                status if status.get("phase") == "AwaitingApproval" and plan.get("name") else None
            )

        return poll(f"{self.name}'s plan awaiting approval", awaiting, timeout=PLAN_DEADLINE)

    def ptah(self, *args: str) -> dict[str, Any]:
        """``kubectl ptah VERB KIND NAME --yes -o json`` as the lab's admin."""
        verb, *rest = args
        out = io.StringIO()
        code = kubectl_ptah.main(
            [
                *("--kubeconfig", str(self.run.lab.kubeconfig("admin")), "-n", NAMESPACE),
                *(verb, self.family, self.name, *rest, "--yes", "-o", "json"),
            ],
            stdin=io.StringIO(),
            stdout=out,
        )
        assert code == 0, f"kubectl ptah {verb} {self.family} {self.name} refused"
        answer: dict[str, Any] = json.loads(out.getvalue())
        return answer

    def running_apply(self) -> tuple[Object, Object]:
        """The Apply Job and its one Pod, once its SQL waits on the gate in PostgreSQL."""

        def blocked() -> tuple[Object, Object] | None:
            jobs = self.jobs("apply")
            if len(jobs) != 1 or self.waiting_on_lock() < 1:
                return None
            uid = jobs[0]["metadata"]["uid"]
            pods = [
                pod
                for pod in self.run.admin.list(PODS, NAMESPACE)
                if any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences", []))
            ]
            return (jobs[0], pods[0]) if len(pods) == 1 else None

        return poll(f"{self.name}'s Apply waiting on the gate", blocked, timeout=PLAN_DEADLINE)

    def explain(self) -> None:
        """What the API server and the database hold, printed when a scenario fails."""
        try:
            obj = self.run.admin.get(self.resource, NAMESPACE, self.name)
        except NotFound:
            print(f"# {self.name} does not exist")
            obj = {}
        print(f"# {self.name} annotations={obj.get('metadata', {}).get('annotations')}")
        print(f"# {self.name} status={json.dumps(obj.get('status'), indent=1)[:4000]}")
        for event in self.run.admin.list(EVENTS, NAMESPACE):
            if (event.get("regarding") or {}).get("name", "").startswith(("ptah-", self.name)):
                regarding = (event.get("regarding") or {}).get("name")
                print(f"# event {regarding} {event.get('reason')}: {str(event.get('note'))[:240]}")
        for job in self.jobs():
            conditions = [
                (c.get("type"), c.get("status"), c.get("reason"))
                for c in (job.get("status") or {}).get("conditions") or []
            ]
            labels = job["metadata"].get("labels") or {}
            print(f"# job {job['metadata']['name']} {labels.get(LABEL_OPERATION)}: {conditions}")
        for pod in self.run.admin.list(PODS, NAMESPACE):
            print(f"# pod {pod['metadata']['name']}: {(pod.get('status') or {}).get('phase')}")
        print(f"# {self.database}'s DDL: {self.ddl()}")


def leases(run: LabRun) -> list[Object]:
    return run.admin.list(LEASES, None)


def lease_of(run: LabRun, epoch: str) -> Object | None:
    """The realm Lease whose tenure is ``epoch`` (its epoch annotation), or None."""
    for lease in leases(run):
        if (lease["metadata"].get("annotations") or {}).get(
            "operator.ptah.run/lease-epoch"
        ) == epoch:
            return lease
    return None


@contextmanager
def gate_held(subject: Subject) -> Iterator[psycopg.Connection[Any]]:
    """A superuser transaction holding ``gate`` (ACCESS SHARE): an ALTER of it waits."""
    assert subject.run.postgres is not None
    conn = psycopg.connect(subject.run.postgres.url(subject.database))
    try:
        conn.execute("LOCK TABLE gate IN ACCESS SHARE MODE")
        yield conn
    finally:
        conn.close()  # the transaction ends with the session: the lock goes


@contextmanager
def explained(*subjects: Subject) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for subject in subjects:
            subject.explain()
        raise
