"""Requests, the call log and injectable faults of the in-memory API double.

A crash-safety argument is a claim about one particular call: "if the process stops
right after the status patch that sets dispatchStarted, the next pass never creates a
second Job". Tests make that claim checkable by naming the call with a predicate over
the ``Request`` (verb, resource, namespace, name and what was sent) and choosing what
happens to it:

- ``before``: the call raises the given error and nothing is stored (a refusal, or a
  timeout that never reached etcd);
- ``after``: the write is stored, then the call raises (a response lost on the way);
- ``stop``: the write is stored, then this and every later call raise ``Unavailable``
  until ``restart()`` (the process crashed right after the write);
- ``read``: a get, list, watch or log read raises.

The call log records each call in order with its outcome, for tests that check that
one durable write happened before the next step started.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jobclaim.apiserver import ApiError, Resource, Unavailable

__all__ = ["Call", "Fault", "FaultKind", "Predicate", "Request", "Verb", "matching"]

Verb = Literal[
    "get",
    "list",
    "watch",
    "create",
    "replace",
    "patch_metadata",
    "patch_spec",
    "patch_fields",
    "patch_status",
    "delete",
]
FaultKind = Literal["before", "after", "stop", "read"]
_WHAT: dict[FaultKind, str] = {
    "before": "the write failed before anything was stored",
    "after": "the write was stored but its answer was lost",
    "stop": "the process stopped right after the write",
    "read": "the read failed",
}


@dataclass(frozen=True, slots=True)
class Request:
    """One call as a fault predicate sees it.

    ``body`` is what the caller sent: the object for create and replace, the metadata,
    spec or status mapping for the three patches, ``{"uid", "propagationPolicy"}`` for
    a delete and ``{"container"}`` for a log read; empty for other reads.
    """

    verb: Verb
    resource: Resource
    namespace: str | None
    name: str | None
    body: Mapping[str, Any] = field(default_factory=dict)


Predicate = Callable[[Request], bool]


def matching(
    verb: Verb | None = None,
    resource: Resource | None = None,
    name: str | None = None,
    *,
    namespace: str | None = None,
    body: Callable[[Mapping[str, Any]], bool] | None = None,
) -> Predicate:
    """A predicate selecting calls by verb, resource, name, namespace and body.

    Resources compare by group and plural, so a test's own ``Resource`` value for a
    kind selects the same calls as the product's constant.
    """

    def predicate(request: Request) -> bool:
        if verb is not None and request.verb != verb:
            return False
        if resource is not None and (request.resource.group, request.resource.plural) != (
            resource.group,
            resource.plural,
        ):
            return False
        if name is not None and request.name != name:
            return False
        if namespace is not None and request.namespace != namespace:
            return False
        return body is None or body(request.body)

    return predicate


@dataclass(slots=True)
class Fault:
    """One injected fault; ``fired`` counts the calls it hit, ``times`` (None: every
    matching call) how many it may hit."""

    kind: FaultKind
    when: Predicate
    error: ApiError | None = None
    times: int | None = 1
    fired: int = 0

    @property
    def armed(self) -> bool:
        return self.times is None or self.fired < self.times

    def raised(self) -> ApiError:
        """A fresh exception per hit, so one traceback never accumulates another's."""
        if self.kind == "stop" or self.error is None:
            return Unavailable(f"injected fault: {_WHAT[self.kind]}")
        return copy.copy(self.error)


@dataclass(frozen=True, slots=True)
class Call:
    """One entry of the call log. ``wrote`` is true when the write was applied (even if
    its caller saw an error afterwards, as with ``after`` and ``stop`` faults)."""

    verb: Verb
    resource: Resource
    namespace: str | None
    name: str | None
    ok: bool
    wrote: bool
    error: str = ""

    @classmethod
    def of(
        cls, request: Request, *, ok: bool, wrote: bool, error: BaseException | None = None
    ) -> Call:
        return cls(
            request.verb,
            request.resource,
            request.namespace,
            request.name,
            ok,
            wrote,
            type(error).__name__ if error is not None else "",
        )

    def __str__(self) -> str:
        where = "/".join(p for p in (self.namespace, self.name) if p)
        outcome = "ok" if self.ok else f"failed ({self.error})"
        return f"{self.verb} {self.resource.plural} {where} {outcome}".replace("  ", " ")
