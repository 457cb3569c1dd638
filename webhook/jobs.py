"""Job CREATE: only the Job the active claim reserved, exactly as the builder builds it.

The controller creates a Job once per claim, after the claim, the admission snapshot
and (for a mutating claim) the dispatch mark are durable. This rule admits exactly
that create: the owner is read uncached, its ``status.activeOperation`` must name this
Job and hold no UID yet, and the Job is rebuilt with ``jobclaim.build_job`` from the
claim's own inputs and held to the rebuild with ``jobclaim.match`` (submitted mode,
with the execution binding in force). The webhook and the controller therefore ask
the same predicate about the same rebuild: the webhook cannot admit a Job the
controller would refuse to adopt, and a compromised manager cannot create one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

from jobclaim import (
    BuildRefused,
    Claim,
    Expected,
    InvalidInput,
    build_job,
    decode_chunk,
    expected,
    manager_record_of,
    match,
    migration_plan_problem,
    operation_info,
    owner_family,
    schema_plan_problem,
)
from jobclaim.api import ManagerRecord, PtahMigration, PtahMigrationPlan, PtahSchema, PtahSchemaPlan
from jobclaim.apiserver import PTAHMIGRATIONPLANS, PTAHSCHEMAPLANS
from webhook.jobauthority import (
    AUTHORITY,
    hold_migration_approval,
    hold_pins,
    hold_policy,
    hold_schema_approval,
    hold_single_run,
    hold_target,
    schema_plan_needs_approval,
)
from webhook.objects import Candidate, configmap_key, read_owner, stored
from webhook.projections import projection_mismatch
from webhook.rules import CONTROLLER_WRITE, Judgement, ReadKey, Reads, Settings, Trail, read, rule

JOB_CREATE: Final = rule(
    "job-create",
    (CONTROLLER_WRITE,),
    "Job CREATE: only the Job the active claim reserved, exactly as its claim builds it",
    description="""
    The owner named by the Job's one controller reference is read directly from the
    API server. Its status.activeOperation must name this Job and hold no UID yet (a
    claim holding a UID already has its Job: a second create is the double run the
    lifecycle exists to prevent), and a mutating claim must have written
    dispatchStarted first, so that every create is covered by the durable mark. The
    Job is rebuilt with jobclaim.build_job from the claim's inputs, the execution
    binding in force and the manager record the Job itself carries (the admission
    snapshot's template digest pins that record), and must pass jobclaim.match
    against the rebuild in submitted mode. A schema Apply's plan and every projection
    ConfigMap are re-read: the plan must be the one status.plan records and each
    projection exactly its chunk's bytes, because the Job mounts them by name. A
    migration Apply reads the plan its claim references for the sequence it expects,
    and the plan must have been made from the artifact the claim's Job pulls: the
    versions a person approved name files in that artifact alone.
    """,
    admits="the one create of the Job the active claim reserved, built by jobclaim.build_job",
)
NOT_RESERVED: Final = JOB_CREATE.refuses(
    "the Job does not match a not-yet-created active operation"
)
NOT_MARKED: Final = JOB_CREATE.refuses(
    "the mutating claim has not written dispatchStarted before its one create"
)
NO_BINDING: Final = JOB_CREATE.refuses("the {kind} records no execution binding in force")
NO_RECORD: Final = JOB_CREATE.refuses("the Job's manager record cannot be read: {reason}")
NO_PLAN: Final = JOB_CREATE.refuses("the Apply claim names no plan")
PLAN_MISSING: Final = JOB_CREATE.refuses("the Apply's plan {key} does not exist")
PLAN_NOT_RECORDED: Final = JOB_CREATE.refuses(
    "the Apply's plan {key} is not the plan its claim records: {reason}"
)
PROJECTION_MISSING: Final = JOB_CREATE.refuses("the Apply's plan projection {key} does not exist")
PROJECTION_WRONG: Final = JOB_CREATE.refuses(
    "the Apply's plan projection {key} is not its plan's chunk: {reason}"
)
CANNOT_REBUILD: Final = JOB_CREATE.refuses(
    "the active operation cannot reconstruct the submitted Job: {reason}"
)
OUTSIDE_INTENT: Final = JOB_CREATE.refuses(
    "the Job is outside the active operation intent: {reason}"
)

OWNERS: Final = {"PtahSchema": PtahSchema, "PtahMigration": PtahMigration}
# How many rebuilt claims ``Rebuilds`` keeps: one per claim being dispatched at once.
REBUILT_CLAIMS: Final = 64
# The record enters the key as its field values: a frozen model hashes and compares
# through Python-level methods, twice per review, where a tuple of strings is C work.
RebuildKey = tuple[int, tuple[tuple[str, object], ...], tuple[str, ...], str | None]


class Rebuilds:
    """The submitted-mode claim each owner rebuilds to, and the claim's half of
    ``match`` (``jobclaim.Expected``: the normalized rebuild, its canonical spec and
    its template digest), remembered per decoded owner.

    ``build_job`` is a pure function of the owner, the manager record the Job
    carries, the sequence the plan fixes and the snapshot digest, and the claim adds
    only the owner's own binding. The owner is the frozen model ``Stored.decode``
    answers for the exact bytes the API server sent (``rules.decoded_text``), so the
    same bytes give the very same object, and a changed owner (its status, its spec
    or only its resourceVersion) is another object and misses. The entry is keyed by
    that object's identity and holds the object itself, so the identity cannot be
    reused by another owner while the entry lives. Nothing the manager writes into
    the key is trusted beyond what the rebuild already read from it: every input of
    the rebuild is in the key. A rebuild that refuses raises and is not remembered.
    The Job under review is never part of an entry: each review is matched afresh.
    """

    def __init__(self, size: int = REBUILT_CLAIMS) -> None:
        self._size = size
        # The async path judges on the event loop; the synchronous ``Engine.decide``
        # may be called from several threads, so the bookkeeping takes a lock.
        self._lock = threading.Lock()
        self._entries: OrderedDict[RebuildKey, tuple[PtahSchema | PtahMigration, Expected]] = (
            OrderedDict()
        )

    def expected(
        self,
        owner: PtahSchema | PtahMigration,
        record: ManagerRecord,
        sequence: tuple[str, ...],
        digest: str | None,
    ) -> Expected:
        key: RebuildKey = (id(owner), tuple(record.__dict__.items()), sequence, digest)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is owner:
                self._entries.move_to_end(key)
                return entry[1]
        prepared = expected(rebuilt_claim(owner, record, sequence, digest))
        with self._lock:
            self._entries[key] = (owner, prepared)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return prepared

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def rebuilt_claim(
    owner: PtahSchema | PtahMigration,
    record: ManagerRecord,
    sequence: tuple[str, ...],
    digest: str | None,
) -> Claim:
    """The claim ``owner``'s Job is held to on create: rebuilt with ``build_job``
    from the claim's inputs and the binding in force (``BuildRefused`` or
    ``InvalidInput`` when it cannot be)."""
    family = owner_family(owner)
    status = owner.status
    binding = status.execution_binding if status else None
    if binding is None:
        raise TypeError("a claim without a binding reached the rebuild")
    inputs = family.job_inputs(
        binding=binding, manager=record, expected_sequence=sequence, snapshot_digest=digest
    )
    claim = family.claim(built=build_job(inputs), stored=False, binding=binding)
    if claim is None:
        raise TypeError("a claim vanished between two reads of one decoded owner")
    return claim


# One per process, like the decode memo it keys on.
REBUILDS: Final = Rebuilds()


def judge_job_create(found: Candidate, trail: Trail, settings: Settings) -> Judgement:
    trail.enter(JOB_CREATE)
    owner = yield from read_owner(found.meta, OWNERS, what="Job", trail=trail)
    if not isinstance(owner, PtahSchema | PtahMigration):
        raise TypeError(f"a Job owner decoded as {type(owner).__name__}")
    status = owner.status
    operation = status.active_operation if status else None
    if operation is None or operation.job_name != found.name or operation.job_uid:
        raise trail.deny(NOT_RESERVED)
    trail.passed(f"status.activeOperation reserves {found.name} and holds no UID yet")
    family = owner_family(owner)
    mutating = operation_info(family.family, operation.type).mutating
    if mutating and not operation.dispatch_started:
        raise trail.deny(NOT_MARKED)
    binding = status.execution_binding if status else None
    if binding is None:
        raise trail.deny(NO_BINDING, kind=owner.kind)
    try:
        record = manager_record_of(found.raw)
    except InvalidInput as error:
        raise trail.deny(NO_RECORD, reason=str(error)) from error
    trail.enter(AUTHORITY)
    hold_pins(settings, binding, record, trail)
    hold_target(owner, trail)
    if mutating:
        hold_policy(owner, trail)
        hold_single_run(owner, trail)
    trail.enter(JOB_CREATE)
    snapshot = operation.admission_snapshot
    digest = snapshot.digest if snapshot else None
    sequence = yield from _hold_plan(owner, trail, mutating=mutating)
    try:
        prepared = REBUILDS.expected(owner, record, sequence, digest)
    except (BuildRefused, InvalidInput) as error:
        raise trail.deny(CANNOT_REBUILD, reason=str(error)) from error
    trail.passed("rebuilt with jobclaim.build_job from the claim and the binding in force")
    verdict = match(found.raw, prepared.claim, prepared)
    if not verdict:
        raise trail.deny(OUTSIDE_INTENT, reason=verdict.reason)
    trail.passed("jobclaim.match: the Job is its claim's (submitted, binding in force)")
    return trail.allow()


def _hold_plan(
    owner: PtahSchema | PtahMigration, trail: Trail, *, mutating: bool
) -> Reads[tuple[str, ...]]:
    """Hold an Apply's plan to its claim: a schema's plan and projections (the Job
    mounts them), a migration's referenced plan (its sequence, which the Job expects);
    and a mutating claim to the approval it spent (``job-authority``)."""
    if isinstance(owner, PtahSchema):
        held = yield from _hold_schema_plan(owner, trail)
        if held is not None and mutating:
            plan, key, data = held
            trail.enter(AUTHORITY)
            required = schema_plan_needs_approval(owner, plan, data, key, trail)
            yield from hold_schema_approval(owner, plan, required, trail)
            trail.enter(JOB_CREATE)
        return ()
    found = yield from _migration_plan(owner, trail)
    if found is None:
        return ()
    if mutating:
        trail.enter(AUTHORITY)
        yield from hold_migration_approval(owner, found, trail)
        trail.enter(JOB_CREATE)
    return tuple(entry.version for entry in found.spec.migrations)


def _hold_schema_plan(
    schema: PtahSchema, trail: Trail
) -> Reads[tuple[PtahSchemaPlan, ReadKey, bytes] | None]:
    """For a schema Apply, re-read the plan and every projection and hold them to it;
    the plan, its key and the bytes the Pod mounts.

    Returns None without reading for any other operation, or when status.plan is
    missing (the builder then refuses the Apply with its own sentence).
    """
    status = schema.status
    operation = status.active_operation if status else None
    record = status.plan if status else None
    if operation is None or operation.type != "Apply" or record is None:
        return None
    namespace = schema.metadata.namespace or ""
    key = ReadKey(PTAHSCHEMAPLANS, namespace, record.name)
    fetched = yield from read(key)
    plan = stored(fetched, key, PtahSchemaPlan, trail)
    if plan is None:
        raise trail.deny(PLAN_MISSING, key=key)
    problem = schema_plan_problem(plan, record, owner=schema.metadata)
    if problem:
        raise trail.deny(PLAN_NOT_RECORDED, key=key, reason=problem)
    keys = [configmap_key(namespace, chunk.name) for chunk in plan.spec.chunks]
    # One batch: the shell reads up to 16 projections concurrently.
    projections = yield from read(*keys)
    data = b""
    for chunk, chunk_key in sorted(
        zip(plan.spec.chunks, keys, strict=True), key=lambda pair: pair[0].index
    ):
        found = projections.get(chunk_key)
        if found is None:
            raise trail.deny(PROJECTION_MISSING, key=chunk_key)
        tree = found.tree()
        problem = projection_mismatch(tree, plan, chunk)
        if problem:
            raise trail.deny(PROJECTION_WRONG, key=chunk_key, reason=problem)
        data += decode_chunk(tree["binaryData"]["chunk"]) or b""
    trail.passed(f"plan {key} and its {len(keys)} projections hold the recorded bytes")
    return plan, key, data


def _migration_plan(migration: PtahMigration, trail: Trail) -> Reads[PtahMigrationPlan | None]:
    """For a migration Apply, the plan its claim references; None otherwise."""
    status = migration.status
    operation = status.active_operation if status else None
    if operation is None or operation.type != "Apply":
        return None
    ref = operation.plan_ref
    if ref is None:
        raise trail.deny(NO_PLAN)
    key = ReadKey(PTAHMIGRATIONPLANS, migration.metadata.namespace or "", ref.name)
    fetched = yield from read(key)
    plan = stored(fetched, key, PtahMigrationPlan, trail)
    if plan is None:
        raise trail.deny(PLAN_MISSING, key=key)
    problem = migration_plan_problem(
        plan,
        ref,
        owner=migration.metadata,
        epoch=operation.execution_binding_id,
        artifact=operation.source.digest if operation.source else None,
    )
    if problem:
        raise trail.deny(PLAN_NOT_RECORDED, key=key, reason=problem)
    trail.passed(f"plan {key} is the one the claim references")
    return plan
