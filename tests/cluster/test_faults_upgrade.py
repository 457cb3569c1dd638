"""Fault scenario 4 on the real cluster: the chart upgraded under running Jobs.

A rolling upgrade replaces the manager while Jobs it dispatched still run. What the
replacement may do with them depends on what changed, and the spec's answers are
checked here with the chart's own ``helm upgrade``, real Pods and real SQL:

- a release that changes only the manager's identity (the image digest, and the
  runner image the Jobs' install container names) adopts a running Apply: the one
  Job runs to its end and is read, nothing is recorded as uncertain;
- a release that changes the Job's Pod template (here: a size limit on every Job's
  scratch volume) cannot claim a running Apply as its own: a migration's run is
  recorded Unknown (``status.unresolvedRun``) with no second Job, the resource is
  Blocked and claims nothing else while the record stands, the realm's Lease is not
  released but left to expire after the Pod has stopped (the spec's rule for a run
  retired while it may still write), and a History reading that finds the migration
  applied settles it; a schema's run becomes a pending observation of unknown
  outcome, whose proof finds the database converged and attributes no Apply;
- a read-only Job running across a template-changing release is run again: a new
  attempt under a new Job built by the new release (the old Job is left to its own
  deadline), and the reading completes.

The releases are images of the session's own manager, pushed to the lab registry
beside it: ``crane mutate --label`` for the identity (same content, new digest),
``crane append`` of a layer replacing ``jobclaim/builder.py`` for the template. The
Apply and the reading are still running when the upgrade lands because their SQL
waits inside PostgreSQL on a lock the test holds (scenario 2's ``gate``; the lab
executor's revision table). The chart's release is restored at the end. Jobs are
followed as the API server stores them; outcomes are read from the API server and the
database's own DDL audit. Each recovery time is printed, not asserted.
"""

from __future__ import annotations

import io
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest

import jobclaim.builder
from jobclaim.apiserver import JOBS, PODS, PTAHMIGRATIONS, PTAHSCHEMAS, Object
from jobclaim.envelope import LABEL_OPERATION, OWNER_LABEL
from lab.artifacts import run_crane
from lab.clusterrun import MANAGER_IMAGE, NAMESPACE, LabRun
from tests.cluster.clusterkit import Api, poll, recovery
from tests.cluster.managers import chart_upgraded, holder, leader_lease, managers
from tests.cluster.subjects import (
    MIGRATED,
    Subject,
    explained,
    gate_held,
    lease_of,
)
from tests.cluster.tenants import PLAN_DEADLINE, Recorder

pytestmark = pytest.mark.cluster

RELEASE_LABEL: Final = "lab.ptah.run/release"
# Where the manager image's venv keeps the package (images/manager/Containerfile,
# Debian bookworm's python3.11).
SITE: Final = "opt/ptah/lib/python3.11/site-packages"
# The template release's one change: every Job's scratch volume gets a size limit. A
# Pod template field the claim does not pin (a schema claim pins its grace period, so
# a new default grace would not change a running schema Apply's rebuild).
TMP_BEFORE: Final = '{"name": "tmp", "emptyDir": {}},'
TMP_AFTER: Final = '{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},'
TMP_LIMIT: Final = "64Mi"
INTERVAL: Final = "20s"
# What a PtahSchema's Apply does to the gate table (scenario 2's schema).
SCHEMA_DDL: Final = [("ALTER TABLE", "public.gate")]


# -- the releases -----------------------------------------------------------------------


def _crane(run: LabRun, *args: str) -> str:
    """crane against the lab registry; the digest of the image it wrote."""
    digest = run_crane(run.lab.crane, *args).rsplit("@", 1)[-1]
    assert digest.startswith("sha256:") and len(digest) == 71, digest
    return digest


def _template_layer(path: Path) -> None:
    """A layer whose ``jobclaim/builder.py`` gives every Job's scratch volume a limit,
    and whose whiteout drops the image's compiled copy of the old one (the image's
    filesystem is read-only: Python compiles the new source in memory)."""
    source = Path(jobclaim.builder.__file__).read_text()
    assert source.count(TMP_BEFORE) == 1, "the builder's scratch volume moved"
    changed = source.replace(TMP_BEFORE, TMP_AFTER).encode()
    package = f"{SITE}/jobclaim"
    with tarfile.open(path, "w") as layer:
        for name, data in (
            (f"{package}/builder.py", changed),
            (f"{package}/__pycache__/.wh.builder.cpython-311.pyc", b""),
        ):
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode, entry.mtime = len(data), 0o644, int(time.time())
            layer.addfile(entry, io.BytesIO(data))


@dataclass(frozen=True)
class Releases:
    run: LabRun
    repository: str
    digests: dict[str, str]

    def values(self, release: str) -> dict[str, Any]:
        """The chart values that install ``release``: the manager image and, since the
        manager image also supplies the Jobs' runner, the runner image."""
        digest = self.digests[release]
        return {
            "image": {"digest": digest},
            "execution": {"runnerImage": f"{self.repository}@{digest}"},
        }


@pytest.fixture(scope="module")
def releases(lab_run: LabRun) -> Iterator[Releases]:
    """The chart's release and the two test releases; the chart's is back afterwards."""
    run = lab_run
    manager = run.images[MANAGER_IMAGE]
    repo = manager.repository
    identity = _crane(run, "mutate", manager.ref, "--label", f"{RELEASE_LABEL}=identity",
                      "-t", f"{repo}:identity")  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        layer = Path(work) / "builder.tar"
        _template_layer(layer)
        template = _crane(run, "append", "-b", manager.ref, "-f", str(layer),
                          "-t", f"{repo}:template")  # fmt: skip
    made = Releases(
        run, repo, {"chart": manager.digest, "identity": identity, "template": template}
    )
    assert len(set(made.digests.values())) == 3, made.digests
    print(f"# releases: {made.digests}")
    try:
        yield made
    finally:
        chart_upgraded(run, made.values("chart"))


@pytest.fixture(scope="module")
def subjects(lab_run: LabRun, releases: Releases) -> dict[str, Subject]:
    """The scenarios' resources, created together so their readings run side by side."""
    # Readings every 20 s: the settling History reading and the held one come soon.
    made = {
        name: Subject(lab_run, resource, name, interval=INTERVAL)
        for resource, name in (
            (PTAHMIGRATIONS, "upgrade-id"),
            (PTAHSCHEMAS, "upgrade-sid"),
            (PTAHMIGRATIONS, "upgrade-tpl"),
            (PTAHSCHEMAS, "upgrade-stpl"),
        )
    }
    for subject in made.values():
        subject.create()
    return made


# -- what the API server stores --------------------------------------------------------


@contextmanager
def followed(api: Api, subject: Subject) -> Iterator[Recorder]:
    """Every stored version of the subject's Jobs while the block runs."""
    owner = OWNER_LABEL[subject.family]

    def mine(obj: Object) -> bool:
        return (obj["metadata"].get("labels") or {}).get(owner) == subject.name

    recorder = Recorder(api, subject.run.lab.kubeconfig("admin"), JOBS, NAMESPACE, mine)
    try:
        yield recorder
    finally:
        recorder.close()
    recorder.seen()  # raises when following broke: history would be lost


def jobs_ever(recorder: Recorder, operation: str) -> dict[str, Object]:
    """Each Job of ``operation`` the API server stored, by UID, as last seen."""
    return {
        obj["metadata"]["uid"]: obj
        for _, obj in recorder.seen()
        if (obj["metadata"].get("labels") or {}).get(LABEL_OPERATION) == operation
    }


def _tmp_limit(job: Object) -> str | None:
    """The size limit of the Job's scratch volume: set only by the template release."""
    (tmp,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "tmp"]
    limit = tmp["emptyDir"].get("sizeLimit")
    return None if limit is None else str(limit)


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _upgraded(run: LabRun, releases: Releases, release: str) -> datetime:
    """Install ``release``; when the new manager took the leader Lease."""
    old = {pod["metadata"]["name"] for pod in managers(run)}
    chart_upgraded(run, releases.values(release))

    def new_leader() -> Object | None:
        lease = leader_lease(run)
        return lease if holder(lease) and holder(lease) not in old else None

    lease = poll(f"the {release} release's manager leading", new_leader)
    print(f"# {release} release installed; {holder(lease)} leads")
    return _time(lease["spec"]["acquireTime"])


# -- the scenarios ----------------------------------------------------------------------


@contextmanager
def running_applies(api: Api, *names: str, subjects: dict[str, Subject]) -> Iterator[list[Running]]:
    """Each subject's plan approved and its Apply running, its SQL held on the gate
    for the block; every Job each subject stores is followed throughout."""
    with ExitStack() as stack:
        pair = [subjects[name] for name in names]
        stack.enter_context(explained(*pair))
        plans = {subject.name: subject.awaiting_approval()["plan"] for subject in pair}
        jobs = {subject.name: stack.enter_context(followed(api, subject)) for subject in pair}
        gates = ExitStack()
        stack.enter_context(gates)
        for subject in pair:
            gates.enter_context(gate_held(subject))
        running = []
        for subject in pair:
            print(f"# {subject.ptah('approve')['name']} approved")
            job, pod = subject.running_apply()
            operation = subject.status()["activeOperation"]
            running.append(Running(subject, plans[subject.name], job, pod, operation,
                                   jobs[subject.name], gates))  # fmt: skip
        yield running


@dataclass
class Running:
    """One subject's Apply as the upgrade finds it, and what it stores."""

    subject: Subject
    plan: dict[str, Any]
    job: Object
    pod: Object
    operation: dict[str, Any]
    jobs: Recorder
    gates: ExitStack

    @property
    def uid(self) -> str:
        return str(self.job["metadata"]["uid"])

    def one_apply(self) -> None:
        """One Apply Job ever, with one Pod, and its DDL reached the database once."""
        applies = jobs_ever(self.jobs, "apply")
        print(f"# {self.subject.name}: Apply Jobs ever {sorted(applies)}")
        assert list(applies) == [self.uid], "no Apply Job but the one that was running"
        assert self.subject.pods_created(self.job["metadata"]["name"]) == 1
        expected = MIGRATED if self.subject.family == "migration" else SCHEMA_DDL
        assert self.subject.ddl() == expected, "the DDL reached the database exactly once"


def test_an_upgrade_that_changes_only_the_manager_identity_adopts_a_running_apply(
    releases: Releases, subjects: dict[str, Subject], api: Api
) -> None:
    run = releases.run
    with running_applies(api, "upgrade-id", "upgrade-sid", subjects=subjects) as applies:
        upgraded = time.monotonic()
        leading = _upgraded(run, releases, "identity")
        for apply in applies:
            # The new manager supervises the claim as its own: it renews the realm's
            # Lease under the same tenure while the Apply still waits on the gate.
            def renewed(epoch: str = apply.operation["leaseEpoch"]) -> Object | None:
                lease = lease_of(run, epoch)
                renew = ((lease or {}).get("spec") or {}).get("renewTime")
                return lease if renew and _time(renew) > leading else None

            poll(f"{apply.subject.name}'s realm Lease renewed by the new manager", renewed)
            status = apply.subject.status()
            assert status["activeOperation"]["jobUID"] == apply.uid
            assert not status.get("unresolvedRun") and not status.get("pendingObservation")
        applies[0].gates.close()
        finals = [apply.subject.until_phase("InSync") for apply in applies]
        recovery(f"identity-only upgrade -> InSync {time.monotonic() - upgraded:.1f}s")
    chart = f"{releases.repository}@{releases.digests['chart']}"
    for apply, final in zip(applies, finals, strict=True):
        apply.one_apply()
        status = final["status"]
        if apply.subject.family == "migration":
            last = status["lastRun"]
            print(f"# {apply.subject.name}: lastRun {last}")
            assert (last["jobName"], last["outcome"]) == (apply.job["metadata"]["name"], "Applied")
            # The audit names the release that dispatched the Job, not the one that read it.
            assert last["dispatchedBy"]["controllerImage"] == chart, last["dispatchedBy"]
            assert not status.get("unresolvedRun") and not status.get("resolvedRun")
        else:
            # The approved plan is the one recorded as applied: the run was read.
            assert status["applied"]["uid"] == apply.plan["uid"], status.get("applied")
            assert not status.get("pendingObservation")


def test_an_upgrade_that_changes_the_job_template_records_a_running_apply_unknown(
    releases: Releases, subjects: dict[str, Subject], api: Api
) -> None:
    run = releases.run
    with running_applies(api, "upgrade-tpl", "upgrade-stpl", subjects=subjects) as applies:
        migration, schema = applies
        assert all(_tmp_limit(apply.job) is None for apply in applies)
        upgraded = time.monotonic()
        _upgraded(run, releases, "template")

        def recorded() -> tuple[dict[str, Any], dict[str, Any]] | None:
            unresolved = migration.subject.status().get("unresolvedRun")
            pending = schema.subject.status().get("pendingObservation")
            return (unresolved, pending) if unresolved and pending else None

        record, pending = poll("both running Applies recorded Unknown", recorded,
                               timeout=PLAN_DEADLINE)  # fmt: skip
        print(f"# recorded {time.monotonic() - upgraded:.1f}s after the upgrade began: "
              f"{record}; {pending}")  # fmt: skip
        assert (record["outcome"], record["jobUID"]) == ("Unknown", migration.uid)
        assert record["operationID"] == migration.operation["id"]
        assert (pending["outcome"], pending["applyJobUID"]) == ("OutcomeUnknown", schema.uid)
        status = migration.subject.status()
        # Blocked on the record; a History reading (due an interval after it) is the
        # only claim it may make meanwhile.
        assert status["phase"] in ("Blocked", "Reading"), status["phase"]
        assert (status.get("activeOperation") or {}).get("type", "History") == "History"
        # The Jobs' Pods still run (their SQL waits on the gate): the realms stay held.
        for apply in applies:
            lease = lease_of(run, apply.operation["leaseEpoch"])
            assert lease is not None and lease["spec"].get("holderIdentity"), lease
        # The gates open: each old Job's DDL commits, once, on its own.
        migration.gates.close()
        settled = poll(
            "the migration's record settled by a History reading",
            lambda: migration.subject.status().get("resolvedRun") or None,
            timeout=PLAN_DEADLINE,
        )
        finals = [apply.subject.until_phase("InSync") for apply in applies]
        recovery(f"template upgrade -> settled and InSync "
              f"{time.monotonic() - upgraded:.1f}s")  # fmt: skip
    for apply in applies:
        apply.one_apply()

    # The migration: settled by the reading, never by a second run.
    print(f"# {migration.subject.name}: resolvedRun {settled}")
    assert settled["resolution"] == "HistoryRead"
    assert settled["operationID"] == migration.operation["id"]
    assert not finals[0]["status"].get("unresolvedRun")
    # The readings after the upgrade were built by the new release.
    histories = jobs_ever(migration.jobs, "history")
    later = [j for j in histories.values() if j["metadata"]["creationTimestamp"]
             > migration.job["metadata"]["creationTimestamp"]]  # fmt: skip
    assert later and all(_tmp_limit(j) == TMP_LIMIT for j in later), [_tmp_limit(j) for j in later]
    # Retired while its Pod could still write, so no release was staged: the spec
    # leaves the Lease to expire, and it expires after the executor stopped.
    lease = lease_of(run, migration.operation["leaseEpoch"])
    assert lease is not None and lease["spec"].get("holderIdentity"), lease
    expires = _time(lease["spec"]["renewTime"]).timestamp() + lease["spec"]["leaseDurationSeconds"]
    statuses = run.admin.get(PODS, NAMESPACE, migration.pod["metadata"]["name"])["status"]
    stopped = [
        (state.get("state") or {}).get("terminated", {}).get("finishedAt", "running")
        for state in statuses.get("containerStatuses") or []
    ]
    print(f"# the Lease left to expire at {datetime.fromtimestamp(expires)}, "
          f"the Apply Pod stopped {stopped}")  # fmt: skip
    assert stopped and "running" not in stopped
    assert all(expires > _time(finished).timestamp() for finished in stopped)

    # The schema: the proof found the database converged and attributed no Apply; the
    # realm went back once it was settled.
    status = finals[1]["status"]
    assert not status.get("pendingObservation")
    assert (status.get("applied") or {}).get("uid") != schema.plan["uid"]
    assert schema.subject.events("ConvergedAfterUnknownOutcome")
    lease = lease_of(run, schema.operation["leaseEpoch"])
    assert lease is None or not lease["spec"].get("holderIdentity"), lease


@contextmanager
def revisions_locked(subject: Subject) -> Iterator[None]:
    """The lab executor's revision table held ACCESS EXCLUSIVE: a History reading waits."""
    assert subject.run.postgres is not None
    conn = psycopg.connect(subject.run.postgres.url(subject.database))
    try:
        conn.execute("LOCK TABLE ptah_lab.revisions IN ACCESS EXCLUSIVE MODE")
        yield
    finally:
        conn.close()  # the transaction ends with the session: the lock goes


def test_a_reading_running_across_a_template_change_is_run_again(
    releases: Releases, subjects: dict[str, Subject], api: Api
) -> None:
    # After the first scenario the migration is InSync and reads its History every
    # interval; the template release from the second is installed.
    run, subject = releases.run, subjects["upgrade-id"]
    with explained(subject), followed(api, subject) as jobs:
        subject.until_phase("InSync")
        applies = len(subject.jobs("apply"))
        with revisions_locked(subject):

            def reading() -> dict[str, Any] | None:
                operation = subject.status().get("activeOperation") or {}
                waiting = operation.get("type") == "History" and operation.get("jobUID")
                return operation if waiting and subject.waiting_on_lock() >= 1 else None

            before = poll("a History reading waiting on the revision table", reading,
                          timeout=PLAN_DEADLINE)  # fmt: skip
            upgraded = time.monotonic()
            _upgraded(run, releases, "chart")

            def again() -> dict[str, Any] | None:
                operation = subject.status().get("activeOperation") or {}
                new = operation.get("jobUID") not in (None, before["jobUID"])
                return operation if operation.get("type") == "History" and new else None

            after = poll("the reading run again", again, timeout=PLAN_DEADLINE)
            print(f"# run again {time.monotonic() - upgraded:.1f}s after the upgrade began: "
                  f"attempt {before.get('attempt')} -> {after.get('attempt')}")  # fmt: skip
        final = subject.until_phase("InSync")
        recovery(f"template upgrade under a reading -> InSync "
              f"{time.monotonic() - upgraded:.1f}s")  # fmt: skip
    histories = jobs_ever(jobs, "history")
    assert {before["jobUID"], after["jobUID"]} <= set(histories), sorted(histories)
    assert _tmp_limit(histories[before["jobUID"]]) == TMP_LIMIT
    assert _tmp_limit(histories[after["jobUID"]]) is None
    # The spec: a read-only claim runs again under a new attempt, leaving the old Job
    # to its own deadline.
    assert int(after.get("attempt", 1)) > int(before.get("attempt", 1))
    assert final["status"]["history"]["observedAt"]
    assert len(subject.jobs("apply")) == applies and subject.ddl() == MIGRATED
