"""What a manager serves: its namespaces, by name or by label, and its own Jobs only.

A platform team runs one manager per set of tenant namespaces (the chart's
``watch.namespaces`` and ``watch.namespaceSelector``). Such a manager must neither see
nor touch anything outside them, and its memory and API traffic must not grow with the
rest of the cluster. So:

- with a list of namespaces, every watch is opened in each listed namespace, never
  across the cluster (the chart's RBAC grants nothing outside them, so a cluster-wide
  watch would only be refused);
- a Job watch asks the server for the operator's own Jobs only (the
  ``app.kubernetes.io/managed-by`` label every dispatched Job carries): the thousands
  of Jobs other teams run are never sent, never decoded. A watch only queues keys and
  every decision reads uncached, so a Job hidden from the watch by a relabel hides
  nothing from the pass that reads it;
- with a namespace selector, the namespace a key is in is read uncached before its
  pass, and it is served only if its labels match. Fail closed: a namespace whose
  labels cannot be read is not served (the key is retried later, never run on a guess).

The decisions are pure (``watch_targets``, ``watch_labels``, ``scope_refusal``);
``namespace_refusal`` is the one read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from jobclaim import LABEL_MANAGED_BY, MANAGED_BY, selector_matches
from jobclaim.api import NamespaceSelector
from jobclaim.apiserver import JOBS, NAMESPACES, ApiClient, ApiError, Resource

__all__ = [
    "CLUSTER",
    "OutOfScope",
    "WatchScope",
    "namespace_refusal",
    "scope_refusal",
    "watch_labels",
    "watch_targets",
]

# The kinds the manager watches that others create too: only its own reach it. (Pods
# and ConfigMaps are never watched; their reads are uncached gets and lists in one
# namespace.)
_OWN_ONLY: Final = frozenset({JOBS.plural})


@dataclass(frozen=True, slots=True)
class OutOfScope:
    """Why a namespace is not served; ``retry`` when only a failed read said so (the
    key is tried again later), not when the namespace is known to be outside."""

    reason: str
    retry: bool = False


@dataclass(frozen=True, slots=True)
class WatchScope:
    """The namespaces a manager serves. Empty: the whole cluster."""

    namespaces: tuple[str, ...] = ()
    selector: NamespaceSelector | None = None

    @property
    def cluster_wide(self) -> bool:
        return not self.namespaces and self.selector is None

    def describe(self) -> str:
        parts = []
        if self.namespaces:
            parts.append("namespaces " + ", ".join(self.namespaces))
        if self.selector is not None:
            parts.append("namespaces labelled " + self.selector.model_dump_json(by_alias=True))
        return " and ".join(parts) or "every namespace"


CLUSTER: Final = WatchScope()


def watch_targets(scope: WatchScope) -> tuple[str | None, ...]:
    """Where each watch is opened: each listed namespace, else across the cluster
    (None). Pure. A selector alone watches the cluster and filters per key: the
    namespaces it matches are not known in advance and change with their labels."""
    return scope.namespaces or (None,)


def watch_labels(resource: Resource) -> dict[str, str] | None:
    """The label selector a watch on ``resource`` sends. Pure."""
    if resource.plural in _OWN_ONLY:
        return {LABEL_MANAGED_BY: MANAGED_BY}
    return None


def scope_refusal(
    scope: WatchScope, namespace: str, labels: Mapping[str, str] | None
) -> OutOfScope | None:
    """Why ``namespace`` is not served, or None when it is. Pure.

    ``labels`` are the namespace's, None when they could not be read; they matter
    only under a selector, and there None refuses (fail closed). Both a list and a
    selector given: a namespace must be in the list and match.
    """
    if scope.namespaces and namespace not in scope.namespaces:
        return OutOfScope(
            f"namespace {namespace} is not one this manager watches ({scope.describe()})"
        )
    if scope.selector is None:
        return None
    if labels is None:
        return OutOfScope(
            f"the labels of namespace {namespace} cannot be read; it is not served", retry=True
        )
    if not selector_matches(scope.selector, labels):
        return OutOfScope(f"namespace {namespace} does not match this manager's namespace selector")
    return None


def namespace_refusal(api: ApiClient, scope: WatchScope, namespace: str) -> OutOfScope | None:
    """``scope_refusal`` for ``namespace``, its labels read uncached when a selector
    needs them (a namespace relabelled a moment ago is what the pass sees)."""
    if scope.selector is None:
        return scope_refusal(scope, namespace, None)
    labels: dict[str, str] | None
    try:
        found = api.get(NAMESPACES, None, namespace)
        raw = (found.get("metadata") or {}).get("labels") or {}
        labels = {str(k): str(v) for k, v in raw.items()}
    except ApiError:  # NotFound among them: no labels read, no match assumed
        labels = None
    return scope_refusal(scope, namespace, labels)
