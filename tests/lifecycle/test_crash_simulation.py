"""A randomized crash simulation: both families, several resources sharing one
database, and a process that stops at random durable writes.

One in-memory cluster: three resources (two PtahSchemas and a PtahMigration) address
one database under one coordination key, and a fourth schema another. What can
happen is what a cluster does: passes over any resource; the process stopping right
after a durable write and restarting; a read failing; new approvals and new plans; suspension and
resumption, spec edits and deletions; Jobs ending with their result, with a run the
runner lost, or with no Pod at all; a migration's History reading and a person's
acknowledgment of its unresolved run; an upgrade that rotates the execution
binding; a foreign claimant on the shared realm through
the real locker; and time passing. A schema's proof needs no action of its own: a
pending observation claims its Observe and Plan by itself, and Jobs ending read them.

Two drivers explore it:

- hypothesis (``RuleBasedStateMachine``, derandomized) over random schedules, with
  crashes armed by the kind of durable write they follow;
- an explicit scheduler that plays a few seeded schedules once fault-free and then
  once per durable write, stopping the process right after that write. The seeds are
  chosen so that every kind of durable write is crashed after at least once
  (asserted); both print how many schedules and crash points they explored.

After every step, the invariants the spec states for whole lives:

- at most one Job per claim, ever; no mutating Job without a durable mark, a
  snapshot and a spent approval (checked at the moment of its create);
- after an Apply, its live claim or a record of it, never both, never neither;
- the realm's Lease is never released, and never another resource's, while an Apply
  Job may still write (not terminal or a Pod not stopped, inside its window);
- no approval authorizes two dispatches; no uncertainty record is cleared except by
  a reading, an acknowledgment, or the deletion the spec lets end a proof.

``PTAH_SOAK=<n>`` runs ``n`` random hypothesis
schedules and ``PTAH_SOAK_SEEDS=<n>`` sweeps seeds 0..n-1; a failure names its seed
and crash point.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from controller.context.passcontext import Environment
from controller.mutationlifecycle import Driver, RealmHolder, Retirement, Step
from controller.pieces.targetlock import TargetLock
from controller.runtime.lifecyclepass import request_claim, run_pass
from controller.runtime.reconciler import Key
from controller.stages.claimwrites import target_digest
from jobclaim import (
    digest_of,
    lease_name,
    migration_plan_name,
    plan_name,
    projection_names,
    sha256_digest,
)
from jobclaim.api import PtahSchema
from jobclaim.apiserver import (
    JOBS,
    LEASES,
    PODS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    Object,
    Resource,
)
from jobclaim.stamps import stamp_time
from tests.support.claimworld import BINDING
from tests.support.dispatchworld import (
    LEASE_NS,
    NS,
    STATEMENTS,
    Rig,
    add_migration,
    add_schema,
    make_rig,
)
from tests.support.examples import examples
from tests.support.faultrig import (
    Contender,
    Holding,
    Seen,
    StepApi,
    invariant_problems,
    read_holding,
)
from tests.support.podworld import (
    APPLIED,
    MIGRATED,
    NO_CHANGES,
    OBSERVED,
    finish_job,
    harvest_with,
    history,
)
from tests.support.scriptednode import Database, answer

SHARED: Final = "shared-primary"
# (kind, name, coordination key): three resources on one database, one elsewhere.
RESOURCES: Final = (
    ("PtahSchema", "orders", SHARED),
    ("PtahSchema", "invoices", SHARED),
    ("PtahMigration", "billing", SHARED),
    ("PtahSchema", "audit", "audit-primary"),
)
# The durable writes a crash can follow: every write of the dispatch sequence and of
# a claim's way in and out (``faultrig.StepApi.write_label``).
CRASH_LABELS: Final = (
    "finalizer",
    "claim",
    Step.LEASE.value,
    Step.STAGE.value,
    Step.SNAPSHOT.value,
    Step.CONSUME.value,
    Step.MARK.value,
    Step.CREATE.value,
    Step.RECORD.value,
    "retire",
    "release",
    "release-recorded",
)
SOAK: Final = int(os.environ.get("PTAH_SOAK", "0"))


def _resource(kind: str) -> Resource:
    return PTAHSCHEMAS if kind == "PtahSchema" else PTAHMIGRATIONS


def _approvals(kind: str) -> Resource:
    return PTAHSCHEMAAPPROVALS if kind == "PtahSchema" else PTAHMIGRATIONAPPROVALS


def _stamp(rig: Rig) -> dict[str, Any]:
    """Admission's stamp, by the world's clock, which the double stamps creation by."""
    return {
        "approver": {"username": "alice", "uid": "alice-uid", "groups": ["dba"]},
        "approvedAt": stamp_time(rig.clocks.wall()),
        "mutationRequestUID": "admission-request-sim",
    }


# -- what the world outside the controller writes ----------------------------------------


def publish_plan(rig: Rig, kind: str, name: str, serial: int) -> None:
    """A new current plan, as a reading would publish it (issue 5's Plan harvest)."""
    api = rig.api
    resource = _resource(kind)
    stored = api.get(resource, NS, name)
    uid = stored["metadata"]["uid"]
    fingerprint = digest_of({"resource": name, "uid": uid, "serial": serial})
    status = dict(stored.get("status") or {})
    # A plan is computed under the binding in force, whatever epoch that is by now.
    binding = status.get("executionBinding") or BINDING.to_wire()
    common = {
        "executionBindingID": binding["epoch"],
        "controllerStateVersion": binding["controllerStateVersion"],
        "ptahVersion": binding["ptahVersion"],
        "executorImage": binding["executorImage"],
        "runnerProtocolVersion": binding["runnerProtocolVersion"],
        "coordinationDigest": digest_of({"db": name}),
        "fingerprint": fingerprint,
    }
    if kind == "PtahSchema":
        plan = plan_name(fingerprint)
        (chunk_name,) = projection_names(plan, 1)
        content = sha256_digest(STATEMENTS)
        made = api.create(
            PTAHSCHEMAPLANS,
            NS,
            {
                "metadata": {"name": plan},
                "spec": {
                    **common,
                    "schemaRef": {"name": name, "uid": uid},
                    "contentDigest": content,
                    "statementCount": 1,
                    "chunks": [
                        {
                            "name": chunk_name,
                            "index": 0,
                            "digest": content,
                            "size": len(STATEMENTS),
                        }
                    ],
                },
            },
        )
        api.create(
            PTAHSCHEMAPLANCHUNKS,
            NS,
            {
                "metadata": {"name": chunk_name},
                "spec": {
                    "planRef": {"name": plan, "uid": made["metadata"]["uid"]},
                    "index": 0,
                    "data": base64.b64encode(STATEMENTS).decode(),
                    "digest": content,
                    "size": len(STATEMENTS),
                },
            },
        )
        status["plan"] = {
            "name": plan,
            "uid": made["metadata"]["uid"],
            "fingerprint": fingerprint,
            "contentDigest": content,
            "executionBindingID": binding["epoch"],
            "controllerStateVersion": binding["controllerStateVersion"],
            "ptahVersion": binding["ptahVersion"],
            "statementCount": 1,
            "chunkCount": 1,
        }
    else:
        plan = migration_plan_name(fingerprint)
        made = api.create(
            PTAHMIGRATIONPLANS,
            NS,
            {
                "metadata": {"name": plan},
                "spec": {
                    **common,
                    "migrationRef": {"name": name, "uid": uid},
                    "migrations": [
                        {"version": f"2026010{serial % 10}000000", "digest": sha256_digest(b"m")}
                    ],
                    "historyFingerprint": digest_of({"history": name, "serial": serial}),
                    "artifactDigest": sha256_digest(b"artifact"),
                },
            },
        )
        status["plan"] = {"name": plan, "uid": made["metadata"]["uid"]}
    api.patch_status(
        resource, NS, name, status, resource_version=stored["metadata"]["resourceVersion"]
    )


def approve(rig: Rig, kind: str, name: str, serial: int) -> bool:
    """A person approves the resource's current plan; False when it has none."""
    stored = rig.api.get(_resource(kind), NS, name)
    plan = (stored.get("status") or {}).get("plan")
    if not plan:
        return False
    plan_obj = rig.api.get(
        PTAHSCHEMAPLANS if kind == "PtahSchema" else PTAHMIGRATIONPLANS, NS, plan["name"]
    )
    ref = "schemaRef" if kind == "PtahSchema" else "migrationRef"
    rig.api.create(
        _approvals(kind),
        NS,
        {
            "metadata": {"name": f"{name}-approval-{serial}"},
            "spec": {
                ref: {"name": name, "uid": stored["metadata"]["uid"]},
                "planRef": {"name": plan["name"], "uid": plan["uid"]},
                "planFingerprint": plan_obj["spec"]["fingerprint"],
                "executionBindingID": plan_obj["spec"]["executionBindingID"],
                **_stamp(rig),
            },
        },
    )
    return True


# -- what a simulation run remembers -----------------------------------------------------


@dataclass
class Tally:
    """Across every schedule of one run: how much was explored."""

    schedules: int = 0
    steps: int = 0
    crashes: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        points = sum(self.crashes.values())
        kinds = ", ".join(f"{label} {self.crashes[label]}" for label in CRASH_LABELS)
        return (
            f"crash simulation: {self.schedules} schedules, {self.steps} steps, "
            f"{points} crash points ({kinds})"
        )


TALLY = Tally()


@dataclass(frozen=True)
class ApplyJob:
    """An Apply Job as its create sent it: whose, on which realm, until when it may run."""

    key: Key
    digest: str
    deadline: datetime | None


@dataclass
class Sim:
    """One schedule's cluster, and what it has seen happen."""

    rig: Rig
    api: StepApi
    env: Environment
    contender: Contender
    keys: list[Key]
    violations: list[str] = field(default_factory=list)
    # Per claim ID: the Jobs its creates named, and the approval each create spent.
    creates: dict[str, list[str]] = field(default_factory=dict)
    spent_by: dict[str, str] = field(default_factory=dict)
    # Every Apply Job sent, by name; every Lease holder identity a resource's claims had.
    apply_jobs: dict[str, ApplyJob] = field(default_factory=dict)
    holders: dict[Key, set[str]] = field(default_factory=dict)
    # Per resource: the marked Apply claim last seen live (ID, Job name).
    live_apply: dict[Key, tuple[str, str]] = field(default_factory=dict)
    # Per resource: the uncertainty record standing (its operation ID) and the number
    # of readings harvested and acknowledgments made when it was first seen.
    uncertain: dict[Key, tuple[str, int]] = field(default_factory=dict)
    settlements: Counter[Key] = field(default_factory=Counter)
    serial: int = 0

    @classmethod
    def make(cls, driver: Driver | None = None) -> Sim:
        driver = driver or Driver()
        rig = make_rig(driver)
        keys = [
            add_schema(rig, name, coordination_key=key)
            if kind == "PtahSchema"
            else add_migration(rig, name, coordination_key=key)
            for kind, name, key in RESOURCES
        ]
        api = StepApi(rig.api, rig.api.peek)
        lock = TargetLock(api, LEASE_NS, clock=rig.clocks.monotonic, wall=rig.clocks.wall)
        env = dataclasses.replace(rig.env, api=api, lock=lock, driver=driver)
        contender = Contender.on(rig.api, LEASE_NS, rig.clocks.wall, rig.clocks.monotonic)
        sim = cls(rig, api, env, contender, keys)
        api.watchers.append(sim.at_create)
        return sim

    def holding(self, key: Key) -> Holding:
        return read_holding(
            self.rig.api.peek,
            lambda: self.rig.api.list(JOBS, NS),
            _resource(key.kind),
            NS,
            key.name,
            lease_namespace=LEASE_NS,
            consumed_uids=self.api.consumed_uids,
        )

    def violate(self, problem: str) -> None:
        if problem not in self.violations:
            self.violations.append(problem)

    # -- checked at the moment of a create -----------------------------------------

    def at_create(self, seen: Seen) -> None:
        """A Job create is about to be sent: it must be covered by everything the spec
        makes durable before it, and be its claim's first."""
        if seen.step is not Step.CREATE:
            return
        owners = seen.body.get("metadata", {}).get("ownerReferences") or []
        (owner,) = owners
        key = Key(owner["kind"], NS, owner["name"])
        holding = self.holding(key)
        claim = holding.claim
        claim_id = str(claim.get("id") or "")
        if holding.claim_holder:
            self.holders.setdefault(key, set()).add(holding.claim_holder)
        mutating = claim.get("type") == "Apply"
        if mutating and not holding.marked:
            self.violate(f"{key.name}: a Job was created for a claim with no durable mark")
        for problem in invariant_problems(holding, realm=False):
            self.violate(f"{key.name}: at its create, {problem}")
        if mutating and holding.approval_consumed is None:
            self.violate(f"{key.name}: an Apply Job was created without an approval")
        approval = _held_approval(self.rig, key) if mutating else None
        if approval is not None:
            first = self.spent_by.setdefault(approval, claim_id)
            if first != claim_id:
                self.violate(f"{key.name}: approval {approval} authorized a second dispatch")
        named = self.creates.setdefault(claim_id, [])
        named.append(str(seen.name))
        if mutating and len(named) > 1:
            self.violate(f"{key.name}: claim {claim_id[:19]} was sent a second create")
        if mutating:
            deadline = claim.get("executionNotAfter")
            self.apply_jobs[str(seen.name)] = ApplyJob(
                key,
                str(claim.get("coordinationDigest")),
                _parse_time(deadline) if isinstance(deadline, str) else None,
            )

    # -- checked after every step --------------------------------------------------

    def check(self) -> None:
        for key in self.keys:
            holding = self.holding(key)
            if holding.claim_holder:
                self.holders.setdefault(key, set()).add(holding.claim_holder)
            if not holding.present:
                self.live_apply.pop(key, None)
                self.uncertain.pop(key, None)
                continue
            for problem in invariant_problems(holding, realm=False):
                self.violate(f"{key.name}: {problem}")
            self._check_accounts(key, holding)
        self._check_realms()
        for claim_id, jobs in self.creates.items():
            if len(set(jobs)) > 1 and claim_id in self.spent_by.values():
                self.violate(f"claim {claim_id[:19]} has more than one Job")

    def _check_accounts(self, key: Key, holding: Holding) -> None:
        """After an Apply: its live claim or its record, never both, never neither; an
        uncertainty record cleared only by a reading or an acknowledgment."""
        claim, records = holding.claim, holding.records
        live = str(claim.get("id") or "")
        named = _record_ids(records)
        if live and live in named:
            self.violate(f"{key.name}: Apply {live[:19]} is both a live claim and a record")
        before = self.live_apply.get(key)
        deleting = bool(_deleting(self.rig, key))
        if before is not None and before[0] != live:
            last_run = (records.get("lastRun") or {}).get("jobName") if records else None
            # Deletion ends a proof no reading will finish: the record may go with it.
            if before[0] not in named and last_run != before[1] and not deleting:
                self.violate(f"{key.name}: Apply {before[0][:19]} left neither claim nor record")
            del self.live_apply[key]
        if holding.marked and claim.get("type") == "Apply":
            self.live_apply[key] = (live, str(claim.get("jobName")))
        standing = _uncertain_id(records)
        was = self.uncertain.get(key)
        if was is not None and was[0] != standing:
            if self.settlements[key] <= was[1] and not deleting:
                self.violate(
                    f"{key.name}: the record of {was[0][:19]} was cleared "
                    "without a reading or an acknowledgment"
                )
            del self.uncertain[key]
        if standing is not None and key not in self.uncertain:
            self.uncertain[key] = (standing, self.settlements[key])

    def _check_realms(self) -> None:
        """The realm's Lease is never released, and never another resource's, while an
        Apply Job may still write: it is not terminal or a Pod of it has not stopped,
        and the window the runner enforces is still open."""
        now = self.rig.clocks.wall()
        for name, job in self.apply_jobs.items():
            if job.deadline is not None and now >= job.deadline:
                continue
            if not _job_may_run(self.rig, name):
                continue
            lease = self.rig.api.peek(LEASES, LEASE_NS, lease_name(job.digest))
            holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
            if holder not in self.holders.get(job.key, set()):
                self.violate(
                    f"{job.key.name}: the realm is {holder or 'released'!r} "
                    f"while Apply Job {name[:24]} may still write"
                )


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _deleting(rig: Rig, key: Key) -> str | None:
    stored = rig.api.peek(_resource(key.kind), NS, key.name) or {}
    found = stored.get("metadata", {}).get("deletionTimestamp")
    return str(found) if found else None


def _record_ids(records: Mapping[str, Any]) -> set[str]:
    """The operation IDs the resource's records name."""
    found = set()
    pending = records.get("pendingObservation") or {}
    if pending.get("applyOperationID"):
        found.add(str(pending["applyOperationID"]))
    for field_name in ("unresolvedRun", "resolvedRun"):
        record = records.get(field_name) or {}
        if record.get("operationID"):
            found.add(str(record["operationID"]))
    return found


def _uncertain_id(records: Mapping[str, Any]) -> str | None:
    """The operation an uncertainty record stands for, if one stands."""
    pending = records.get("pendingObservation") or {}
    if pending:
        return str(pending.get("applyOperationID"))
    unresolved = records.get("unresolvedRun") or {}
    return str(unresolved.get("operationID")) if unresolved else None


def _job_may_run(rig: Rig, name: str) -> bool:
    job = rig.api.peek(JOBS, NS, name)
    if job is None:
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    terminal = any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )
    uid = job["metadata"]["uid"]
    for pod in rig.api.list(PODS, NS):
        owners = pod["metadata"].get("ownerReferences") or []
        if any(o.get("uid") == uid for o in owners):
            states = [
                s.get("state") or {}
                for s in (pod.get("status") or {}).get("containerStatuses") or []
            ]
            if not states or any("terminated" not in state for state in states):
                return True
    return not terminal


def _held_approval(rig: Rig, key: Key) -> str | None:
    stored = rig.api.peek(_resource(key.kind), NS, key.name) or {}
    status = stored.get("status") or {}
    claim = status.get("activeOperation") or {}
    ref = (status.get("plan") or {}).get("approval") if key.kind == "PtahSchema" else None
    ref = ref or claim.get("approvalRef")
    return str(ref["uid"]) if ref else None


# -- what can happen: the actions both drivers below draw from -----------------------------


def _passes(sim: Sim, index: int, passes: int) -> None:
    key = sim.keys[index]
    for _ in range(passes):
        if sim.api.stopped:
            return
        try:
            run_pass(sim.env, key.kind, key.namespace, key.name)
        except Exception as error:  # the reconciler logs and retries; here it is a bug
            sim.violate(f"{key.name}: a pass raised {type(error).__name__}: {error}")


def _stored(sim: Sim, index: int) -> Object | None:
    key = sim.keys[index]
    return sim.rig.api.peek(_resource(key.kind), NS, key.name)


def _approve(sim: Sim, index: int) -> None:
    key = sim.keys[index]
    if _stored(sim, index) is not None:
        sim.serial += 1
        approve(sim.rig, key.kind, key.name, sim.serial)


def _replan(sim: Sim, index: int) -> None:
    """A new plan for an idle resource that has none (what a reading publishes)."""
    key = sim.keys[index]
    stored = _stored(sim, index)
    if stored is None or stored["metadata"].get("deletionTimestamp"):
        return
    status = stored.get("status") or {}
    if status.get("activeOperation") or status.get("plan") or status.get("pendingLockRelease"):
        return
    sim.serial += 1
    publish_plan(sim.rig, key.kind, key.name, sim.serial)


def _spec(sim: Sim, index: int, spec: dict[str, Any]) -> None:
    key = sim.keys[index]
    stored = _stored(sim, index)
    if stored is not None and not stored["metadata"].get("deletionTimestamp"):
        sim.rig.api.patch_spec(_resource(key.kind), NS, key.name, spec)


def _delete(sim: Sim, index: int) -> None:
    key = sim.keys[index]
    if _stored(sim, index) is not None:
        sim.rig.api.delete(_resource(key.kind), NS, key.name)


def _contend(sim: Sim) -> None:
    """Another resource's claim tries the shared realm through the real locker, on the
    world's clock: it takes it only when it is free or lapsed by that clock."""
    if sim.contender.held is not None:
        return
    stored = sim.rig.api.peek(PTAHSCHEMAS, NS, "orders")
    if stored is not None:
        digest = target_digest(PtahSchema.model_validate(stored).spec.target, NS)
        sim.contender.take(digest, 960, wait_out=False)


# How a Job ends: the runner's result frame for each claim type, as the runner
# operation and the frame's fields. A read-only claim's frame is a reading.
# Resolve and Verify read no database, so their frames name none.
_NO_DATABASE: Final[dict[str, Any]] = {"coordinationDigest": None, "targetIdentityDigest": None}
RESOLVED: Final = {**_NO_DATABASE, **answer("resolve", Database())}
VERIFIED: Final = {**_NO_DATABASE, **answer("verify", Database())}
RESULTS: Final[dict[tuple[str, str], tuple[str, dict[str, Any]]]] = {
    ("PtahSchema", "Resolve"): ("resolve", RESOLVED),
    ("PtahSchema", "Verify"): ("verify", VERIFIED),
    ("PtahMigration", "Resolve"): ("resolve", RESOLVED),
    ("PtahMigration", "Verify"): ("verify", VERIFIED),
    ("PtahSchema", "Apply"): ("apply", APPLIED),
    ("PtahSchema", "Observe"): ("observe", OBSERVED),
    ("PtahSchema", "Plan"): ("plan", NO_CHANGES),
    ("PtahMigration", "Apply"): ("migration-apply", MIGRATED),
    ("PtahMigration", "History"): ("migration-history", history(0)),
}
# A run the runner itself could not account for: the connection dropped mid-run.
LOST: Final[dict[str, dict[str, Any]]] = {
    "PtahSchema": {
        "childExitCode": 1,
        "mutationStarted": True,
        "uncertain": True,
        "error": {"code": "lost", "message": "the connection dropped mid-run"},
    },
    "PtahMigration": {
        "childExitCode": 1,
        "mutationStarted": True,
        "uncertain": True,
        "error": {"code": "lost", "message": "the connection dropped mid-migration"},
        "migrationRun": {"outcome": "Unknown", "appliedVersions": []},
    },
}
ENDINGS: Final = ("result", "lost", "no-pod")


def _running(sim: Sim) -> list[tuple[Key, dict[str, Any], Object]]:
    """The resources whose live claim has a Job that has not ended, with both."""
    found = []
    for key in sim.keys:
        claim = dict(sim.holding(key).claim)
        job = sim.rig.api.peek(JOBS, NS, str(claim.get("jobName"))) if claim else None
        if job is not None and _job_may_run(sim.rig, job["metadata"]["name"]):
            found.append((key, claim, job))
    return found


def _finish(sim: Sim, index: int, ending: str) -> None:
    """The ``index``-th running Job (modulo how many run) ends: with its result frame,
    with a frame that says the run was lost, or with no Pod at all (the Job
    controller gave up before one ran)."""
    running = _running(sim)
    if not running:
        return
    key, claim, job = running[index % len(running)]
    if ending == "no-pod":
        finish_job(sim.rig, job["metadata"]["name"])
        return
    operation, fields = RESULTS[(key.kind, str(claim["type"]))]
    if ending == "lost" and claim["type"] == "Apply":
        fields = LOST[key.kind]
    harvest_with(sim.rig, key, operation, fields)
    if claim["type"] != "Apply" and ending == "result":
        sim.settlements[key] += 1  # a reading that can settle an uncertainty record


def _claim_history(sim: Sim, index: int) -> None:
    """A migration's History reading, claimed as the reconciler's ``claim`` does."""
    key = sim.keys[index]
    if key.kind == "PtahMigration" and not sim.api.stopped:
        request_claim(sim.env, key.kind, key.namespace, key.name, "History")


def _acknowledge(sim: Sim, index: int) -> None:
    """A person acknowledges the migration's unresolved run, naming its attempt."""
    key = sim.keys[index]
    stored = _stored(sim, index)
    record = ((stored or {}).get("status") or {}).get("unresolvedRun")
    if key.kind != "PtahMigration" or stored is None or not record:
        return
    sim.serial += 1
    sim.rig.api.create(
        PTAHMIGRATIONRUNACKNOWLEDGMENTS,
        NS,
        {
            "metadata": {"name": f"ack-{key.name}-{sim.serial}"},
            "spec": {
                "migrationRef": {"name": key.name, "uid": stored["metadata"]["uid"]},
                "operationID": record["operationID"],
                "acknowledgedBy": {"username": "bob", "uid": "bob-uid", "groups": ["dba"]},
                "acknowledgedAt": stamp_time(sim.rig.clocks.wall()),
                "mutationRequestUID": f"admission-request-ack-{sim.serial}",
            },
        },
    )
    sim.settlements[key] += 1


# Reads whose failure a pass must take as "cannot say", never as "nothing there":
# the Job and its Pods decide whether an executor may still write, the Lease who
# holds the realm, the approvals and acknowledgments what is authorized or settled.
FLAKY_READS: Final = (
    "get jobs",
    "list pods",
    "get leases",
    "list ptahmigrationrunacknowledgments",
    "list ptahschemaapprovals",
    "get ptahmigrationapprovals",
)


def _flaky_read(sim: Sim, index: int, read: str) -> None:
    """Passes over one resource while the next read of one kind fails."""
    sim.api.arm(read, "fail")
    _passes(sim, index, 2)
    sim.api.armed[:] = [armed for armed in sim.api.armed if armed.label != read]


def _rotate(sim: Sim) -> None:
    """The manager is upgraded to another Ptah version: a new execution binding, and
    a new epoch for every resource on its next pass (issue 5's binding rotation)."""
    sim.serial += 1
    serial = sim.serial
    config = sim.env.config
    sim.env.config = dataclasses.replace(
        config, binding=dataclasses.replace(config.binding, ptah_version=f"v9.{serial}.0")
    )
    sim.env.epochs = lambda: f"v1-{serial:032x}"


def _restart(sim: Sim) -> None:
    TALLY.crashes.update(armed.label for armed in sim.api.armed if armed.fired)
    if sim.api.crashed_after is not None:
        TALLY.crashes[sim.api.crashed_after] += 1
        sim.api.crashed_after = None
    sim.api.restart()


# -- hypothesis: random schedules, crashes armed by label --------------------------------

resource_index = st.integers(min_value=0, max_value=len(RESOURCES) - 1)


class CrashSimulation(RuleBasedStateMachine):
    sim: Sim

    @initialize()
    def cluster(self) -> None:
        self.sim = Sim.make()
        TALLY.schedules += 1

    @precondition(lambda self: not self.sim.api.stopped)
    @rule(
        index=resource_index,
        passes=st.integers(min_value=1, max_value=3),
        crash=st.none() | st.sampled_from(CRASH_LABELS),
    )
    def reconcile(self, index: int, passes: int, crash: str | None) -> None:
        """Passes over one resource; with ``crash``, the process stops right after the
        first durable write of that kind they make, and is restarted."""
        if crash is None or self.sim.api.armed:
            _passes(self.sim, index, passes)
            return
        self.crash_during(index, crash, passes)

    @precondition(lambda self: not self.sim.api.stopped and not self.sim.api.armed)
    @rule(label=st.sampled_from(CRASH_LABELS))
    def crash_at_next(self, label: str) -> None:
        """The process will stop right after the next durable write of ``label``,
        whichever resource's pass makes it."""
        self.sim.api.arm(label, "stop")

    @precondition(lambda self: not self.sim.api.stopped and not self.sim.api.armed)
    @rule(
        index=resource_index,
        label=st.sampled_from(CRASH_LABELS),
        passes=st.integers(min_value=1, max_value=4),
    )
    def crash_during(self, index: int, label: str, passes: int) -> None:
        """Passes over one resource until the process stops right after its next durable
        write of ``label``, then a restart; a write that does not come is not waited for."""
        self.sim.api.arm(label, "stop")
        _passes(self.sim, index, passes)
        if self.sim.api.stopped:
            _restart(self.sim)
        else:
            self.sim.api.armed.clear()

    @precondition(lambda self: self.sim.api.stopped)
    @rule()
    def restart(self) -> None:
        _restart(self.sim)

    @rule(index=resource_index)
    def approve(self, index: int) -> None:
        _approve(self.sim, index)

    @rule(index=resource_index)
    def replan(self, index: int) -> None:
        _replan(self.sim, index)

    @rule(index=resource_index, suspend=st.booleans())
    def suspend(self, index: int, suspend: bool) -> None:
        _spec(self.sim, index, {"suspend": suspend})

    @rule(index=resource_index, interval=st.sampled_from(["5m", "10m", "1h"]))
    def edit_spec(self, index: int, interval: str) -> None:
        _spec(self.sim, index, {"interval": interval})

    @rule(index=resource_index)
    def delete(self, index: int) -> None:
        _delete(self.sim, index)

    @rule()
    def contend(self) -> None:
        _contend(self.sim)

    @rule()
    def contender_lets_go(self) -> None:
        self.sim.contender.release()

    @rule(seconds=st.sampled_from([1, 30, 600, 1200]))
    def time_passes(self, seconds: int) -> None:
        self.sim.rig.clocks.advance(seconds)

    # -- outcomes: a Job ending, a reading asked for, a person's acknowledgment, an
    # upgrade that rotates the execution binding. A schema's proof needs no rule: a
    # pending observation claims it by itself. --------------------------------------

    @rule(index=resource_index, ending=st.sampled_from(ENDINGS))
    def job_ends(self, index: int, ending: str) -> None:
        _finish(self.sim, index, ending)

    @precondition(lambda self: not self.sim.api.stopped)
    @rule(index=resource_index)
    def history_reading(self, index: int) -> None:
        _claim_history(self.sim, index)

    @rule(index=resource_index)
    def acknowledge(self, index: int) -> None:
        _acknowledge(self.sim, index)

    @rule()
    def rotate_binding(self) -> None:
        _rotate(self.sim)

    @precondition(lambda self: not self.sim.api.stopped and not self.sim.api.armed)
    @rule(index=resource_index, read=st.sampled_from(FLAKY_READS))
    def a_read_fails(self, index: int, read: str) -> None:
        _flaky_read(self.sim, index, read)

    @invariant()
    def the_spec_holds(self) -> None:
        if not hasattr(self, "sim"):
            return
        TALLY.steps += 1
        self.sim.check()
        assert not self.sim.violations, self.sim.violations


# -- an explicit scheduler: every durable write of a seeded schedule, crashed after ----

Action = tuple[str, tuple[int, ...]]


def schedule(seed: int, length: int) -> list[Action]:
    """A seeded schedule of actions, mostly passes, with the world moving meanwhile."""
    rng = random.Random(seed)
    n = len(RESOURCES)
    actions: list[Action] = []
    for _ in range(length):
        roll = rng.random()
        if roll < 0.40:
            actions.append(("passes", (rng.randrange(n), rng.randint(1, 3))))
        elif roll < 0.50:
            actions.append(("finish", (rng.randrange(n), rng.randrange(len(ENDINGS)))))
        elif roll < 0.53:
            actions.append(("history", (rng.randrange(n),)))
        elif roll < 0.55:
            actions.append(("acknowledge", (rng.randrange(n),)))
        elif roll < 0.58:
            actions.append(("rotate", ()))
        elif roll < 0.64:
            actions.append(("approve", (rng.randrange(n),)))
        elif roll < 0.70:
            actions.append(("replan", (rng.randrange(n),)))
        elif roll < 0.76:
            actions.append(("suspend", (rng.randrange(n), rng.randint(0, 1))))
        elif roll < 0.81:
            actions.append(("edit", (rng.randrange(n),)))
        elif roll < 0.84:
            actions.append(("delete", (rng.randrange(n),)))
        elif roll < 0.89:
            actions.append(("contend", ()))
        elif roll < 0.93:
            actions.append(("let-go", ()))
        elif roll >= 0.985:
            actions.append(("flaky", (rng.randrange(n), rng.randrange(len(FLAKY_READS)))))
        else:
            actions.append(("time", (rng.choice([30, 600, 1200]),)))
    return actions


def play(actions: list[Action], crash_after: int | None, driver: Driver | None = None) -> Sim:
    """Run a schedule, the process stopping right after its ``crash_after``-th durable
    write and restarting at once; the invariants are checked after every action."""
    sim = Sim.make(driver)
    sim.api.stop_after_writes = crash_after
    for name, args in actions:
        TALLY.steps += 1
        if name == "passes":
            _passes(sim, args[0], args[1])
        elif name == "approve":
            _approve(sim, args[0])
        elif name == "replan":
            _replan(sim, args[0])
        elif name == "suspend":
            _spec(sim, args[0], {"suspend": bool(args[1])})
        elif name == "edit":
            _spec(sim, args[0], {"interval": f"{sim.serial + 2}m"})
            sim.serial += 1
        elif name == "delete":
            _delete(sim, args[0])
        elif name == "contend":
            _contend(sim)
        elif name == "let-go":
            sim.contender.release()
        elif name == "time":
            sim.rig.clocks.advance(args[0])
        elif name == "finish":
            _finish(sim, args[0], ENDINGS[args[1]])
        elif name == "history":
            _claim_history(sim, args[0])
        elif name == "acknowledge":
            _acknowledge(sim, args[0])
        elif name == "rotate":
            _rotate(sim)
        elif name == "flaky":
            _flaky_read(sim, args[0], FLAKY_READS[args[1]])
        if sim.api.stopped:
            _restart(sim)
        sim.check()
        if sim.violations:
            break
    return sim


def _settings() -> settings:
    if SOAK:
        return settings(
            max_examples=SOAK,
            stateful_step_count=60,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    # Lives are short until issue 5 lets a Job finish (a dispatched Apply holds its
    # realm for good), so many short schedules explore more crash points than a few
    # long ones.
    return settings(
        max_examples=examples(120),
        stateful_step_count=25,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@pytest.fixture
def tally() -> Iterator[Tally]:
    TALLY.schedules, TALLY.steps = 0, 0
    TALLY.crashes.clear()
    yield TALLY


def test_random_schedules_with_crashes_armed_by_kind(
    tally: Tally, capsys: pytest.CaptureFixture[str]
) -> None:
    run_state_machine_as_test(CrashSimulation, settings=_settings())
    with capsys.disabled():
        print("\nhypothesis " + tally.line())
    assert tally.schedules > 0


# The seeds CI sweeps, and how long each schedule is. Chosen so that the sweep stops
# the process after every kind of durable write at least once (asserted below): each
# of seeds 0 and 6 reaches a retirement that releases a held realm, a proof and a
# binding rotation. ``PTAH_SOAK_SEEDS=<n>`` sweeps seeds 0..n-1 instead (0..23, about
# 900 crash points, found nothing when this was written).
_SOAK_SEEDS: Final = int(os.environ.get("PTAH_SOAK_SEEDS", "0"))
SEEDS: Final = tuple(range(_SOAK_SEEDS)) if _SOAK_SEEDS else (0, 6)
LENGTH: Final = 40


def _durable_writes(sim: Sim) -> list[str]:
    return [str(call.label) for call in sim.api.log if call.wrote]


def test_every_durable_write_of_seeded_schedules_crashed_after(
    tally: Tally, capsys: pytest.CaptureFixture[str]
) -> None:
    failures: list[str] = []
    for seed in SEEDS:
        actions = schedule(seed, LENGTH)
        base = play(actions, None)
        assert not base.violations, (seed, base.violations)
        tally.schedules += 1
        for k in range(1, len(_durable_writes(base)) + 1):
            sim = play(actions, k)
            tally.schedules += 1
            if sim.violations:
                failures.append(f"seed {seed}, crash after write {k}: {sim.violations}")
    with capsys.disabled():
        print("\nseeded " + tally.line())
    assert not failures, failures
    if not _SOAK_SEEDS:
        missed = [label for label in CRASH_LABELS if not tally.crashes[label]]
        assert not missed, f"no schedule crashed after: {missed}"


@pytest.mark.parametrize(
    ("first", "second"),
    [(Step.CONSUME, Step.MARK), (Step.MARK, Step.CREATE), (Step.SNAPSHOT, Step.MARK)],
    ids=["consume<->mark", "mark<->create", "snapshot<->mark"],
)
def test_the_simulation_catches_a_dependency_moved_past_the_mark(first: Step, second: Step) -> None:
    """The simulation is not vacuous: with a step the mark depends on exchanged with it,
    the first seed's sweep finds a Job or a mark without its account."""
    driver = Driver.swapped(first, second)
    actions = schedule(SEEDS[0], LENGTH)
    base = play(actions, None, driver)
    found = list(base.violations)
    for k in range(1, len(_durable_writes(base)) + 1):
        if found:
            break
        found = play(actions, k, driver).violations
    assert found, f"exchanging {first.value} and {second.value} broke no invariant"


def test_the_simulation_catches_a_release_while_a_job_may_still_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The realm invariant is not vacuous: a retirement that releases whenever its claim
    held the realm, ignoring a record that keeps it and a Job that may still write,
    hands the database back under a running executor in the first seed's schedule."""
    monkeypatch.setattr(Retirement, "releases", lambda self: self.holder is not RealmHolder.NONE)
    sim = play(schedule(SEEDS[0], LENGTH), None)
    assert any("may still write" in problem for problem in sim.violations), sim.violations
