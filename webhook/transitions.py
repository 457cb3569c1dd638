"""The manager's own status writes: what the lifecycle cannot lose, even to the manager.

``manager-state`` admits status writes from the manager's identity alone; this rule
judges what those writes may do, because a stolen manager identity can write status
too. Status is the operator's memory of what it dispatched: clearing a dispatch mark
turns "the outcome is unknown" back into "create the Job", and dropping a pending
proof, an unresolved run or a staged release forgets a run that may have changed a
database, or hands the database back while something may still write. So an UPDATE
of a PtahSchema's or PtahMigration's status is held to the transitions the
specification allows, each checked against evidence the manager cannot forge (read
directly from the API server), and a decision's ``Consumed`` record, once written,
stays as written.

Pure, as every rule: the evidence is yielded as reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from jobclaim import (
    CONSUMED,
    LABEL_OPERATION,
    LABEL_OPERATION_ID,
    LEASE_EPOCH_ANNOTATION,
    RESOLVE,
    STAMPED,
    UNVERIFIED_OPERATIONS,
    artifact_verified,
    finished,
    lease_holder,
    lease_name,
    operation_id_label_value,
    operation_info,
    owner_family,
    pod_stopped,
    resolved_artifact,
    resolved_source,
    stamp_problem,
    verification,
    verification_policy,
)
from jobclaim.api import (
    ApprovalStatus,
    PtahMigration,
    PtahMigrationRunAcknowledgment,
    PtahResultRecord,
    PtahSchema,
    PtahSchemaProofSettlement,
)
from jobclaim.apiserver import (
    JOBS,
    LEASES,
    PODS,
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHRESULTRECORDS,
    PTAHSCHEMAPROOFSETTLEMENTS,
)
from runner import RunnerResult, decode_result
from webhook.objects import Candidate, stored
from webhook.records import claim_job_problem, result_problem
from webhook.rules import MANAGER_STATE, ReadKey, Reads, Settings, Trail, read, rule

TRANSITIONS: Final = rule(
    "manager-transitions",
    (MANAGER_STATE,),
    "The manager's status writes keep what the lifecycle cannot lose",
    description="""
    A status UPDATE the manager makes to a PtahSchema or PtahMigration is held to the
    transitions the lifecycle allows. Once a mutating claim has written
    dispatchStarted, the mark stays and its jobUID, once recorded, never changes,
    except by the one path the specification gives: a create the API server refused
    before storing, provable because no Job stands under the reserved name (read
    directly) and no UID was recorded. The marked claim's identity (type, Job name,
    attempt, epoch, target, artifact, plan and approval) does not change, and it leaves status
    only by its retirement with the record of its Apply: a schema's
    pendingObservation naming the claim, a migration's lastRun naming its Job or
    unresolvedRun naming the claim. A schema's pendingObservation goes only with a
    person's stamped settlement naming its Apply (read directly), the reading that
    proves it (the proof's Observe or Plan claim, whose Job is read Complete and is
    that claim's by jobclaim.match), or the schema's deletion; a migration's
    unresolvedRun only with the History reading whose Job is read Complete and is its
    claim's, or a stamped acknowledgment naming the run; and pendingLockRelease only
    once every Pod of the claim's Jobs (listed by its operation-id label) has stopped
    by its kubelet-written status and the realm Lease (read directly) is gone or no
    longer held by the claim under the recorded epoch. On a decision (an approval, an
    acknowledgment, a settlement), a Consumed record, once written, stays, with the
    claim it names, and so does the one Job it names as the Job it authorized.
    The artifact is the readings' word, not the manager's: a resolved artifact
    (status.source, status.artifact) is recorded only from the Resolve claim's
    completed Job and the record its Pod wrote of that exact resolution; a
    verification under a policy only from the Verify claim's, of the artifact that
    claim read and the policy digest its Pod recorded. A new claim reads the
    resolved artifact as status records it, and where the spec names a verification
    policy, no claim but Resolve and Verify stands before that artifact is verified.
    """,
    admits="the manager's status writes that keep every record the lifecycle relies on",
)
MARK_CLEARED: Final = TRANSITIONS.refuses(
    "the manager may not clear dispatchStarted of the mutating claim {claim}: {why}"
)
JOB_UID_CHANGED: Final = TRANSITIONS.refuses(
    "the manager may not clear or change the jobUID {uid} of the mutating claim {claim}"
)
CLAIM_REWRITTEN: Final = TRANSITIONS.refuses(
    "the manager may not change the {field} of the marked claim {claim}"
)
RETIRED_WITHOUT_RECORD: Final = TRANSITIONS.refuses(
    "the marked claim {claim} may leave status only with the record of its Apply ({record})"
)
RECORD_DROPPED: Final = TRANSITIONS.refuses(
    "the manager may not drop the {record} of {what} without the evidence that settles it: {why}"
)
RELEASE_RUNNING: Final = TRANSITIONS.refuses(
    "the manager may not drop the pendingLockRelease of {claim}: its Pod {pod} has not "
    "stopped (phase {phase})"
)
RELEASE_DROPPED: Final = TRANSITIONS.refuses(
    "the manager may not drop the pendingLockRelease of {claim}: the realm Lease {lease} is "
    "still held by the claim under {epoch}"
)
CONSUMED_CHANGED: Final = TRANSITIONS.refuses(
    "the manager may not remove or change the Consumed record of {kind} {name} (consumed by {by})"
)
WITNESS_CHANGED: Final = TRANSITIONS.refuses(
    "the manager may not remove or change the Job {kind} {name} names as the one it "
    "authorized ({job})"
)
WITNESS_UNSPENT: Final = TRANSITIONS.refuses(
    "the manager may not name a Job in {kind} {name} before it is consumed"
)
ARTIFACT_UNATTESTED: Final = TRANSITIONS.refuses(
    "the manager may not record {digest} as the resolved artifact: {why}"
)
VERIFICATION_UNATTESTED: Final = TRANSITIONS.refuses(
    "the manager may not record artifact {digest} as verified: {why}"
)
CLAIM_OFF_ARTIFACT: Final = TRANSITIONS.refuses(
    "the {operation} claim {claim} must read the artifact Resolve recorded ({recorded}), "
    "not {claimed}"
)
CLAIM_UNVERIFIED: Final = TRANSITIONS.refuses(
    "the {operation} claim {claim} may not stand before artifact {digest} is verified under "
    "the spec's verification policy {policy}"
)

Owner = PtahSchema | PtahMigration
# What a marked claim is: none of it may change while the claim stands. The source is
# the artifact a migration Apply pulls its files from (the versions a person approved
# name files in that artifact alone), so it is the claim's as much as its target.
_CLAIM_IDENTITY: Final = (
    "type",
    "job_name",
    "attempt",
    "execution_binding_id",
    "target",
    "coordination_digest",
    "source",
    "registry_ca_digest",
    "plan_ref",
    "approval_ref",
)


def judge_transition(
    old: Candidate, new: Candidate, trail: Trail, settings: Settings
) -> Reads[None]:
    """Hold one manager status UPDATE to the lifecycle's transitions."""
    trail.enter(TRANSITIONS)
    before, after = old.model, new.model
    if isinstance(before, PtahSchema | PtahMigration) and isinstance(after, type(before)):
        yield from _hold_claim(before, after, trail)
        yield from _hold_records(before, after, trail, settings)
        yield from _hold_artifact(before, after, trail)
        _hold_new_claim(before, after, trail)
        trail.passed("every record the lifecycle relies on is kept or settled")
        return
    status_before = getattr(before, "status", None)
    if isinstance(status_before, ApprovalStatus):
        _hold_consumed(
            new.raw["kind"], new.name, status_before, getattr(after, "status", None), trail
        )
        trail.passed("the decision's Consumed record is kept")


def _claim(owner: Owner) -> Any:
    return owner.status.active_operation if owner.status else None


def _hold_claim(before: Owner, after: Owner, trail: Trail) -> Reads[None]:
    old = _claim(before)
    if old is None or not old.dispatch_started:
        return
    if not operation_info(owner_family(before).family, old.type).mutating:
        return
    new = _claim(after)
    if new is None or new.id != old.id:
        _hold_retirement_record(before, after, old, trail)
        return
    for field in _CLAIM_IDENTITY:
        if getattr(old, field, None) != getattr(new, field, None):
            raise trail.deny(CLAIM_REWRITTEN, field=field, claim=old.id)
    if isinstance(before, PtahSchema) and isinstance(after, PtahSchema):
        plan_before = before.status.plan if before.status else None
        plan_after = after.status.plan if after.status else None
        if plan_before != plan_after:
            raise trail.deny(CLAIM_REWRITTEN, field="plan", claim=old.id)
    if old.job_uid and new.job_uid != old.job_uid:
        raise trail.deny(JOB_UID_CHANGED, uid=old.job_uid, claim=old.id)
    if new.dispatch_started:
        return
    # The one way back: the create was refused before storing, so nothing stands under
    # the reserved name. A UID recorded already proves a Job was stored.
    if old.job_uid:
        raise trail.deny(MARK_CLEARED, claim=old.id, why=f"its Job {old.job_uid} was created")
    key = ReadKey(JOBS, before.metadata.namespace or "", old.job_name)
    fetched = yield from read(key)
    if fetched.get(key) is not None:
        raise trail.deny(MARK_CLEARED, claim=old.id, why=f"its Job {key} exists")
    trail.passed(f"dispatchStarted withdrawn: no Job stands under {key}")


def _hold_retirement_record(before: Owner, after: Owner, old: Any, trail: Trail) -> None:
    if isinstance(after, PtahSchema):
        pending = after.status.pending_observation if after.status else None
        if pending is not None and pending.apply_operation_id == old.id:
            trail.passed(f"the marked claim {old.id} retired into its pendingObservation")
            return
        raise trail.deny(RETIRED_WITHOUT_RECORD, claim=old.id, record="a pendingObservation")
    assert isinstance(after, PtahMigration)
    last = after.status.last_run if after.status else None
    unresolved = after.status.unresolved_run if after.status else None
    if (last is not None and last.job_name == old.job_name) or (
        unresolved is not None and unresolved.operation_id == old.id
    ):
        trail.passed(f"the marked claim {old.id} retired with its run's record")
        return
    raise trail.deny(RETIRED_WITHOUT_RECORD, claim=old.id, record="a lastRun or an unresolvedRun")


def _hold_records(before: Owner, after: Owner, trail: Trail, settings: Settings) -> Reads[None]:
    if isinstance(before, PtahSchema) and isinstance(after, PtahSchema):
        yield from _hold_pending_observation(before, after, trail)
    if isinstance(before, PtahMigration) and isinstance(after, PtahMigration):
        yield from _hold_unresolved_run(before, after, trail)
    yield from _hold_release(before, after, trail, settings)


def _reading_done(owner: Owner, types: Sequence[str]) -> Reads[str | None]:
    """None when the old status's read-only claim of ``types`` has its Job Complete
    and its Pod's own record of a successful reading; otherwise why it is no evidence."""
    found = yield from _reading_result(owner, types)
    return found if isinstance(found, str) else None


def _reading_result(owner: Owner, types: Sequence[str]) -> Reads[RunnerResult | str]:
    """What the old status's read-only claim of ``types`` read, from its completed
    Job's own Pod record; or why there is no such evidence."""
    claim = _claim(owner)
    if claim is None or claim.type not in types or not claim.job_uid:
        return f"no {' or '.join(types)} reading of it was recorded"
    namespace = owner.metadata.namespace or ""
    key = ReadKey(JOBS, namespace, claim.job_name)
    record_key = ReadKey(PTAHRESULTRECORDS, namespace, claim.job_name)
    fetched = yield from read(key, record_key)
    found = fetched.get(key)
    job = found.tree() if found is not None else None
    if job is None or job.get("metadata", {}).get("uid") != claim.job_uid:
        return f"the reading's Job {key} does not exist"
    if finished(job) != "Complete":
        return f"the reading's Job {key} has not completed"
    # The claim is status, which the manager writes: it could name any finished Job
    # (a team's own, or the unaccounted Apply's). The Job must be the reading's by
    # jobclaim.match against what the claim fixes: owner, operation, epoch, images.
    why = claim_job_problem(owner, job)
    if why is not None:
        return f"the reading's Job {key} is not its claim's: {why}"
    # And a Complete Job says nothing of what it read: the reading's own Pod must have
    # recorded a successful result of this attempt, about the claim's database.
    stored_record = fetched.get(record_key)
    if stored_record is None:
        return f"the reading's Job {key} has no result record its Pod wrote"
    try:
        record = stored_record.decode(PtahResultRecord)
    except ValueError as error:
        return f"the reading's record {record_key} does not decode: {error}"
    why = result_problem(owner, job, record)
    result = decode_result(record.spec.result) if why is None else None
    if result is not None and result.error is not None:
        why = "it records a failed reading"
    if result is None or why is not None:
        return f"the reading's record {record_key} is no evidence: {why}"
    return result


def _hold_pending_observation(before: PtahSchema, after: PtahSchema, trail: Trail) -> Reads[None]:
    pending = before.status.pending_observation if before.status else None
    if pending is None:
        return
    kept = after.status.pending_observation if after.status else None
    if kept is not None and kept.apply_operation_id == pending.apply_operation_id:
        return
    what = f"the Apply {pending.apply_operation_id}"
    if after.metadata.deletion_timestamp is not None:
        trail.passed(f"the pendingObservation of {what} ends with the schema's deletion")
        return
    settled = after.status.settled_proof if after.status else None
    if settled is not None and settled.apply_operation_id == pending.apply_operation_id:
        ref = settled.settlement_ref
        key = ReadKey(PTAHSCHEMAPROOFSETTLEMENTS, before.metadata.namespace or "", ref.name)
        fetched = yield from read(key)
        settlement = stored(fetched, key, PtahSchemaProofSettlement, trail)
        why = _decision_problem(
            settlement, ref.uid, before.metadata.uid or "", pending.apply_operation_id
        )
        if why is None:
            trail.passed(f"the pendingObservation of {what} settled by {key}")
            return
        raise trail.deny(RECORD_DROPPED, record="pendingObservation", what=what, why=why)
    why = yield from _reading_done(before, ("Observe", "Plan"))
    if why is not None:
        raise trail.deny(RECORD_DROPPED, record="pendingObservation", what=what, why=why)
    trail.passed(f"the pendingObservation of {what} proved by its reading")


def _hold_unresolved_run(before: PtahMigration, after: PtahMigration, trail: Trail) -> Reads[None]:
    unresolved = before.status.unresolved_run if before.status else None
    if unresolved is None:
        return
    kept = after.status.unresolved_run if after.status else None
    if kept is not None and kept.operation_id == unresolved.operation_id:
        return
    what = f"the run {unresolved.operation_id}"
    if after.metadata.deletion_timestamp is not None:
        return
    resolved = after.status.resolved_run if after.status else None
    if resolved is None or resolved.operation_id != unresolved.operation_id:
        raise trail.deny(
            RECORD_DROPPED, record="unresolvedRun", what=what, why="no resolvedRun names it"
        )
    why: str | None
    if resolved.resolution == "Acknowledged" and resolved.acknowledgment_ref is not None:
        ref = resolved.acknowledgment_ref
        key = ReadKey(PTAHMIGRATIONRUNACKNOWLEDGMENTS, before.metadata.namespace or "", ref.name)
        fetched = yield from read(key)
        ack = stored(fetched, key, PtahMigrationRunAcknowledgment, trail)
        why = _decision_problem(ack, ref.uid, before.metadata.uid or "", unresolved.operation_id)
    else:
        why = yield from _reading_done(before, ("History",))
    if why is not None:
        raise trail.deny(RECORD_DROPPED, record="unresolvedRun", what=what, why=why)
    trail.passed(f"the unresolvedRun of {what} settled ({resolved.resolution})")


def _hold_artifact(before: Owner, after: Owner, trail: Trail) -> Reads[None]:
    """A resolved artifact or a verification changes only by its reading's record.

    Status is the manager's to write, so without this a stolen manager identity could
    pin any digest of the spec's repository (an image nobody resolved or verified)
    and every later Job would read it by jobclaim.match.
    """
    artifact = resolved_artifact(after)
    if artifact is not None and artifact != resolved_artifact(before):
        found = yield from _reading_result(before, (RESOLVE,))
        why = found if isinstance(found, str) else _resolution_problem(found, artifact)
        if why is not None:
            raise trail.deny(ARTIFACT_UNATTESTED, digest=artifact.digest, why=why)
        trail.passed(f"artifact {artifact.digest} recorded from its Resolve record")
    verified = verification(after)
    if verified is None or verified == verification(before) or verified.policy_digest is None:
        # Without a policy digest a verification vouches for nothing a claim relies on.
        return
    found = yield from _reading_result(before, ("Verify",))
    why = found if isinstance(found, str) else _verification_problem(before, found, verified)
    if why is not None:
        raise trail.deny(VERIFICATION_UNATTESTED, digest=verified.artifact_digest, why=why)
    trail.passed(f"artifact {verified.artifact_digest} verified by its Verify record")


def _resolution_problem(result: RunnerResult, artifact: Any) -> str | None:
    section = result.resolve
    if section is None:
        return "the Resolve record holds no resolution"
    recorded = (
        section.resolved_reference,
        section.resolved_digest,
        section.resolved_media_type,
        section.resolved_size,
    )
    if recorded != (artifact.reference, artifact.digest, artifact.media_type, artifact.size):
        return f"the Resolve record pinned {section.resolved_reference}@{section.resolved_digest}"
    return None


def _verification_problem(before: Owner, result: RunnerResult, verified: Any) -> str | None:
    section = result.verify
    read = _claim(before).source
    if section is None:
        return "the Verify record holds no verification"
    if read is None or read.digest != verified.artifact_digest:
        return f"the Verify reading read {read.digest if read else 'no artifact'}"
    if section.verification_policy_digest != verified.policy_digest:
        return f"the Verify record checked policy {section.verification_policy_digest}"
    return None


def _hold_new_claim(before: Owner, after: Owner, trail: Trail) -> None:
    """A claim written now reads the artifact status records, verified where the spec
    asks: the claim is what its Job is matched against, so it is where a digest
    nobody resolved or verified would enter."""
    claim, old = _claim(after), _claim(before)
    if claim is None or (old is not None and old.id == claim.id and old.source == claim.source):
        return
    recorded = resolved_source(after, claim.type)
    if claim.source != recorded:
        raise trail.deny(
            CLAIM_OFF_ARTIFACT,
            operation=claim.type,
            claim=claim.id,
            recorded=recorded.reference if recorded else "none",
            claimed=claim.source.reference if claim.source else "none",
        )
    policy = verification_policy(after)
    if policy is None or claim.type in UNVERIFIED_OPERATIONS:
        trail.passed(f"the {claim.type} claim reads the artifact status records")
        return
    digest = claim.source.digest if claim.source else "none"
    if not artifact_verified(after):
        raise trail.deny(
            CLAIM_UNVERIFIED,
            operation=claim.type,
            claim=claim.id,
            digest=digest,
            policy=f"{policy.name}/{policy.key}",
        )
    trail.passed(f"the {claim.type} claim reads artifact {digest}, verified under its policy")


def _decision_problem(
    decision: PtahSchemaProofSettlement | PtahMigrationRunAcknowledgment | None,
    uid: str,
    owner_uid: str,
    operation_id: str,
) -> str | None:
    """Why a person's decision does not settle ``operation_id`` of the owner, or None."""
    if decision is None or decision.metadata.uid != uid:
        return "the decision it names does not exist"
    if isinstance(decision, PtahSchemaProofSettlement):
        names = (decision.spec.schema_ref.uid, decision.spec.apply_operation_id)
    else:
        names = (decision.spec.migration_ref.uid, decision.spec.operation_id)
    if names != (owner_uid, operation_id):
        return f"{decision.kind} {decision.metadata.name} settles another run"
    spec = decision.spec.to_wire()
    return stamp_problem(STAMPED[decision.kind], spec, decision.metadata.creation_timestamp)


def _hold_release(before: Owner, after: Owner, trail: Trail, settings: Settings) -> Reads[None]:
    release = before.status.pending_lock_release if before.status else None
    if release is None:
        return
    kept = after.status.pending_lock_release if after.status else None
    if kept == release:
        return
    # The evidence: every Pod of the claim's mutating Jobs has stopped, as the kubelet
    # reports in Pod status, which the manager cannot write (a reading's Pod writes
    # nothing to the database, and an older attempt of one may run to its deadline).
    # The Lease below is the manager's own word (it may update Leases), checked too
    # but proving nothing on its own.
    family = owner_family(before).family
    pods = ReadKey(
        PODS,
        before.metadata.namespace or "",
        "",
        selector=((LABEL_OPERATION_ID, operation_id_label_value(release.operation_id)),),
    )
    listed = yield from read(pods)
    found_pods = listed.get(pods)
    for pod in (found_pods.tree().get("items") or []) if found_pods is not None else []:
        meta = pod.get("metadata") or {}
        operation = str((meta.get("labels") or {}).get(LABEL_OPERATION, "")).capitalize()
        if operation_info(family, operation).mutating and not pod_stopped(pod):
            phase = (pod.get("status") or {}).get("phase") or "unknown"
            raise trail.deny(
                RELEASE_RUNNING, claim=release.operation_id, pod=meta.get("name"), phase=phase
            )
    key = ReadKey(LEASES, settings.coordination_namespace, lease_name(release.coordination_digest))
    fetched = yield from read(key)
    found = fetched.get(key)
    if found is not None:
        lease = found.tree()
        spec = lease.get("spec") or {}
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        holder = lease_holder(before.metadata.uid or "", release.operation_id)
        if (
            spec.get("holderIdentity") == holder
            and annotations.get(LEASE_EPOCH_ANNOTATION) == release.lease_epoch
        ):
            raise trail.deny(
                RELEASE_DROPPED, claim=release.operation_id, lease=key, epoch=release.lease_epoch
            )
    trail.passed(
        f"the release of {release.operation_id} is done: its Pods stopped, {key} no longer its"
    )


def _hold_consumed(kind: str, name: str, before: ApprovalStatus, after: Any, trail: Trail) -> None:
    spent = any(c.type == CONSUMED and c.status == "True" for c in before.conditions)
    if not spent and before.consumed_by is None:
        if isinstance(after, ApprovalStatus) and after.consumed_job is not None:
            # Named only after a claim spent the decision and its Job was created.
            raise trail.deny(WITNESS_UNSPENT, kind=kind, name=name)
        return
    still = isinstance(after, ApprovalStatus) and any(
        c.type == CONSUMED and c.status == "True" for c in after.conditions
    )
    if not still or after.consumed_by != before.consumed_by:
        raise trail.deny(CONSUMED_CHANGED, kind=kind, name=name, by=before.consumed_by or "-")
    # The witness of the one Job the decision ran: written once, never changed or
    # dropped, or a second Job could run under it once the first is gone.
    if before.consumed_job is not None and after.consumed_job != before.consumed_job:
        raise trail.deny(WITNESS_CHANGED, kind=kind, name=name, job=before.consumed_job.name)
