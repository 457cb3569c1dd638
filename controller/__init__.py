"""The reconciler: one pass over one PtahSchema or PtahMigration, and the loop that runs
passes. Its rooms, innermost first (``tests/test_layers.py`` holds the arrows):

- ``mutationlifecycle/``: the pure core (dispatch order, boundary, release rule);
- ``pieces/``: what a pass is built from and that knows nothing of a pass;
- ``context/``: one pass's environment (``PassContext``, the ``Family`` protocol);
- ``stages/``: the stages both families share;
- ``families/schema/``, ``families/migration/``: each family's dispatch and records;
- ``runtime/``: one pass in order, the manager loop, leader election.

This module is the surface the composition root (``manager``) and the lab use: the
names below and nothing else, so the rooms can be rearranged without a change there.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from controller.context.passcontext import Environment, Subject
    from controller.context.passlog import current_fields
    from controller.mutationlifecycle import Driver, Step, Stop
    from controller.pieces.events import ApiEventSink, EventSink
    from controller.pieces.faultpoints import Boundary, Operation
    from controller.pieces.managerconfig import (
        CONTROLLER_STATE_VERSION,
        BindingInputs,
        ManagerConfig,
    )
    from controller.pieces.operationidentity import (
        input_fingerprint,
        migration_operation,
        schema_operation,
    )
    from controller.pieces.planpolicy import policy_digest
    from controller.pieces.podintent import AdmissionSettings, resolve_snapshot
    from controller.pieces.targetlock import TargetLock
    from controller.runtime.leaderelection import LeaderElector, timing_problem
    from controller.runtime.lifecyclepass import FAMILIES
    from controller.runtime.reconciler import Key, Reconciler

__all__ = [
    "CONTROLLER_STATE_VERSION",
    "FAMILIES",
    "AdmissionSettings",
    "ApiEventSink",
    "BindingInputs",
    "Boundary",
    "Driver",
    "Environment",
    "EventSink",
    "Key",
    "LeaderElector",
    "ManagerConfig",
    "Operation",
    "Reconciler",
    "Step",
    "Stop",
    "Subject",
    "TargetLock",
    "current_fields",
    "input_fingerprint",
    "migration_operation",
    "policy_digest",
    "resolve_snapshot",
    "schema_operation",
    "timing_problem",
]

# Each name's home, imported on first use rather than with the package, so importing
# the pure core (``controller.mutationlifecycle``) or running
# ``python -m controller.pieces.vocabulary`` does not load the whole reconciler first.
# tests/test_layers.py holds this table to the imports above and to ``__all__``.
_HOMES: Final[dict[str, str]] = {
    "Environment": "controller.context.passcontext",
    "Subject": "controller.context.passcontext",
    "current_fields": "controller.context.passlog",
    "Driver": "controller.mutationlifecycle",
    "Step": "controller.mutationlifecycle",
    "Stop": "controller.mutationlifecycle",
    "ApiEventSink": "controller.pieces.events",
    "EventSink": "controller.pieces.events",
    "Boundary": "controller.pieces.faultpoints",
    "Operation": "controller.pieces.faultpoints",
    "BindingInputs": "controller.pieces.managerconfig",
    "CONTROLLER_STATE_VERSION": "controller.pieces.managerconfig",
    "ManagerConfig": "controller.pieces.managerconfig",
    "input_fingerprint": "controller.pieces.operationidentity",
    "migration_operation": "controller.pieces.operationidentity",
    "schema_operation": "controller.pieces.operationidentity",
    "policy_digest": "controller.pieces.planpolicy",
    "AdmissionSettings": "controller.pieces.podintent",
    "resolve_snapshot": "controller.pieces.podintent",
    "TargetLock": "controller.pieces.targetlock",
    "LeaderElector": "controller.runtime.leaderelection",
    "timing_problem": "controller.runtime.leaderelection",
    "FAMILIES": "controller.runtime.lifecyclepass",
    "Key": "controller.runtime.reconciler",
    "Reconciler": "controller.runtime.reconciler",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'controller' has no attribute {name!r}")
    value: object = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
