"""The Pod admission snapshot: what admission would add to the operation Pod.

It is persisted in the claim before any Job carries its digest, so every state in
which a Job may exist carries the exact envelope its Pods are judged by.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jobclaim.api._base import Digest, WireModel


class BoundObject(WireModel):
    """An object the snapshot was resolved from, bound by name, UID and version."""

    name: str = Field(min_length=1, max_length=253)
    uid: str = Field(min_length=1, max_length=128)
    resource_version: str = Field(min_length=1, max_length=128)


class ServiceAccountBinding(WireModel):
    object: BoundObject
    image_pull_secrets: list[str] = Field(default_factory=list, max_length=64)


class LimitRangeBinding(WireModel):
    object: BoundObject
    default_requests: dict[str, str] = Field(default_factory=dict)
    default_limits: dict[str, str] = Field(default_factory=dict)


class Toleration(WireModel):
    key: str | None = None
    """The taint key the toleration matches."""
    operator: Literal["Exists", "Equal"] | None = None
    """Exists or Equal."""
    value: str | None = None
    """The taint value to match with Equal."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint effect to match."""
    toleration_seconds: int | None = None
    """How long a NoExecute taint is tolerated."""


class RuntimeClassBinding(WireModel):
    object: BoundObject
    handler: str
    overhead_defined: bool = False
    overhead: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class PriorityClassBinding(WireModel):
    # No object means "no class and no global default": then name is empty and value 0.
    object: BoundObject | None = None
    name: str = ""
    value: int = 0
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"


class AdmissionSnapshot(WireModel):
    version: Literal["v1"] = "v1"
    digest: str
    template_digest: Digest
    service_account: ServiceAccountBinding
    limit_ranges: list[LimitRangeBinding] = Field(default_factory=list, max_length=32)
    runtime_class: RuntimeClassBinding | None = None
    priority_class: PriorityClassBinding = Field(default_factory=PriorityClassBinding)
    default_tolerations_enabled: bool = True
    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300
    extended_resource_toleration_enabled: bool = False
    always_pull_images_enabled: bool = False
