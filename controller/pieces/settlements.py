"""A person's settlement of a schema's proof: which one settles, and spending it.

"Only deletion and a person's settlement end a proof that no read can finish." A
schema owing proof (``status.pendingObservation``) holds its database until a reading
proves what it holds. When no reading can (the database was restored elsewhere, the
target is gone), a person creates a PtahSchemaProofSettlement naming the pending
Apply attempt. Admission stamps who, when and in which request; only a settlement
whose stamp can be verified (``jobclaim.stamps.stamp_problem``) settles anything, and
it settles in that stamped name. ``schema_records.prove`` takes it only once no Apply
Pod can still run, and writes the settled record, the cleared proof and the staged
Lease release in one status patch.

The choice is a pure function over what was listed; the reads and the one status
patch that spends a settlement are the shell.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import ValidationError

from jobclaim import STAMPED, parse_stamp_time, stamp_problem
from jobclaim.api import PendingObservationStatus, PtahSchema, PtahSchemaProofSettlement
from jobclaim.apiserver import PTAHSCHEMAPROOFSETTLEMENTS, ApiClient, Conflict

CONSUMED: Final = "Consumed"
PROOF_SETTLED: Final = "ProofSettled"
_LATEST: Final = datetime.max.replace(tzinfo=UTC)

Skipped = tuple[str, str]


def _spent(settlement: PtahSchemaProofSettlement) -> bool:
    conditions = settlement.status.conditions if settlement.status else []
    return any(c.type in (CONSUMED, "Stale") and c.status == "True" for c in conditions)


def choose_settlement(
    objects: Iterable[Mapping[str, Any]], schema: PtahSchema, pending: PendingObservationStatus
) -> tuple[PtahSchemaProofSettlement | None, list[Skipped]]:
    """The oldest unspent, stamped settlement naming this schema's pending attempt, and
    the ones naming it that were skipped for their stamp, with why."""
    usable: list[PtahSchemaProofSettlement] = []
    skipped: list[Skipped] = []
    kind = STAMPED[PTAHSCHEMAPROOFSETTLEMENTS.kind]
    for obj in objects:
        try:
            settlement = PtahSchemaProofSettlement.model_validate(obj)
        except ValidationError:
            continue  # not a settlement this operator can read: it settles nothing
        spec = settlement.spec
        if (
            spec.schema_ref.uid != schema.metadata.uid
            or spec.schema_ref.name != schema.metadata.name
            or spec.apply_operation_id != pending.apply_operation_id
            or settlement.metadata.deletion_timestamp
            or _spent(settlement)
        ):
            continue
        problem = stamp_problem(kind, spec.to_wire(), settlement.metadata.creation_timestamp)
        if problem is not None:
            skipped.append((settlement.metadata.name or "", problem))
            continue
        usable.append(settlement)
    usable.sort(
        key=lambda s: (
            parse_stamp_time(s.metadata.creation_timestamp) or _LATEST,
            s.metadata.name or "",
        )
    )
    return (usable[0] if usable else None), skipped


def find_settlement(
    api: ApiClient, schema: PtahSchema, pending: PendingObservationStatus
) -> tuple[PtahSchemaProofSettlement | None, list[Skipped]]:
    """``choose_settlement`` over the schema's namespace, listed uncached."""
    namespace = schema.metadata.namespace or ""
    return choose_settlement(api.list(PTAHSCHEMAPROOFSETTLEMENTS, namespace), schema, pending)


def consume_settlement(api: ApiClient, settlement: PtahSchemaProofSettlement, now: str) -> None:
    """Mark the settlement spent. After the status patch that settled the proof: a stop
    between the two leaves an unspent settlement naming an attempt no longer owed,
    which settles nothing, so the mark is a record for people, not a guard."""
    status = settlement.status.to_wire() if settlement.status else {}
    conditions = [c for c in status.get("conditions", []) if c.get("type") != CONSUMED]
    conditions.append(
        {
            "type": CONSUMED,
            "status": "True",
            "reason": PROOF_SETTLED,
            "message": "the settlement ended the proof it names",
            "lastTransitionTime": now,
        }
    )
    with contextlib.suppress(Conflict):
        api.patch_status(
            PTAHSCHEMAPROOFSETTLEMENTS,
            settlement.metadata.namespace or "",
            settlement.metadata.name or "",
            {**status, "conditions": conditions},
            resource_version=settlement.metadata.resource_version or "",
        )
