"""Speaking as an operation Pod on the real API server: its bound token and its record.

No kubelet runs beside the harness's API server, so no Pod ever reads its projected
token. The API server still issues one: a TokenRequest bound to the Pod (the Job
controller created it; it need not have been scheduled) is exactly the credential the
kubelet would have projected, and authenticates with the Pod's name and UID in
``userInfo.extra``. With it, the runner's own ``ApiRecorder`` creates the record over
HTTPS, so the record admission rule and its policy judge a real Pod-bound request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from jobclaim.apiserver import Object
from lab.localplane import LocalControlPlane
from runner import PodIdentity, RecordUnwritten, RunnerResult, encode_result, record_for
from runner.recorder import ApiRecorder

TOKEN_REQUEST_SECONDS = 600


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
            assert created.status_code in (201, 409), created.text
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
        assert answer.status_code == 201, answer.text
        return str(answer.json()["status"]["token"])


def recorder_for(plane: LocalControlPlane, token: str, directory: Path) -> ApiRecorder:
    """The runner's own recorder, holding ``token`` as the kubelet would project it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    # No retries: a refusal is a 4xx, and a test has no outage to wait out.
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


__all__ = ["RecordUnwritten", "identity_of", "pod_token", "record_as_pod", "recorder_for"]
