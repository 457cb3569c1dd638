"""The Pod admission snapshot: what admission will add to the operation Pod, resolved
and sealed before any Job carries its digest.

A Job's Pod is changed by admission after the controller builds it: the ServiceAccount
plugin adds image pull secrets, LimitRanger adds container defaults, RuntimeClass adds
overhead and scheduling, Priority sets a class and value, and a few plugin switches
add tolerations or force image pulls. A reader that later holds a running Pod to its
claim must know which of these it may see, and must not learn it from the Pod itself
(a Pod could then vouch for anything). So the claim records, before the Job exists,
exactly which objects admission reads, each bound by name, UID and resourceVersion.

Only credential-free objects are read (never a Secret): the snapshot records pull
secret *names* and nothing they contain. Anything ambiguous is refused rather than
guessed: two global default PriorityClasses, LimitRanges that disagree on a default,
more objects than a snapshot may bind. A guess would record an envelope admission
did not apply, and every later check of the Pod would be held to the wrong thing.

``resolve_snapshot`` reads; everything it decides is in the pure functions above it.
``snapshot_verdict`` is the pure rule the dispatch sequence applies to a persisted
snapshot and the template it is about to create.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import ValidationError

from jobclaim import (
    MAX_KEYS,
    MAX_LIMIT_RANGES,
    quantity_value,
    seal,
    snapshot_problem,
    template_digest,
)
from jobclaim.api import (
    AdmissionSnapshot,
    BoundObject,
    LimitRangeBinding,
    PriorityClassBinding,
    RuntimeClassBinding,
    ServiceAccountBinding,
    Toleration,
)
from jobclaim.apiserver import (
    LIMITRANGES,
    PRIORITYCLASSES,
    RUNTIMECLASSES,
    SERVICEACCOUNTS,
    ApiReader,
    NotFound,
)
from jobclaim.errors import PtahError

__all__ = [
    "AdmissionSettings",
    "AdmissionUnresolvable",
    "Verdict",
    "limit_range_bindings",
    "priority_class_binding",
    "resolve_snapshot",
    "runtime_class_binding",
    "service_account_binding",
    "snapshot_verdict",
]

# Scheduling items a RuntimeClass may add (node selector keys plus tolerations).
MAX_SCHEDULING_ITEMS: Final = 64
MAX_PULL_SECRETS: Final = 64
DEFAULT_SERVICE_ACCOUNT: Final = "default"

Verdict = Literal["resolve", "valid", "refresh", "refuse"]


class AdmissionUnresolvable(PtahError):
    """Admission's inputs cannot be pinned: a missing object, ambiguity, or a bound."""


@dataclass(frozen=True)
class AdmissionSettings:
    """The admission plugin switches of the cluster, as the operator is configured.

    They cannot be read from the API, so they are configuration; recording them in
    the snapshot means a change of configuration is a change of envelope, not a
    silent difference between what was judged and what was admitted.
    """

    default_tolerations_enabled: bool = True
    default_not_ready_toleration_seconds: int = 300
    default_unreachable_toleration_seconds: int = 300
    extended_resource_toleration_enabled: bool = False
    always_pull_images_enabled: bool = False


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def _bound(obj: Mapping[str, Any], what: str) -> BoundObject:
    meta = _mapping(obj.get("metadata"))
    try:
        return BoundObject(
            name=meta.get("name") or "",
            uid=meta.get("uid") or "",
            resource_version=meta.get("resourceVersion") or "",
        )
    except ValidationError as error:
        raise AdmissionUnresolvable(
            f"the {what} {meta.get('name')!r} cannot be bound by name, UID and resourceVersion"
        ) from error


def service_account_binding(obj: Mapping[str, Any]) -> ServiceAccountBinding:
    """The ServiceAccount and the pull secret names its admission plugin adds, in order."""
    bound = _bound(obj, "service account")
    names = [_mapping(s).get("name") for s in _list(obj.get("imagePullSecrets"))]
    if any(not isinstance(n, str) or not n for n in names):
        raise AdmissionUnresolvable(
            f"service account {bound.name} lists an image pull secret without a name"
        )
    if len(names) > MAX_PULL_SECRETS:
        raise AdmissionUnresolvable(
            f"service account {bound.name} lists {len(names)} image pull secrets, "
            f"more than the {MAX_PULL_SECRETS} a snapshot may bind"
        )
    return ServiceAccountBinding(object=bound, image_pull_secrets=names)


def _quantities(value: object, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, quantity in _mapping(value).items():
        if not isinstance(quantity, str) or quantity_value(quantity) is None:
            raise AdmissionUnresolvable(f"{where}: {key} is not a quantity")
        out[str(key)] = quantity
    return out


def _merge_default(
    merged: dict[str, tuple[str, str]], key: str, quantity: str, source: str, what: str
) -> None:
    """Record one default, refusing a second source that gives the same key another
    value: LimitRanger applies them in an order it does not promise, so which one a
    Pod would get is not something a snapshot can know."""
    earlier = merged.get(key)
    if earlier is None:
        merged[key] = (quantity, source)
    elif quantity_value(earlier[0]) != quantity_value(quantity):
        sources = (
            f"limit range {source}"
            if earlier[1] == source
            else (f"limit ranges {earlier[1]} and {source}")
        )
        raise AdmissionUnresolvable(
            f"{sources} give the container default {what} for {key} different values"
        )


def limit_range_bindings(objects: Sequence[Mapping[str, Any]]) -> list[LimitRangeBinding]:
    """Every LimitRange of the namespace, sorted, with its Container defaults.

    All of them are bound, not only those with defaults: a LimitRange's minimums and
    maximums decide whether the Pod is admitted at all, so a change to any of them is
    a change of envelope.
    """
    if len(objects) > MAX_LIMIT_RANGES:
        raise AdmissionUnresolvable(
            f"the namespace has {len(objects)} limit ranges, more than the "
            f"{MAX_LIMIT_RANGES} a snapshot may bind"
        )
    requests: dict[str, tuple[str, str]] = {}
    limits: dict[str, tuple[str, str]] = {}
    bindings: list[LimitRangeBinding] = []
    for obj in objects:
        bound = _bound(obj, "limit range")
        own_requests: dict[str, str] = {}
        own_limits: dict[str, str] = {}
        for raw in _list(_mapping(obj.get("spec")).get("limits")):
            item = _mapping(raw)
            if item.get("type") != "Container":
                continue
            where = f"limit range {bound.name}"
            for key, quantity in _quantities(item.get("defaultRequest"), where).items():
                _merge_default(requests, key, quantity, bound.name, "request")
                own_requests.setdefault(key, quantity)
            for key, quantity in _quantities(item.get("default"), where).items():
                _merge_default(limits, key, quantity, bound.name, "limit")
                own_limits.setdefault(key, quantity)
        bindings.append(
            LimitRangeBinding(
                object=bound, default_requests=own_requests, default_limits=own_limits
            )
        )
    defaults = sum(len(b.default_requests) + len(b.default_limits) for b in bindings)
    if defaults > MAX_KEYS:
        raise AdmissionUnresolvable(
            f"the limit ranges give {defaults} container defaults, more than the "
            f"{MAX_KEYS} a snapshot may bind"
        )
    ordered = sorted(bindings, key=_binding_order)
    if len({_binding_order(b) for b in ordered}) != len(ordered):
        raise AdmissionUnresolvable("the namespace lists one limit range twice")
    return ordered


def _binding_order(binding: LimitRangeBinding) -> str:
    obj = binding.object
    return f"{obj.name}\x00{obj.uid}\x00{obj.resource_version}"


def runtime_class_binding(obj: Mapping[str, Any]) -> RuntimeClassBinding:
    """The handler, Pod overhead and scheduling a RuntimeClass adds to the Pod."""
    bound = _bound(obj, "runtime class")
    handler = obj.get("handler")
    if not isinstance(handler, str) or not handler:
        raise AdmissionUnresolvable(f"runtime class {bound.name} names no handler")
    overhead_spec = _mapping(obj.get("overhead"))
    overhead_defined = overhead_spec.get("podFixed") is not None
    overhead = _quantities(overhead_spec.get("podFixed"), f"runtime class {bound.name} overhead")
    scheduling = _mapping(obj.get("scheduling"))
    node_selector = {str(k): str(v) for k, v in _mapping(scheduling.get("nodeSelector")).items()}
    raw_tolerations = _list(scheduling.get("tolerations"))
    if len(overhead) > MAX_KEYS:
        raise AdmissionUnresolvable(
            f"runtime class {bound.name} has more than {MAX_KEYS} overhead resources"
        )
    if len(node_selector) + len(raw_tolerations) > MAX_SCHEDULING_ITEMS:
        raise AdmissionUnresolvable(
            f"runtime class {bound.name} adds more than {MAX_SCHEDULING_ITEMS} scheduling items"
        )
    try:
        tolerations = [Toleration.model_validate(t) for t in raw_tolerations]
    except ValidationError as error:
        raise AdmissionUnresolvable(
            f"runtime class {bound.name} carries a toleration this operator cannot read"
        ) from error
    return RuntimeClassBinding(
        object=bound,
        handler=handler,
        overhead_defined=overhead_defined,
        overhead=overhead,
        node_selector=node_selector,
        tolerations=tolerations,
    )


def _priority(obj: Mapping[str, Any]) -> PriorityClassBinding:
    bound = _bound(obj, "priority class")
    value = obj.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise AdmissionUnresolvable(f"priority class {bound.name} has no integer value")
    policy = obj.get("preemptionPolicy") or "PreemptLowerPriority"
    if policy not in ("PreemptLowerPriority", "Never"):
        raise AdmissionUnresolvable(
            f"priority class {bound.name} has preemption policy {policy!r}, "
            "which this operator does not know"
        )
    return PriorityClassBinding(
        object=bound, name=bound.name, value=value, preemption_policy=policy
    )


def priority_class_binding(
    named: Mapping[str, Any] | None, every: Sequence[Mapping[str, Any]] | None
) -> PriorityClassBinding:
    """The class the Priority plugin gives the Pod: the one it names, else the single
    global default, else none (value 0)."""
    if named is not None:
        return _priority(named)
    defaults = [pc for pc in every or () if pc.get("globalDefault") is True]
    if len(defaults) > 1:
        names = sorted(str(_mapping(pc.get("metadata")).get("name")) for pc in defaults)
        raise AdmissionUnresolvable(
            f"priority classes {', '.join(names)} are all marked global default, so which "
            "one admission applies is ambiguous"
        )
    return _priority(defaults[0]) if defaults else PriorityClassBinding()


def assemble(
    template: Mapping[str, Any],
    *,
    service_account: ServiceAccountBinding,
    limit_ranges: list[LimitRangeBinding],
    runtime_class: RuntimeClassBinding | None,
    priority_class: PriorityClassBinding,
    settings: AdmissionSettings,
) -> AdmissionSnapshot:
    """The sealed snapshot; refuses one the shared validator would not accept."""
    snapshot = seal(
        AdmissionSnapshot(
            digest="",
            template_digest=template_digest(template),
            service_account=service_account,
            limit_ranges=limit_ranges,
            runtime_class=runtime_class,
            priority_class=priority_class,
            default_tolerations_enabled=settings.default_tolerations_enabled,
            default_not_ready_toleration_seconds=settings.default_not_ready_toleration_seconds,
            default_unreachable_toleration_seconds=settings.default_unreachable_toleration_seconds,
            extended_resource_toleration_enabled=settings.extended_resource_toleration_enabled,
            always_pull_images_enabled=settings.always_pull_images_enabled,
        )
    )
    # The reader that later judges a Job validates with the same function; a snapshot
    # it would refuse must never be persisted, or the claim could never dispatch.
    problem = snapshot_problem(snapshot)
    if problem is not None:
        raise AdmissionUnresolvable(f"the resolved snapshot is not valid: {problem}")
    return snapshot


def _pod_spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(template.get("spec"))


def _optional_name(spec: Mapping[str, Any], field: str) -> str | None:
    value = spec.get(field)
    return value if isinstance(value, str) and value else None


def resolve_snapshot(
    api: ApiReader,
    namespace: str,
    template: Mapping[str, Any],
    settings: AdmissionSettings,
) -> AdmissionSnapshot:
    """Read what admission will apply to a Pod from ``template`` and seal it.

    Every read is uncached. Raises ``AdmissionUnresolvable`` when an object the Pod
    names is missing or the namespace's objects are ambiguous or too many; other API
    errors propagate for the next pass to retry.
    """
    spec = _pod_spec(template)
    account = (
        _optional_name(spec, "serviceAccountName")
        or _optional_name(spec, "serviceAccount")
        or DEFAULT_SERVICE_ACCOUNT
    )
    try:
        sa = api.get(SERVICEACCOUNTS, namespace, account)
    except NotFound as error:
        raise AdmissionUnresolvable(
            f"service account {account} does not exist in namespace {namespace}, so no Pod "
            "of the operation could be admitted"
        ) from error
    limit_ranges = limit_range_bindings(api.list(LIMITRANGES, namespace))
    runtime_class = None
    runtime_name = _optional_name(spec, "runtimeClassName")
    if runtime_name is not None:
        try:
            runtime_class = runtime_class_binding(api.get(RUNTIMECLASSES, None, runtime_name))
        except NotFound as error:
            raise AdmissionUnresolvable(f"runtime class {runtime_name} does not exist") from error
    priority_name = _optional_name(spec, "priorityClassName")
    if priority_name is not None:
        try:
            named = api.get(PRIORITYCLASSES, None, priority_name)
        except NotFound as error:
            raise AdmissionUnresolvable(f"priority class {priority_name} does not exist") from error
        priority = priority_class_binding(named, None)
    else:
        priority = priority_class_binding(None, api.list(PRIORITYCLASSES, None))
    return assemble(
        template,
        service_account=service_account_binding(sa),
        limit_ranges=limit_ranges,
        runtime_class=runtime_class,
        priority_class=priority,
        settings=settings,
    )


def snapshot_verdict(
    snapshot: AdmissionSnapshot | None, template: Mapping[str, Any], *, refreshed: bool
) -> Verdict:
    """What the dispatch sequence does with a persisted snapshot and the template.

    ``resolve`` when there is none; ``refuse`` a snapshot the shared validator refuses
    (edited after sealing, or out of bounds); ``valid`` when it pins this very
    template; otherwise ``refresh`` once and ``refuse`` the second time.

    The one re-resolution is deliberate. The claim's input fingerprint does not cover
    the manager identity (controller image and revision, runner image), which binds
    nothing and which the snapshot pins, so a manager that changes between the pass
    that made the snapshot durable and the pass that creates the Job (a rollout, a new
    leader) builds a template the snapshot predates. Nothing has been dispatched and the
    approval is not yet spent, so the snapshot is resolved again for that template, as
    its own boundary (the pass returns); a second disagreement retires the claim, so a
    template that keeps moving never dispatches. Either way the create only follows a
    ``valid`` verdict in the same pass, so no Job carries a template its snapshot does
    not pin (tests/lifecycle/test_snapshot_pin.py; docs/architecture.md).
    """
    if snapshot is None:
        return "resolve"
    if snapshot_problem(snapshot) is not None:
        return "refuse"
    if snapshot.template_digest == template_digest(template):
        return "valid"
    return "refuse" if refreshed else "refresh"
