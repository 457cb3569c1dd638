"""A PtahSchema and its claim on a real API server, written as the manager writes them,
and the Job the claim reserved: what the webhook is asked about when the API server
itself calls it (``tests/webhook/test_real_apiserver.py``, and with the chart's
configurations, ``tests/realapi/test_webhook_registered.py``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from controller.pieces.operationidentity import input_fingerprint, schema_operation
from controller.pieces.podintent import AdmissionSettings
from jobclaim import build_job, schema_job_inputs
from jobclaim.api import PtahSchema, PtahSchemaStatus
from jobclaim.apiserver import PTAHSCHEMAS, Object, Refused
from kube.client import KubeApi
from lab.localplane import LocalControlPlane
from lab.standin import resolve_and_verify
from tests.support.claimworld import BINDING, MANAGER, NOW, RESOLVED, example, snapshot_for


@dataclass
class Cluster:
    admin: KubeApi
    manager: KubeApi
    namespace: str


def claimed_schema(
    cluster: Cluster,
    name: str,
    *,
    operation: str = "Resolve",
    plane: LocalControlPlane | None = None,
) -> tuple[PtahSchema, Object]:
    """A PtahSchema stored by the admin, and its claim of ``operation`` written by the
    manager: the claim is made around the UID the API server assigned.

    A claim after Resolve reads the artifact a Resolve Pod recorded, verified by a
    Verify Pod; both then run first, on the stand-in node of ``plane``, whose Job
    controller makes their Pods."""
    raw = example("ptahschema.yaml")
    raw["metadata"] = {"name": name, "namespace": cluster.namespace}
    stored = cluster.admin.create(PTAHSCHEMAS, cluster.namespace, raw)
    if operation != "Resolve":
        assert plane is not None, f"a {operation} claim needs its readings run on a plane"
        stored = cluster.manager.patch_status(
            PTAHSCHEMAS,
            cluster.namespace,
            name,
            {"executionBinding": BINDING.to_wire()},
            resource_version=stored["metadata"]["resourceVersion"],
        )
        resolve_and_verify(
            plane,
            cluster.admin,
            cluster.manager,
            cluster.namespace,
            name,
            digest=RESOLVED.digest,
            record=MANAGER,
            admission=AdmissionSettings(),
            await_reading=False,
        )
        stored = cluster.admin.get(PTAHSCHEMAS, cluster.namespace, name)
    schema = PtahSchema.model_validate(stored)
    claim = schema_operation(
        schema,
        operation=operation,
        fingerprint=input_fingerprint({"operation": operation, "name": name}),
        epoch=BINDING.epoch,
        nonce=uuid.uuid4().bytes,
        started_at=NOW,
    )
    status = (schema.status or PtahSchemaStatus()).model_copy(
        update={"execution_binding": BINDING, "active_operation": claim}
    )
    draft = build_job(
        schema_job_inputs(
            schema.model_copy(update={"status": status}), binding=BINDING, manager=MANAGER
        )
    )
    claim = claim.model_copy(update={"admission_snapshot": snapshot_for(draft["spec"]["template"])})
    status = status.model_copy(update={"active_operation": claim})
    written = cluster.manager.patch_status(
        PTAHSCHEMAS,
        cluster.namespace,
        name,
        status.to_wire(),
        resource_version=stored["metadata"]["resourceVersion"],
    )
    schema = PtahSchema.model_validate(written)
    assert claim.admission_snapshot is not None
    job = build_job(
        schema_job_inputs(
            schema,
            binding=BINDING,
            manager=MANAGER,
            snapshot_digest=claim.admission_snapshot.digest,
        )
    )
    return schema, job


def refusal(call: Any) -> str:
    with pytest.raises(Refused) as refused:
        call()
    return str(refused.value)
