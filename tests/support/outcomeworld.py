"""What the outcome tests share: the two families side by side, and how to read a
resource's account of its run in one word."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.runtime.reconciler import Key
from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAS,
    Resource,
)
from tests.support.dispatchworld import Rig, add_migration, add_schema
from tests.support.podworld import APPLIED, MIGRATED


@dataclass(frozen=True)
class FamilyCase:
    name: str
    add: Callable[[Rig], Key]
    resource: Resource
    apply_op: str  # the runner operation of its Apply
    applied: dict[str, Any]  # the frame fields of a successful Apply
    record: str  # the status field its unknown outcome leaves
    approvals: Resource

    def __str__(self) -> str:
        return self.name


SCHEMA = FamilyCase(
    "schema", add_schema, PTAHSCHEMAS, "apply", APPLIED, "pendingObservation", PTAHSCHEMAAPPROVALS
)
MIGRATION = FamilyCase(
    "migration",
    add_migration,
    PTAHMIGRATIONS,
    "migration-apply",
    MIGRATED,
    "unresolvedRun",
    PTAHMIGRATIONAPPROVALS,
)
FAMILIES = (SCHEMA, MIGRATION)


def status_of(rig: Rig, key: Key) -> dict[str, Any]:
    return dict(rig.resource(key).get("status") or {})


def account(rig: Rig, key: Key) -> str:
    """``live`` while the Apply's claim stands, else ``succeeded`` or ``unknown``: what
    the record (or the last run, for an accounted migration) says."""
    status = status_of(rig, key)
    if "pendingObservation" in status:
        # The record stands beside the proof's own read-only claims.
        outcome = status["pendingObservation"]["outcome"]
        return "succeeded" if outcome == "ApplySucceeded" else "unknown"
    claim = status.get("activeOperation") or {}
    if claim.get("type") == "Apply":
        return "live"
    # A reading claimed after the run (a migration's VerifyingHistory) stands beside
    # the record, as a schema's proof does.
    if "unresolvedRun" in status:
        return "unknown"
    last = status.get("lastRun") or {}
    return "succeeded" if last.get("outcome") == "Applied" else "none"


def lease_holder_of(rig: Rig) -> str:
    (lease,) = rig.leases()
    return str(lease["spec"].get("holderIdentity") or "")


def rotate_binding(rig: Rig, epoch: str = "v1-" + "f" * 32, version: str = "v9.9.9") -> None:
    """A new Ptah version in the manager's configuration; the next epoch is ``epoch``."""
    config = rig.env.config
    rig.env.config = dataclasses.replace(
        config, binding=dataclasses.replace(config.binding, ptah_version=version)
    )
    rig.env.epochs = lambda: epoch


# A migration Apply's result record that ended Unknown: the run that outcomes and the
# manager's status metrics record as unresolved.
UNKNOWN_RUN = {
    "childExitCode": 1,
    "mutationStarted": True,
    "uncertain": True,
    "error": {"code": "lost", "message": "the connection dropped mid-migration"},
    "migrationRun": {"outcome": "Unknown", "appliedVersions": []},
}
