"""PtahResultRecord: what an operation Pod says it did, written by that Pod itself.

The manager's own token can write status, Leases and plans, so none of them can prove
that a reading happened or what a plan said. A result record can: the runner creates
it through the API server under its Pod's own bound ServiceAccount token, and
admission admits it only when that token names a live Pod of the Job the record
names, and that Job is its claim's. A record is never changed after its create; the
manager may only delete it (on retirement, or with its owner).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints

from jobclaim.api._base import Digest, Name, Uid, WireModel
from jobclaim.api.meta import ObjectMeta

# The result is the runner's compact JSON payload. A plan's text is at most 1 MiB and
# JSON escaping can grow it, so the record's own bound sits under the API server's
# 1.5 MiB object limit with room for metadata; a result that does not fit is recorded
# as the runner's "too large" refusal instead.
MAX_RESULT_BYTES: Final = 1_400_000

OperationId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
RunnerOperationName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z-]{0,31}$")]


class RecordedObject(WireModel):
    """An object the record speaks for, by name and UID."""

    name: Name
    """The object's name."""
    uid: Uid
    """The object's UID: a later object of the same name is another one."""


class PtahResultRecordSpec(WireModel):
    """The result of one operation attempt, as its own Pod reported it."""

    operation: RunnerOperationName
    """The runner operation the Pod ran (resolve, verify, observe, plan, apply,
    migration-history, migration-apply)."""
    operation_id: OperationId
    """The claim's operation ID: the attempt this result is the account of."""
    protocol_version: int = Field(ge=1, le=2**31 - 1)
    """The runner protocol version the result is written in."""
    job: RecordedObject
    """The operation Job the writing Pod belongs to."""
    pod: RecordedObject
    """The Pod that wrote the record: the one its bound token names."""
    result_digest: Digest
    """The SHA-256 of ``result``'s bytes."""
    result: str = Field(min_length=2, max_length=MAX_RESULT_BYTES)
    """The runner's result payload, compact JSON (the same document the termination
    summary is a digest-bound summary of)."""


class PtahResultRecord(WireModel):
    api_version: Literal["operator.ptah.run/v1alpha1"] = "operator.ptah.run/v1alpha1"
    kind: Literal["PtahResultRecord"] = "PtahResultRecord"
    metadata: ObjectMeta
    spec: PtahResultRecordSpec
