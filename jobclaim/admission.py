"""Sealing and checking the Pod admission snapshot.

The snapshot's own digest covers every field but itself, so a snapshot edited after
it was sealed (by a person with status access, or a restore of an older copy) no
longer validates, and no Job is ever judged by an envelope nobody resolved.
"""

from __future__ import annotations

from typing import Any, Final

from jobclaim._canonical import digest_of, is_digest
from jobclaim.api.snapshot import AdmissionSnapshot

MAX_LIMIT_RANGES: Final = 32
MAX_KEYS: Final = 64


def _unsealed(snapshot: AdmissionSnapshot) -> dict[str, Any]:
    wire = snapshot.model_dump(by_alias=True, mode="json")
    wire["digest"] = ""
    return wire


def snapshot_digest(snapshot: AdmissionSnapshot) -> str:
    """The digest of the snapshot with its own digest field empty (still serialized)."""
    return digest_of(_unsealed(snapshot))


def seal(snapshot: AdmissionSnapshot) -> AdmissionSnapshot:
    """The same snapshot carrying its digest."""
    return snapshot.model_copy(update={"digest": snapshot_digest(snapshot)})


def _binding_key(binding: Any) -> str:
    obj = binding.object
    return f"{obj.name}\x00{obj.uid}\x00{obj.resource_version}"


def snapshot_problem(snapshot: AdmissionSnapshot) -> str | None:
    """Why a persisted snapshot cannot be trusted, or None when it can."""
    if snapshot.version != "v1":
        return f"snapshot version {snapshot.version!r} is not v1"
    if not is_digest(snapshot.template_digest):
        return "the template digest is not a sha256 digest"
    keys = [_binding_key(b) for b in snapshot.limit_ranges]
    if len(keys) > MAX_LIMIT_RANGES:
        return f"{len(keys)} LimitRanges exceed the {MAX_LIMIT_RANGES} a snapshot may bind"
    if keys != sorted(keys) or len(set(keys)) != len(keys):
        return "the LimitRanges are not sorted and unique"
    defaults = sum(len(b.default_requests) + len(b.default_limits) for b in snapshot.limit_ranges)
    if defaults > MAX_KEYS:
        return f"{defaults} LimitRange defaults exceed the {MAX_KEYS} a snapshot may bind"
    priority = snapshot.priority_class
    if priority.object is None and (priority.name or priority.value):
        return "a priority class without a bound object must have no name and value 0"
    if priority.object is not None and priority.object.name != priority.name:
        return "the priority class name is not the bound object's name"
    if snapshot.digest != snapshot_digest(snapshot):
        return "the snapshot's digest does not cover its contents"
    return None
