"""What a fault scenario of its own needs on the session's chart: a tenant and witnesses.

The fault scenarios share make run's environment (``lab_run``) and must leave it as they
found it, so each works in a namespace of its own, on a database of its own on the lab's
PostgreSQL, with resources of its own pointing at artifacts it pushed itself:

- ``Tenant``: the namespace, a login role, the target and dev databases, their Secrets,
  the verification policy, the artifacts; its resources and their approvals; ``close``
  deletes the namespace (the manager takes its finalizers off).
- ``Recorder``: every stored version of one kind, from a watch that resumes where it
  broke off, so a scenario reads the history the API server kept (a Lease's holders,
  the Jobs ever created) instead of sampling it.
- ``TIMED_AUDIT``: an event trigger pair that records, in the target database, when
  each executor session began and ended each DDL command, and holds every executor
  DDL command for a while, so two executions that overlapped in time would show it.
- ``AUDIT``: an event trigger that counts every DDL command a database finishes, so a
  scenario can say its migrations reached the database once.
"""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

import psycopg

from jobclaim.apiserver import (
    CONFIGMAPS,
    EVENTS,
    JOBS,
    NAMESPACES,
    PTAHMIGRATIONS,
    PTAHSCHEMAS,
    SECRETS,
    SERVICEACCOUNTS,
    NotFound,
    Object,
    Resource,
    Unavailable,
)
from jobclaim.envelope import LABEL_OPERATION, OWNER_LABEL
from kube.client import KubeApi, resource_path
from kubectl_ptah import cli as kubectl_ptah
from lab.clusterrun import POLICY, LabRun
from lab.executor.documents import SCHEMA_ARTIFACT_TYPE
from lab.executor.oci import push_artifact
from lab.progress import DONE, FAILED, failure_of, phase_of
from tests.cluster.clusterkit import Api, poll

API_VERSION: Final = "operator.ptah.run/v1alpha1"
POLICY_NAME: Final = "lab-policy"
TARGET_SECRET: Final = "target-db"
DEV_SECRET: Final = "dev-db"
MIGRATIONS_ARTIFACT: Final = "shop/billing-migrations"
# Resolve, Verify, Read and Plan Jobs on a shared 2-core node before a plan waits.
PLAN_DEADLINE: Final = 900.0
_FAMILIES: Final = {
    "PtahSchema": (PTAHSCHEMAS, "schema"),
    "PtahMigration": (PTAHMIGRATIONS, "migration"),
}
Keep = Callable[[Object], bool]

# Every DDL command an executor session runs in the target database, timed by the server
# itself: the start trigger records the moment a command begins (and holds it for
# HOLD_SECONDS, so an execution spans seconds rather than milliseconds), the end trigger
# each object the command made or changed. A session is one executor connection (its
# backend pid and start time), and ``client`` is the address of the Pod it came from.
HOLD_SECONDS: Final = 1.5
TIMED_AUDIT: Final = f"""
CREATE SCHEMA realm_audit;
CREATE TABLE realm_audit.ddl (
  n bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  session text NOT NULL,
  client inet,
  phase text NOT NULL,
  tag text NOT NULL,
  object text
);
CREATE FUNCTION realm_audit.session() RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
  SELECT pg_backend_pid() || '@' || backend_start FROM pg_stat_activity
  WHERE pid = pg_backend_pid()
$$;
CREATE FUNCTION realm_audit.started() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
  INSERT INTO realm_audit.ddl (session, client, phase, tag)
  VALUES (realm_audit.session(), inet_client_addr(), 'start', tg_tag);
  IF current_setting('application_name') = 'ptah-lab-executor' THEN
    PERFORM pg_sleep({HOLD_SECONDS});
  END IF;
END $$;
CREATE FUNCTION realm_audit.ended() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE c record;
BEGIN
  FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    INSERT INTO realm_audit.ddl (session, client, phase, tag, object)
    VALUES (realm_audit.session(), inet_client_addr(), 'end', c.command_tag,
            c.object_identity);
  END LOOP;
END $$;
CREATE EVENT TRIGGER realm_started ON ddl_command_start EXECUTE FUNCTION realm_audit.started();
CREATE EVENT TRIGGER realm_ended ON ddl_command_end EXECUTE FUNCTION realm_audit.ended();
"""

# Every DDL command PostgreSQL finishes in the migration's database, counted by the
# server itself: an event trigger owned by the superuser writes one row per command.
AUDIT: Final = """
CREATE SCHEMA fault_audit;
CREATE TABLE fault_audit.ddl (n bigserial PRIMARY KEY, tag text NOT NULL, object text);
CREATE FUNCTION fault_audit.record() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE c record;
BEGIN
  FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    INSERT INTO fault_audit.ddl (tag, object) VALUES (c.command_tag, c.object_identity);
  END LOOP;
END $$;
CREATE EVENT TRIGGER fault_audit ON ddl_command_end EXECUTE FUNCTION fault_audit.record();
"""


@dataclass(frozen=True)
class Execution:
    """One executor session's DDL in the target database: when, from where, what."""

    session: str
    client: str
    began: datetime
    ended: datetime
    objects: tuple[str, ...]

    def line(self) -> str:
        return (
            f"session {self.session} from {self.client}: {self.began.time()} -> "
            f"{self.ended.time()} ({(self.ended - self.began).total_seconds():.1f}s) "
            f"{', '.join(self.objects)}"
        )


def executions(run: LabRun, database: str) -> list[Execution]:
    """Each executor session that changed ``public``, in the order it began."""
    rows = run.query(
        database,
        "SELECT session, host(client), min(at), max(at), "
        "array_agg(object ORDER BY n) FILTER (WHERE object IS NOT NULL) "
        "FROM realm_audit.ddl GROUP BY session, client "
        "HAVING bool_or(object LIKE 'public.%') ORDER BY min(at)",
    )
    found = []
    for session, client, began, ended, objects in rows:
        assert isinstance(began, datetime) and isinstance(ended, datetime)
        assert isinstance(objects, list)
        found.append(Execution(str(session), str(client), began, ended, tuple(map(str, objects))))
    return found


def overlaps(found: list[Execution]) -> list[tuple[Execution, Execution]]:
    """Every pair of executions whose DDL windows intersect. Pure."""
    ordered = sorted(found, key=lambda e: e.began)
    return [
        (first, second)
        for i, first in enumerate(ordered)
        for second in ordered[i + 1 :]
        if second.began <= first.ended
    ]


def named(name: str) -> Keep:
    """Keep the versions of the object called ``name``."""
    return lambda obj: bool(obj["metadata"]["name"] == name)


def everything(obj: Object) -> bool:
    return True


class Recorder:
    """Every stored version of ``resource`` in ``namespace`` from now on, in order.

    A watch that ends (the server closes it every few seconds) resumes from the last
    version it delivered, so no stored version is skipped; it runs on a client of its
    own, in a thread that ``close`` ends.
    """

    def __init__(
        self, api: Api, kubeconfig: Path, resource: Resource, namespace: str, keep: Keep
    ) -> None:
        self._http = api
        self._api = KubeApi.from_kubeconfig(kubeconfig)
        self._resource = resource
        self._namespace = namespace
        self._keep = keep
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.failure: BaseException | None = None
        self._seen: list[tuple[str, Object]] = []
        self._version = self._list()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _list(self) -> str:
        """Record what stands that was not seen in this version yet; the list's own
        resourceVersion, from which the watch replays every later change."""
        listed = self._http.get(resource_path(self._resource, self._namespace))
        with self._lock:
            known = {(obj["metadata"]["uid"], obj["metadata"]["resourceVersion"])
                     for _, obj in self._seen}  # fmt: skip
            self._seen.extend(
                ("LISTED", obj)
                for obj in listed.get("items") or []
                if self._keep(obj)
                and (obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]) not in known
            )
        return str(listed["metadata"]["resourceVersion"])

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self._api.watch(
                    self._resource,
                    self._namespace,
                    resource_version=self._version,
                    timeout_seconds=5,
                ):
                    obj = event.object
                    self._version = str(obj["metadata"]["resourceVersion"])
                    if event.type != "BOOKMARK" and self._keep(obj):
                        with self._lock:
                            self._seen.append((event.type, obj))
                    if self._stop.is_set():
                        return
            except Unavailable as error:
                if error.status != 410:
                    self.failure = error
                    return
                # The last version seen is this namespace's last change; other
                # namespaces' changes push the server's window past it while this one
                # is quiet (410, seen in CI after the other scenarios). The watch gave
                # every change up to its end; the list gives what stands after it.
                try:
                    self._version = self._list()
                except Exception as failed:
                    self.failure = failed
                    return
            except Exception as error:  # a broken watch is a failed witness, said at the end
                self.failure = error
                return

    def seen(self) -> list[tuple[str, Object]]:
        if self.failure is not None:
            raise AssertionError(f"the {self._resource.plural} watch failed: {self.failure}")
        with self._lock:
            return list(self._seen)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
        self._api.close()


@dataclass
class Tenant:
    """A namespace with its own database on the lab's PostgreSQL, and its resources."""

    run: LabRun
    namespace: str
    database: str
    role: str = ""
    created: list[tuple[Resource, str]] = field(default_factory=list)

    def open(self) -> Tenant:
        run, pg = self.run, self.run.postgres
        assert pg is not None
        admin = run.admin
        admin.create(NAMESPACES, None, {"metadata": {"name": self.namespace}})
        # The service-account controller creates it moments after the namespace.
        poll(
            f"the default service account of {self.namespace}",
            lambda: _get_or_none(admin, SERVICEACCOUNTS, self.namespace, "default"),
        )
        self.role, password = self.database, secrets.token_urlsafe(18)
        pg.create_role(self.role, password)
        node_ip = str(run.lab.topology.node_ip)
        for secret, database in (
            (TARGET_SECRET, self.database),
            (DEV_SECRET, f"{self.database}_dev"),
        ):
            pg.create_database_named(database, owner=self.role)
            url = pg.url(database, user=self.role, password=password, host=node_ip)
            admin.create(
                SECRETS,
                self.namespace,
                {"metadata": {"name": secret}, "stringData": {"url": url}, "type": "Opaque"},
            )
        admin.create(
            CONFIGMAPS,
            self.namespace,
            {"metadata": {"name": POLICY_NAME}, "data": {"policy.json": POLICY}},
        )
        return self

    def execute(self, sql: str) -> None:
        """Run ``sql`` in the target database as the superuser."""
        assert self.run.postgres is not None
        with psycopg.connect(self.run.postgres.url(self.database), autocommit=True) as conn:
            conn.execute(sql.encode())

    def push_schema(self, name: str, ddl: str) -> str:
        """A desired-schema artifact of one file; its reference pinned by digest."""
        where = f"{self.run.lab.registry}/{self.namespace}/{name}"
        digest = push_artifact(
            f"{where}:lab", SCHEMA_ARTIFACT_TYPE, [("schema.sql", ddl.encode())], plain_http=True
        )
        return f"{where}@{digest}"

    def target(self, key: str) -> Object:
        return {
            "engine": "PostgreSQL",
            "coordinationKey": key,
            "urlFrom": {"name": TARGET_SECRET, "key": "url"},
        }

    def schema(
        self, name: str, key: str, ref: str, exclude: list[str], extra: Object | None = None
    ) -> Object:
        """A PtahSchema converging ``public`` of the tenant's database, leaving ``exclude``;
        ``extra`` adds spec fields (an interval, execution settings)."""
        return self._create(
            "PtahSchema",
            name,
            {
                "target": self.target(key),
                "desired": {
                    "ociRef": ref,
                    "verificationPolicyFrom": {"name": POLICY_NAME, "key": "policy.json"},
                },
                "dev": {"urlFrom": {"name": DEV_SECRET, "key": "url"}},
                "policy": {"apply": "OnApproval", "exclude": exclude},
                **(extra or {}),
            },
        )

    def migration(self, name: str, key: str) -> Object:
        """A PtahMigration running the billing example's migrations on the tenant's database."""
        return self._create(
            "PtahMigration",
            name,
            {
                "target": self.target(key),
                "artifact": {
                    "ociRef": self.run.pinned[MIGRATIONS_ARTIFACT],
                    "verificationPolicyFrom": {"name": POLICY_NAME, "key": "policy.json"},
                },
                "policy": {"apply": "OnApproval"},
            },
        )

    def _create(self, kind: str, name: str, spec: Object) -> Object:
        resource = _FAMILIES[kind][0]
        self.created.append((resource, name))
        return self.run.admin.create(
            resource,
            self.namespace,
            {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec},
        )

    def get(self, resource: Resource, name: str) -> Object:
        obj = self.run.admin.get(resource, self.namespace, name)
        if phase_of(obj) in FAILED:
            raise AssertionError(f"{resource.kind} {name} failed: {failure_of(obj)}")
        return obj

    def awaiting(self, resource: Resource, name: str) -> Object:
        """Wait for the resource's plan to await approval."""

        def ready() -> Object | None:
            obj = self.get(resource, name)
            plan = ((obj.get("status") or {}).get("plan") or {}).get("name")
            return obj if phase_of(obj) == "AwaitingApproval" and plan else None

        return poll(f"{resource.kind} {name} awaiting approval", ready, timeout=PLAN_DEADLINE)

    def in_sync(self, resource: Resource, name: str) -> Object:
        def done() -> Object | None:
            obj = self.get(resource, name)
            return obj if phase_of(obj) == DONE else None

        return poll(f"{resource.kind} {name} InSync", done, timeout=PLAN_DEADLINE)

    def approve(self, resource: Resource, name: str) -> str:
        """``kubectl ptah approve --yes``: admission stamps the approver."""
        out = io.StringIO()
        code = kubectl_ptah.main(
            [
                *("--kubeconfig", str(self.run.lab.kubeconfig("admin"))),
                *("-n", self.namespace, "approve", _FAMILIES[resource.kind][1], name),
                *("--yes", "-o", "json"),
            ],
            stdin=io.StringIO(),
            stdout=out,
        )
        assert code == 0, f"kubectl ptah approve {resource.kind} {name} refused"
        made = json.loads(out.getvalue())
        return f"{made['kind']} {made['name']} stamped by {made['stampedBy']}"

    def apply_jobs(self, resource: Resource, name: str) -> list[Object]:
        selector = {OWNER_LABEL[_FAMILIES[resource.kind][1]]: name, LABEL_OPERATION: "apply"}
        return self.run.admin.list(JOBS, self.namespace, label_selector=selector)

    def events(self, name: str) -> list[Object]:
        return [
            event
            for event in self.run.admin.list(EVENTS, self.namespace)
            if (event.get("regarding") or {}).get("name") == name
        ]

    def close(self) -> None:
        """Delete the namespace; the manager takes the resources' finalizers off."""
        with contextlib.suppress(NotFound):
            self.run.admin.delete(NAMESPACES, None, self.namespace)


def _get_or_none(admin: KubeApi, resource: Resource, namespace: str, name: str) -> Object | None:
    try:
        return admin.get(resource, namespace, name)
    except NotFound:
        return None
