"""The result record: how an operation Pod tells the controller what happened.

The runner encodes its ``RunnerResult`` as compact ASCII JSON (the payload), takes
its SHA-256 (the digest) and creates a ``PtahResultRecord`` named after its Job,
through the API server, under its own Pod's bound ServiceAccount token
(``runner.recorder``). Admission admits the record only from a live Pod of the Job
the record names, for its claim's operation (``webhook.records``), so a record says
what that Pod said, and the manager's own token cannot write one.

The Pod log carries one line about it, the record's name and digest
(``PTAH_RUNNER_RECORD_V1 <namespace>/<name> sha256:<hex>``), never the result itself:
a plan's statements are SQL, and ``pods/log`` is granted widely.

A reader (``result_of_record``) holds a record to the Job it harvests and the attempt
it expects: the Job's UID, the digest over the exact result bytes, the operation, its
ID and the protocol version. A record bound elsewhere is never this attempt's account.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from jobclaim import (
    ENV_JOB_NAME,
    ENV_JOB_UID,
    ENV_POD_NAME,
    ENV_POD_NAMESPACE,
    ENV_POD_UID,
)
from jobclaim.api import MAX_RESULT_BYTES, PtahResultRecord
from runner.errors import ForeignRecord, MalformedRecord, ResultTooLarge
from runner.result import (
    RUNNER_PROTOCOL_VERSION,
    RunnerResult,
    decode_result,
    encode_json,
)

RECORD_MARKER: Final = "PTAH_RUNNER_RECORD_V1"


@dataclass(frozen=True, slots=True)
class EncodedResult:
    payload: bytes
    digest: str  # sha256:<hex> of the payload, which the termination summary names


@dataclass(frozen=True, slots=True)
class DigestedResult:
    """A result read from its record and bound to the operation that asked for it."""

    result: RunnerResult
    digest: str


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def encode_result(result: RunnerResult) -> EncodedResult:
    """The payload and digest of ``result``; ``ResultTooLarge`` when no record holds it."""
    payload = encode_json(result.to_wire())
    if len(payload) > MAX_RESULT_BYTES:
        raise ResultTooLarge(
            f"the result encodes to {len(payload)} bytes, more than a record's {MAX_RESULT_BYTES}"
        )
    return EncodedResult(payload, sha256_of(payload))


@dataclass(frozen=True, slots=True)
class PodIdentity:
    """The Pod the runner runs in and the Job that created it, as the downward API said."""

    namespace: str
    pod_name: str
    pod_uid: str
    job_name: str
    job_uid: str

    @property
    def record_name(self) -> str:
        # One record per Job: the Job runs one Pod, and a second Pod could not replace
        # what the first recorded (a record is never changed after its create).
        return self.job_name


_IDENTITY_ENV: Final = (ENV_POD_NAMESPACE, ENV_POD_NAME, ENV_POD_UID, ENV_JOB_NAME, ENV_JOB_UID)


def pod_identity(env: Mapping[str, str]) -> PodIdentity | str:
    """The Pod's identity from the environment, or why the runner cannot name it."""
    missing = [name for name in _IDENTITY_ENV if not env.get(name)]
    if missing:
        return f"the environment does not name the Pod and its Job ({', '.join(missing)} unset)"
    return PodIdentity(
        namespace=env[ENV_POD_NAMESPACE],
        pod_name=env[ENV_POD_NAME],
        pod_uid=env[ENV_POD_UID],
        job_name=env[ENV_JOB_NAME],
        job_uid=env[ENV_JOB_UID],
    )


def record_for(
    identity: PodIdentity, result: RunnerResult, encoded: EncodedResult
) -> dict[str, Any]:
    """The PtahResultRecord the runner creates, as its wire object.

    Owned by its Job, so it goes when the Job's cleanup TTL removes the Job (which
    admission allows only after the harvest), and nothing accumulates; the reference
    does not block the Job's deletion, which would need a grant on the Job's
    finalizers that no operation Pod should hold."""
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": identity.job_name,
        "uid": identity.job_uid,
    }
    record = PtahResultRecord.model_validate(
        {
            "metadata": {
                "name": identity.record_name,
                "namespace": identity.namespace,
                "ownerReferences": [owner],
            },
            "spec": {
                "operation": result.operation,
                "operationID": result.operation_id,
                "protocolVersion": result.protocol_version,
                "job": {"name": identity.job_name, "uid": identity.job_uid},
                "pod": {"name": identity.pod_name, "uid": identity.pod_uid},
                "resultDigest": encoded.digest,
                "result": encoded.payload.decode("ascii"),
            },
        }
    )
    return record.to_wire()


def record_line(identity: PodIdentity, digest: str) -> bytes:
    """The one line the log keeps of a written record: where it is, and its digest."""
    return f"{RECORD_MARKER} {identity.namespace}/{identity.record_name} {digest}\n".encode()


def binding_problem(
    result_operation: str,
    result_operation_id: str,
    result_protocol: int,
    *,
    operation: str,
    operation_id: str,
    protocol_version: int,
) -> str | None:
    """Why an account is not this attempt's, or None. Shared with the summary."""
    if result_operation != operation:
        return f"it reports operation {result_operation!r}, not {operation!r}"
    if result_operation_id != operation_id:
        return f"it reports operation ID {result_operation_id!r}, not {operation_id!r}"
    if result_protocol != protocol_version:
        return f"it speaks runner protocol {result_protocol}, not {protocol_version}"
    return None


def result_of_record(
    record: PtahResultRecord,
    operation: str,
    operation_id: str,
    *,
    job_uid: str,
    protocol_version: int = RUNNER_PROTOCOL_VERSION,
) -> DigestedResult:
    """The result ``record`` carries, bound to the Job with ``job_uid`` and this attempt.

    Raises ``MalformedRecord`` for a record of another Job or whose digest does not
    cover its result, and ``ForeignRecord`` for one of another operation or attempt.
    """
    spec = record.spec
    if spec.job.uid != job_uid:
        raise MalformedRecord(f"the record speaks for Job UID {spec.job.uid}, not {job_uid}")
    payload = spec.result.encode("ascii", "replace")
    if sha256_of(payload) != spec.result_digest:
        raise MalformedRecord("the record's digest does not cover its result")
    try:
        result = decode_result(payload)
    except ValueError as error:
        raise MalformedRecord(f"the record's result is not a valid result: {error}") from None
    problem = binding_problem(
        result.operation,
        result.operation_id,
        result.protocol_version,
        operation=operation,
        operation_id=operation_id,
        protocol_version=protocol_version,
    ) or binding_problem(
        spec.operation,
        spec.operation_id,
        spec.protocol_version,
        operation=operation,
        operation_id=operation_id,
        protocol_version=protocol_version,
    )
    if problem:
        raise ForeignRecord(f"the record is not this attempt's: {problem}")
    return DigestedResult(result, spec.result_digest)
