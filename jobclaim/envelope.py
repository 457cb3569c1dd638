"""The label and annotation vocabulary an operation Job carries, and its rules.

The builder writes these keys and the matcher checks them from the same constants,
so what is built and what is accepted cannot drift apart.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

PREFIX: Final = "operator.ptah.run/"

LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_OPERATION: Final = PREFIX + "operation"
LABEL_OPERATION_ID: Final = PREFIX + "operation-id"
MANAGED_BY: Final = "ptah-operator"
OWNER_LABEL: Final = {"schema": PREFIX + "schema", "migration": PREFIX + "migration"}
COMPONENT: Final = {"schema": "schema-operation", "migration": "migration-operation"}

ANN_OPERATION_ID: Final = PREFIX + "operation-id"
ANN_INPUT_FINGERPRINT: Final = PREFIX + "input-fingerprint"
ANN_PTAH_VERSION: Final = PREFIX + "ptah-version"
ANN_EPOCH: Final = PREFIX + "execution-binding-id"
ANN_CONTROLLER_IMAGE: Final = PREFIX + "controller-image"
ANN_CONTROLLER_REVISION: Final = PREFIX + "controller-revision"
ANN_STATE_VERSION: Final = PREFIX + "controller-state-version"
ANN_SNAPSHOT_DIGEST: Final = PREFIX + "admission-snapshot-digest"
ANN_PLAN_FINGERPRINT: Final = PREFIX + "plan-fingerprint"
ANN_PLAN_CONTENT_DIGEST: Final = PREFIX + "plan-content-digest"

# The manager record: who dispatched. It binds nothing (the template digest pins it),
# so a later manager of the same binding may adopt a Job an earlier one created.
MANAGER_RECORD_KEYS: Final = (
    ANN_CONTROLLER_IMAGE,
    ANN_CONTROLLER_REVISION,
    ANN_STATE_VERSION,
    ANN_PTAH_VERSION,
)
ENVELOPE_KEYS: Final = (
    ANN_OPERATION_ID,
    ANN_INPUT_FINGERPRINT,
    ANN_PTAH_VERSION,
    ANN_EPOCH,
    ANN_CONTROLLER_IMAGE,
    ANN_CONTROLLER_REVISION,
    ANN_STATE_VERSION,
    ANN_SNAPSHOT_DIGEST,
)
PLAN_KEYS: Final = (ANN_PLAN_FINGERPRINT, ANN_PLAN_CONTENT_DIGEST)

# Marks every mutating Job carries: an autoscaler that evicted an Apply Pod would turn
# a running migration into an outcome nobody can establish.
MUTATING_MARKS: Final[Mapping[str, str]] = {
    "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
}

# Labels the API server writes onto a Job's Pod template and selector by itself: the
# ones naming the Job's UID and the ones naming the Job. A set, because every Pod
# template label is looked up in it on each match.
GENERATED_UID_LABELS: Final = ("batch.kubernetes.io/controller-uid", "controller-uid")
GENERATED_NAME_LABELS: Final = ("batch.kubernetes.io/job-name", "job-name")
GENERATED_IDENTITY_LABELS: Final = frozenset(GENERATED_UID_LABELS + GENERATED_NAME_LABELS)

MAX_DECLARED_KEYS: Final = 16
_RESERVED_DOMAINS: Final = ("ptah.run/", "kubernetes.io/", "k8s.io/")
_RESERVED_SUBDOMAINS: Final = tuple("." + d for d in _RESERVED_DOMAINS)


# A claim's operation is labelled again on every pass that holds it: by the builder,
# by match in envelope mode and by the harvester. The value is a pure function of an
# immutable string, so a bounded memo cannot go stale; it saves the hash, not a check.
@functools.lru_cache(maxsize=1024)
def operation_id_label_value(operation_id: str) -> str:
    """A label-safe stand-in for an operation ID: 16 hex chars of its SHA-256."""
    return hashlib.sha256(operation_id.encode("utf-8")).hexdigest()[:16]


# Like the operation-ID label, the labels a claim fixes are asked for again on every
# pass that holds the claim (to build its Job, or to hold a Job to them), and they are
# a pure function of four immutable strings; the read-only view keeps a caller from
# changing what the next caller is handed.
@functools.lru_cache(maxsize=1024)
def claimed_labels(
    family: str, owner_name: str, operation: str, operation_id: str
) -> Mapping[str, str]:
    """The labels a claim fixes on its Job, besides any a spec declares.

    The builder writes them and ``match`` holds a Job to them: one statement for both.
    """
    return MappingProxyType(
        {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_COMPONENT: COMPONENT.get(family, ""),
            OWNER_LABEL.get(family, ""): owner_name,
            LABEL_OPERATION: operation.lower(),
            LABEL_OPERATION_ID: operation_id_label_value(operation_id),
        }
    )


def is_reserved_key(key: str) -> bool:
    """A key a user may not declare: the platform's, Kubernetes' and the operator's.

    A declared ``job-name`` or ``*.kubernetes.io/*`` key could impersonate what the API
    server or another controller writes, and a declared ``*.ptah.run/*`` key could
    impersonate the envelope itself.
    """
    if key in ("controller-uid", "job-name") or key.startswith(_RESERVED_DOMAINS):
        return True
    return "." in key and any(d in key for d in _RESERVED_SUBDOMAINS)


def claimed_metadata_problem(actual: Mapping[str, str], claimed: Mapping[str, str]) -> str | None:
    """Why ``actual`` is not ``claimed`` plus declared keys, or None when it is.

    Every claimed key must carry the claimed value; every other key must be one a user
    could have declared, and there can be no more of them than a spec may declare.
    """
    # Item-set inclusion is the common case, decided without a Python-level loop; only
    # when it fails is each key looked at (a claimed None then equals an absent key).
    if claimed.items() <= actual.items():
        # Every claimed key is there, so the keys beyond them are exactly the declared
        # ones. (Without the inclusion an absent None-valued key could make room for an
        # undeclared one.) Accepting them needs no set and no sort: only the sentence
        # naming the first refused key, below, needs those.
        declared = len(actual) - len(claimed)
        if declared <= MAX_DECLARED_KEYS:
            for key in actual:
                if key not in claimed and is_reserved_key(key):
                    break
            else:
                return None
    elif any(actual.get(key) != value for key, value in claimed.items()):
        # Name the first differing key in sorted order, so the sentence is stable.
        key = min(key for key, value in claimed.items() if actual.get(key) != value)
        return f"{key} is not the claim's value"
    others = actual.keys() - claimed.keys()
    for key in sorted(others):
        if is_reserved_key(key):
            return f"{key} is a reserved key the claim does not fix"
    if len(others) > MAX_DECLARED_KEYS:
        return (
            f"{len(others)} declared keys exceed the {MAX_DECLARED_KEYS} "
            "spec.execution.podMetadata allows"
        )
    return None


def declared_metadata_problem(declared: Mapping[str, str]) -> str | None:
    """Why a spec's declared Pod metadata cannot be carried, or None."""
    for key in sorted(declared):
        if is_reserved_key(key):
            return f"spec.execution.podMetadata declares the reserved key {key}"
    if len(declared) > MAX_DECLARED_KEYS:
        return (
            f"spec.execution.podMetadata declares {len(declared)} keys, "
            f"more than the {MAX_DECLARED_KEYS} allowed"
        )
    return None
