"""Result records: admitted only from the operation Pod they speak for.

A ``PtahResultRecord`` is the evidence the webhook later admits decisions on (a
published plan's bytes, a reading that ends a proof), so it must be something the
manager's token cannot write. RBAC lets every ServiceAccount create records; this rule
is what makes one worth believing. A create is admitted only when

- the request comes from a Pod-bound ServiceAccount token: ``userInfo.extra`` carries
  exactly one ``authentication.kubernetes.io/pod-name`` and ``pod-uid``, which the API
  server put there from the token, and they are the Pod the record names; the user is
  that Pod's ServiceAccount in the record's namespace;
- that Pod, read directly, is live (its runner has not stopped), has that UID and is
  controlled by the Job the record names, which is named as the record is;
- that Job's controller owner holds the active claim that reserved it, and the Job
  is that claim's by ``jobclaim.match`` (stored mode, binding in force);
- the record is the claim's: its operation, operation ID and protocol version, a
  digest that covers the result bytes, a result that decodes and reports the same
  operation and attempt, and the claim's database (target identity and realm digests
  where the claim knows them) and, for a schema Apply, the plan its Job was built for.

Any change to a record is refused: a record says what one Pod said once. It is named
after its Job and owned by it, so garbage collection removes it with the Job (whose
cleanup TTL admission allows only after the harvest); nobody needs delete on records.
The ValidatingAdmissionPolicy ``ptah-operator-result-records`` holds the token half of
this inside the API server while this webhook is unreachable or replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from jobclaim import (
    ANN_PLAN_CONTENT_DIGEST,
    RUNNER_CONTAINER,
    match,
    owner_family,
    runner_state,
)
from jobclaim.api import ObjectMeta, PtahMigration, PtahResultRecord, PtahSchema
from jobclaim.apiserver import JOBS, PODS, PTAHRESULTRECORDS
from runner import MalformedRecord, RunnerResult, result_of_record
from webhook.objects import candidate, names_the_candidate, read_owner, request_kind_problem
from webhook.review import AdmissionRequest
from webhook.rules import (
    RECORDS,
    Judgement,
    Object,
    ReadKey,
    Reads,
    Settings,
    Trail,
    read,
    rule,
)

POD_NAME_EXTRA: Final = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA: Final = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
OWNERS: Final = {"PtahSchema": PtahSchema, "PtahMigration": PtahMigration}

RECORD_WRITE: Final = rule(
    "result-record",
    (RECORDS,),
    "PtahResultRecord CREATE: only from the live operation Pod of the claim's Job",
    description="""
    The request must come from a Pod-bound ServiceAccount token: userInfo.extra names
    exactly one pod-name and pod-uid, which must be the Pod the record names, and the
    user must be a ServiceAccount of the record's namespace. That Pod is read directly:
    the same UID, its runner not yet stopped, its ServiceAccount the requester, and
    controlled by the Job the record names (the record is named after that Job and
    owned by it alone, so it goes with the Job). The
    Job is read directly (same UID); its controller owner must hold the active claim
    that reserved it, and the Job must be that claim's by jobclaim.match (stored mode,
    binding in force). The record's operation, operation ID and protocol version must
    be the claim's; its digest must cover its result, which must decode and report the
    same operation and attempt, the claim's database and realm where the claim knows
    them and, for a schema Apply, the plan content its Job was built for. Every UPDATE
    is refused: records are immutable.
    """,
    admits="the record an operation Pod writes of its own result, once",
)
NOT_A_RECORD: Final = RECORD_WRITE.refuses("only ptahresultrecords are judged here, not {resource}")
IMMUTABLE: Final = RECORD_WRITE.refuses("a result record is never changed after its create")
NO_POD_TOKEN: Final = RECORD_WRITE.refuses(
    "the request is not made with a Pod-bound token: userInfo.extra names no single {extra}"
)
NOT_THE_POD: Final = RECORD_WRITE.refuses(
    "the token speaks for Pod {token}, and the record names Pod {named}"
)
NOT_A_SERVICE_ACCOUNT: Final = RECORD_WRITE.refuses(
    "the requester {user} is not a ServiceAccount of the namespace {namespace}"
)
NAME_NOT_JOB: Final = RECORD_WRITE.refuses(
    "the record must be named after, and owned by exactly, its Job {job}"
)
POD_GONE: Final = RECORD_WRITE.refuses("the record's Pod {key} does not exist with UID {uid}")
POD_STOPPED: Final = RECORD_WRITE.refuses("the record's Pod {key} has stopped")
POD_ACCOUNT: Final = RECORD_WRITE.refuses(
    "the record's Pod {key} runs as ServiceAccount {actual}, not as the requester {user}"
)
POD_NOT_JOBS: Final = RECORD_WRITE.refuses(
    "the record's Pod {key} is not controlled by the Job {job} with UID {uid}"
)
JOB_GONE: Final = RECORD_WRITE.refuses("the record's Job {key} does not exist with UID {uid}")
NO_CLAIM: Final = RECORD_WRITE.refuses(
    "the Job's owner holds no active claim reserving the Job {job}: {why}"
)
NOT_CLAIMS_JOB: Final = RECORD_WRITE.refuses("the Job {job} is not its claim's: {why}")
NOT_CLAIMS_RESULT: Final = RECORD_WRITE.refuses("the record is not its claim's result: {why}")


def _extra(request: AdmissionRequest, key: str, trail: Trail) -> str:
    values = request.user_info.extra.get(key) or []
    if len(values) != 1 or not values[0]:
        raise trail.deny(NO_POD_TOKEN, extra=key)
    return values[0]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _controlled_by(pod: Object, job_name: str, job_uid: str) -> bool:
    refs = _map(pod.get("metadata")).get("ownerReferences") or []
    controllers = [_map(r) for r in refs if _map(r).get("controller") is True]
    return len(controllers) == 1 and (
        controllers[0].get("apiVersion") == "batch/v1"
        and controllers[0].get("kind") == "Job"
        and controllers[0].get("name") == job_name
        and controllers[0].get("uid") == job_uid
    )


def _owned_by_job(raw: Object, job_name: str, job_uid: str) -> bool:
    """The record is named after its Job and owned by it alone (so it goes with it)."""
    metadata = _map(raw.get("metadata"))
    refs = metadata.get("ownerReferences") or []
    if metadata.get("name") != job_name or len(refs) != 1:
        return False
    ref = _map(refs[0])
    return (ref.get("apiVersion"), ref.get("kind"), ref.get("name"), ref.get("uid")) == (
        "batch/v1",
        "Job",
        job_name,
        job_uid,
    )


def claim_job_problem(owner: PtahSchema | PtahMigration, job: Object) -> str | None:
    """Why ``job`` is not the Job its owner's active claim reserved, or None.

    The claim is status, which the manager writes: it could name any Job. The Job
    must be the claim's by jobclaim.match against what the claim fixes (owner,
    operation, epoch, images, inputs), under the binding in force."""
    status = owner.status
    claim = status.active_operation if status else None
    metadata = _map(job.get("metadata"))
    if claim is None or claim.job_name != metadata.get("name"):
        return "no active claim names it"
    if claim.job_uid and claim.job_uid != metadata.get("uid"):
        return "the claim recorded another UID under its name"
    binding = status.execution_binding if status else None
    in_force = binding if binding and binding.epoch == claim.execution_binding_id else None
    rebuilt = owner_family(owner).claim(built=None, stored=True, binding=in_force)
    verdict = match(job, rebuilt) if rebuilt is not None else None
    if not verdict:
        return verdict.reason if verdict is not None else "no claim to hold it to"
    return None


def result_problem(
    owner: PtahSchema | PtahMigration, job: Object, record: PtahResultRecord
) -> str | None:
    """Why ``record`` is not the result of ``job`` under its owner's claim, or None.

    Shared by the create rule and by every rule that later takes a record as evidence,
    so a record is read the same way where it enters and where it is relied on."""
    status = owner.status
    claim = status.active_operation if status else None
    binding = status.execution_binding if status else None
    rebuilt = owner_family(owner).claim(built=None, stored=True, binding=binding)
    if claim is None or rebuilt is None or binding is None:
        return "its owner holds no claim with a binding in force"
    try:
        result = result_of_record(
            record,
            rebuilt.info.runner_operation,
            claim.id,
            job_uid=str(_map(job.get("metadata")).get("uid") or ""),
            protocol_version=binding.runner_protocol_version,
        ).result
    except MalformedRecord as error:
        return str(error)
    return _database_problem(claim, job, result)


def _job_env(job: Object) -> Mapping[str, str]:
    """The runner container's literal environment: what the claim fixed for the Pod
    (the Job's template is bound to the claim's admission snapshot by match)."""
    spec = _map(_map(_map(job.get("spec")).get("template")).get("spec"))
    for container in spec.get("containers") or []:
        if _map(container).get("name") == RUNNER_CONTAINER:
            return {
                str(e.get("name")): str(e.get("value"))
                for e in _map(container).get("env") or []
                if isinstance(e, dict) and "value" in e
            }
    return {}


def _database_problem(claim: Any, job: Object, result: RunnerResult) -> str | None:
    env = _job_env(job)
    # A migration's claim knows no target identity of its own; its Job may.
    expected = {
        "coordination_digest": getattr(claim, "coordination_digest", None)
        or env.get("PTAH_COORDINATION_DIGEST"),
        "target_identity_digest": getattr(claim, "target_identity_digest", None)
        or env.get("PTAH_EXPECTED_TARGET_IDENTITY_DIGEST"),
    }
    for field, known in expected.items():
        reported = getattr(result, field)
        if known and reported and known != reported:
            return f"it reports another {field.replace('_', ' ')} than its claim's"
    planned = _map(_map(job.get("metadata")).get("annotations")).get(ANN_PLAN_CONTENT_DIGEST)
    if result.apply is not None and result.apply.plan_content_digest != planned:
        return "it reports applying another plan than its Job was built for"
    return None


def judge_record_write(request: AdmissionRequest, settings: Settings) -> Judgement:
    """The records endpoint's one entry."""
    del settings  # nothing deployment-specific: the token and the claim decide
    trail = Trail(RECORD_WRITE)
    gvr = request.resource
    if (gvr.group, gvr.resource) != (PTAHRESULTRECORDS.group, PTAHRESULTRECORDS.plural):
        raise trail.deny(NOT_A_RECORD, resource=gvr.resource)
    if request.operation != "CREATE" or request.subresources:
        raise trail.deny(IMMUTABLE)
    problem = request_kind_problem(request, PTAHRESULTRECORDS)
    if problem:
        raise trail.deny(problem)
    found = candidate(request, PTAHRESULTRECORDS)
    if not isinstance(found.model, PtahResultRecord) or not names_the_candidate(request, found):
        raise TypeError("a PtahResultRecord candidate was decoded as another kind")
    record = found.model
    spec = record.spec
    namespace = found.namespace
    pod_name = _extra(request, POD_NAME_EXTRA, trail)
    pod_uid = _extra(request, POD_UID_EXTRA, trail)
    if (pod_name, pod_uid) != (spec.pod.name, spec.pod.uid):
        raise trail.deny(
            NOT_THE_POD, token=f"{pod_name} ({pod_uid})", named=f"{spec.pod.name} ({spec.pod.uid})"
        )
    user = request.user_info.username
    account = user.removeprefix(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:")
    if account == user or not account or ":" in account:
        raise trail.deny(NOT_A_SERVICE_ACCOUNT, user=user, namespace=namespace)
    trail.passed(f"a Pod-bound token of {user} for the Pod the record names")
    if not _owned_by_job(found.raw, spec.job.name, spec.job.uid):
        raise trail.deny(NAME_NOT_JOB, job=spec.job.name)
    pod_key = ReadKey(PODS, namespace, spec.pod.name)
    job_key = ReadKey(JOBS, namespace, spec.job.name)
    fetched = yield from read(pod_key, job_key)
    stored_pod, stored_job = fetched.get(pod_key), fetched.get(job_key)
    pod = stored_pod.tree() if stored_pod is not None else None
    if pod is None or _map(pod.get("metadata")).get("uid") != spec.pod.uid:
        raise trail.deny(POD_GONE, key=pod_key, uid=spec.pod.uid)
    if runner_state(pod)[0] is None or _map(pod.get("status")).get("phase") in (
        "Succeeded",
        "Failed",
    ):
        raise trail.deny(POD_STOPPED, key=pod_key)
    actual = _map(pod.get("spec")).get("serviceAccountName") or "default"
    if actual != account:
        raise trail.deny(POD_ACCOUNT, key=pod_key, actual=actual, user=user)
    if not _controlled_by(pod, spec.job.name, spec.job.uid):
        raise trail.deny(POD_NOT_JOBS, key=pod_key, job=spec.job.name, uid=spec.job.uid)
    job = stored_job.tree() if stored_job is not None else None
    if job is None or _map(job.get("metadata")).get("uid") != spec.job.uid:
        raise trail.deny(JOB_GONE, key=job_key, uid=spec.job.uid)
    trail.passed(f"{pod_key} is live, runs as the requester and is controlled by {job_key}")
    owner = yield from _job_owner(job, namespace, trail)
    why = claim_job_problem(owner, job)
    if why == "no active claim names it":
        raise trail.deny(NO_CLAIM, job=spec.job.name, why=why)
    if why is not None:
        raise trail.deny(NOT_CLAIMS_JOB, job=spec.job.name, why=why)
    trail.passed("jobclaim.match: the Job is its active claim's (stored, binding in force)")
    why = result_problem(owner, job, record)
    if why is not None:
        raise trail.deny(NOT_CLAIMS_RESULT, why=why)
    trail.passed("the record is the claim's operation, attempt, database and plan")
    return trail.allow()


def _job_owner(job: Object, namespace: str, trail: Trail) -> Reads[PtahSchema | PtahMigration]:
    metadata = _map(job.get("metadata"))
    meta = ObjectMeta.model_validate(
        {
            "name": metadata.get("name"),
            "namespace": namespace,
            "ownerReferences": metadata.get("ownerReferences") or [],
        }
    )
    owner = yield from read_owner(meta, OWNERS, what="Job", trail=trail, allow_deleting=True)
    if not isinstance(owner, PtahSchema | PtahMigration):
        raise TypeError(f"the Job's owner decoded as {type(owner).__name__}")
    return owner
