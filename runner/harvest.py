"""Harvest: whose account may be read, and what the account read means.

Pure decisions over objects the caller read (uncached) from the API server:

* ``select_evidence``: the account is the Job's result record, written by a Pod of the
  Job under its own token (admission checked that when it was written), once every
  Pod of the Job has stopped; the writing Pod itself may be gone since. Without a
  record, the account can only be a migration Apply's termination summary, and comes
  from exactly one Pod owned by the Job (``select_pod``), carrying the claim's
  envelope, whose runner container actually terminated. A Pod still running may still
  write; two Pods are two runs that one account cannot speak for; a Pod that does not
  carry the claim's envelope ran something nobody admitted.
* ``reread_at``: a record not found is read again every 2 s for 30 s after the Job
  finished (a create whose answer the runner saw reaches every reader at once, but a
  create still in flight when the Pod stopped may land late), then given up; a record
  that is there and wrong is never waited for.
* ``judge``: an account that reports another database than the claim's is uncertain
  for a mutation (it changed something, somewhere) and unusable for a read, never a
  failure; one that cannot be read is uncertain for a mutation and a retry for a read.

The Job's own exit status and conditions take no part in any of it: a Job that
"Completed" says nothing about what the database went through.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from jobclaim import (
    ANN_EPOCH,
    ANN_OPERATION_ID,
    ANN_SNAPSHOT_DIGEST,
    INSTALL_CONTAINER,
    LABEL_OPERATION_ID,
    RUNNER_CONTAINER,
    Claim,
    finished,
    operation_id_label_value,
    pod_stopped,
    runner_state,
)
from jobclaim.api import PtahResultRecord
from jobclaim.times import parse_time
from runner.errors import RecordError, SummaryRefused
from runner.summary import Account

REREAD_INTERVAL: Final = timedelta(seconds=2)
REREAD_WINDOW: Final = timedelta(seconds=30)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class PodEvidence:
    """The one Pod whose account may be read: from the Job's record when ``recorded``
    (the Pod may be gone), else from its termination message."""

    name: str
    uid: str
    termination_message: str | None
    recorded: bool = False


@dataclass(frozen=True, slots=True)
class NoEvidence:
    """Why no Pod's account can be read now.

    ``may_still_write``: a Pod of the Job may still be running, so nothing may be
    released on this answer. ``pod_uids``: the Job's Pods, which a record keeps (more
    than one forces an unknown outcome even after the Job is gone).
    """

    reason: str
    may_still_write: bool
    pod_uids: tuple[str, ...] = ()


def _names_job(pod: Mapping[str, Any], job_uid: str) -> bool:
    refs = _list(_map(pod.get("metadata")).get("ownerReferences"))
    return any(_map(ref).get("uid") == job_uid for ref in refs)


def _owned_exactly(pod: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    metadata = _map(job.get("metadata"))
    refs = _list(_map(pod.get("metadata")).get("ownerReferences"))
    if len(refs) != 1:
        return False
    ref = _map(refs[0])
    return (
        ref.get("apiVersion") == "batch/v1"
        and ref.get("kind") == "Job"
        and ref.get("name") == metadata.get("name")
        and ref.get("uid") == metadata.get("uid")
        and ref.get("controller") is True
    )


def _container(
    spec: Mapping[str, Any], name: str, containers: str = "containers"
) -> Mapping[str, Any] | None:
    found = [c for c in _list(spec.get(containers)) if _map(c).get("name") == name]
    return _map(found[0]) if len(found) == 1 else None


def pod_envelope_problem(
    pod: Mapping[str, Any], job: Mapping[str, Any], claim: Claim
) -> str | None:
    """Why the Pod is not one the claim's envelope admits, or None.

    The Job was already held to the claim (``jobclaim.match``); the Pod is held to the
    Job and to what the persisted admission snapshot says admission may add.
    """
    metadata = _map(pod.get("metadata"))
    annotations, labels = _map(metadata.get("annotations")), _map(metadata.get("labels"))
    if annotations.get(ANN_OPERATION_ID) != claim.operation_id:
        return "the Pod does not carry the claim's operation ID"
    if labels.get(LABEL_OPERATION_ID) != operation_id_label_value(claim.operation_id):
        return "the Pod is not labelled with the claim's operation ID"
    if annotations.get(ANN_EPOCH) != claim.epoch:
        return "the Pod runs under another execution epoch than its claim"
    snapshot = claim.snapshot
    if snapshot is None:
        return "the claim has no admission snapshot to hold the Pod to"
    if annotations.get(ANN_SNAPSHOT_DIGEST) != snapshot.digest:
        return "the Pod does not carry the claim's admission snapshot digest"
    spec = _map(pod.get("spec"))
    template = _map(_map(_map(job.get("spec")).get("template")).get("spec"))
    for containers, name in (
        ("containers", RUNNER_CONTAINER),
        ("initContainers", INSTALL_CONTAINER),
    ):
        # The runner is what the install container copies and the main container starts.
        found = _container(spec, name, containers)
        built = _container(template, name, containers)
        if found is None or built is None:
            return f"the Pod does not run exactly one {name} container"
        if found.get("image") != built.get("image") or found.get("command") != built.get("command"):
            return "the Pod's runner is not the one its Job template runs"
    if (spec.get("serviceAccountName") or "default") != snapshot.service_account.object.name:
        return "the Pod runs as another service account than the snapshot bound"
    if spec.get("priorityClassName", "") != snapshot.priority_class.name:
        return "the Pod has another priority class than the snapshot bound"
    runtime = snapshot.runtime_class.object.name if snapshot.runtime_class else None
    if spec.get("runtimeClassName") != runtime:
        return "the Pod has another runtime class than the snapshot bound"
    return None


def select_pod(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], claim: Claim
) -> PodEvidence | NoEvidence:
    """The Pod whose account may be read, or why none may be.

    ``pods`` are the Pods listed in the Job's namespace (by its selector, or all).
    """
    job_uid = _map(job.get("metadata")).get("uid")
    if not job_uid or finished(job) is None:
        # A Job that has not finished may still start a Pod or be running one.
        return NoEvidence("the Job has not finished", may_still_write=True)
    named = [p for p in pods if _names_job(p, job_uid)]
    uids = tuple(str(_map(p.get("metadata")).get("uid", "")) for p in named)
    still = any(not pod_stopped(p) for p in named)
    if any(not _owned_exactly(p, job) for p in named):
        return NoEvidence("a Pod names the Job without being exactly owned by it", still, uids)
    if not named:
        return NoEvidence("the Job has no Pod", may_still_write=False)
    if len(named) > 1:
        reason = f"the Job has {len(named)} Pods, and one account cannot speak for several runs"
        return NoEvidence(reason, still, uids)
    pod = named[0]
    problem = pod_envelope_problem(pod, job, claim)
    if problem:
        return NoEvidence(problem, still, uids)
    state, message = runner_state(pod)
    if state:
        return NoEvidence(state, still, uids)
    return PodEvidence(str(_map(pod.get("metadata")).get("name", "")), uids[0], message)


def select_evidence(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    claim: Claim,
    record: PtahResultRecord | None,
) -> PodEvidence | NoEvidence:
    """Whose account may be read: the record's Pod, once the Job's Pods all stopped, or
    without a record of this Job the one Pod ``select_pod`` picks."""
    job_uid = str(_map(job.get("metadata")).get("uid") or "")
    if record is None or record.spec.job.uid != job_uid:
        # A record of another Job under this name is refused by the account itself.
        return select_pod(job, pods, claim)
    if finished(job) is None:
        return NoEvidence("the Job has not finished", may_still_write=True)
    named = [p for p in pods if _names_job(p, job_uid)]
    writer = record.spec.pod.uid
    uids = tuple(str(_map(p.get("metadata")).get("uid", "")) for p in named)
    if writer not in uids:
        uids = (*uids, writer)
    still = any(not pod_stopped(p) for p in named)
    if still:
        return NoEvidence("a Pod of the Job may still run", True, uids)
    if any(not _owned_exactly(p, job) for p in named):
        return NoEvidence("a Pod names the Job without being exactly owned by it", False, uids)
    if len(uids) > 1:
        reason = f"the Job has {len(uids)} Pods, and one account cannot speak for several runs"
        return NoEvidence(reason, False, uids)
    for pod in named:
        problem = pod_envelope_problem(pod, job, claim)
        if problem:
            return NoEvidence(problem, False, uids)
    return PodEvidence(record.spec.pod.name, writer, None, recorded=True)


def terminal_since(job: Mapping[str, Any]) -> datetime | None:
    """When the Job's terminal condition was set, or None while it has none."""
    kind = finished(job)
    if kind is None:
        return None
    for item in _list(_map(job.get("status")).get("conditions")):
        condition = _map(item)
        if condition.get("type") == kind and condition.get("status") == "True":
            return parse_time(str(condition.get("lastTransitionTime", "")))
    return None


def reread_at(
    error: RecordError, *, terminal_at: datetime | None, now: datetime
) -> datetime | None:
    """When to read again for a record still arriving; None: stop waiting."""
    if not error.may_still_arrive or terminal_at is None:
        return None
    give_up = terminal_at + REREAD_WINDOW
    if now >= give_up:
        return None
    return min(now + REREAD_INTERVAL, give_up)


class Outcome(enum.Enum):
    ACCOUNTED = "accounted"  # this attempt's account, about the claim's database
    WAIT = "wait"  # read the record again at ``retry_at``
    UNCERTAIN = "uncertain"  # a mutation nobody can account for: record it unresolved
    UNUSABLE = "unusable"  # a read-only result that cannot be used: run it again


@dataclass(frozen=True, slots=True)
class Judgement:
    outcome: Outcome
    reason: str = ""
    account: Account | None = None
    retry_at: datetime | None = None


def database_problem(
    account: Account, *, coordination_digest: str | None, target_identity_digest: str | None
) -> str | None:
    """Why the account is about another database than the claim's, or None.

    Each digest the claim knows is compared with the one the account reports; a
    digest the account reports and the claim does not know cannot disagree.
    """
    summary = account.summary
    if coordination_digest and summary.coordination_digest not in (None, coordination_digest):
        return "the run reports another database realm than its claim's"
    if target_identity_digest and summary.target_identity_digest not in (
        None,
        target_identity_digest,
    ):
        return "the run reports opening another database than its claim's"
    return None


def judge(
    claim: Claim,
    read: Account | RecordError | SummaryRefused,
    *,
    terminal_at: datetime | None,
    now: datetime,
    coordination_digest: str | None = None,
    target_identity_digest: str | None = None,
) -> Judgement:
    """What the harvest of one terminal Job concludes from what its Pod gave."""
    # Only a known read-only operation may simply run again; work of an unknown type is
    # not harmless, so its unreadable account is uncertain like a mutation's.
    unreadable = Outcome.UNUSABLE if claim.info.read_only else Outcome.UNCERTAIN
    if isinstance(read, RecordError):
        retry = reread_at(read, terminal_at=terminal_at, now=now)
        if retry is not None:
            return Judgement(Outcome.WAIT, str(read), retry_at=retry)
        return Judgement(unreadable, f"no account could be read: {read}")
    if isinstance(read, SummaryRefused):
        return Judgement(unreadable, str(read))
    problem = database_problem(
        read,
        coordination_digest=coordination_digest,
        target_identity_digest=target_identity_digest,
    )
    if problem:
        # Not failed: a run that reached another database may have changed it.
        return Judgement(unreadable, problem, read)
    return Judgement(Outcome.ACCOUNTED, "", read)
