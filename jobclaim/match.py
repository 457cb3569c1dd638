"""``match(job, claim)``: whether a Job is the one its claim built. Decided only here.

Every reader asks this one predicate: the controller's read-back after the create,
its adoption of a Job a stopped pass created, its supervision and cleanup, and the
webhook when it admits the create, the cleanup TTL or a plan published from a Job.
The webhook therefore refuses exactly the Jobs the controller would not recognize.

The first check that fails names the verdict; the order is part of the contract,
because tests and security reviewers read the sentence to learn what differed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from jobclaim._canonical import (
    canonical_json,
    is_canonical_positive_int32,
    is_clean_text,
    is_digest,
    is_epoch,
    is_pinned_image,
)
from jobclaim.admission import snapshot_problem
from jobclaim.api._base import API_VERSION
from jobclaim.claim import CLEANUP_TTL_SECONDS, Claim
from jobclaim.envelope import (
    ANN_CONTROLLER_IMAGE,
    ANN_CONTROLLER_REVISION,
    ANN_EPOCH,
    ANN_INPUT_FINGERPRINT,
    ANN_OPERATION_ID,
    ANN_PLAN_CONTENT_DIGEST,
    ANN_PLAN_FINGERPRINT,
    ANN_PTAH_VERSION,
    ANN_SNAPSHOT_DIGEST,
    ANN_STATE_VERSION,
    MUTATING_MARKS,
    claimed_labels,
    claimed_metadata_problem,
)
from jobclaim.operations import OperationInfo
from jobclaim.semantic import json_equal, semantic_equal
from jobclaim.template import (
    generated_identity_problem,
    template_digest,
    without_generated_identity,
    without_generated_labels,
)

_SERVER_ASSIGNED: Final = ("uid", "resourceVersion", "generation", "creationTimestamp")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Match, or the sentence naming the first thing that differs."""

    matched: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.matched


MATCH: Final = Verdict(True)


def _refuse(reason: str) -> Verdict:
    return Verdict(False, reason)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _claim_problem(claim: Claim, info: OperationInfo) -> str | None:
    owner = claim.owner
    if owner.family is None or not (owner.namespace and owner.name and owner.uid):
        return "the claim names no owner that dispatches Jobs"
    if not info.known:
        # An operation type this code does not define is not read-only; accepting a
        # Job for it would act on work nobody here can describe.
        return "the claim names an operation this operator does not define"
    if not (claim.operation and claim.operation_id and claim.job_name):
        return "the claim names no operation or Job"
    if not is_epoch(claim.epoch):
        return "the claim names no execution epoch"
    if claim.snapshot is None:
        return "the claim's admission snapshot is invalid: the claim has none"
    problem = snapshot_problem(claim.snapshot)
    if problem:
        return f"the claim's admission snapshot is invalid: {problem}"
    return None


def _owner_problem(metadata: Mapping[str, Any], claim: Claim) -> str | None:
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list) or len(refs) != 1:
        return "the Job does not have exactly one owner"
    ref = _map(refs[0])
    owner = claim.owner
    if (
        ref.get("apiVersion") != API_VERSION
        or ref.get("kind") != owner.kind
        or ref.get("name") != owner.name
        or ref.get("uid") != owner.uid
        or ref.get("controller") is not True
        or ref.get("blockOwnerDeletion") is not True
    ):
        return f"the Job's controller owner is not {owner.kind} {owner.name}"
    return None


@dataclass(frozen=True, slots=True)
class Expected:
    """What ``match`` needs of the claim alone, worked out once per claim.

    ``match`` holds every Job to its claim in two halves: what the claim itself
    allows (its owner, operation, epoch, sealed snapshot) and, in full-rebuild mode,
    the rebuilt Job normalized, its spec's canonical JSON and its Pod template's
    digest. None of it depends on the Job, so a caller that holds one claim for
    several Jobs (the webhook's remembered rebuilds) prepares it once with
    ``expected`` and hands it to ``match``; the verdict is the same either way.
    """

    claim: Claim
    problem: str | None
    built: dict[str, Any] | None = None
    # None when the rebuild has no canonical JSON (an integer beyond 64 bits): the
    # comparison then takes the node-by-node path it always took.
    spec_json: bytes | None = None
    template_digest: str | None = None
    # The canonical JSON of ``{"metadata": ..., "spec": ...}`` of the rebuild: all a
    # submitted Job's client may write, so one comparison settles a Job that is its
    # rebuild to the byte (``_against_rebuild``). None when ``spec_json`` is.
    submitted_json: bytes | None = None


def expected(claim: Claim) -> Expected:
    """The claim's half of ``match`` (see ``Expected``)."""
    problem = _claim_problem(claim, claim.info)
    if claim.built is None:
        return Expected(claim, problem)
    built = without_generated_identity(claim.built)
    spec = _map(built.get("spec"))
    try:
        spec_json = canonical_json(spec)
        digest = template_digest(_map(spec.get("template")))
        submitted = canonical_json(_submitted(_map(built.get("metadata")), spec))
    except ValueError:
        spec_json, digest, submitted = None, None, None
    return Expected(claim, problem, built, spec_json, digest, submitted)


def _submitted(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """What a submitted Job's client writes, as one value: its canonical JSON is the
    metadata's then the spec's, each a complete JSON value, so two are equal exactly
    when both parts are."""
    return {"metadata": metadata, "spec": spec}


def match(job: Mapping[str, Any] | None, claim: Claim, prepared: Expected | None = None) -> Verdict:
    """Whether ``job`` is the Job ``claim`` reserved; the first difference otherwise.

    ``prepared`` is ``expected(claim)`` when the caller kept it; one made for another
    claim object is not used.
    """
    if prepared is None or prepared.claim is not claim:
        prepared = expected(claim)
    # Looked up once per call and handed to the checks that need it.
    info = claim.info
    problem = prepared.problem
    if problem:
        return _refuse(problem)
    metadata = _map(job.get("metadata")) if isinstance(job, Mapping) else {}
    if job is None or not metadata.get("uid"):
        return _refuse("the Job has no API-assigned identity")
    if metadata.get("namespace") != claim.owner.namespace or metadata.get("name") != claim.job_name:
        return _refuse("the Job's name or namespace is not the one the claim reserved")
    if claim.job_uid and metadata.get("uid") != claim.job_uid:
        return _refuse("the Job's UID is not the one the claim recorded")
    problem = _owner_problem(metadata, claim)
    if problem:
        return _refuse(problem)
    if claim.binding is not None and claim.epoch != claim.binding.epoch:
        return _refuse("the claim was made under an execution epoch that is no longer in force")
    annotations: Mapping[str, str] = _map(metadata.get("annotations"))
    if annotations.get(ANN_EPOCH) != claim.epoch:
        return _refuse("the Job runs under another execution epoch than its claim")
    problem = generated_identity_problem(job)
    if problem:
        return _refuse(problem)
    template = _map(_map(job.get("spec")).get("template"))
    # Only a rebuild compares the whole spec, so only it needs the normalized copy of
    # the Job; envelope mode reads the maps already taken here.
    digest: str | None = None
    if prepared.built is not None:
        verdict, identical = _against_rebuild(without_generated_identity(job), claim, prepared)
        if identical:
            # The normalized spec is the rebuild's to the byte, template included, so
            # the template's digest is the rebuild's (see below).
            digest = prepared.template_digest
    else:
        verdict = _against_envelope(metadata, annotations, template, claim, info)
    if not verdict:
        return verdict
    assert claim.snapshot is not None
    # The digest ignores what the API server generated by itself, so the template as
    # read digests exactly as its normalized copy would.
    if digest is None:
        digest = template_digest(template)
    if digest != claim.snapshot.template_digest:
        return _refuse("the Job's Pod template does not match the persisted admission snapshot")
    return MATCH


def _against_rebuild(
    job: Mapping[str, Any], claim: Claim, prepared: Expected
) -> tuple[Verdict, bool]:
    """Full-rebuild mode: the Job is exactly what the claim's inputs build today.

    Also says whether the normalized spec is the rebuild's canonical JSON byte for
    byte (the first test ``semantic_equal`` makes, against the bytes kept in
    ``prepared``)."""
    built = prepared.built
    assert built is not None
    metadata, built_metadata = _map(job.get("metadata")), _map(built.get("metadata"))
    # A submitted Job's metadata as its client wrote it (a stored Job's is not compared).
    scrubbed = (
        {k: v for k, v in metadata.items() if k not in _SERVER_ASSIGNED and k != "managedFields"}
        if not claim.stored
        else {}
    )
    if not claim.stored and prepared.submitted_json is not None:
        # The Job the webhook admits is its rebuild to the byte: one canonical dump
        # settles every check below at once (equal metadata has equal labels and
        # annotations), and a Job that differs anywhere takes them one by one, so its
        # sentence names the first difference exactly as before.
        written = _canonical_or_none(_submitted(scrubbed, _map(job.get("spec"))))
        if written == prepared.submitted_json:
            return MATCH, True
    if not json_equal(metadata.get("labels"), built_metadata.get("labels")) or not json_equal(
        metadata.get("annotations"), built_metadata.get("annotations")
    ):
        return _refuse("the Job's labels or annotations are not the ones its claim builds"), False
    # A submitted Job carries nothing its claim did not build: a finalizer or an extra
    # owner on create would change how the Job dies, which nobody reviewed.
    if not claim.stored and not json_equal(scrubbed, built_metadata):
        return _refuse("the Job's metadata is not the metadata its claim builds"), False
    spec = dict(_map(job.get("spec")))
    built_spec = _map(built.get("spec"))
    ttl = spec.get("ttlSecondsAfterFinished")
    # ``type(...) is int``: 3600.0 and True-like values are not the TTL a harvest
    # writes, though Python calls them equal (a reading's Job is born with it, so the
    # rebuild holds the same field and must not be passed by another JSON type).
    if claim.stored and type(ttl) is int and ttl == CLEANUP_TTL_SECONDS:
        # The one change allowed after the create: the cleanup TTL a harvest sets.
        if "ttlSecondsAfterFinished" in built_spec:
            spec["ttlSecondsAfterFinished"] = built_spec["ttlSecondsAfterFinished"]
        else:
            del spec["ttlSecondsAfterFinished"]
    if prepared.spec_json is not None and _canonical_or_none(spec) == prepared.spec_json:
        return MATCH, True
    if not semantic_equal(spec, built_spec):
        return _refuse("the Job's spec is not the one its claim builds"), False
    return MATCH, False


def _canonical_or_none(value: Any) -> bytes | None:
    try:
        return canonical_json(value)
    except ValueError:
        return None


def manager_record_problem(annotations: Mapping[str, Any]) -> str | None:
    """Why the manager record a Job carries is ambiguous, or None.

    The record is read from the Job itself (a later manager of the same binding may
    have dispatched it), so each value must have exactly one reading.
    """
    record = (
        annotations.get(ANN_CONTROLLER_IMAGE),
        annotations.get(ANN_CONTROLLER_REVISION),
        annotations.get(ANN_STATE_VERSION),
        annotations.get(ANN_PTAH_VERSION),
    )
    try:
        return _record_problem(*record)
    except TypeError:
        # A value JSON can spell but Python cannot hash (a list, an object) is not a
        # record any manager writes; judged without the memo, it is refused the same.
        return _record_problem.__wrapped__(*record)


# Every Job one manager version dispatches carries the same four values, so the
# verdict on them repeats from Job to Job and pass to pass: a bounded memo of a pure
# function of the values (typed, so "3" and 3 are not one entry) cannot go stale.
@functools.lru_cache(maxsize=64, typed=True)
def _record_problem(image: Any, revision: Any, state_version: Any, ptah_version: Any) -> str | None:
    if not is_pinned_image(image):
        return "the Job's controller image is not pinned by a lowercase SHA-256 digest"
    if not is_clean_text(revision):
        return "the Job's controller revision is invalid: empty, padded, too long or not text"
    if not is_canonical_positive_int32(state_version):
        return "the Job's controller state version is not a canonical positive integer"
    if not is_clean_text(ptah_version):
        return "the Job's data-plane version is empty or ambiguous"
    return None


def _against_envelope(
    metadata: Mapping[str, Any],
    annotations: Mapping[str, str],
    template: Mapping[str, Any],
    claim: Claim,
    info: OperationInfo,
) -> Verdict:
    """Envelope mode: the inputs may have moved, so hold the Job to what the claim fixes.

    The Job's metadata, its annotations and its Pod template come as ``match`` read
    them from the Job (its generated identity already checked), not normalized.
    """
    labels: Mapping[str, str] = _map(metadata.get("labels"))
    owner = claim.owner
    problem = claimed_metadata_problem(
        labels,
        claimed_labels(owner.family or "", owner.name, claim.operation, claim.operation_id),
    )
    if problem:
        return _refuse(f"the Job's labels are not its claim's: {problem}")
    problem = manager_record_problem(annotations)
    if problem:
        return _refuse(problem)
    # The manager record is present and unambiguous from here on.
    ptah_version = annotations[ANN_PTAH_VERSION]
    state_version = annotations[ANN_STATE_VERSION]
    binding = claim.binding
    if binding is not None and (
        ptah_version != binding.ptah_version
        or state_version != str(binding.controller_state_version)
    ):
        return _refuse("the Job does not carry the versions of the execution binding in force")
    fingerprint = claim.input_fingerprint or annotations.get(ANN_INPUT_FINGERPRINT, "")
    if not is_digest(fingerprint):
        return _refuse("the Job carries no input fingerprint its claim can accept")
    assert claim.snapshot is not None
    claimed = {
        ANN_OPERATION_ID: claim.operation_id,
        ANN_INPUT_FINGERPRINT: fingerprint,
        ANN_EPOCH: claim.epoch,
        ANN_SNAPSHOT_DIGEST: claim.snapshot.digest,
        ANN_CONTROLLER_IMAGE: annotations[ANN_CONTROLLER_IMAGE],
        ANN_CONTROLLER_REVISION: annotations[ANN_CONTROLLER_REVISION],
        ANN_STATE_VERSION: state_version,
        ANN_PTAH_VERSION: ptah_version,
    }
    plan = claim.plan
    if plan is not None:
        if (
            not (plan.name and plan.uid)
            or plan.execution_binding_id != claim.epoch
            or plan.ptah_version != ptah_version
            or str(plan.controller_state_version) != state_version
        ):
            return _refuse("the Job does not carry the plan binding its claim runs")
        claimed[ANN_PLAN_FINGERPRINT] = plan.fingerprint
        claimed[ANN_PLAN_CONTENT_DIGEST] = plan.content_digest
    if info.mutating:
        claimed.update(MUTATING_MARKS)
    problem = claimed_metadata_problem(annotations, claimed)
    if problem:
        return _refuse(f"the Job's annotations are not its claim's: {problem}")
    template_metadata = _map(template.get("metadata"))
    if _map(template_metadata.get("annotations")) != annotations:
        return _refuse("the Job's Pod template annotations differ from the Job's")
    if without_generated_labels(template_metadata.get("labels")) != labels:
        return _refuse("the Job's Pod template labels differ from the Job's")
    return MATCH
