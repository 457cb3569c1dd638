"""Kubernetes object metadata, complete: every field ObjectMeta defines.

Listed whole, because strict decoding refuses what it does not list, and a real API
server sends all of these.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from jobclaim.api._base import Timestamp, WireModel


class OwnerReference(WireModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ManagedFieldsEntry(WireModel):
    manager: str | None = None
    operation: str | None = None
    api_version: str | None = None
    time: Timestamp | None = None
    fields_type: str | None = None
    fields_v1: dict[str, Any] | None = Field(default=None, alias="fieldsV1")
    subresource: str | None = None


class ObjectMeta(WireModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    self_link: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[ManagedFieldsEntry] | None = None


# Kubernetes' own limits: a name is a DNS subdomain, a Secret or ConfigMap key at most
# 253 characters, a UID at most 128. Bounded here so the CRD's CEL rules that compare
# them are priced by these lengths, not by the largest request.
_Name = Annotated[str, StringConstraints(max_length=253)]
_Uid = Annotated[str, StringConstraints(max_length=128)]


class ObjectReference(WireModel):
    """An exact object: a name alone can be reused by a replacement, a UID cannot."""

    name: _Name
    """The object's name, in the same namespace."""
    uid: _Uid
    """The object's UID: the one object of that name this reference means."""


class NamedReference(WireModel):
    name: _Name
    """The referenced object's name."""


class SecretKeySelector(WireModel):
    name: _Name
    """The Secret's name, in the resource's namespace."""
    key: _Name
    """The key within the Secret."""
    optional: bool | None = None
    """Kubernetes' optional flag; the operator treats a missing key as an error."""


class ConfigMapKeySelector(WireModel):
    name: _Name
    """The ConfigMap's name, in the resource's namespace."""
    key: _Name
    """The key within the ConfigMap."""
    optional: bool | None = None
    """Kubernetes' optional flag; the operator treats a missing key as an error."""


class Condition(WireModel):
    """A kstatus condition, as kubectl wait and GitOps tools read one."""

    type: str
    """What the condition is about (Ready, ApprovalRequired, Consumed, Stale, ...)."""
    status: str
    """True, False or Unknown."""
    reason: str | None = None
    """Why, in one CamelCase word."""
    message: str | None = None
    """Why, in a sentence for a person."""
    last_transition_time: Timestamp | None = None
    """When the status last changed."""
    observed_generation: int | None = None
    """The metadata.generation the condition was set from."""
