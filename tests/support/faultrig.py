"""A fault-injecting API wrapper that knows which dispatch step each call serves, and a
reading of what the API server holds after a pass.

``StepApi`` wraps any ``ApiClient`` (the in-memory double, or the real adapter on the
control-plane harness's kube-apiserver: ``tests.lifecycle.backends``), so the suite
drives the controller through the same protocol a manager uses. It maps every call to
the dispatch step it belongs to by looking at the call and at what is stored *before*
it, the way the original's ``dispatchAPI`` did:

- a Job create is ``create``; a Lease create or replace is ``lease``; a ConfigMap
  create is ``stage``; a status write on an approval is ``consume``;
- a status write on the claim's resource is compared with the stored claim: a new
  Job UID is ``record``, ``dispatchStarted`` turning true is ``mark``, a new admission
  snapshot is ``snapshot``, a new Lease epoch is ``lease``;
- a get of a Job this wrapper saw created is ``confirm``;
- a get of the claim's plan while an undispatched claim stands is ``authorize`` (the
  one step with no write: its fault is on the re-read that decides it).

The mapping is deliberately independent of the driver, so a driver with two steps
exchanged is judged by what it wrote, not by what it says it ran.

Every other write gets a label too (``write_label``: the finalizer, a new claim, a
retirement, a release, the write that clears a performed release), so a crash can
follow any durable write by its kind; every other read is labelled by its verb and
resource ("list pods"), so a read can fail by its kind.

Faults are armed on the *first* call with a label: ``fail`` raises before anything
is stored (for a read: the read fails); ``stop`` lets the call through and then fails
it and every later call until ``restart()`` (a process that crashed right after it).
``before`` runs a test action just ahead of that call (an approval replaced in the
middle of a pass). ``stop_after_writes`` stops after the n-th stored write, whatever
it is, for a scheduler that crashes after every write in turn.

``Contender`` is a second claimant through the real locker; ``read_holding`` reads what
the API server holds for one resource, and ``invariant_problems`` judges it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.mutationlifecycle import Step
from controller.pieces.targetlock import TargetLock
from jobclaim import lease_holder, lease_name, operation_info, projection_names
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    LEASES,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    ApiClient,
    ApiError,
    NotFound,
    Object,
    Resource,
    Unavailable,
    WatchEvent,
)

FaultMode = Literal["fail", "stop"]
Peek = Callable[[Resource, str | None, str], Object | None]

SUBJECTS = (PTAHSCHEMAS, PTAHMIGRATIONS)
APPROVALS = (PTAHSCHEMAAPPROVALS, PTAHMIGRATIONAPPROVALS)
PLANS = (PTAHSCHEMAPLANS, PTAHMIGRATIONPLANS)


def peek_through(client: ApiClient) -> Peek:
    """A ``Peek`` for any adapter: an uncached get that answers None for NotFound.

    The in-memory double has ``peek`` (outside its call log); a real API server's
    adapter has only the protocol, and this is all ``StepApi`` needs of it. Pass the
    adapter itself, never the ``StepApi`` over it, so the peek is neither faulted nor
    attributed to a step."""

    def peek(resource: Resource, namespace: str | None, name: str) -> Object | None:
        try:
            return client.get(resource, namespace, name)
        except NotFound:
            return None

    return peek


def _same(a: Resource, b: Resource) -> bool:
    return (a.group, a.plural) == (b.group, b.plural)


def _is(resource: Resource, *among: Resource) -> bool:
    return any(_same(resource, other) for other in among)


def _claim_of(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    status = (obj or {}).get("status") or {}
    return dict(status.get("activeOperation") or {})


def dispatched(claim: Mapping[str, Any]) -> bool:
    """The boundary as the spec defines it: a mark, or a recorded UID."""
    return bool(claim.get("dispatchStarted")) or bool(claim.get("jobUID"))


def is_consumed(approval: Mapping[str, Any] | None) -> bool:
    conditions = ((approval or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Consumed" and c.get("status") == "True" for c in conditions)


@dataclass(frozen=True, slots=True)
class StepCall:
    """One call as the wrapper saw it: the step it served (None: not a dispatch step),
    whether it answered, and whether it stored something."""

    seq: int
    step: Step | None
    verb: str
    resource: str
    name: str | None
    ok: bool
    wrote: bool
    label: str | None = None


@dataclass(slots=True)
class Armed:
    """A fault on the first call with ``label`` (a step's value, or a durable write's
    name from ``write_label``)."""

    label: str
    mode: FaultMode | None
    before: Callable[[], None] | None = None
    fired: bool = False


@dataclass(frozen=True, slots=True)
class Seen:
    """A call as a watcher sees it, before it runs."""

    step: Step | None
    label: str | None
    verb: str
    resource: Resource
    namespace: str | None
    name: str | None
    body: Mapping[str, Any]


@dataclass(slots=True)
class StepApi:
    """``ApiClient`` over ``inner`` with step attribution and step-armed faults."""

    inner: ApiClient
    peek: Peek
    log: list[StepCall] = field(default_factory=list)
    armed: list[Armed] = field(default_factory=list)
    stopped: bool = False
    # Stop the process right after this many more stored writes, whatever they are
    # (None: no such crash armed); ``crashed_after`` names the write it followed.
    stop_after_writes: int | None = None
    crashed_after: str | None = None
    created_jobs: set[tuple[str | None, str]] = field(default_factory=set)
    consumed_uids: set[str] = field(default_factory=set)
    # Every top-level status field a stored write on a PtahSchema or PtahMigration
    # carried: how a row knows whether issue 5's records are written at all.
    status_fields: set[str] = field(default_factory=set)
    # Called on every call before it runs: a test's own checks of the moment (what
    # stood when a mark was written, what covered a Job's create).
    watchers: list[Callable[[Seen], None]] = field(default_factory=list)
    _seq: Iterator[int] = field(default_factory=itertools.count)

    # -- the test surface --------------------------------------------------------------

    def arm(
        self,
        step: Step | str,
        mode: FaultMode | None,
        *,
        before: Callable[[], None] | None = None,
    ) -> Armed:
        """Arm a fault on the next call of ``step`` (or of a write label)."""
        armed = Armed(step.value if isinstance(step, Step) else step, mode, before)
        self.armed.append(armed)
        return armed

    def restart(self) -> None:
        """The process is back; the faults are cleared, the store kept everything."""
        self.stopped = False
        self.armed.clear()
        self.stop_after_writes = None

    def steps(self, *, ok: bool | None = None) -> list[StepCall]:
        return [c for c in self.log if c.step is not None and (ok is None or c.ok == ok)]

    def job_creates(self) -> list[StepCall]:
        """Creates that stored a Job (including one whose answer a stop swallowed)."""
        return [c for c in self.log if c.step is Step.CREATE and c.wrote]

    # -- attribution -------------------------------------------------------------------

    def step_of(
        self,
        verb: str,
        resource: Resource,
        namespace: str | None,
        name: str | None,
        body: Mapping[str, Any],
    ) -> Step | None:
        if verb == "create" and _same(resource, JOBS):
            return Step.CREATE
        if verb in ("create", "replace") and _same(resource, LEASES):
            # A release empties the holder; it ends a tenure and serves no step.
            spec = body.get("spec") or {}
            return Step.LEASE if spec.get("holderIdentity") else None
        if verb == "create" and _same(resource, CONFIGMAPS):
            return Step.STAGE
        if verb == "patch_status" and _is(resource, *APPROVALS):
            return Step.CONSUME
        if verb == "get" and _same(resource, JOBS) and name is not None:
            return Step.CONFIRM if (namespace, name) in self.created_jobs else None
        if verb == "patch_status" and _is(resource, *SUBJECTS) and name is not None:
            return _claim_write(_claim_of(self.peek(resource, namespace, name)), body)
        if verb == "get" and _is(resource, *PLANS) and name is not None:
            return self._authorize_read(resource, namespace, name)
        return None

    def _authorize_read(self, plans: Resource, namespace: str | None, name: str) -> Step | None:
        subject = PTAHSCHEMAS if _same(plans, PTAHSCHEMAPLANS) else PTAHMIGRATIONS
        plan = self.peek(plans, namespace, name) or {}
        ref = (plan.get("spec") or {}).get("schemaRef") or (plan.get("spec") or {}).get(
            "migrationRef"
        )
        if not ref:
            return None
        claim = _claim_of(self.peek(subject, namespace, ref["name"]))
        return Step.AUTHORIZE if claim and not dispatched(claim) else None

    # -- the call path -----------------------------------------------------------------

    def _call(
        self,
        verb: str,
        resource: Resource,
        namespace: str | None,
        name: str | None,
        body: Mapping[str, Any],
        run: Callable[[], Any],
    ) -> Any:
        seq = next(self._seq)
        if self.stopped:
            self.log.append(StepCall(seq, None, verb, resource.plural, name, False, False))
            raise Unavailable("the process stopped; call restart()")
        step = self.step_of(verb, resource, namespace, name, body)
        is_write = verb not in ("get", "list", "watch")
        label = step.value if step is not None else None
        if label is None and is_write:
            label = self.write_label(verb, resource, namespace, name, body)
        elif label is None:
            label = f"{verb} {resource.plural}"  # a read: "list pods", "get jobs"
        armed = self._fire(label)
        seen = Seen(step, label, verb, resource, namespace, name, body)
        for watch in self.watchers:
            watch(seen)

        def logged(ok: bool, wrote: bool) -> StepCall:
            return StepCall(seq, step, verb, resource.plural, name, ok, wrote, label)

        if armed is not None and armed.mode == "fail":
            self.log.append(logged(False, False))
            raise Unavailable(f"injected: the {label} call failed")
        consumed_uid = self._approval_uid(verb, resource, namespace, name)
        try:
            result = run()
        except ApiError:
            self.log.append(logged(False, False))
            raise
        if step is Step.CREATE and name is not None:
            self.created_jobs.add((namespace, name))
        if verb == "patch_status" and _is(resource, *SUBJECTS):
            self.status_fields.update(k for k, v in body.items() if v is not None)
        if consumed_uid is not None and is_consumed({"status": body}):
            self.consumed_uids.add(consumed_uid)
        if is_write and self.stop_after_writes is not None:
            self.stop_after_writes -= 1
            if self.stop_after_writes == 0:
                self.stop_after_writes, self.crashed_after = None, label
                armed = Armed(str(label), "stop", fired=True)
        if armed is not None and armed.mode == "stop":
            self.stopped = True
            self.log.append(logged(False, is_write))
            raise Unavailable(f"injected: the process stopped after the {label} call")
        self.log.append(logged(True, is_write))
        return result

    def write_label(
        self,
        verb: str,
        resource: Resource,
        namespace: str | None,
        name: str | None,
        body: Mapping[str, Any],
    ) -> str:
        """The name of a durable write that is not a dispatch step's."""
        if _same(resource, LEASES):
            return "release"  # a Lease write with no holder
        if not _is(resource, *SUBJECTS) or name is None:
            return f"{verb} {resource.plural}"
        if verb == "patch_metadata":
            return "finalizer"
        if verb != "patch_status":
            return f"{verb} {resource.plural}"
        stored = dict((self.peek(resource, namespace, name) or {}).get("status") or {})
        before, after = stored.get("activeOperation"), body.get("activeOperation")
        if before is None and after is not None:
            return "claim"
        if before is not None and after is None:
            return "retire"
        if stored.get("pendingLockRelease") and not body.get("pendingLockRelease"):
            return "release-recorded"
        if before is not None and after is not None and before.get("id") == after.get("id"):
            return "claim-update"
        return "status"

    def _approval_uid(
        self, verb: str, resource: Resource, namespace: str | None, name: str | None
    ) -> str | None:
        if verb != "patch_status" or not _is(resource, *APPROVALS) or name is None:
            return None
        found = self.peek(resource, namespace, name)
        return str(found["metadata"]["uid"]) if found else None

    def _fire(self, label: str | None) -> Armed | None:
        if label is None:
            return None
        for armed in self.armed:
            if armed.label == label and not armed.fired:
                armed.fired = True
                if armed.before is not None:
                    armed.before()
                return armed
        return None

    # -- ApiClient ---------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        result: Object = self._call(
            "get", resource, namespace, name, {}, lambda: self.inner.get(resource, namespace, name)
        )
        return result

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: Mapping[str, str] | None = None,
    ) -> list[Object]:
        result: list[Object] = self._call(
            "list",
            resource,
            namespace,
            None,
            {},
            lambda: self.inner.list(resource, namespace, label_selector=label_selector),
        )
        return result

    def create(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        name = (obj.get("metadata") or {}).get("name")
        result: Object = self._call(
            "create",
            resource,
            namespace,
            name,
            obj,
            lambda: self.inner.create(resource, namespace, obj),
        )
        return result

    def replace(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        name = (obj.get("metadata") or {}).get("name")
        result: Object = self._call(
            "replace",
            resource,
            namespace,
            name,
            obj,
            lambda: self.inner.replace(resource, namespace, obj),
        )
        return result

    def patch_metadata(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        metadata: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        result: Object = self._call(
            "patch_metadata",
            resource,
            namespace,
            name,
            metadata,
            lambda: self.inner.patch_metadata(
                resource, namespace, name, metadata, resource_version=resource_version
            ),
        )
        return result

    def patch_spec(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        spec: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        result: Object = self._call(
            "patch_spec",
            resource,
            namespace,
            name,
            spec,
            lambda: self.inner.patch_spec(
                resource, namespace, name, spec, resource_version=resource_version
            ),
        )
        return result

    def patch_fields(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        fields: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        result: Object = self._call(
            "patch_fields",
            resource,
            namespace,
            name,
            fields,
            lambda: self.inner.patch_fields(
                resource, namespace, name, fields, resource_version=resource_version
            ),
        )
        return result

    def patch_status(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        result: Object = self._call(
            "patch_status",
            resource,
            namespace,
            name,
            status,
            lambda: self.inner.patch_status(
                resource, namespace, name, status, resource_version=resource_version
            ),
        )
        return result

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Foreground", "Background", "Orphan"] = "Background",
    ) -> None:
        self._call(
            "delete",
            resource,
            namespace,
            name,
            {"uid": uid},
            lambda: self.inner.delete(resource, namespace, name, uid=uid, propagation=propagation),
        )

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 60,
        label_selector: Mapping[str, str] | None = None,
    ) -> Iterator[WatchEvent]:
        result: Iterator[WatchEvent] = self._call(
            "watch",
            resource,
            namespace,
            None,
            {},
            lambda: self.inner.watch(
                resource,
                namespace,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                label_selector=label_selector,
            ),
        )
        return result


def _claim_write(stored: Mapping[str, Any], body: Mapping[str, Any]) -> Step | None:
    """Which step a status write on a claim's resource is, against the stored claim."""
    new = dict(body.get("activeOperation") or {})
    if not new or not stored or new.get("id") != stored.get("id"):
        return None  # a new claim, a retirement, or a new attempt: no dispatch step
    if new.get("jobUID") and new.get("jobUID") != stored.get("jobUID"):
        return Step.RECORD
    if new.get("dispatchStarted") and not stored.get("dispatchStarted"):
        return Step.MARK
    if new.get("admissionSnapshot") != stored.get("admissionSnapshot"):
        return Step.SNAPSHOT
    if new.get("leaseEpoch") != stored.get("leaseEpoch"):
        return Step.LEASE
    return None


# -- a second claimant -------------------------------------------------------------------


@dataclass(slots=True)
class Contender:
    """Another resource's claim on the same realm, through the real locker.

    It has its own monotonic clock: it takes a Lease someone else holds only after
    seeing it unchanged for a whole duration by that clock, exactly as a second
    manager would, and never by writing the Lease behind the locker's back.
    """

    lock: TargetLock
    clock: list[float]
    holder: str = lease_holder("contender-resource-uid", "sha256:" + "c" * 64)
    held: tuple[str, str] | None = None  # coordination digest, epoch

    @classmethod
    def on(
        cls,
        api: ApiClient,
        lease_namespace: str,
        wall: Callable[[], Any],
        monotonic: Callable[[], float] | None = None,
    ) -> Contender:
        """A contender on its own clock, or on ``monotonic`` (the world's) if given."""
        clock = [0.0]
        own = monotonic or (lambda: clock[0])
        lock = TargetLock(api, lease_namespace, clock=own, wall=wall)
        return cls(lock, clock)

    def take(self, digest: str, duration: int, *, wait_out: bool = True) -> bool:
        """Take the realm; with ``wait_out``, after watching the holder's Lease unchanged
        for a whole duration by the contender's own clock. Whether it holds it now."""
        state = self.lock.acquire(digest, self.holder, duration, None)
        if not state.held and wait_out:
            # By its own observation the holder stopped renewing a whole duration ago.
            self.clock[0] += duration + 1
            state = self.lock.acquire(digest, self.holder, duration, None)
        if not state.held or state.epoch is None:
            return False
        self.held = (digest, state.epoch)
        return True

    def release(self) -> None:
        if self.held is not None:
            self.lock.release(self.held[0], self.holder, self.held[1])
            self.held = None


# -- what the API server holds -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Holding:
    """What the API server holds for one resource after a pass: the claim's fields,
    its records, whether its approval is spent, whether its projection is there, its
    Jobs and who holds its realm."""

    present: bool
    claim: Mapping[str, Any]
    records: Mapping[str, Any]
    approval_consumed: bool | None  # None: the claim holds no approval
    projection_present: bool | None  # None: nothing to project
    job_uid_by_name: Mapping[str, str]
    lease_holder: str | None  # None: no Lease; "": released
    claim_holder: str | None

    # Whether the claim's type takes the mark at all: a read-only claim that holds no
    # realm (a migration's History) is dispatched without one.
    takes_mark: bool = True

    @property
    def marked(self) -> bool:
        return dispatched(self.claim)

    @property
    def claimed_job(self) -> str | None:
        name = self.claim.get("jobName")
        return self.job_uid_by_name.get(name) if isinstance(name, str) else None


# What a resource keeps of a run that is no longer a live claim, and the release a
# retirement staged.
RECORD_FIELDS = (
    "pendingObservation",
    "unresolvedRun",
    "resolvedRun",
    "lastRun",
    "pendingLockRelease",
)


def read_holding(
    peek: Peek,
    jobs: Callable[[], list[Object]],
    subject: Resource,
    namespace: str,
    name: str,
    *,
    lease_namespace: str,
    consumed_uids: set[str],
) -> Holding:
    obj = peek(subject, namespace, name)
    status = dict((obj or {}).get("status") or {})
    claim = _claim_of(obj)
    records = {k: status[k] for k in RECORD_FIELDS if status.get(k) is not None}
    uid = (obj or {}).get("metadata", {}).get("uid", "")
    owned = {
        j["metadata"]["name"]: j["metadata"]["uid"]
        for j in jobs()
        if any(ref.get("uid") == uid for ref in j["metadata"].get("ownerReferences") or [])
    }
    approval: bool | None = None
    projection: bool | None = None
    holder: str | None = None
    claim_holder: str | None = None
    if claim:
        schema = _same(subject, PTAHSCHEMAS)
        plan = status.get("plan") or {}
        ref = (plan.get("approval") if schema else claim.get("approvalRef")) or None
        if ref:
            found = peek(APPROVALS[0] if schema else APPROVALS[1], namespace, ref["name"])
            same = found is not None and found["metadata"]["uid"] == ref["uid"]
            approval = ref["uid"] in consumed_uids or (same and is_consumed(found))
        if schema and claim.get("type") == "Apply" and plan:
            names = projection_names(plan["name"], int(plan.get("chunkCount") or 1))
            projection = all(peek(CONFIGMAPS, namespace, n) is not None for n in names)
        digest = claim.get("coordinationDigest")
        if digest:
            lease = peek(LEASES, lease_namespace, lease_name(digest))
            holder = (lease or {}).get("spec", {}).get("holderIdentity", "") if lease else None
            claim_holder = lease_holder(uid, claim["id"])
    takes_mark = True
    if claim:
        family = "schema" if _same(subject, PTAHSCHEMAS) else "migration"
        proof = status.get("pendingObservation") is not None
        takes_mark = operation_info(family, str(claim.get("type"))).holds_lock(proof)
    return Holding(
        takes_mark=takes_mark,
        present=obj is not None,
        claim=claim,
        records=records,
        approval_consumed=approval,
        projection_present=projection,
        job_uid_by_name=owned,
        lease_holder=holder,
        claim_holder=claim_holder,
    )


# The invariants every pass must leave, worded as the problems they forbid.
JOB_UNMARKED = "a Job exists and its claim is not marked"
MARK_UNSPENT = "a marked claim's approval is not consumed"
MARK_NO_SNAPSHOT = "a marked claim has no admission snapshot"
MARK_NO_PROJECTION = "a marked schema Apply has no projection"
MARK_CONTENDED = "a claim is marked while another claimant holds the realm"
MARK_UNHELD = "a claim is marked while nobody holds its realm"


def invariant_problems(holding: Holding, *, realm: bool = True) -> list[str]:
    """What is wrong with what the API server holds for one resource, right now.

    ``realm=False`` leaves out who holds the realm: where time passes, a Lease can
    lapse legitimately under a marked claim, and the caller judges the realm by
    whether a Job may still write instead."""
    problems: list[str] = []
    claim = holding.claim
    named = claim.get("jobName")
    # A Job under a live claim's name must be covered by its mark; a Job whose claim
    # is gone must be named by a record (issue 5), never be a stray.
    for job in holding.job_uid_by_name:
        if job == named and holding.takes_mark and not holding.marked:
            problems.append(JOB_UNMARKED)
    if not holding.marked:
        return problems
    if holding.approval_consumed is False:
        problems.append(MARK_UNSPENT)
    if not claim.get("admissionSnapshot"):
        problems.append(MARK_NO_SNAPSHOT)
    if holding.projection_present is False:
        problems.append(MARK_NO_PROJECTION)
    # A claim that holds no realm (a Resolve, a Verify, an Observe outside a proof,
    # a History) has none to lose: its recorded Job is a reading's.
    if realm and holding.takes_mark and not claim.get("leaseContinuityLost"):
        if holding.lease_holder and holding.lease_holder != holding.claim_holder:
            problems.append(MARK_CONTENDED)
        elif not holding.lease_holder:
            problems.append(MARK_UNHELD)
    return problems
