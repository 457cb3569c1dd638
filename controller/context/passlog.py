"""The fields every log line of a pass carries: which resource, which claim, which phase.

The reconciler sets them around each pass (``pass_fields``); the manager's JSON
formatter adds them to every record written on that worker's thread meanwhile, so a
line logged deep inside a stage names its resource without the stage passing it on.
A context variable rather than an argument: the stages log through ``logging`` and
must not grow a parameter for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from controller.context.passcontext import Subject

_FIELDS: ContextVar[dict[str, Any] | None] = ContextVar("ptah_pass_fields", default=None)


def current_fields() -> dict[str, Any]:
    """The fields of the pass running on this thread (empty outside a pass)."""
    return dict(_FIELDS.get() or {})


def subject_fields(subject: Subject) -> dict[str, Any]:
    """What a resource says of its claim and phase. Pure."""
    status = subject.status
    operation = status.active_operation if status is not None else None
    return {
        "phase": (status.phase if status is not None else None) or "Pending",
        "operation": operation.type if operation is not None else None,
        "operationId": operation.id if operation is not None else None,
        "attempt": operation.attempt if operation is not None else None,
    }


# What a pass says of its resource before it has read it: every line of a pass carries
# the same keys, null until known (a log query filters on a key, not on its absence).
UNREAD: Final[dict[str, Any]] = {
    "phase": None,
    "operation": None,
    "operationId": None,
    "attempt": None,
}


@contextmanager
def pass_fields(kind: str, namespace: str, name: str) -> Iterator[dict[str, Any]]:
    """Set the pass's fields for its duration; the dict yielded may be updated."""
    fields: dict[str, Any] = {"kind": kind, "namespace": namespace, "resource": name, **UNREAD}
    token = _FIELDS.set(fields)
    try:
        yield fields
    finally:
        _FIELDS.reset(token)


def note(subject: Subject) -> None:
    """The pass read ``subject``: its claim and phase join the pass's fields."""
    fields = _FIELDS.get()
    if fields is not None:
        fields.update(subject_fields(subject))
