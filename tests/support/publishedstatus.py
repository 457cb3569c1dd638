"""Every status the operator can publish: each decision the phase machine can reach,
for both families, written onto the family's example as the operator writes it.

``controller.pieces.phasemachine.decide`` is run over every combination of its facts
(the schema family without the facts only a PtahMigration has), and each distinct
decision is published through ``controller.stages.conditions.conditions_for``. The
GitOps readers of those statuses (Argo CD's health script, kstatus) are each held to
what the conditions mean over this one set, so a new phase or condition reaches both.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from controller.context.passcontext import Family, Status
from controller.families.migration.dispatch import MIGRATION
from controller.families.schema.dispatch import SCHEMA
from controller.pieces.phasemachine import Decision, Event, Facts, decide
from controller.stages.conditions import conditions_for
from jobclaim.api import PtahMigrationStatus, PtahSchemaStatus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = "2026-12-05T00:00:00Z"
# The reading failure a RETRY_NOT_DUE decision is published with.
FAILURE = {
    "operation": "Observe",
    "message": "the database refused the connection",
    "failures": 3,
    "failedAt": NOW,
    "retryNotBefore": NOW,
}
# Facts only a PtahMigration has (Facts says so): a schema's are always false.
MIGRATION_ONLY = frozenset({"run_unresolved", "refuses"})


def reachable_decisions(family: str) -> list[Decision]:
    """Every distinct decision ``decide`` makes over every combination of its facts."""
    flags = [
        f.name
        for f in dataclasses.fields(Facts)
        if f.name != "family" and (family == "migration" or f.name not in MIGRATION_ONLY)
    ]
    found: dict[tuple[Event, str], Decision] = {}
    for values in itertools.product((False, True), repeat=len(flags)):
        decision = decide(Facts(family, **dict(zip(flags, values, strict=True))))  # type: ignore[arg-type]
        found.setdefault((decision.event, decision.phase), decision)
    return list(found.values())


def published(family: Family, example: str, decision: Decision) -> dict[str, Any]:
    """The object as the operator leaves it after publishing ``decision``."""
    obj: dict[str, Any] = yaml.safe_load((EXAMPLES / example).read_text())
    obj["metadata"].update(generation=4, uid="00000000-0000-0000-0000-000000000004")
    obj["spec"]["suspend"] = decision.event is Event.SUSPENDED
    status_type = PtahSchemaStatus if family is SCHEMA else PtahMigrationStatus
    failure = FAILURE if decision.event is Event.RETRY_NOT_DUE else None
    status: Status = status_type.model_validate(
        {"observedGeneration": 4, "phase": decision.phase, "readingFailure": failure}
    )
    subject = family.parse(obj)
    conditions = conditions_for(family, subject, status, decision, now=NOW)
    obj["status"] = {
        **status.to_wire(),
        "conditions": [condition.to_wire() for condition in conditions],
    }
    return obj


def published_objects() -> Iterator[tuple[str, dict[str, Any]]]:
    """Each published object with its label ``<kind>-<phase>-<event>``, both families."""
    for family, example, kind in (
        (SCHEMA, "ptahschema.yaml", "PtahSchema"),
        (MIGRATION, "ptahmigration.yaml", "PtahMigration"),
    ):
        for decision in reachable_decisions(family.name):
            label = f"{kind}-{decision.phase}-{decision.event.name}"
            yield label, published(family, example, decision)
