"""What an operation Pod needs to write its own result record, and nothing more.

The record is evidence only because the manager cannot write it: the runner creates it
under the Pod's own bound ServiceAccount token, which the API server issues for this
Pod alone (its name and UID travel in the token, and reach admission as
``userInfo.extra``). So the token is

- projected into the runner's container only: the init containers that install the
  runner and pull the artifact never see it;
- short-lived: it expires soon after the Job's deadline (never under the API server's
  ten-minute minimum), so a copy taken from a finished Pod is worth nothing for long;
- of the Job's own ServiceAccount, whatever it is: a user's cloud-identity account keeps
  working, and RBAC may grant ``create`` on records to every ServiceAccount, because
  admission, not RBAC, decides which Pod may speak for which Job.

Where the record goes is not configurable: the runner talks to the API server at the
address the kubelet gives every container (``KUBERNETES_SERVICE_HOST``/``PORT``) and
trusts the cluster's own CA bundle (``kube-root-ca.crt``). Nothing the manager writes
can point the token anywhere else: the Job is held to its rebuild by ``jobclaim.match``.

The Pod's and Job's names and UIDs reach the runner through the downward API (the Job
controller labels every Pod with its Job's name and UID), so a record names what the
kubelet started, not what the manager said.
"""

from __future__ import annotations

from typing import Any, Final

RECORD_TOKEN_VOLUME: Final = "record-token"
RECORD_TOKEN_DIR: Final = "/var/run/secrets/operator.ptah.run/record"
RECORD_TOKEN_FILE: Final = "token"
RECORD_CA_FILE: Final = "ca.crt"
# The API server's floor for a projected token's lifetime.
MIN_TOKEN_SECONDS: Final = 600
# How long after the Job's deadline the token still works: the runner writes its record
# after the executor stops, within the kill grace the deadline leaves it.
TOKEN_MARGIN_SECONDS: Final = 300
ROOT_CA_CONFIGMAP: Final = "kube-root-ca.crt"

ENV_POD_NAME: Final = "PTAH_POD_NAME"
ENV_POD_UID: Final = "PTAH_POD_UID"
ENV_POD_NAMESPACE: Final = "PTAH_POD_NAMESPACE"
ENV_JOB_NAME: Final = "PTAH_JOB_NAME"
ENV_JOB_UID: Final = "PTAH_JOB_UID"
RECORD_IDENTITY_ENV: Final = frozenset(
    {ENV_POD_NAME, ENV_POD_UID, ENV_POD_NAMESPACE, ENV_JOB_NAME, ENV_JOB_UID}
)
# The labels the Job controller puts on every Pod it creates.
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
JOB_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"

_FIELDS: Final = (
    (ENV_JOB_NAME, f"metadata.labels['{JOB_NAME_LABEL}']"),
    (ENV_JOB_UID, f"metadata.labels['{JOB_UID_LABEL}']"),
    (ENV_POD_NAME, "metadata.name"),
    (ENV_POD_NAMESPACE, "metadata.namespace"),
    (ENV_POD_UID, "metadata.uid"),
)


def identity_env() -> list[dict[str, Any]]:
    """The runner's view of its own Pod and Job, from the downward API, as stored."""
    return [
        {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}
        for name, path in _FIELDS
    ]


def token_seconds(active_deadline_seconds: int) -> int:
    """The token's lifetime: past the Job's deadline by the margin, never under the floor."""
    return max(MIN_TOKEN_SECONDS, active_deadline_seconds + TOKEN_MARGIN_SECONDS)


def token_volume(active_deadline_seconds: int, mode: int) -> dict[str, Any]:
    """The projected volume holding the Pod's bound token and the cluster CA, as stored."""
    token = {"expirationSeconds": token_seconds(active_deadline_seconds), "path": RECORD_TOKEN_FILE}
    items = [{"key": RECORD_CA_FILE, "path": RECORD_CA_FILE}]
    sources = [
        {"serviceAccountToken": token},
        {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": items}},
    ]
    return {"name": RECORD_TOKEN_VOLUME, "projected": {"sources": sources, "defaultMode": mode}}


def token_mount() -> dict[str, Any]:
    return {"name": RECORD_TOKEN_VOLUME, "mountPath": RECORD_TOKEN_DIR, "readOnly": True}
