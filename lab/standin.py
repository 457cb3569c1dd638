"""A stand-in node for readings: the Job's own Pod records what it read.

There is no kubelet beside the local control plane, so no operation Pod ever runs.
Admission takes a resolved artifact and a verification only from the record the
reading's own Pod wrote (``webhook.transitions``): a manager identity that wrote
them directly would be exactly the stolen token the rule stops. So the local run and
the real-API tests produce that record the way the runner does: the real Job
controller creates the Job's Pod; the API server issues a token bound to that Pod (a
TokenRequest, the credential the kubelet would project); the runner's own recorder
creates the record with it; the Pod is then marked Succeeded (what its kubelet would
write) and the real Job controller completes the Job. Only the executor's answer is
stood in for, and it says so: :func:`resolution` and :func:`verification_of` are
what a registry client and a policy check would report.

:func:`claim_reading` is the controller's dispatch of a reading, for a caller that
runs no controller: the claim with its admission snapshot, its Job created by the
manager through admission, and the Job's UID recorded.
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from pathlib import Path
from typing import Any, Final

import httpx

from controller import (
    AdmissionSettings,
    input_fingerprint,
    migration_operation,
    policy_digest,
    resolve_snapshot,
    schema_operation,
)
from jobclaim import build_job, migration_job_inputs, schema_job_inputs
from jobclaim.api import (
    ManagerRecord,
    OCIArtifactAccessBinding,
    PtahMigration,
    PtahSchema,
)
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    PODS,
    PTAHSCHEMAS,
    AlreadyExists,
    ApiClient,
    NotFound,
    Object,
    Resource,
)
from jobclaim.builder import repository_of
from jobclaim.times import timestamp, utc_now
from lab.localplane import LocalControlPlane
from lab.polling import until
from runner import (
    RUNNER_PROTOCOL_VERSION,
    PodIdentity,
    RunnerResult,
    encode_result,
    record_for,
)
from runner.recorder import ApiRecorder

__all__ = [
    "MEDIA_TYPE",
    "ON_NODE",
    "POLICY_TEXT",
    "claim_reading",
    "ensure_policy",
    "identity_of",
    "pod_token",
    "record_as_pod",
    "recorder_for",
    "resolution",
    "resolve_and_verify",
    "resolve_result",
    "run_on_stand_in",
    "verification_of",
]

TOKEN_REQUEST_SECONDS: Final = 600
MEDIA_TYPE: Final = "application/vnd.oci.image.manifest.v1+json"
# The verification policy the stand-in's Verify reports having checked: the text of
# the ConfigMap the examples name, created when missing (a real cluster has its own).
POLICY_TEXT: Final = '{"requireSignature": true}'


# -- speaking as the Pod ---------------------------------------------------------------


def pod_token(plane: LocalControlPlane, pod: Object, *, audience: str | None = None) -> str:
    """A token the API server binds to ``pod`` (its ServiceAccount, created if missing)."""
    meta = pod["metadata"]
    namespace = meta["namespace"]
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    headers = {"Authorization": f"Bearer {plane.token('admin')}"}
    base = f"{plane.server_url}/api/v1/namespaces/{namespace}/serviceaccounts"
    with httpx.Client(verify=plane.ssl_context(), timeout=30.0, headers=headers) as http:
        found = http.get(f"{base}/{account}")
        if found.status_code == 404:
            created = http.post(base, json={"metadata": {"name": account}})
            if created.status_code not in (201, 409):
                raise RuntimeError(f"service account {account} not created: {created.text}")
        spec: dict[str, Any] = {
            "expirationSeconds": TOKEN_REQUEST_SECONDS,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        if audience is not None:
            spec["audiences"] = [audience]
        answer = http.post(
            f"{base}/{account}/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        if answer.status_code != 201:
            raise RuntimeError(f"no token bound to Pod {meta['name']}: {answer.text}")
        return str(answer.json()["status"]["token"])


def recorder_for(plane: LocalControlPlane, token: str, directory: Path) -> ApiRecorder:
    """The runner's own recorder, holding ``token`` as the kubelet would project it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    # No retries: a refusal is a 4xx, and the stand-in has no outage to wait out.
    return ApiRecorder(plane.server_url, directory / "token", plane.ca_path, retry_seconds=0.0)


def identity_of(pod: Object) -> PodIdentity:
    """What the downward API would tell the Pod's runner about itself."""
    meta = pod["metadata"]
    (owner,) = [ref for ref in meta["ownerReferences"] if ref.get("controller")]
    return PodIdentity(
        namespace=meta["namespace"],
        pod_name=meta["name"],
        pod_uid=meta["uid"],
        job_name=owner["name"],
        job_uid=owner["uid"],
    )


def record_as_pod(
    plane: LocalControlPlane, pod: Object, result: RunnerResult, directory: Path
) -> dict[str, Any]:
    """Create the record ``pod``'s runner would create for ``result``; the wire record.

    Raises ``RecordUnwritten`` with the API server's sentence when it is refused."""
    record = record_for(identity_of(pod), result, encode_result(result))
    recorder_for(plane, pod_token(plane, pod), directory).create(record)
    return record


# -- what the executor would have answered ---------------------------------------------


def _result(runner_op: str, claim: Object, section: dict[str, Any]) -> RunnerResult:
    return RunnerResult.from_wire(
        {
            "protocolVersion": RUNNER_PROTOCOL_VERSION,
            "operation": runner_op,
            "operationId": claim["id"],
            "childExitCode": 0,
            **section,
        }
    )


def resolution(requested: str, digest: str) -> OCIArtifactAccessBinding:
    """What a registry client pins ``requested`` to: its repository, by ``digest``."""
    return OCIArtifactAccessBinding(
        reference=f"{repository_of(requested)}@{digest}",
        digest=digest,
        media_type=MEDIA_TYPE,
        size=1234,
    )


def resolve_result(claim: Object, pinned: OCIArtifactAccessBinding) -> RunnerResult:
    return _result(
        "resolve",
        claim,
        {
            "resolve": {
                "resolvedDigest": pinned.digest,
                "resolvedReference": pinned.reference,
                "resolvedMediaType": pinned.media_type,
                "resolvedSize": pinned.size,
            }
        },
    )


def verification_of(claim: Object, policy: str = POLICY_TEXT) -> RunnerResult:
    """A Verify that checked the claim's artifact under ``policy`` and found it sound."""
    return _result("verify", claim, {"verify": {"verificationPolicyDigest": policy_digest(policy)}})


def ensure_policy(admin: ApiClient, namespace: str, name: str, key: str) -> str:
    """The verification policy ConfigMap the spec names, created with
    :data:`POLICY_TEXT` when missing; its text."""
    with contextlib.suppress(AlreadyExists):
        admin.create(
            CONFIGMAPS, namespace, {"metadata": {"name": name}, "data": {key: POLICY_TEXT}}
        )
    data = admin.get(CONFIGMAPS, namespace, name).get("data") or {}
    text = data.get(key)
    if not isinstance(text, str):
        raise ValueError(f"verification policy {namespace}/{name} has no key {key}")
    return text


# -- the reading's Job, run -----------------------------------------------------------


def _pod_of(admin: ApiClient, namespace: str, job: Object) -> Object | None:
    uid = job["metadata"]["uid"]
    for found in admin.list(PODS, namespace):
        if any(r.get("uid") == uid for r in found["metadata"].get("ownerReferences") or []):
            return found
    return None


def _complete(admin: ApiClient, namespace: str, name: str) -> bool:
    conditions = (admin.get(JOBS, namespace, name).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


def run_on_stand_in(
    plane: LocalControlPlane, admin: ApiClient, namespace: str, job_name: str, result: RunnerResult
) -> None:
    """Run the Job ``job_name`` on the stand-in node: its Pod records ``result`` under
    its own bound token, succeeds, and the Job controller completes the Job."""
    job = admin.get(JOBS, namespace, job_name)
    # The Job controller creates the Pod on its own time.
    until(
        lambda: _pod_of(admin, namespace, job) is not None,
        f"the Job controller's Pod of {job_name}",
    )
    pod = _pod_of(admin, namespace, job)
    assert pod is not None
    with tempfile.TemporaryDirectory(prefix="ptah-standin-") as directory:
        record_as_pod(plane, pod, result, Path(directory))
    containers = (pod.get("spec") or {}).get("containers") or []
    admin.patch_status(
        PODS,
        namespace,
        pod["metadata"]["name"],
        {
            **(pod.get("status") or {}),
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
                for c in containers
            ],
        },
        resource_version=pod["metadata"]["resourceVersion"],
    )
    # And completes the Job once it has counted the Pod, on its own time too.
    until(
        lambda: _complete(admin, namespace, job_name), f"the Job controller to complete {job_name}"
    )


def claim_reading(
    manager: ApiClient,
    resource: Resource,
    namespace: str,
    name: str,
    operation: str,
    *,
    record: ManagerRecord,
    admission: AdmissionSettings,
) -> Object:
    """Dispatch a reading as the controller's steps do: the claim with its admission
    snapshot and mark, its Job created by the manager (admission judges it), then the
    Job's UID recorded. Returns the claim as stored."""
    schema = resource is PTAHSCHEMAS
    stored = manager.get(resource, namespace, name)
    owner: PtahSchema | PtahMigration = (PtahSchema if schema else PtahMigration).model_validate(
        stored
    )
    status = owner.status
    binding = status.execution_binding if status else None
    if status is None or binding is None:
        raise ValueError(f"{resource.kind} {namespace}/{name} has no execution binding yet")
    form = schema_operation if schema else migration_operation
    claim: Any = form(
        owner,  # type: ignore[arg-type]
        operation=operation,
        fingerprint=input_fingerprint({"operation": operation, "stood-in": uuid.uuid4().hex}),
        epoch=binding.epoch,
        nonce=uuid.uuid4().bytes,
        started_at=timestamp(utc_now()),
    )

    def job_for(claimed: Any, digest: str | None) -> Object:
        with_claim = owner.model_copy(
            update={"status": status.model_copy(update={"active_operation": claimed})}
        )
        if isinstance(with_claim, PtahSchema):
            inputs = schema_job_inputs(
                with_claim, binding=binding, manager=record, snapshot_digest=digest
            )
        else:
            inputs = migration_job_inputs(
                with_claim, binding=binding, manager=record, snapshot_digest=digest
            )
        return build_job(inputs)

    template = job_for(claim, None)["spec"]["template"]
    snapshot = resolve_snapshot(manager, namespace, template, admission)
    claim = claim.model_copy(update={"admission_snapshot": snapshot, "dispatch_started": True})
    written = _write_claim(manager, resource, namespace, stored, claim)
    created = manager.create(JOBS, namespace, job_for(claim, snapshot.digest))
    claim = claim.model_copy(update={"job_uid": created["metadata"]["uid"]})
    _write_claim(manager, resource, namespace, written, claim)
    wire: Object = claim.to_wire()
    return wire


def _write_claim(
    manager: ApiClient, resource: Resource, namespace: str, stored: Object, claim: Any
) -> Object:
    name = stored["metadata"]["name"]
    return manager.patch_status(
        resource,
        namespace,
        name,
        {**(stored.get("status") or {}), "activeOperation": claim.to_wire()},
        resource_version=stored["metadata"]["resourceVersion"],
    )


# -- a schema's Resolve and Verify, run ---------------------------------------------------

# The readings run on the stand-in node before a schema's plan can be read: what
# admission needs a Pod's own record of (the resolved artifact, its verification).
ON_NODE: Final = ("Resolve", "Verify")


def _claimed(admin: ApiClient, namespace: str, name: str, operation: str) -> Object:
    """Wait until the controller claimed ``operation`` and recorded its Job."""

    def claimed() -> Object | None:
        schema = admin.get(PTAHSCHEMAS, namespace, name)
        claim = (schema.get("status") or {}).get("activeOperation") or {}
        return claim if claim.get("type") == operation and claim.get("jobUID") else None

    # The controller claims on its own time.
    until(lambda: claimed() is not None, f"the controller to claim {operation} for {name}")
    found = claimed()
    assert found is not None
    return found


def _verified(admin: ApiClient, namespace: str, name: str) -> bool:
    status = admin.get(PTAHSCHEMAS, namespace, name).get("status") or {}
    return bool((status.get("verification") or {}).get("policyDigest"))


def resolve_and_verify(
    plane: LocalControlPlane,
    admin: ApiClient,
    manager: ApiClient,
    namespace: str,
    name: str,
    *,
    digest: str,
    record: ManagerRecord,
    admission: AdmissionSettings,
    await_reading: bool,
) -> OCIArtifactAccessBinding:
    """The PtahSchema ``name``'s Resolve (pinning ``digest``) and Verify, each run on
    the stand-in node; the artifact pinned.

    With a controller running (``await_reading``) it claims each reading and
    harvests what the Pod recorded; without one, each is claimed here as its dispatch
    would (under the manager record ``record``) and harvested by the manager as its
    pass would. The verification policy the spec names is created when missing.
    Once harvested, the readings' Jobs are deleted, as their cleanup TTL would, and
    the records they own with them.
    """
    schema = PtahSchema.model_validate(admin.get(PTAHSCHEMAS, namespace, name))
    selector = schema.spec.desired.verification_policy_from
    policy = ensure_policy(admin, namespace, selector.name, selector.key) if selector else None
    pinned = resolution(schema.spec.desired.oci_ref, digest)
    ran: list[str] = []
    for operation in ON_NODE:
        if await_reading:
            claim = _claimed(admin, namespace, name, operation)
        else:
            claim = claim_reading(
                manager, PTAHSCHEMAS, namespace, name, operation, record=record, admission=admission
            )
        read = (
            resolve_result(claim, pinned)
            if operation == "Resolve"
            else verification_of(claim, policy or POLICY_TEXT)
        )
        run_on_stand_in(plane, admin, namespace, claim["jobName"], read)
        ran.append(claim["jobName"])
        if not await_reading:
            _harvest(manager, namespace, name, _found(operation, pinned, read, bool(selector)))
    if await_reading:
        # The controller harvests on its own time.
        until(
            lambda: _verified(admin, namespace, name),
            f"the controller to record the verification of {name}",
        )
    for job in ran:
        with contextlib.suppress(NotFound):
            admin.delete(JOBS, namespace, job)
    return pinned


def _found(
    operation: str, pinned: OCIArtifactAccessBinding, read: RunnerResult, policy: bool
) -> dict[str, Any]:
    """What the controller's harvest of the reading writes (``controller.stages.readings``)."""
    if operation == "Resolve":
        return {"source": pinned.to_wire(), "verification": None, "observation": None}
    verification: dict[str, Any] = {
        "artifactDigest": pinned.digest,
        "verifiedAt": timestamp(utc_now()),
    }
    if policy and read.verify is not None:
        verification["policyDigest"] = read.verify.verification_policy_digest
    return {"verification": verification}


def _harvest(manager: ApiClient, namespace: str, name: str, found: dict[str, Any]) -> None:
    """The write that retires the reading's claim with what it found."""
    stored = manager.get(PTAHSCHEMAS, namespace, name)
    status = {**(stored.get("status") or {}), **found}
    status.pop("activeOperation", None)
    manager.patch_status(
        PTAHSCHEMAS, namespace, name, status, resource_version=stored["metadata"]["resourceVersion"]
    )
