"""Plan projections: the ConfigMaps a schema Apply Pod reads its plan from.

The Apply Pod holds no Kubernetes credential and the kubelet mounts no custom
resource, so the controller copies each verified chunk into an immutable ConfigMap
of the same name, owned by the plan. The controller builds them here and the webhook
holds a submitted one to the same builder, so neither accepts bytes the other would
not have written.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import ValidationError

from jobclaim._canonical import sha256_digest
from jobclaim.api._base import API_VERSION
from jobclaim.api.schema import PlanChunk, PtahSchemaPlan, PtahSchemaPlanChunk
from jobclaim.envelope import PREFIX
from jobclaim.naming import projection_names

CHUNK_KEY: Final = "chunk"
LABEL_PLAN: Final = PREFIX + "plan"
LABEL_SCHEMA: Final = PREFIX + "schema"
_SERVER_ASSIGNED: Final = ("uid", "resourceVersion", "generation", "creationTimestamp")


def chunk_geometry_problem(plan_name: str, chunks: Sequence[PlanChunk]) -> str | None:
    """Why a plan's chunk list is not ``<plan>-000``.. by index, in order, or None.

    The Apply Job mounts projections by these names; a plan listing any other names
    would have its Pod read ConfigMaps nobody verified.
    """
    if not 1 <= len(chunks) <= 16:
        return f"it lists {len(chunks)} chunks"
    expected = list(enumerate(projection_names(plan_name, len(chunks))))
    if [(c.index, c.name) for c in chunks] != expected:
        return "its chunks are not named by index after the plan"
    return None


def decode_chunk(encoded: str) -> bytes | None:
    """Strict base64, or None: a lenient decoder would accept bytes nobody wrote."""
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None


def chunk_problem(chunk: PlanChunk, data: bytes) -> str | None:
    """Why ``data`` is not the chunk the plan recorded, or None."""
    if len(data) != chunk.size:
        return f"chunk {chunk.name} holds {len(data)} bytes, the plan recorded {chunk.size}"
    if sha256_digest(data) != chunk.digest:
        return f"chunk {chunk.name} does not have the digest the plan recorded"
    return None


def build_projection(
    *,
    namespace: str,
    schema_name: str,
    plan_name: str,
    plan_uid: str,
    chunk: PlanChunk,
    data: bytes,
) -> dict[str, Any]:
    """The immutable ConfigMap that carries one chunk to the Apply Pod."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": chunk.name,
            "namespace": namespace,
            "labels": {LABEL_PLAN: plan_name, LABEL_SCHEMA: schema_name},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "PtahSchemaPlan",
                    "name": plan_name,
                    "uid": plan_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        # Immutable, so a projection the Pod mounts cannot change under a running Apply.
        "immutable": True,
        "binaryData": {CHUNK_KEY: base64.b64encode(data).decode("ascii")},
    }


def projection_problem(candidate: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """Why a stored or submitted projection is not the one the plan builds, or None.

    Server-assigned metadata is ignored; everything else must be exactly equal.
    """
    metadata = candidate.get("metadata")
    if not isinstance(metadata, dict):
        return "the projection has no metadata"
    scrubbed = {k: v for k, v in metadata.items() if k not in _SERVER_ASSIGNED}
    scrubbed.pop("managedFields", None)
    if scrubbed != expected["metadata"]:
        return "the projection's metadata is not the one its plan builds"
    rest = {k: v for k, v in candidate.items() if k != "metadata"}
    wanted = {k: v for k, v in expected.items() if k != "metadata"}
    if rest != wanted:
        return "the projection's contents are not the plan's chunk bytes"
    return None


def plan_geometry_problem(plan: PtahSchemaPlan) -> str | None:
    """Why the plan cannot bind its chunks (``jobclaim.chunk_geometry_problem``), or None."""
    name = plan.metadata.name or ""
    if not name or not plan.metadata.uid or not plan.metadata.namespace:
        return "the plan has no name, UID and namespace to bind its chunks to"
    problem = chunk_geometry_problem(name, plan.spec.chunks)
    return f"the plan: {problem}" if problem else None


def chunk_object_problem(
    plan: PtahSchemaPlan, chunk: PlanChunk, obj: Mapping[str, Any]
) -> tuple[bytes | None, str | None]:
    """The chunk's bytes, or why the stored object is not ``chunk`` of ``plan``.

    One reading of a stored chunk for every reader: the controller before an Apply
    (``controller.pieces.planstore``) and ``kubectl ptah plan`` before a person approves,
    so a person is shown exactly the bytes the Apply would run."""
    try:
        stored = PtahSchemaPlanChunk.model_validate(obj)
    except ValidationError:
        return None, f"chunk {chunk.name} is not a chunk this operator can read"
    if stored.metadata.name != chunk.name:
        return None, f"chunk {chunk.name} was answered by {stored.metadata.name}"
    ref = stored.spec.plan_ref
    if (ref.name, ref.uid) != (plan.metadata.name, plan.metadata.uid):
        return None, f"chunk {chunk.name} belongs to another plan"
    if stored.spec.index != chunk.index:
        return None, f"chunk {chunk.name} sits at index {stored.spec.index}, not {chunk.index}"
    if (stored.spec.size, stored.spec.digest) != (chunk.size, chunk.digest):
        return None, f"chunk {chunk.name} records another size or digest than the plan"
    data = decode_chunk(stored.spec.data)
    if data is None:
        return None, f"chunk {chunk.name} is not base64"
    problem = chunk_problem(chunk, data)
    return (None, problem) if problem else (data, None)
