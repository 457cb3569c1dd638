"""What a real API server does to an object on each write, as pure functions.

The in-memory double (``kube.fake.inmemory``) applies these; each mirrors a rule of
kube-apiserver 1.37 that some decision of the operator depends on, and the
conformance suite (``tests/apiconformance``) checks it against the real server. They
are pure so each rule can be read, and tested, on its own.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

from jobclaim.apiserver import JOBS, Conflict, Invalid, Object, Resource

__all__ = [
    "SERVER_OWNED",
    "admit_job",
    "carry_metadata",
    "check_immutable_configmap",
    "check_name",
    "conflict",
    "default_service_account",
    "generation_content",
    "has_generation",
    "merge_patch",
    "omit_empty_metadata",
    "same_resource",
]

# Built-in kinds whose objects carry no metadata.generation on a real API server.
_WITHOUT_GENERATION: Final = frozenset(
    {
        ("", "configmaps"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("", "limitranges"),
        ("", "namespaces"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("coordination.k8s.io", "leases"),
        ("node.k8s.io", "runtimeclasses"),
        ("scheduling.k8s.io", "priorityclasses"),
    }
)
# Metadata only the API server writes: values a client sends are ignored, not stored.
SERVER_OWNED: Final = (
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)
_IMMUTABLE: Final = ("uid", "name", "namespace")
_DNS_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_JOB_LABELS: Final = (
    ("batch.kubernetes.io/controller-uid", "uid"),
    ("batch.kubernetes.io/job-name", "name"),
    ("controller-uid", "uid"),
    ("job-name", "name"),
)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, null removes, lists replace.

    Pure: the result shares nothing with either argument, so a later change to it can
    never reach into the stored object it was computed from.
    """
    return _merge(copy.deepcopy(target), patch)


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def omit_empty_metadata(obj: Object) -> None:
    """Drop empty metadata maps and lists, in place, as the server's encoding does.

    ObjectMeta's collections are ``omitempty``: a merge patch that removes the last
    label leaves no ``labels`` key at all, and a caller testing ``"labels" in meta``
    must see the same on both backends.
    """
    meta = obj.get("metadata") or {}
    for field in ("labels", "annotations", "finalizers", "ownerReferences"):
        if field in meta and not meta[field]:
            del meta[field]


def same_resource(a: Resource, b: Resource) -> bool:
    return (a.group, a.plural) == (b.group, b.plural)


def has_generation(resource: Resource) -> bool:
    return (resource.group, resource.plural) not in _WITHOUT_GENERATION


def generation_content(resource: Resource, obj: Object) -> Object:
    """What a generation counts: everything outside metadata, and outside status
    where the status subresource owns it."""
    skip = {"metadata", "apiVersion", "kind"} | ({"status"} if resource.has_status else set())
    return {k: v for k, v in obj.items() if k not in skip}


def conflict(resource: Resource, name: str) -> Conflict:
    return Conflict(
        f'operation cannot be fulfilled on {resource.plural} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        status=409,
        reason="Conflict",
    )


def carry_metadata(resource: Resource, current: Object, new: Object) -> None:
    """Hold an update's metadata to what a client may change, in place.

    A stale ``resourceVersion`` is a conflict (the optimistic lock every
    read-decide-write of the operator relies on); identity cannot change; the fields
    the server owns keep their stored values; and once deletion has started no new
    finalizer may be added, or an object could be held from deletion forever.
    """
    old_meta, meta = current["metadata"], new.setdefault("metadata", {})
    sent = meta.get("resourceVersion")
    if sent and sent != old_meta["resourceVersion"]:
        raise conflict(resource, old_meta["name"])
    for field in _IMMUTABLE:
        if meta.get(field, old_meta.get(field)) != old_meta.get(field):
            raise Invalid(f"metadata.{field} is immutable", status=422, reason="Invalid")
    for field in (*_IMMUTABLE, *SERVER_OWNED, "resourceVersion"):
        meta.pop(field, None)
        if field in old_meta:
            meta[field] = old_meta[field]
    added = set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ())
    if old_meta.get("deletionTimestamp") and added:
        raise Invalid(
            "metadata.finalizers: no new finalizers can be added if the object is being deleted",
            status=422,
            reason="Invalid",
        )


def check_name(resource: Resource, name: str) -> None:
    # A Job's name is also a label value in its Pod template, so it is held to 63.
    limit = 63 if same_resource(resource, JOBS) else 253
    if not name or len(name) > limit or not _DNS_SUBDOMAIN.fullmatch(name):
        raise Invalid(
            f'metadata.name: invalid value "{name}": a {resource.kind} name must be a '
            f"lower-case RFC 1123 subdomain of at most {limit} characters",
            status=422,
            reason="Invalid",
        )


def check_immutable_configmap(resource: Resource, current: Object, new: Object) -> None:
    # Plan projections are immutable ConfigMaps: a stored projection can be replaced
    # only by deleting it, which is what lets a reader trust a projection it finds.
    if resource.plural != "configmaps" or resource.group or not current.get("immutable"):
        return
    for field in ("data", "binaryData", "immutable"):
        if new.get(field) != current.get(field):
            raise Invalid(
                f"{field}: field is immutable when `immutable` is set",
                status=422,
                reason="Invalid",
            )


def admit_job(job: Object) -> None:
    """What kube-apiserver 1.37 writes into a new batch/v1 Job before storing it,
    beyond the defaults a builder that writes every default already wrote.

    The selector and template labels bind the Job's Pods to this Job's UID; the
    matcher (``jobclaim.match``) strips exactly these, so a double that skipped them
    would let a test pass a Job the real server hands back differently.
    """
    meta, spec = job["metadata"], job.setdefault("spec", {})
    # Defaulted, not generated: batch/v1 SetDefaults_Job writes it when absent, and a
    # Job read back from a real server carries it even if its builder never wrote it.
    spec.setdefault("manualSelector", False)
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    if not spec.get("manualSelector"):
        for label, field in _JOB_LABELS:
            labels.setdefault(label, meta[field])
        selector = spec.get("selector") or {}
        selector.setdefault("matchLabels", {}).setdefault(
            "batch.kubernetes.io/controller-uid", meta["uid"]
        )
        spec["selector"] = selector
    default_service_account(job)
    job["status"] = {}


def default_service_account(job: Object) -> None:
    # serviceAccount is the deprecated alias of serviceAccountName; defaulting keeps
    # them equal, serviceAccountName winning (k8s.io/kubernetes pkg/apis/core/v1).
    pod = job.get("spec", {}).get("template", {}).get("spec")
    if not isinstance(pod, dict):
        return
    name = pod.get("serviceAccountName") or pod.get("serviceAccount") or ""
    for field in ("serviceAccountName", "serviceAccount"):
        if name:
            pod[field] = name
        else:
            pod.pop(field, None)
