"""Fault points: the durable writes of an Apply claim a lab manager can stop dead after.

The spec's table "the process stopped, what does the next pass see" is proven on the
double and on the real API server by stopping the pass's own API client. On the lab
cluster the whole manager is killed instead (tests/cluster/test_faults_kill.py), and
it must be killed right after one named write *succeeded*, which only the manager
knows. So each write is named here once, from what it changed, and an environment
may carry a ``FaultPoints`` that is told about each one.

Production never carries one: ``Environment.faults`` is ``None`` unless the manager's
configuration is a lab one (``manager.config``), and nothing here can stop a pass.

The boundaries, in the order an Apply claim crosses them:

- ``claim``: the status patch that stores the Apply claim (``activeOperation``);
- ``mark``: the patch that writes ``dispatchStarted``;
- ``create``: the one Job create, answered by the API server;
- ``record``: the patch that records the Job's UID;
- ``outcome``: the patch that clears the claim (its record and release staged).
"""

from __future__ import annotations

import enum
from typing import Protocol

from jobclaim.api import ActiveOperationStatus, MigrationOperationStatus, PtahMigration, PtahSchema

Operation = ActiveOperationStatus | MigrationOperationStatus
Subject = PtahSchema | PtahMigration

# The only claim type the fault points watch: read-only claims cross the same writes,
# and stopping one proves nothing about SQL running twice.
APPLY = "Apply"


class Boundary(enum.Enum):
    CLAIM = "claim"
    MARK = "mark"
    CREATE = "create"
    RECORD = "record"
    OUTCOME = "outcome"


def crossed(before: Operation | None, after: Operation | None) -> list[tuple[Boundary, Operation]]:
    """The Apply boundaries one status write crossed, each with the claim it concerns.

    Pure: decided from the claim as it stood before the write and as it was stored.
    """
    found: list[tuple[Boundary, Operation]] = []
    same = before is not None and after is not None and before.id == after.id
    if before is not None and before.type == APPLY and not same:
        found.append((Boundary.OUTCOME, before))
    if after is not None and after.type == APPLY:
        if not same:
            found.append((Boundary.CLAIM, after))
        if after.dispatch_started and not (same and before and before.dispatch_started):
            found.append((Boundary.MARK, after))
        if after.job_uid and not (same and before and before.job_uid):
            found.append((Boundary.RECORD, after))
    return found


class FaultPoints(Protocol):
    """Told about each Apply boundary right after its write succeeded."""

    def after(self, boundary: Boundary, subject: Subject, operation: Operation) -> None: ...
