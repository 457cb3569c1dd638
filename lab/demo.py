"""``make run``: take the example PtahSchema through a claim to its Job, offline.

It does what the controller does before the one permitted create - form the claim,
seal the admission snapshot over the Job's Pod template, build the Job - then plays
the API server's part (assign a UID, generate the selector and identity labels) and
asks ``jobclaim.match`` about the Job it got back, and about a forged one.
"""

from __future__ import annotations

import argparse
import copy
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from controller import input_fingerprint, schema_operation
from jobclaim import (
    build_job,
    match,
    plan_name,
    schema_claim,
    schema_job_inputs,
    seal,
    template_digest,
)
from jobclaim.api import (
    CurrentPlanStatus,
    ExecutionBindingStatus,
    ManagerRecord,
    PtahSchema,
    PtahSchemaStatus,
)
from jobclaim.api.snapshot import AdmissionSnapshot, BoundObject, ServiceAccountBinding
from runner import RUNNER_PROTOCOL_VERSION

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ptahschema.yaml"
# The execution binding and manager identity a real installation reads from its chart
# values; these stand-ins are pinned the same way (by digest) so they pass the same rules.
BINDING = ExecutionBindingStatus(
    epoch="v1-" + uuid.UUID(int=1).hex,
    controller_state_version=1,
    ptah_version="1.9.0",
    executor_image="registry.example.com/ptah@sha256:" + "1" * 64,
    runner_protocol_version=RUNNER_PROTOCOL_VERSION,
)
MANAGER = ManagerRecord(
    controller_image="registry.example.com/ptah-operator@sha256:" + "2" * 64,
    controller_revision="demo",
    runner_image="registry.example.com/ptah-runner@sha256:" + "3" * 64,
)
NOW = "2026-12-02T12:00:00Z"


def _claimed_schema(path: Path) -> PtahSchema:
    raw = yaml.safe_load(path.read_text())
    raw["metadata"].setdefault("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, "ptah-demo")))
    raw["metadata"].setdefault("generation", 1)
    schema = PtahSchema.model_validate(raw)
    fingerprint = input_fingerprint({"spec": schema.spec.to_wire(), "generation": 1})
    plan_fingerprint = "sha256:" + "c" * 64
    plan = CurrentPlanStatus(
        name=plan_name(plan_fingerprint),
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, "ptah-demo-plan")),
        fingerprint=plan_fingerprint,
        content_digest="sha256:" + "d" * 64,
        execution_binding_id=BINDING.epoch,
        controller_state_version=BINDING.controller_state_version,
        ptah_version=BINDING.ptah_version,
        statement_count=3,
        chunk_count=1,
    )
    operation = schema_operation(
        schema,
        operation="Apply",
        fingerprint=fingerprint,
        epoch=BINDING.epoch,
        nonce=b"\x00" * 16,
        started_at=NOW,
    )
    status = PtahSchemaStatus(execution_binding=BINDING, plan=plan, active_operation=operation)
    schema = schema.model_copy(update={"status": status})
    # The snapshot is sealed over the Pod template before any Job carries its digest.
    draft = build_job(schema_job_inputs(schema, binding=BINDING, manager=MANAGER))
    snapshot = seal(
        AdmissionSnapshot(
            digest="",
            template_digest=template_digest(draft["spec"]["template"]),
            service_account=ServiceAccountBinding(
                object=BoundObject(name="default", uid="demo-sa", resource_version="1")
            ),
        )
    )
    operation = operation.model_copy(update={"admission_snapshot": snapshot})
    return schema.model_copy(
        update={"status": status.model_copy(update={"active_operation": operation})}
    )


def _as_stored(job: dict[str, Any]) -> dict[str, Any]:
    """What the API server hands back: its own UID, selector and identity labels."""
    stored = copy.deepcopy(job)
    uid = str(uuid.uuid4())
    name = stored["metadata"]["name"]
    stored["metadata"].update(uid=uid, resourceVersion="1", generation=1, creationTimestamp=NOW)
    stored["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    stored["spec"]["template"]["metadata"]["labels"].update(
        {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name}
    )
    return stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--example", type=Path, default=EXAMPLE)
    args = parser.parse_args(argv)
    schema = _claimed_schema(args.example)
    assert schema.status is not None and schema.status.active_operation is not None
    operation = schema.status.active_operation
    snapshot = operation.admission_snapshot
    assert snapshot is not None
    job = build_job(
        schema_job_inputs(schema, binding=BINDING, manager=MANAGER, snapshot_digest=snapshot.digest)
    )
    print(f"# claim: {operation.type} {operation.id}")
    print(f"#   reserves Job {operation.job_name}, epoch {operation.execution_binding_id}")
    print(f"#   admission snapshot {snapshot.digest} over template {snapshot.template_digest}")
    print(yaml.safe_dump(job, sort_keys=False), end="")

    stored = _as_stored(job)
    verdicts = {
        "read back, held to its rebuild": schema_claim(schema, built=job, binding=BINDING),
        "read back, held to what the claim fixes": schema_claim(schema, binding=BINDING),
    }
    print("---")
    for label, claim in verdicts.items():
        assert claim is not None
        verdict = match(stored, claim)
        print(f"# {label}: {'match' if verdict else verdict.reason}")
    forged = copy.deepcopy(stored)
    forged["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    claim = verdicts["read back, held to its rebuild"]
    assert claim is not None
    verdict = match(forged, claim)
    print(f"# a forged privileged copy: {'match' if verdict else verdict.reason}")
    return 0 if not verdict else 1


if __name__ == "__main__":
    sys.exit(main())
