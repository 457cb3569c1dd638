"""Fault scenario 1 on the real cluster: the manager killed at each durable write of an Apply.

The spec's table "the process stopped, what does the next pass see" names every
durable write of a claim and what the next pass makes of a stop right after it. Here
the stop is real: the chart's manager runs with the lab's fault points
(``lab.faultPoints``, refused unless the executor is the lab's stand-in), and a
resource of this file's own, on a database of its own, names one write in its
``lab.ptah.run/stop-after`` annotation. Right after that write succeeds the pass
parks for good (``lab.labfaults``, in the lab's manager image); the test removes the
annotation (so the replacement does not stop there again), SIGKILLs the manager's
process from the host (a Pod's processes are the host's), and deletes its Pod. The
replacement manager then takes over. What holds is read from the API server and from
PostgreSQL itself:

- at most one Apply Job ever existed for the resource (every Job the API server
  stored since the approval, by UID, followed by a watch), and none ever stood
  under a claim that was not marked (``dispatchStarted`` or a recorded UID);
- the database received the migrations' DDL at most once (an event trigger counts
  every command; on MariaDB, the server's own general log), exactly once where the
  outcome is a run;
- the outcome the table promises: ``claim``, ``create`` and ``record`` run the one
  Job to InSync (the last two adopt it), ``mark`` records the run as unknown
  (``status.unresolvedRun``) with no Job and no SQL, ``outcome`` performs the
  staged release;
- the realm's Lease is released, and released no earlier than every Apply Pod's
  container stopped (the release's ``renewTime`` against the kubelet's
  ``finishedAt``).

Then the swapped-boundary build: the same lab-only guard installs a manager whose
dispatch creates the Job before it marks (``lab.swapSteps=mark,create``, the fault
suite's ``MARK<->CREATE`` swap). On the real cluster the chart's controller-write
webhook refuses every create of a claim not yet marked, so that build's Apply never
runs: scenario 1's outcome check fails for it (no Job, no SQL, an unmarked claim
long past the time the real build took to recover), which the test asserts.

Both engines: the MySQL example's migrations (``examples/ptahmigration-mysql.yaml``, on
the lab's MariaDB) at ``create`` (the dispatch: the replacement adopts a Job that ran
its DDL, which must reach the server once though MySQL commits each DDL statement on
its own) and ``outcome`` (the harvest: the staged release after a run that is over).

Both families: a PtahMigration at every boundary, a PtahSchema at ``create`` (its
Apply crosses the same writes through the same ``DispatchPass``; the replacement
adopts its Job and proves the outcome under the same Lease; killed after its mark, a
schema owes a proof no reading can give and holds its database until a person
settles it, which is scenario 2's business). The chart's manager is restored at the
end of the file. The Lease-epoch, snapshot and approval-spent rows of the table write
nothing a Job
depends on and are left to the crash simulation. Each recovery time
(kill -> the promised outcome) is printed, not asserted.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Final

import pytest

from jobclaim import coordination_digest, lease_name
from jobclaim.apiserver import (
    JOBS,
    LEASES,
    PODS,
    NotFound,
    Object,
)
from jobclaim.envelope import LABEL_OPERATION, OWNER_LABEL
from lab.clusterrun import (
    MANAGER_NAMESPACE,
    NAMESPACE,
    LabRun,
)
from tests.cluster.clusterkit import Api, poll, recovery
from tests.cluster.faultcases import (
    RECOVERY_DEADLINE,
    Case,
    approve,
    awaiting_plan,
    create_case,
    get_case,
    lab_env,
    manager_pods,
    parked,
    promised_outcome,
    remove_case,
    sigkill,
    upgrade_chart,
)
from tests.cluster.tenants import PLAN_DEADLINE, Recorder, everything

pytestmark = pytest.mark.cluster

# The PostgreSQL examples: these rows count DDL with PostgreSQL's event trigger.
SWAPPED_DEADLINE: Final = 180.0
# 0001's CREATE TABLE (and its primary key's index), 0002's ALTER TABLE.
DDL: Final = [
    ("CREATE TABLE", "public.invoices"),
    ("CREATE INDEX", "public.invoices_pkey"),
    ("ALTER TABLE", "public.invoices"),
]
# The MySQL example's 0001 CREATE TABLE and 0002 ALTER TABLE, as MariaDB's general log
# shows them (the executor's own revision table left out).
MYSQL_DDL: Final = [("CREATE TABLE", "products"), ("ALTER TABLE", "products")]
MYSQL_STATEMENT: Final = re.compile(
    r"\s*(CREATE TABLE|ALTER TABLE)\s+(?:IF NOT EXISTS\s+)?`?(\w+)`?", re.IGNORECASE
)
# The schema example's two tables; the executor's plan decides the rest of its DDL
# (indexes, constraints), each of which must reach the database once.
SCHEMA_TABLES: Final = [("CREATE TABLE", "public.customers"), ("CREATE TABLE", "public.orders")]
UNMARKED: Final = "a Job stands under a claim that is not marked"


CASES: Final = [
    Case("claim", "run"),
    Case("mark", "unknown"),
    Case("create", "run"),
    Case("record", "run"),
    Case("outcome", "run"),
    # A schema's Apply crosses the same writes through the same DispatchPass; killed
    # after its create, the replacement adopts the Job and the proof runs under the
    # same Lease.
    Case("create", "run", family="schema"),
    # A MySQL migration at the dispatch and at the harvest: two rows, since the cluster
    # time is the cost (README) and the other writes cross the same engine-blind code.
    Case("create", "run", engine="MySQL"),
    Case("outcome", "run", engine="MySQL"),
]
# No fault point: the swapped build is judged by the outcome alone.
SWAPPED: Final = Case("", "run", label="swapped")
_SWAPPED_TEST: Final = "test_a_build_that_creates_before_it_marks_fails_the_scenario"


@pytest.fixture(scope="module")
def lab_faults(lab_run: LabRun, api: Api, request: pytest.FixtureRequest) -> Iterator[LabRun]:
    """The chart's manager with the lab's fault points, and every selected case's
    migration planned; afterwards the migrations are gone and the chart's manager is back."""
    run = lab_run
    cases = _selected(request)
    upgrade_chart(run, fault_points=True)
    assert lab_env(run) == {"PTAH_LAB_FAULT_POINTS": "true"}
    try:
        for case in cases:
            create_case(run, case)
        yield run
    finally:
        for case in cases:
            remove_case(run, case)
        upgrade_chart(run, fault_points=False)
        assert lab_env(run) == {}, "the chart's manager is back, with no lab variable"


def _selected(request: pytest.FixtureRequest) -> list[Case]:
    """The cases this session runs (all, or those ``-k`` kept): a run of the MySQL rows
    alone plans no PostgreSQL resource on the shared 2-core node."""
    here = [
        item
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.module is request.module
    ]
    chosen: list[Case] = []
    for item in here:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "case" in callspec.params:
            chosen.append(callspec.params["case"])
    swapped = [SWAPPED] if any(item.originalname == _SWAPPED_TEST for item in here) else []
    return [*chosen, *swapped]


# -- the kill ----------------------------------------------------------------------------


# -- what the API server and the database hold ------------------------------------------


class Stored:
    """Every version of the namespace's Jobs and Pods the API server stores while the
    scenario runs, followed as it happens: the API server's watch window is short (a
    replay from the approval's version at the end was already "too old" on the lab
    cluster), so a Job or Pod deleted meanwhile is still seen."""

    def __init__(self, run: LabRun, api: Api) -> None:
        admin = run.lab.kubeconfig("admin")
        self._recorders = {
            key: Recorder(api, admin, resource, NAMESPACE, everything)
            for resource, key in ((JOBS, "jobs"), (PODS, "pods"))
        }

    @property
    def objects(self) -> dict[str, dict[str, Object]]:
        """Each Job and Pod by UID, as last stored."""
        return {
            key: {obj["metadata"]["uid"]: obj for _, obj in recorder.seen()}
            for key, recorder in self._recorders.items()
        }

    def close(self) -> None:
        for recorder in self._recorders.values():
            recorder.close()
        for recorder in self._recorders.values():
            recorder.seen()  # raises when following broke: history would be lost

    def apply_jobs(self, case: Case) -> dict[str, Object]:
        """Every Apply Job of the case the API server stored, by UID, as last seen."""
        return {
            uid: job
            for uid, job in self.objects["jobs"].items()
            if (job["metadata"].get("labels") or {}).get(OWNER_LABEL[case.family]) == case.name
            and (job["metadata"].get("labels") or {}).get(LABEL_OPERATION) == "apply"
        }

    def stopped_at(self, jobs: dict[str, Object]) -> list[str]:
        """When each container of each Pod of ``jobs`` stopped, as the kubelet said in
        the last version stored; a container never seen stopped is ``running``."""
        found = []
        for pod in self.objects["pods"].values():
            labels = pod["metadata"].get("labels") or {}
            if labels.get("batch.kubernetes.io/controller-uid") not in jobs:
                continue
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                terminated = (status.get("state") or {}).get("terminated")
                found.append(terminated["finishedAt"] if terminated else "running")
        return found


def _unmarked_job(run: LabRun, case: Case) -> str | None:
    """The invariant at the kill: a Job under the claim's reserved name means the claim
    is marked (``dispatchStarted``, or a recorded UID). Its problem, or None."""
    operation = (get_case(run, case).get("status") or {}).get("activeOperation") or {}
    if not operation.get("jobName"):
        return None
    try:
        run.admin.get(JOBS, NAMESPACE, operation["jobName"])
    except NotFound:
        return None
    marked = operation.get("dispatchStarted") or operation.get("jobUID")
    return None if marked else f"{UNMARKED}: {operation['jobName']}"


def _ddl(run: LabRun, case: Case) -> list[tuple[object, ...]]:
    if case.engine == "MySQL":
        # What the server itself ran in the case's database, never the executor's report.
        assert run.mariadb is not None
        found = (MYSQL_STATEMENT.match(text) for text in run.mariadb.queries(case.database))
        ran = [(m.group(1).upper(), m.group(2)) for m in found if m]
        return [row for row in ran if row[1] != "ptah_lab_revisions"]
    return run.query(
        case.database,
        "SELECT tag, object FROM fault_audit.ddl WHERE object LIKE 'public.%' ORDER BY n",
    )


def _lease(run: LabRun, case: Case) -> Object | None:
    digest = coordination_digest(
        engine=case.engine,
        namespace=NAMESPACE,
        coordination_key=f"{case.name}-primary",
        realm=None,
    )
    try:
        return run.admin.get(LEASES, MANAGER_NAMESPACE, lease_name(digest))
    except NotFound:
        return None


def _released(run: LabRun, case: Case) -> Object | None:
    lease = _lease(run, case)
    return lease if lease is not None and not lease["spec"].get("holderIdentity") else None


def _state(run: LabRun, case: Case) -> str:
    """The durable state the kill left, on one line."""
    status = get_case(run, case).get("status") or {}
    operation = status.get("activeOperation") or {}
    claim = {k: operation.get(k) for k in ("type", "dispatchStarted", "jobUID")}
    held = (_lease(run, case) or {}).get("spec", {}).get("holderIdentity")
    return (
        f"claim {claim if operation else None}, pendingLockRelease "
        f"{bool(status.get('pendingLockRelease'))}, realm held {bool(held)}"
    )


def _explain(run: LabRun, api: Api, case: Case) -> None:
    obj = run.admin.get(case.resource, NAMESPACE, case.name)
    status = obj.get("status") or {}
    print(f"# {case.name}: phase={status.get('phase')} status={json.dumps(status)[:1500]}")
    for job in run.admin.list(JOBS, NAMESPACE):
        if (job["metadata"].get("labels") or {}).get(OWNER_LABEL[case.family]) == case.name:
            print(f"# job {job['metadata']['name']}: {(job.get('status') or {}).get('conditions')}")
    print(f"# lease: {(_lease(run, case) or {}).get('spec')}")
    print(f"# the database's DDL: {_ddl(run, case)}")
    for pod in manager_pods(run):
        name = pod["metadata"]["name"]
        try:
            log = api.text(
                f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{name}/log", tailLines="60"
            )
        except Exception:
            continue
        print(f"# the log of {name}, last 60 lines:\n{log}")


# -- the scenario ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_manager_killed_after_each_durable_write_leaves_what_the_table_promises(
    lab_faults: LabRun, api: Api, case: Case
) -> None:
    try:
        _scenario(lab_faults, api, case)
    except BaseException:
        _explain(lab_faults, api, case)
        raise


def _scenario(run: LabRun, api: Api, case: Case) -> None:
    awaiting = poll(f"{case.name}'s plan awaiting approval", lambda: awaiting_plan(run, case),
                    timeout=PLAN_DEADLINE)  # fmt: skip
    stored = Stored(run, api)
    try:
        _kill_and_recover(run, api, case, stored, awaiting["status"]["plan"])
    finally:
        stored.close()


def _kill_and_recover(
    run: LabRun, api: Api, case: Case, stored: Stored, plan: dict[str, str]
) -> None:
    print(f"# {case.name}: {approve(run, case)}")
    pod = parked(run, api, case)
    assert _unmarked_job(run, case) is None
    print(f"# {case.name}: parked after {case.boundary}: {_state(run, case)}")
    killed = sigkill(pod)
    api.delete(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{pod}", gracePeriodSeconds="0")
    print(f"# {case.name}: SIGKILLed the manager in {pod} and deleted the Pod")

    final = poll(f"{case.name}'s promised outcome ({case.outcome})",
                 lambda: promised_outcome(run, case), timeout=RECOVERY_DEADLINE)  # fmt: skip
    recovered = time.monotonic() - killed
    recovery(f"{case.name}, killed after {case.boundary} -> {case.outcome} "
          f"{recovered:.1f}s")  # fmt: skip

    jobs = stored.apply_jobs(case)
    ddl = _ddl(run, case)
    print(f"# {case.name}: Apply Jobs ever {sorted(jobs)}, DDL {ddl}")
    assert len(jobs) <= 1, f"more than one Apply Job existed: {sorted(jobs)}"
    if case.outcome == "unknown":
        assert jobs == {}, "a marked claim whose Job is missing never creates one"
        assert ddl == [], "no statement may reach the database without a Job"
        assert final["status"]["unresolvedRun"]
    elif case.family == "migration":
        assert len(jobs) == 1
        expected = MYSQL_DDL if case.engine == "MySQL" else DDL
        assert ddl == expected, "each migration's DDL reached the database exactly once"
        assert (
            final["status"]["lastRun"]["jobName"] == next(iter(jobs.values()))["metadata"]["name"]
        )
    else:
        assert len(jobs) == 1
        assert len(ddl) == len(set(ddl)), "a statement of the plan reached the database twice"
        assert [row for row in ddl if row in SCHEMA_TABLES] == SCHEMA_TABLES, ddl
        # The plan the person approved is the one recorded as applied, by the one Job.
        assert final["status"]["applied"]["uid"] == plan["uid"], final["status"]["applied"]

    lease = poll(f"{case.name}'s realm Lease released", lambda: _released(run, case))
    released = lease["spec"]["renewTime"]
    stopped = stored.stopped_at(jobs)
    print(f"# {case.name}: Lease released at {released}, Apply Pods stopped at {stopped}")
    assert len(stopped) >= len(jobs), "each Apply Job's Pod was seen"
    for finished in stopped:
        assert finished != "running", "the Lease was released while an Apply Pod runs"
        # finishedAt has whole seconds; the release's renewTime has microseconds.
        assert released[:19] >= finished[:19], (released, finished)


def test_a_build_that_creates_before_it_marks_fails_the_scenario(
    lab_faults: LabRun, api: Api
) -> None:
    """The swapped-boundary build (create before mark) under scenario 1's check.

    On the real cluster the build cannot even reach its first kill: the chart's
    controller-write webhook refuses a mutating claim's create before its
    ``dispatchStarted``, so its Apply never runs. Scenario 1's outcome check fails for
    it: within a deadline several times the recoveries above, the claim is still
    unmarked, no Apply Job was ever stored and no statement reached the database. The
    test passes because that check fails as expected.
    """
    run, case = lab_faults, SWAPPED
    try:
        poll(f"{case.name}'s plan awaiting approval", lambda: awaiting_plan(run, case),
             timeout=PLAN_DEADLINE)  # fmt: skip
        upgrade_chart(run, fault_points=True, swap="mark,create")
        assert lab_env(run) == {
            "PTAH_LAB_FAULT_POINTS": "true",
            "PTAH_LAB_SWAP_STEPS": "mark,create",
        }
        stored = Stored(run, api)
        try:
            print(f"# {case.name}: {approve(run, case)}")
            # A deadline for something that must not happen: the recoveries above took
            # well under a minute each; three minutes without the outcome is the check
            # failing.
            with pytest.raises(pytest.fail.Exception, match="did not happen within"):
                poll(f"{case.name}'s outcome under the swapped build",
                     lambda: promised_outcome(run, case), timeout=SWAPPED_DEADLINE)  # fmt: skip
            operation = (get_case(run, case).get("status") or {}).get("activeOperation") or {}
        finally:
            stored.close()
        jobs = stored.apply_jobs(case)
        ddl = _ddl(run, case)
        print(
            f"# {case.name}: scenario 1's outcome check fails for the swapped build: after "
            f"{SWAPPED_DEADLINE:.0f}s the claim is {operation.get('type')} dispatchStarted="
            f"{operation.get('dispatchStarted')}, Apply Jobs ever {sorted(jobs)}, DDL {ddl}"
        )
        assert operation.get("type") == "Apply" and not operation.get("dispatchStarted")
        assert jobs == {} and ddl == []
    except BaseException:
        _explain(run, api, case)
        raise
    finally:
        # The chart's order back before the module's end restores the rest.
        upgrade_chart(run, fault_points=True)
