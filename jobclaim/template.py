"""The Pod template digest, and the identity the API server writes onto a Job.

The digest is what the admission snapshot pins: it is computed from the template the
builder produced before any Job exists, and every later reader holds the live Job's
template to it. It must therefore ignore exactly what the API server adds by itself
(the generated identity labels, the deprecated service-account alias) and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobclaim._canonical import digest_of
from jobclaim.envelope import (
    ANN_SNAPSHOT_DIGEST,
    GENERATED_IDENTITY_LABELS,
    GENERATED_NAME_LABELS,
    GENERATED_UID_LABELS,
)
from jobclaim.semantic import pod_spec_with_canonical_quantities

JsonObject = Mapping[str, Any]
JobObject = Mapping[str, Any]


def _mapping(value: Any) -> JsonObject:
    return value if isinstance(value, dict) else {}


def without_service_account_alias(pod_spec: JsonObject) -> dict[str, Any]:
    """Drop ``serviceAccount`` when it only repeats the effective service account.

    Newer API servers fill the deprecated alias from ``serviceAccountName``, older ones
    do not; a digest that kept it would differ by API server version alone. An alias
    naming a *different* account is kept, so it still changes the digest.
    """
    spec = dict(pod_spec)
    effective = spec.get("serviceAccountName") or "default"
    if "serviceAccount" in spec and spec["serviceAccount"] == effective:
        del spec["serviceAccount"]
    return spec


def without_generated_labels(labels: Any) -> dict[str, Any]:
    """Pod template ``labels`` without the identity labels the API server writes.

    The one rule for which labels are the API server's: the digest, the normalized Job
    a rebuild is compared with, and envelope mode's comparison of the Pod template
    labels with the Job's all strip exactly these.
    """
    # A copy then a few deletions: the copy is one C call, and there are fewer generated
    # keys than labels, so this beats filtering every label in Python.
    stripped = dict(_mapping(labels))
    for key in GENERATED_IDENTITY_LABELS:
        stripped.pop(key, None)
    return stripped


def template_digest(template: JsonObject) -> str:
    """The digest the admission snapshot records for a Pod template.

    It strips the generated identity labels and the service-account alias itself, so a
    Job's template as read and as ``without_generated_identity`` leaves it have one
    digest: envelope mode digests the template without normalizing the whole Job.
    """
    metadata = dict(_mapping(template.get("metadata")))
    annotations = dict(_mapping(metadata.get("annotations")))
    annotations.pop(ANN_SNAPSHOT_DIGEST, None)
    labels = without_generated_labels(metadata.get("labels"))
    # The digest annotation refers to the snapshot that holds this digest, so it
    # cannot be part of what is digested; empty maps and a null creation time are how
    # a round trip through the API server spells "nothing".
    metadata.pop("annotations", None)
    metadata.pop("labels", None)
    if metadata.get("creationTimestamp", "") is None:
        del metadata["creationTimestamp"]
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels
    normalized = dict(template)
    if metadata:
        normalized["metadata"] = metadata
    else:
        normalized.pop("metadata", None)
    spec = without_service_account_alias(_mapping(template.get("spec")))
    normalized["spec"] = pod_spec_with_canonical_quantities(spec)
    return digest_of(normalized)


def generated_identity_problem(job: JobObject) -> str | None:
    """Why the API-generated selector or labels do not point at this Job, or None.

    The selector decides which Pods the Job controller counts as this Job's; a forged
    selector could make another Job's Pod, or a person's, stand in for this one.
    """
    metadata = _mapping(job.get("metadata"))
    uid, name = metadata.get("uid"), metadata.get("name")
    spec = _mapping(job.get("spec"))
    if "selector" in spec:
        selector = spec["selector"]
        if not isinstance(selector, Mapping) or set(selector) != {"matchLabels"}:
            return "the Job's selector is not the one the API server generates"
        labels = selector["matchLabels"]
        if (
            not isinstance(labels, Mapping)
            or not labels
            or any(k not in GENERATED_UID_LABELS or v != uid for k, v in labels.items())
        ):
            return "the Job's selector does not select the Job's own Pods"
    template_labels = _mapping(
        _mapping(_mapping(spec.get("template")).get("metadata")).get("labels")
    )
    for key in GENERATED_UID_LABELS:
        if key in template_labels and template_labels[key] != uid:
            return f"the Job's Pod template label {key} does not name the Job's own UID"
    for key in GENERATED_NAME_LABELS:
        if key in template_labels and template_labels[key] != name:
            return f"the Job's Pod template label {key} does not name the Job itself"
    return None


def without_generated_identity(job: JobObject) -> dict[str, Any]:
    """A copy of ``job`` without the selector and template labels the API server writes.

    Only call this after ``generated_identity_problem`` returned None: it removes what
    it was shown to be the API server's own, so a Job and its rebuild compare alike.
    """
    spec = dict(_mapping(job.get("spec")))
    spec.pop("selector", None)
    template = dict(_mapping(spec.get("template")))
    metadata = dict(_mapping(template.get("metadata")))
    labels = without_generated_labels(metadata.get("labels"))
    if labels:
        metadata["labels"] = labels
    else:
        metadata.pop("labels", None)
    if metadata.get("creationTimestamp", "") is None:
        del metadata["creationTimestamp"]
    template["metadata"] = metadata
    template["spec"] = without_service_account_alias(_mapping(template.get("spec")))
    spec["template"] = template
    normalized = dict(job)
    normalized["spec"] = spec
    return normalized
