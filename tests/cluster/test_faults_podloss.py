"""Fault scenario 2 on the real cluster: the Apply's Pod lost mid-run.

A mutating claim's Job that loses its Pod while SQL may be running has an outcome
nobody established. The spec's answers, checked here with real Pods, the chart's
manager and real SQL on the lab's PostgreSQL:

- the Apply Pod deleted mid-run: the outcome is Unknown, and the Job never gets a
  second Pod (one executor, ever); a schema's proof (Observe, then Plan) runs under
  the same Lease tenure as the Apply and, once the database converges, attributes no
  Apply; a migration's unresolved run survives a status wipe (the resource deleted
  and restored from a backup, which brings back the annotation copy and no status),
  is not settled by a History reading that still finds its migration pending, and is
  settled by a person's acknowledgment, after which one fresh approval applies the
  migration exactly once;
- the Apply Pod deleted after it finished and wrote its result record, before the
  manager could harvest it (its node's kubelet stopped meanwhile, so nothing reported
  the Pod's end and the Job could not finish): by the harvest the Pod and its log are
  gone, and the outcome is still read, from the record the Pod wrote under its own
  token: the Apply succeeded, once;
- the node's kubelet stopped mid-run, then restarted: nothing on the API server
  changes for the claim while the node is silent (no second Pod, no record, the
  realm's Lease still renewed under the same tenure), and the restarted kubelet takes
  the running Pod over, so the run the database finished is read from its own account
  and applied once.

The Apply is still running when the fault strikes because its SQL waits inside
PostgreSQL: the test holds a lock on a table the Apply alters (``gate``) and lets go
after the strike. Each scenario has its own resource, role and database; an event
trigger owned by the superuser counts every DDL command the database finished, and
Jobs, Pods, Events, Leases and status are read from the API server, never from the
manager's logs. Recovery times are printed, not asserted.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from typing import Any

import pytest

from jobclaim.api import UNRESOLVED_RUN_ANNOTATION
from jobclaim.apiserver import (
    PODS,
    PTAHMIGRATIONS,
    PTAHRESULTRECORDS,
    PTAHSCHEMAS,
    NotFound,
    Object,
)
from lab.clusterrun import NAMESPACE, LabRun
from tests.cluster.clusterkit import poll, recovery
from tests.cluster.subjects import (
    GATE_ALTER,
    MIGRATED,
    Subject,
    explained,
    gate_held,
    lease_of,
)
from tests.cluster.tenants import PLAN_DEADLINE

pytestmark = pytest.mark.cluster


def _one_executor(subject: Subject, job: Object) -> None:
    name = job["metadata"]["name"]
    assert [j["metadata"]["name"] for j in subject.jobs("apply")] == [name]
    created = subject.pods_created(name)
    status = subject.jobs("apply")[0].get("status") or {}
    print(
        f"# {name}: {created} Pod(s) ever created; job status active={status.get('active')} "
        f"failed={status.get('failed')} succeeded={status.get('succeeded')}"
    )
    assert created == 1
    assert not status.get("active")


@pytest.fixture(scope="module")
def subjects(lab_run: LabRun) -> dict[str, Subject]:
    """The three scenarios' resources, created together: their Resolve, Verify,
    readings and Plan Jobs run side by side while the scenarios go one by one."""
    made = {
        name: Subject(lab_run, resource, name)
        for resource, name in (
            (PTAHMIGRATIONS, "podloss-mig"),
            (PTAHSCHEMAS, "podloss-schema"),
            (PTAHMIGRATIONS, "podloss-node"),
            (PTAHSCHEMAS, "podloss-after"),
        )
    }
    for subject in made.values():
        subject.create()
    return made


# -- the Apply Pod deleted mid-run ----------------------------------------------------


def test_a_migration_apply_pod_deleted_mid_run_is_unknown_restored_and_acknowledged(
    subjects: dict[str, Subject],
) -> None:
    subject = subjects["podloss-mig"]
    with explained(subject):
        _migration_pod_deleted(subject)


def _migration_pod_deleted(subject: Subject) -> None:
    run = subject.run
    subject.awaiting_approval()
    with gate_held(subject):
        print(f"# {subject.ptah('approve')['name']} approved")
        job, pod = subject.running_apply()
        operation = subject.status()["activeOperation"]
        epoch = operation["leaseEpoch"]
        run.admin.delete(PODS, NAMESPACE, pod["metadata"]["name"])
        struck = time.monotonic()

        def unresolved() -> dict[str, Any] | None:
            record = subject.status().get("unresolvedRun")
            return record if record else None

        record = poll("the unresolved run", unresolved, timeout=PLAN_DEADLINE)
        recorded = time.monotonic() - struck
    # The gate is released: the deleted executor's session, if PostgreSQL still holds
    # it, now runs its waiting statement and finds its client gone: a rollback.
    poll("the deleted executor's session gone", lambda: subject.sessions() == 0 or None)
    print(f"# the unresolved run after the Pod's deletion ({recorded:.1f}s): {record}")
    assert record["outcome"] == "Unknown"
    assert record["operationID"] == operation["id"]
    assert record["jobName"] == job["metadata"]["name"]
    status = subject.status()
    assert status["lastRun"]["outcome"] == "Unknown"
    assert not status.get("activeOperation")
    copy_text = subject.get()["metadata"]["annotations"][UNRESOLVED_RUN_ANNOTATION]
    copy = json.loads(copy_text)
    assert copy["operationID"] == record["operationID"]
    lease = lease_of(run, epoch)
    print(f"# the realm's Lease after the record: {lease and lease.get('spec')}")
    _one_executor(subject, job)
    assert subject.ddl() == [], "the interrupted transaction must have been rolled back"
    assert subject.query("SELECT to_regclass('public.ledger') IS NULL") == [(True,)]

    # A spec edit settles nothing. This one shortens the History interval, so the
    # reading after the restore below is due at once rather than ten minutes after
    # the run was recorded.
    edited = run.admin.patch_spec(PTAHMIGRATIONS, NAMESPACE, subject.name, {"interval": "20s"})
    assert edited["metadata"]["generation"] == 2

    def edit_seen() -> dict[str, Any] | None:
        status = subject.status()
        return status if status.get("observedGeneration") == 2 else None

    status = poll("the spec edit seen", edit_seen)
    assert status["unresolvedRun"]["operationID"] == copy["operationID"]

    # A restore from a backup: the resource deleted, then created again from a copy
    # of its spec, labels and annotations, without status, as a backup tool keeps it.
    live = subject.get()
    backup: Object = {
        "apiVersion": live["apiVersion"],
        "kind": live["kind"],
        "metadata": {
            "name": subject.name,
            "namespace": NAMESPACE,
            "labels": live["metadata"].get("labels") or {},
            "annotations": live["metadata"].get("annotations") or {},
        },
        "spec": live["spec"],
    }
    assert backup["metadata"]["annotations"][UNRESOLVED_RUN_ANNOTATION] == copy_text
    run.admin.delete(PTAHMIGRATIONS, NAMESPACE, subject.name)

    def deleted() -> bool | None:
        try:
            run.admin.get(PTAHMIGRATIONS, NAMESPACE, subject.name)
        except NotFound:
            return True
        return None

    poll(f"{subject.name} deleted", deleted)
    # Announced only when the manager saw the deletion (a finalizer still on it).
    print(f"# UnresolvedRunDeleted Events: {len(subject.events('UnresolvedRunDeleted'))}")
    wiped = time.monotonic()
    new_uid = run.admin.create(PTAHMIGRATIONS, NAMESPACE, backup)["metadata"]["uid"]

    def restored() -> dict[str, Any] | None:
        record = subject.status().get("unresolvedRun")
        return record if record and record["operationID"] == copy["operationID"] else None

    poll("the unresolved run restored from its annotation", restored, timeout=PLAN_DEADLINE)
    print(f"# restored from the annotation {time.monotonic() - wiped:.1f}s after the restore")
    restores = [
        event
        for event in subject.events("UnresolvedRunRestored")
        if (event.get("regarding") or {}).get("uid") == new_uid
    ]
    assert restores, "the restored object's record must come from its copy"

    # A History reading of the database, which still has the migration pending,
    # settles nothing, and no Apply is claimed while the record stands.
    def read_with_record() -> dict[str, Any] | None:
        status = subject.status()
        history = status.get("history") or {}
        return status if history.get("observedAt") and status.get("unresolvedRun") else None

    status = poll(
        "a History reading beside the restored record", read_with_record, timeout=PLAN_DEADLINE
    )
    print(f"# the History reading: {status['history']}")
    assert status["history"]["pendingCount"] == 1
    assert status["unresolvedRun"]["operationID"] == copy["operationID"]
    assert subject.jobs("apply") == []

    acknowledged = time.monotonic()
    print(f"# {subject.ptah('acknowledge')}")

    def settled() -> dict[str, Any] | None:
        status = subject.status()
        resolved = status.get("resolvedRun") or {}
        done = not status.get("unresolvedRun") and resolved.get("resolution") == "Acknowledged"
        return status if done else None

    status = poll("the run settled by the acknowledgment", settled, timeout=PLAN_DEADLINE)
    assert status["resolvedRun"]["operationID"] == copy["operationID"]
    poll(
        "the annotation copy removed",
        lambda: (
            UNRESOLVED_RUN_ANNOTATION not in (subject.get()["metadata"].get("annotations") or {})
            or None
        ),
    )
    print(f"# settled by the acknowledgment {time.monotonic() - acknowledged:.1f}s later")

    # A fresh reading, a fresh plan, a fresh approval: the migration runs once.
    subject.awaiting_approval()
    print(f"# {subject.ptah('approve')['name']} approved")
    subject.until_phase("InSync")
    recovery(f"{subject.name}: Apply Pod deleted -> InSync {time.monotonic() - struck:.1f}s")
    assert subject.ddl() == MIGRATED
    assert subject.query("SELECT version FROM ptah_lab.revisions") == [(1,)]
    assert len(subject.jobs("apply")) == 1


# -- the schema: the proof under the same Lease, and no Apply attributed -----------


def test_a_schema_apply_pod_deleted_mid_run_is_proved_under_its_lease_and_attributed_nothing(
    subjects: dict[str, Subject],
) -> None:
    subject = subjects["podloss-schema"]
    with explained(subject):
        _schema_pod_deleted(subject)


def _schema_pod_deleted(subject: Subject) -> None:
    run = subject.run
    approved_plan = subject.awaiting_approval()["plan"]
    with gate_held(subject):
        print(f"# {subject.ptah('approve')['name']} approved")
        job, pod = subject.running_apply()
        epoch = subject.status()["activeOperation"]["leaseEpoch"]
        run.admin.delete(PODS, NAMESPACE, pod["metadata"]["name"])
        struck = time.monotonic()

        def pending() -> dict[str, Any] | None:
            record = subject.status().get("pendingObservation")
            return record if record else None

        record = poll("the pending observation", pending, timeout=PLAN_DEADLINE)
        recovery(
            f"{subject.name}: Apply Pod deleted -> pending observation "
            f"{time.monotonic() - struck:.1f}s"
        )
    poll("the deleted executor's session gone", lambda: subject.sessions() == 0 or None)
    assert record["outcome"] == "OutcomeUnknown"
    assert record["leaseEpoch"] == epoch
    _one_executor(subject, job)
    assert subject.ddl() == [], "the interrupted transaction must have been rolled back"

    # The proof: Observe, then a Plan that finds the change still to make. Every claim
    # it makes holds the Apply's tenure, and so does the realm's Lease throughout.
    seen: set[tuple[str, str]] = set()

    def proof_read_unconverged() -> bool | None:
        status = subject.status()
        active = status.get("activeOperation") or {}
        if active:
            seen.add((active.get("type", ""), active.get("leaseEpoch", "")))
        lease = lease_of(run, epoch)
        assert lease is not None, "the Lease left the Apply's tenure while the proof is owed"
        assert lease["spec"].get("holderIdentity"), "the Lease was released before the proof"
        plans = [
            j
            for j in subject.jobs("plan")
            if j["metadata"]["creationTimestamp"] >= job["metadata"]["creationTimestamp"]
        ]
        done = any((j.get("status") or {}).get("succeeded") for j in plans)
        return True if done and status.get("pendingObservation") and not active else None

    poll(
        "the proof's Plan read, the database not converged",
        proof_read_unconverged,
        timeout=PLAN_DEADLINE,
    )
    print(f"# claims seen during the proof (type, Lease epoch): {sorted(seen)}")
    print(f"# phase while the proof is owed: {subject.status().get('phase')}")
    assert seen, "no claim of the proof was seen"
    assert {e for _, e in seen} == {epoch}

    # The database converges by a hand the operator does not know: the proof settles
    # the record, and no Apply is attributed to it.
    subject.superuser(f"SET ROLE {subject.database}; {GATE_ALTER}")
    converged = time.monotonic()
    subject.until_phase("InSync")
    print(f"# InSync {time.monotonic() - converged:.1f}s after the database converged")
    status = subject.status()
    assert not status.get("pendingObservation")
    assert (status.get("applied") or {}).get("uid") != approved_plan["uid"]
    assert subject.events("ConvergedAfterUnknownOutcome")
    assert subject.ddl() == [("ALTER TABLE", "public.gate")]
    assert len(subject.jobs("apply")) == 1
    lease = lease_of(run, epoch)
    print(f"# the realm's Lease once InSync: {lease and lease.get('spec')}")
    assert lease is None or not lease["spec"].get("holderIdentity")


# -- the Apply Pod gone after it wrote its record ----------------------------------------


def test_an_apply_pod_gone_after_its_record_is_read_from_the_record(
    subjects: dict[str, Subject],
) -> None:
    subject = subjects["podloss-after"]
    with explained(subject):
        _pod_gone_after_its_record(subject)


def _pod_gone_after_its_record(subject: Subject) -> None:
    run = subject.run
    approved_plan = subject.awaiting_approval()["plan"]
    gate = ExitStack()
    gate.enter_context(gate_held(subject))
    with gate:
        print(f"# {subject.ptah('approve')['name']} approved")
        job, pod = subject.running_apply()
        name, pod_name = job["metadata"]["name"], pod["metadata"]["name"]
        # The node's kubelet stopped: the Apply runs on (its container is the
        # runtime's), but nothing reports its Pod's end, so the Job cannot finish and
        # the manager cannot harvest it. The Pod is deleted meanwhile; when the
        # kubelet is back it confirms the Pod ended, and the Job controller counts it
        # and lets it go before it marks the Job finished: at the harvest the Pod,
        # and its log, are gone.
        with run.lab.kubelet_stopped():
            gate.close()  # the ALTER proceeds; the runner records its result and exits

            def recorded() -> Object | None:
                try:
                    return run.admin.get(PTAHRESULTRECORDS, NAMESPACE, name)
                except NotFound:
                    return None

            record = poll(f"{name}'s result record", recorded, timeout=PLAN_DEADLINE)
            poll("the Apply's session gone", lambda: subject.sessions() == 0 or None)
            run.admin.delete(PODS, NAMESPACE, pod_name)
            struck = time.monotonic()

        def harvested() -> dict[str, Any] | None:
            status = subject.status()
            operation = status.get("activeOperation") or {}
            return status if operation.get("type") != "Apply" else None

        status = poll("the Apply harvested", harvested, timeout=PLAN_DEADLINE)
        recovery(
            f"{subject.name}: Apply Pod deleted after its record -> harvested "
            f"{time.monotonic() - struck:.1f}s"
        )
    pods = run.admin.list(PODS, NAMESPACE)
    owners = [p["metadata"].get("ownerReferences", []) for p in pods]
    assert not [o for o in owners if any(r.get("uid") == job["metadata"]["uid"] for r in o)]
    pending = status.get("pendingObservation") or {}
    print(f"# the record after the harvest: {json.dumps(pending)[:600]}")
    assert pending.get("outcome") == "ApplySucceeded", pending
    subject.until_phase("InSync")
    print(f"# InSync {time.monotonic() - struck:.1f}s after the Pod was gone")
    # The record is the Pod's: its bound token named it, and it names the Job.
    assert record["spec"]["pod"]["uid"] == pod["metadata"]["uid"]
    assert record["spec"]["job"]["uid"] == job["metadata"]["uid"]
    status = subject.status()
    assert not status.get("pendingObservation")
    assert (status.get("applied") or {}).get("uid") == approved_plan["uid"]
    assert subject.ddl() == [("ALTER TABLE", "public.gate")]
    _one_executor(subject, job)


# -- the node's kubelet stopped mid-run, then restarted ---------------------------------


def test_a_migration_apply_whose_kubelet_stops_mid_run_gets_no_second_executor(
    subjects: dict[str, Subject],
) -> None:
    subject = subjects["podloss-node"]
    with explained(subject):
        _kubelet_stopped(subject)


def _kubelet_stopped(subject: Subject) -> None:
    run = subject.run
    subject.awaiting_approval()
    with gate_held(subject) as gate:
        print(f"# {subject.ptah('approve')['name']} approved")
        job, _pod = subject.running_apply()
        operation = subject.status()["activeOperation"]
        epoch = operation["leaseEpoch"]
        before = lease_of(run, epoch)
        assert before is not None
        with run.lab.kubelet_stopped():
            stopped = time.monotonic()

            # The manager renews the realm's Lease every few seconds: a renewal while
            # the node is silent shows the claim supervised, not given up.
            def renewed() -> Object | None:
                lease = lease_of(run, epoch)
                assert lease is not None, "the Lease left the run's tenure while it may write"
                moved = lease["spec"].get("renewTime") != before["spec"].get("renewTime")
                return lease if moved else None

            poll("the Lease renewed while the kubelet is stopped", renewed)
            status = subject.status()
            assert status["activeOperation"]["id"] == operation["id"]
            assert not status.get("unresolvedRun")
            assert len(subject.jobs("apply")) == 1
            assert subject.pods_created(job["metadata"]["name"]) == 1
            # The run goes on without its kubelet: the gate opens, the migration commits.
            gate.close()
            poll("the run's session finished", lambda: subject.sessions() == 0 or None)
        print(f"# the kubelet was stopped for {time.monotonic() - stopped:.1f}s")
    restarted = time.monotonic()
    status = subject.until_phase("InSync").get("status") or {}
    recovery(f"{subject.name}: kubelet restarted -> InSync {time.monotonic() - restarted:.1f}s")
    print(f"# lastRun: {status.get('lastRun')}")
    assert status["lastRun"]["outcome"] == "Applied"
    assert not status.get("unresolvedRun")
    _one_executor(subject, job)
    assert subject.ddl() == MIGRATED
