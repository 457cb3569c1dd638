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
    """The object's name."""
    uid: str = Field(min_length=1, max_length=128)
    """The object's UID."""
    resource_version: str = Field(min_length=1, max_length=128)
    """The object's resourceVersion when the snapshot was read; any change to it changes the
    snapshot."""


class ServiceAccountBinding(WireModel):
    """The ServiceAccount the Pod runs as, bound by version."""

    object: BoundObject
    """The ServiceAccount the operation Pod runs as."""
    image_pull_secrets: list[str] = Field(default_factory=list, max_length=64)
    """The pull secrets the ServiceAccount adds to the Pod."""


class LimitRangeBinding(WireModel):
    """A LimitRange of the namespace and the defaults it adds to a container."""

    object: BoundObject
    """A LimitRange of the namespace."""
    default_requests: dict[str, str] = Field(default_factory=dict)
    """The container resource requests it defaults."""
    default_limits: dict[str, str] = Field(default_factory=dict)
    """The container resource limits it defaults."""


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
    """The RuntimeClass the Pod names and what it adds to the Pod."""

    object: BoundObject
    """The RuntimeClass the Pod names."""
    handler: str
    """The RuntimeClass's handler."""
    overhead_defined: bool = False
    """Whether the RuntimeClass defines a Pod overhead."""
    overhead: dict[str, str] = Field(default_factory=dict)
    """The Pod overhead it adds."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """The node selector it adds to the Pod."""
    tolerations: list[Toleration] = Field(default_factory=list)
    """The tolerations it adds to the Pod."""


class PriorityClassBinding(WireModel):
    """The PriorityClass the Pod resolves to."""

    # No object means "no class and no global default": then name is empty and value 0.
    object: BoundObject | None = None
    """The PriorityClass the Pod resolves to; absent when there is none and no global default."""
    name: str = ""
    """The PriorityClass's name; empty when there is none."""
    value: int = 0
    """The priority it gives the Pod."""
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    """PreemptLowerPriority or Never."""


class AdmissionSnapshot(WireModel):
    """What admission adds to the operation Pod, bound to the objects it was read from."""

    version: Literal["v1"] = "v1"
    """The snapshot format: v1."""
    digest: str
    """The digest of the snapshot's content; the Job carries it in an annotation."""
    template_digest: Digest
    """The digest of the Pod template the Job was built with."""
    service_account: ServiceAccountBinding
    """The ServiceAccount the Pod runs as, and what it adds."""
    limit_ranges: list[LimitRangeBinding] = Field(default_factory=list, max_length=32)
    """The namespace's LimitRanges, and what they default."""
    runtime_class: RuntimeClassBinding | None = None
    """The RuntimeClass the Pod names, and what it adds."""
    priority_class: PriorityClassBinding = Field(default_factory=PriorityClassBinding)
    """The PriorityClass the Pod resolves to."""
    default_tolerations_enabled: bool = True
    """Whether the API server adds the default not-ready and unreachable tolerations."""
    default_not_ready_toleration_seconds: int = 300
    """The seconds of the default not-ready toleration."""
    default_unreachable_toleration_seconds: int = 300
    """The seconds of the default unreachable toleration."""
    extended_resource_toleration_enabled: bool = False
    """Whether the API server adds tolerations for extended resources."""
    always_pull_images_enabled: bool = False
    """Whether the AlwaysPullImages admission plugin sets every image to be pulled."""
