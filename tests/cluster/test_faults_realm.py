"""Fault scenario 6 on the real cluster: one database realm, three resources, no overlap.

The Lease is per coordination digest, not per resource: two resources that address one
physical database serialize even when their keys are spelled differently. Here two
PtahSchemas and a PtahMigration point at one database of their own on the lab's
PostgreSQL, each under another spelling of one coordination key (so one digest and one
realm Lease). The schemas converge disjoint tables (each excludes the others'), so all
three have real work. The schema ``alpha`` and the migration ``ledger`` are approved
together; once one of them has an Apply Job, the schema ``beta`` is approved, and
must wait for the realm.

What holds is read from PostgreSQL and the API server, never from the manager's logs:

- PostgreSQL: an event trigger pair times every DDL command an executor session runs
  (and holds each for a moment, so an execution spans seconds): the three Apply
  sessions' windows are disjoint, each changed only its own resource's tables, and each
  table was made once;
- the API server: exactly one Apply Job per resource, ever, and their runs disjoint;
  the realm Lease's stored versions never pass from one holder to another without a
  release between them; ``beta`` said RealmBusy after its approval.

The figures (beta's wait, each hand-over of the realm) are printed, not asserted.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from controller.pieces.events import last_observed
from jobclaim import lease_name
from jobclaim.apiserver import JOBS, LEASES, PODS, PTAHMIGRATIONS, PTAHSCHEMAS, Object, Resource
from jobclaim.envelope import LABEL_OPERATION, OWNER_LABEL
from jobclaim.naming import coordination_digest
from jobclaim.times import parse_time
from lab.clusterrun import MANAGER_NAMESPACE, LabRun
from tests.cluster.clusterkit import Api, poll, recovery
from tests.cluster.tenants import (
    TIMED_AUDIT,
    Recorder,
    Tenant,
    everything,
    executions,
    named,
    overlaps,
)

pytestmark = pytest.mark.cluster

NAMESPACE: Final = "realm6"
DATABASE: Final = "realm6"
# Three spellings of one key: NFKC, trimmed and case-folded they are one realm.
KEYS: Final = {"alpha": "Realm6-Primary", "beta": "  realm6-primary ", "ledger": "REALM6-PRIMARY"}
KINDS: Final[dict[str, Resource]] = {
    "alpha": PTAHSCHEMAS,
    "beta": PTAHSCHEMAS,
    "ledger": PTAHMIGRATIONS,
}
DDL: Final = {
    "alpha": "CREATE TABLE alpha (id bigint PRIMARY KEY, label text NOT NULL);\n",
    "beta": "CREATE TABLE beta (id bigint PRIMARY KEY, amount numeric(12, 2) NOT NULL);\n",
}
# The table each resource's Apply makes in public (its objects are named after it).
MADE: Final = {"alpha": "public.alpha", "beta": "public.beta", "ledger": "public.invoices"}
DIGESTS: Final = {
    coordination_digest(engine="PostgreSQL", namespace=NAMESPACE, coordination_key=k, realm=None)
    for k in KEYS.values()
}
assert len(DIGESTS) == 1, "the three spellings must name one realm"
REALM_LEASE: Final = lease_name(next(iter(DIGESTS)))


def _holders(leases: Recorder) -> list[tuple[str, str, str]]:
    """(holder, epoch, renewTime) of each stored version of the realm Lease."""
    out = []
    for _, lease in leases.seen():
        spec = lease.get("spec") or {}
        epoch = (lease["metadata"].get("annotations") or {}).get("operator.ptah.run/lease-epoch")
        out.append((spec.get("holderIdentity") or "", str(epoch), str(spec.get("renewTime"))))
    return out


def _tenures(holders: list[tuple[str, str, str]]) -> list[tuple[str, str, str, str]]:
    """Each tenure (holder, epoch) with the renewTime it began and ended at. Pure."""
    tenures: list[tuple[str, str, str, str]] = []
    for holder, epoch, renewed in holders:
        if tenures and tenures[-1][:2] == (holder, epoch):
            tenures[-1] = (holder, epoch, tenures[-1][2], renewed)
        else:
            tenures.append((holder, epoch, renewed, renewed))
    return tenures


def _job_runs(jobs: Recorder) -> dict[str, list[Object]]:
    """Owner name -> the last stored version of each Apply Job it ever had."""
    last: dict[str, Object] = {}
    for _, job in jobs.seen():
        if (job["metadata"].get("labels") or {}).get(LABEL_OPERATION) == "apply":
            last[job["metadata"]["name"]] = job
    runs: dict[str, list[Object]] = {}
    for job in last.values():
        labels = job["metadata"].get("labels") or {}
        owner = labels.get(OWNER_LABEL["schema"]) or labels.get(OWNER_LABEL["migration"])
        runs.setdefault(str(owner), []).append(job)
    return runs


def _span(job: Object) -> tuple[datetime, datetime]:
    status = job.get("status") or {}
    began = parse_time(job["metadata"]["creationTimestamp"])
    ended = parse_time(status.get("completionTime"))
    assert began is not None and ended is not None, f"{job['metadata']['name']}: {status}"
    return began, ended


def _explain(tenant: Tenant, leases: Recorder, jobs: Recorder) -> None:
    for name, resource in KINDS.items():
        status = tenant.run.admin.get(resource, NAMESPACE, name).get("status") or {}
        print(f"# {name}: phase={status.get('phase')} op={status.get('activeOperation')}")
        for condition in status.get("conditions") or []:
            print(
                f"#   {condition.get('type')}={condition.get('status')}: {condition.get('message')}"
            )
        reasons = [event.get("reason") for event in tenant.events(name)]
        print(f"#   events: {reasons}")
    for tenure in _tenures(_holders(leases)):
        print(f"# realm tenure {tenure}")
    for kind, job in jobs.seen():
        conditions = [c.get("type") for c in (job.get("status") or {}).get("conditions") or []]
        print(f"# job {kind}: {job['metadata']['name']} {conditions}")
    for pod in tenant.run.admin.list(PODS, NAMESPACE):
        print(f"# pod {pod['metadata']['name']}: {(pod.get('status') or {}).get('phase')}")
    for row in tenant.run.query(DATABASE, "SELECT * FROM realm_audit.ddl ORDER BY n"):
        print(f"# ddl {row}")


def test_one_realm_serializes_two_schemas_and_a_migration_spelled_three_ways(
    lab_run: LabRun, api: Api
) -> None:
    tenant = Tenant(lab_run, NAMESPACE, DATABASE).open()
    kubeconfig: Path = lab_run.lab.kubeconfig("admin")
    leases = Recorder(api, kubeconfig, LEASES, MANAGER_NAMESPACE, named(REALM_LEASE))
    jobs = Recorder(api, kubeconfig, JOBS, NAMESPACE, everything)
    try:
        _scenario(tenant, leases, jobs)
    except BaseException:
        _explain(tenant, leases, jobs)
        raise
    finally:
        leases.close()
        jobs.close()
        tenant.close()


def _scenario(tenant: Tenant, leases: Recorder, jobs: Recorder) -> None:
    tenant.execute(TIMED_AUDIT)
    for name in ("alpha", "beta"):
        others = [other for other in MADE if other != name]
        exclude = ["invoices" if other == "ledger" else other for other in others]
        tenant.schema(name, KEYS[name], tenant.push_schema(f"{name}-schema", DDL[name]), exclude)
    tenant.migration("ledger", KEYS["ledger"])
    for name, resource in KINDS.items():
        tenant.awaiting(resource, name)
    print(f"# all three await approval; realm Lease {MANAGER_NAMESPACE}/{REALM_LEASE}")

    for name in ("alpha", "ledger"):
        print(f"# {tenant.approve(KINDS[name], name)}")
    first = poll(
        "an Apply Job of alpha or ledger",
        lambda: (
            tenant.apply_jobs(PTAHSCHEMAS, "alpha")
            or tenant.apply_jobs(PTAHMIGRATIONS, "ledger")
            or None
        ),
    )
    approved = datetime.now(UTC)
    print(f"# {first[0]['metadata']['name']} exists; {tenant.approve(PTAHSCHEMAS, 'beta')}")

    def beta_waits() -> list[Object] | None:
        busy = [
            event
            for event in tenant.events("beta")
            if event.get("reason") == "RealmBusy"
            # Said since the approval: a RealmBusy said before it and repeated after
            # is one Event whose series moved on, its eventTime still the first.
            and (parse_time(last_observed(event)) or approved) >= approved
        ]
        return busy or None

    busy = poll("beta told the realm is busy", beta_waits)
    print(f"# beta: RealmBusy from {busy[0].get('reportingInstance')}: {busy[0].get('note')}")
    for name, resource in KINDS.items():
        tenant.in_sync(resource, name)
    settled = (datetime.now(UTC) - approved).total_seconds()
    print(f"# all three InSync {settled:.1f}s after beta's approval")

    # PostgreSQL: one session per Apply, each on its own tables, windows disjoint.
    found = executions(tenant.run, DATABASE)
    for execution in found:
        print(f"# {execution.line()}")
    owners = []
    for execution in found:
        public = [o for o in execution.objects if o.startswith("public.")]
        owner = next(
            (name for name, made in MADE.items() if all(o.startswith(made) for o in public)), None
        )
        assert owner is not None, f"a session changed {public}, not one resource's tables"
        assert public.count(MADE[owner]) == (2 if owner == "ledger" else 1), public
        owners.append(owner)
    assert sorted(owners) == sorted(MADE), f"each Apply ran once: {owners}"
    assert overlaps(found) == [], "two executions overlapped in the database"
    for before, after in itertools.pairwise(found):
        print(
            f"# database idle between {before.session} and {after.session}: "
            f"{(after.began - before.ended).total_seconds():.1f}s"
        )

    # The API server: one Apply Job each, ever, their runs disjoint.
    runs = _job_runs(jobs)
    assert {name: len(runs.get(name, [])) for name in MADE} == dict.fromkeys(MADE, 1), runs.keys()
    spans = sorted((_span(job[0]), name) for name, job in runs.items() if name in MADE)
    for ((_, done), first_owner), ((start, _), next_owner) in itertools.pairwise(spans):
        print(f"# Apply of {first_owner} done {done.time()}, {next_owner}'s made {start.time()}")
        assert done <= start, f"the Apply Jobs of {first_owner} and {next_owner} overlapped"
    beta_created = next(span[0][0] for span in spans if span[1] == "beta")
    waited = (beta_created - approved).total_seconds()
    recovery(f"realm: beta approved -> its Apply Job created {waited:.1f}s")

    # The realm Lease: every hand-over went through a release.
    tenures = _tenures(_holders(leases))
    for holder, epoch, since, until in tenures:
        print(f"# realm: {holder or '(released)'} {epoch} {since} -> {until}")
    held = [(holder, epoch) for holder, epoch, _, _ in tenures]
    for (holder, epoch), (successor, its_epoch) in itertools.pairwise(held):
        assert not (holder and successor), (
            f"the realm passed from {holder} ({epoch}) to {successor} ({its_epoch}) unreleased"
        )
    assert held[-1][0] == "", f"the realm is still held by {held[-1][0]}"
