"""Fault scenario 5 on the real cluster: two managers, the leader paused past its Lease.

The chart's manager Deployment is scaled to two replicas (it is put back to the chart's
one at the end). A migration of its own (its own namespace and database) is approved;
the moment its Apply claim is stored, the leader's process is stopped with SIGSTOP on
the host (a Pod's container is a host process here), as an overloaded or descheduled
node stops it. The other replica waits the leader Lease out by its own clock, takes it
and dispatches; the old leader is resumed (SIGCONT) before the kubelet's liveness probe
would kill it, with whatever pass it was in the middle of.

What holds is read from the API server and PostgreSQL, never from the managers' logs:

- one Apply Job, ever, and the migrations' DDL reached the database once;
- the realm Lease: one tenure and one release, and no write after it;
- the leader Lease: the old holder, then the new one (one transition), never back;
- the migration's stored versions: one Apply claim, its mark never withdrawn and its
  Job UID never changed; each dispatch Event (approval consumed, marked, Job created,
  realm released) exactly once, whichever replica sent it;
- the old leader stops working: still running (no restart) and Ready again, it never
  holds the leader Lease again and reports nothing once its interrupted pass is over.

The figures (pause -> takeover -> Apply Job -> InSync) are printed, not asserted.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest

from controller.pieces.events import last_observed, occurrences
from jobclaim import lease_name
from jobclaim.apiserver import JOBS, LEASES, PODS, PTAHMIGRATIONS, Object
from jobclaim.envelope import LABEL_OPERATION
from jobclaim.naming import coordination_digest
from jobclaim.times import parse_time
from lab.clusterrun import MANAGER_NAMESPACE, LabRun
from tests.cluster.clusterkit import Api, poll, recovery
from tests.cluster.managers import (
    LEADER_LEASE,
    container_processes,
    holder,
    leader_lease,
    managers,
    paused,
    restarts,
    two_managers,
)
from tests.cluster.tenants import (
    TIMED_AUDIT,
    Recorder,
    Tenant,
    everything,
    executions,
    named,
)

pytestmark = pytest.mark.cluster

NAMESPACE: Final = "realm5"
DATABASE: Final = "realm5"
NAME: Final = "ledger"
KEY: Final = "realm5-primary"
REALM_LEASE: Final = lease_name(
    coordination_digest(engine="PostgreSQL", namespace=NAMESPACE, coordination_key=KEY, realm=None)
)
# What announces each durable dispatch write: each must be said exactly once. A mark
# may be withdrawn after a create the API server refused before storing it (the paused
# replica's webhook endpoint can answer no one until it drops out), and made again.
ONCE: Final = ("ApprovalConsumed", "JobCreated", "RealmReleased")
# A pass the old leader was in the middle of finishes within this after SIGCONT (its
# next request answers at once); anything it reports later is work it took up again.
STALE_PASS_GRACE: Final = timedelta(seconds=15)
# Resume this long before the kubelet's liveness probe could restart the paused
# container (a probe in flight when it stopped fails too, up to its timeout early):
# its verdict would end the process for a reason of the kubelet's.
KILL_MARGIN: Final = 3.0
# The chart's leader-election values for this scenario (its defaults are 15/10/2): a
# takeover within ~10 s leaves the new leader time to dispatch before the paused one
# must be resumed, ahead of its liveness probe.
TIMINGS: Final = {
    "LEASE_DURATION_SECONDS": "8",
    "RENEW_DEADLINE_SECONDS": "5",
    "RETRY_PERIOD_SECONDS": "1",
}


def _kill_after(pod: Object) -> float:
    """Seconds of failed liveness probes after which the kubelet restarts the container."""
    probe = pod["spec"]["containers"][0]["livenessProbe"]
    period, threshold = int(probe.get("periodSeconds", 10)), int(probe.get("failureThreshold", 3))
    # The first failing probe may have started just before the pause.
    return float(period * (threshold - 1))


def _operation(obj: Object) -> dict[str, Any]:
    return dict((obj.get("status") or {}).get("activeOperation") or {})


def _claim_progression(versions: list[Object]) -> list[str]:
    """The Apply claim through the migration's stored versions; a problem raises. Pure."""
    seen: list[str] = []
    ids: set[str] = set()
    marked, uid, cleared = False, "", False
    for obj in versions:
        operation = _operation(obj)
        if operation.get("type") != "Apply":
            if ids and not cleared:
                cleared = True
                seen.append(f"{obj['metadata']['resourceVersion']}: claim cleared")
            continue
        assert not cleared, "an Apply claim came back after it was cleared"
        ids.add(str(operation.get("id")))
        assert len(ids) == 1, f"more than one Apply claim: {ids}"
        rv = obj["metadata"]["resourceVersion"]
        if operation.get("dispatchStarted"):
            if not marked:
                seen.append(f"{rv}: dispatchStarted")
            marked = True
        elif marked:
            # Only a create refused before storing withdraws a mark: no Job yet.
            assert not uid, "the dispatch mark was withdrawn after its Job was recorded"
            seen.append(f"{rv}: dispatchStarted withdrawn")
            marked = False
        job_uid = str(operation.get("jobUID") or "")
        if uid:
            assert job_uid == uid, f"the claim's Job UID changed from {uid} to {job_uid!r}"
        elif job_uid:
            uid = job_uid
            seen.append(f"{obj['metadata']['resourceVersion']}: jobUID {uid}")
    assert cleared, "the Apply claim was never cleared"
    return seen


def _explain(tenant: Tenant, recorders: dict[str, Recorder]) -> None:
    status = tenant.run.admin.get(PTAHMIGRATIONS, NAMESPACE, NAME).get("status") or {}
    print(f"# phase={status.get('phase')} activeOperation={status.get('activeOperation')}")
    print(f"# lastRun={status.get('lastRun')} unresolvedRun={status.get('unresolvedRun')}")
    for event in tenant.events(NAME):
        print(f"# event {event.get('reason')} by {event.get('reportingInstance')}")
    for what, recorder in recorders.items():
        for kind, obj in recorder.seen() if recorder.failure is None else []:
            spec = obj.get("spec") or {}
            print(
                f"# {what} {kind} rv={obj['metadata']['resourceVersion']} "
                f"holder={spec.get('holderIdentity')} op={_operation(obj).get('type')}"
            )
    for pod in tenant.run.admin.list(PODS, MANAGER_NAMESPACE):
        print(f"# manager pod {pod['metadata']['name']} restarts={restarts(pod)}")


def test_a_paused_leader_loses_to_its_successor_and_stops_working(
    lab_run: LabRun, api: Api
) -> None:
    tenant = Tenant(lab_run, NAMESPACE, DATABASE).open()
    config: Path = lab_run.lab.kubeconfig("admin")
    recorders = {
        "leader": Recorder(api, config, LEASES, MANAGER_NAMESPACE, named(LEADER_LEASE)),
        "realm": Recorder(api, config, LEASES, MANAGER_NAMESPACE, named(REALM_LEASE)),
        "jobs": Recorder(api, config, JOBS, NAMESPACE, everything),
        "migration": Recorder(api, config, PTAHMIGRATIONS, NAMESPACE, named(NAME)),
    }
    try:
        # The migration reads and plans while the second replica starts.
        tenant.execute(TIMED_AUDIT)
        tenant.migration(NAME, KEY)
        # Back to the chart's one replica and timings at the end, whatever happened.
        with two_managers(lab_run, api, TIMINGS):
            try:
                _scenario(tenant, recorders)
            except BaseException:
                _explain(tenant, recorders)
                raise
    finally:
        for recorder in recorders.values():
            recorder.close()
        tenant.close()


def _scenario(tenant: Tenant, recorders: dict[str, Recorder]) -> None:
    run = tenant.run
    # The leader Lease as the new leader wrote it: the chart's timings for this scenario.
    poll(
        "a leader under the scenario's timings",
        lambda: (
            leader_lease(run)
            if leader_lease(run)["spec"].get("leaseDurationSeconds")
            == int(TIMINGS["LEASE_DURATION_SECONDS"])
            and holder(leader_lease(run)) in {p["metadata"]["name"] for p in managers(run)}
            else None
        ),
    )
    lease = leader_lease(run)
    old = holder(lease)
    pods = {pod["metadata"]["name"]: pod for pod in managers(run)}
    assert old in pods, f"the leader {old!r} is none of the manager Pods {sorted(pods)}"
    (standby,) = set(pods) - {old}
    before = restarts(pods[old])
    duration = int(lease["spec"]["leaseDurationSeconds"])
    print(f"# two managers: {old} leads (Lease of {duration}s), {standby} stands by")
    tenant.awaiting(PTAHMIGRATIONS, NAME)

    pids = container_processes(pods[old])
    lease = leader_lease(run)  # the last version before the pause
    assert holder(lease) == old, f"{old} lost the leader Lease before the pause"
    transitions = int(lease["spec"].get("leaseTransitions") or 0)
    resume_by = _kill_after(pods[old]) - KILL_MARGIN
    print(f"# {tenant.approve(PTAHMIGRATIONS, NAME)}")
    # The Apply claim is the first write of the dispatch: stop the leader right there,
    # in the middle of taking it to its Job. A tight poll: the next passes follow at once.
    end = time.monotonic() + 60
    while _operation(tenant.get(PTAHMIGRATIONS, NAME)).get("type") != "Apply":
        assert time.monotonic() < end, "the leader stored no Apply claim within 60s"
        time.sleep(0.02)  # the pause between polls, not a synchronization
    with paused(pids):
        stopped = time.monotonic()
        claim = _operation(tenant.get(PTAHMIGRATIONS, NAME))
        print(
            f"# SIGSTOP {old} (pids {pids}) at the Apply claim: dispatchStarted="
            f"{bool(claim.get('dispatchStarted'))} jobUID={claim.get('jobUID')!r} "
            f"leaseEpoch={claim.get('leaseEpoch')}"
        )
        successor = poll(
            "the standby taking the leader Lease",
            lambda: holder(leader_lease(run)) if holder(leader_lease(run)) != old else None,
            timeout=resume_by,
        )
        took_over = time.monotonic() - stopped
        recovery(f"leader paused -> {successor} leads {took_over:.1f}s")
        assert successor == standby

        def dispatched_or_due() -> str | None:
            if tenant.apply_jobs(PTAHMIGRATIONS, NAME):
                return "the new leader's Apply Job exists"
            return (
                "the liveness deadline is near" if time.monotonic() - stopped > resume_by else None
            )

        why = poll("the Apply Job or the resume deadline", dispatched_or_due, timeout=resume_by)
        resumed = datetime.now(UTC)
        print(f"# SIGCONT {old} {time.monotonic() - stopped:.1f}s after the pause: {why}")

    jobs = poll("the Apply Job", lambda: tenant.apply_jobs(PTAHMIGRATIONS, NAME) or None)
    created = time.monotonic() - stopped
    tenant.in_sync(PTAHMIGRATIONS, NAME)
    settled = time.monotonic() - stopped
    recovery(f"leader paused -> Apply Job created {created:.1f}s, -> InSync {settled:.1f}s")

    # The old leader is alive and serving again (Ready: its webhook answers).
    def ready_again() -> Object | None:
        pod = next(p for p in managers(run) if p["metadata"]["name"] == old)
        conditions = (pod.get("status") or {}).get("conditions") or []
        up = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return pod if up else None

    pod = poll(f"{old} Ready again", ready_again)
    assert restarts(pod) == before, f"the kubelet restarted {old}: the pause outlived its probe"

    # One Apply Job, ever; the database received the migrations once.
    ever = {
        obj["metadata"]["name"]
        for _, obj in recorders["jobs"].seen()
        if (obj["metadata"].get("labels") or {}).get(LABEL_OPERATION) == "apply"
    }
    final = tenant.get(PTAHMIGRATIONS, NAME)
    assert ever == {jobs[0]["metadata"]["name"]} == {final["status"]["lastRun"]["jobName"]}, ever
    found = executions(run, DATABASE)
    for execution in found:
        print(f"# {execution.line()}")
    assert len(found) == 1, "the migrations ran in more than one session"
    public = [o for o in found[0].objects if o.startswith("public.")]
    assert public == ["public.invoices", "public.invoices_pkey", "public.invoices"], public

    # The realm Lease: one tenure, one release, nothing written after it.
    realm = [obj for _, obj in recorders["realm"].seen()]
    holders = [k for k, _ in itertools.groupby(holder(obj) for obj in realm)]
    print(f"# realm Lease holders: {holders} over {len(realm)} stored versions")
    assert len(holders) == 2 and holders[0] and holders[1] == "", holders
    released = [i for i, obj in enumerate(realm) if holder(obj) == ""]
    assert len(released) == 1, "the realm was written again after its release"

    # The leader Lease: old, then new, one transition, never back.
    stored = [
        obj
        for _, obj in recorders["leader"].seen()
        if int(obj["metadata"]["resourceVersion"]) >= int(lease["metadata"]["resourceVersion"])
    ]
    leaders = [k for k, _ in itertools.groupby(holder(obj) for obj in stored)]
    print(f"# leader Lease holders: {leaders}")
    assert leaders == [old, successor], leaders
    now = leader_lease(run)
    assert holder(now) == successor
    assert int(now["spec"].get("leaseTransitions") or 0) == transitions + 1

    # The migration's stored versions: one claim, marked once, its Job UID never changed.
    versions = [obj for _, obj in recorders["migration"].seen()]
    for line in _claim_progression(versions):
        print(f"# migration rv {line}")
    print(f"# migration: {len(versions)} stored versions")

    # Events: each dispatch write said once; the old leader quiet after its last pass.
    # A repeat of one reason and note by one manager is one Event with a series, so
    # occurrences are counted (a doubled ApprovalConsumed is a series of two) and an
    # Event belongs to the window by when it was last said.
    events = [
        event
        for event in tenant.events(NAME)
        if (parse_time(last_observed(event)) or resumed) >= resumed - timedelta(minutes=5)
    ]
    apply_job = jobs[0]["metadata"]["name"]
    said: Counter[str] = Counter()
    for event in events:
        if event.get("reason") in (*ONCE, "DispatchMarked", "DispatchWithdrawn") and (
            # The readings' own Jobs are created and announced too: count the Apply's.
            event.get("reason") != "JobCreated" or apply_job in str(event.get("note"))
        ):
            said[str(event.get("reason"))] += occurrences(event)
    for event in sorted(events, key=lambda e: str(e.get("eventTime"))):
        by = event.get("reportingInstance")
        print(
            f"# event {event.get('eventTime')} {event.get('reason')} x{occurrences(event)} by {by}"
        )
    assert {reason: said[reason] for reason in ONCE} == dict.fromkeys(ONCE, 1), said
    assert said["DispatchMarked"] == said["DispatchWithdrawn"] + 1, said
    late = [
        (event.get("reason"), last_observed(event))
        for event in events
        if event.get("reportingInstance") == old
        and (parse_time(last_observed(event)) or resumed) > resumed + STALE_PASS_GRACE
    ]
    assert late == [], f"the old leader kept working after it was resumed: {late}"
