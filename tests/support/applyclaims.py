"""A migration Apply's claim at each stage the fault points tell apart (claimed, marked,
recorded, another claim, a read): what the controller's fault-point table and the lab's
fault hooks are called with."""

from __future__ import annotations

from typing import Any

from jobclaim.api import MigrationOperationStatus

EPOCH = "v1-" + "b" * 32


def apply_claim(**fields: Any) -> MigrationOperationStatus:
    base: dict[str, Any] = {
        "type": "Apply",
        "id": "sha256:" + "1" * 64,
        "input_fingerprint": "sha256:" + "2" * 64,
        "job_name": "m-apply",
        "execution_binding_id": EPOCH,
    }
    return MigrationOperationStatus(**(base | fields))


CLAIM = apply_claim()
MARKED = apply_claim(dispatch_started=True)
RECORDED = apply_claim(dispatch_started=True, job_uid="u-1")
OTHER = apply_claim(id="sha256:" + "3" * 64)
READ = apply_claim(type="Plan")
