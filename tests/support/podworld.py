"""A stand-in kubelet for the outcome tests.

The in-memory API server runs no Pods, so a test plays the Job controller and the
kubelet itself: it creates the Pod a Job would start (owned by the Job, carrying its
template), the result record the runner would create from inside it
(``write_record``), the runner container's state and its termination message, and
sets the Job's terminal condition. Records and summaries come from the runner's own
encoders, so what a harvest reads is byte for byte what a real runner writes.
"""

from __future__ import annotations

import copy
from typing import Any

from jobclaim.apiserver import JOBS, PODS, PTAHRESULTRECORDS, Object
from jobclaim.times import timestamp
from runner import (
    RUNNER_PROTOCOL_VERSION,
    DigestedResult,
    PodIdentity,
    encode_result,
    encode_summary,
    record_for,
    summary_of,
)
from runner.result import RunnerResult
from tests.support.dispatchworld import NS, Rig

TARGET = "sha256:" + "a" * 64


def job_of(rig: Rig, key: Any) -> Object:
    name = rig.claim(key)["jobName"]
    return rig.api.get(JOBS, NS, name)


def start_pod(
    rig: Rig,
    job: Object,
    *,
    suffix: str = "a",
    terminated: bool = True,
    message: str | None = None,
    result: RunnerResult | None = None,
) -> Object:
    """The Pod the Job controller would start for ``job``, as the kubelet leaves it,
    with the record its runner created of ``result`` (none when None)."""
    template = copy.deepcopy(job["spec"]["template"])
    meta = job["metadata"]
    name = f"{meta['name'][:50]}-{suffix}"
    pod = rig.api.create(
        PODS,
        NS,
        {
            "metadata": {
                "name": name,
                "labels": template["metadata"].get("labels", {}),
                "annotations": template["metadata"].get("annotations", {}),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template["spec"],
        },
    )
    state: dict[str, Any] = {"running": {}}
    if terminated:
        state = {"terminated": {"exitCode": 0}}
        if message is not None:
            state["terminated"]["message"] = message
    status = {
        "phase": "Succeeded" if terminated else "Running",
        "containerStatuses": [{"name": "ptah", "restartCount": 0, "state": state}],
    }
    stored = rig.api.patch_status(
        PODS, NS, name, status, resource_version=pod["metadata"]["resourceVersion"]
    )
    if result is not None:
        write_record(rig, stored, result)
    return stored


def write_record(rig: Rig, pod: Object, result: RunnerResult) -> Object:
    """The result record the Pod's runner creates under its own token."""
    meta = pod["metadata"]
    owner = meta["ownerReferences"][0]
    identity = PodIdentity(
        namespace=NS,
        pod_name=meta["name"],
        pod_uid=meta["uid"],
        job_name=owner["name"],
        job_uid=owner["uid"],
    )
    record = record_for(identity, result, encode_result(result))
    return rig.api.create(PTAHRESULTRECORDS, NS, record)


def stop_pod(rig: Rig, name: str) -> None:
    pod = rig.api.get(PODS, NS, name)
    rig.api.patch_status(
        PODS,
        NS,
        name,
        {
            "phase": "Succeeded",
            "containerStatuses": [
                {"name": "ptah", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
            ],
        },
        resource_version=pod["metadata"]["resourceVersion"],
    )


def finish_job(rig: Rig, name: str, kind: str = "Complete") -> None:
    """The Job controller's verdict, stamped with the rig's wall clock."""
    job = rig.api.get(JOBS, NS, name)
    at = timestamp(rig.clocks.wall())
    rig.api.patch_status(
        JOBS,
        NS,
        name,
        {"conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}]},
        resource_version=job["metadata"]["resourceVersion"],
    )


def summary_message(result: RunnerResult) -> str:
    encoded = encode_result(result)
    return encode_summary(summary_of(DigestedResult(result, encoded.digest))).decode("ascii")


def result_for(rig: Rig, key: Any, runner_op: str, **fields: Any) -> RunnerResult:
    """A valid result of this claim's attempt, bound to its operation ID and realm."""
    claim = rig.claim(key)
    wire: dict[str, Any] = {
        "protocolVersion": RUNNER_PROTOCOL_VERSION,
        "operation": runner_op,
        "operationId": claim["id"],
        "childExitCode": 0,
        "coordinationDigest": claim["coordinationDigest"],
        "targetIdentityDigest": TARGET,
    }
    wire.update(fields)
    return RunnerResult.from_wire({k: v for k, v in wire.items() if v is not None})


APPLIED = {
    "mutationStarted": True,
    "uncertain": False,
    "apply": {"planContentDigest": "sha256:" + "e" * 64, "statementCount": 1},
}
MIGRATED = {
    "mutationStarted": True,
    "uncertain": False,
    "migrationRun": {"outcome": "Applied", "appliedVersions": ["20260101000000"]},
}
NO_CHANGES = {
    "plan": {
        "planOutcome": "NoChanges",
        "planContentDigest": "sha256:" + "e" * 64,
        "statementCount": 0,
    }
}
OBSERVED = {
    "observe": {
        "observedDialect": "postgresql-16",
        "observedDrift": False,
        "driftFindingCount": 0,
        "driftReportDigest": "sha256:" + "c" * 64,
    }
}


def history(pending: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "migrationHistory": {
            "contractVersion": 1,
            "appliedCount": 2,
            "pendingCount": pending,
            "fingerprint": "sha256:" + "d" * 64,
            **extra,
        }
    }


def harvest_with(
    rig: Rig, key: Any, runner_op: str, fields: dict[str, Any], *, summary: bool = False
) -> Object:
    """Run the claim's Job to its end with a Pod that recorded ``fields``' result."""
    job = job_of(rig, key)
    result = result_for(rig, key, runner_op, **fields)
    message = summary_message(result) if summary else None
    pod = start_pod(rig, job, result=result, message=message)
    finish_job(rig, job["metadata"]["name"])
    return pod
