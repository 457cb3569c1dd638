"""The dispatch boundary: may a Job exist, and what did a failed create mean.

Both answers are decided here once, for both families. Neither reads a phase or a
condition reason: a later refusal rewrites a reason, and a boundary that read one
could be moved by a message.
"""

from __future__ import annotations

import enum

from jobclaim.apiserver import AlreadyExists, ApiError, Refused


def may_have_dispatched(*, dispatch_started: bool, job_uid: str | None) -> bool:
    """True once a Job may exist: the durable mark was written, or a UID was recorded.

    A mutating claim in this state is never dispatched again; a missing Job is then
    an outcome nobody established, not a Job to create.
    """
    return dispatch_started or bool(job_uid)


class CreateOutcome(enum.Enum):
    """What a failed Job create tells us about the API server's store."""

    # Refused before storing: nothing stands under the reserved name, so the claim
    # withdraws its marker and dispatches again under the approval it already spent.
    REFUSED_BEFORE_STORING = "refused-before-storing"
    # The write may have happened (a lost response, a timeout, a 5xx, or something
    # already standing under the name): the outcome is unknown, never a retry.
    UNKNOWN = "unknown"


def classify_create(error: BaseException) -> CreateOutcome:
    """Decide what a failed create means. Anything not provably refused is unknown.

    ``Refused`` covers authentication, authorization, validation, admission (a
    webhook that denied, or one that fails closed and could not be called) and
    priority-and-fairness 429s: each is answered before the object is stored.
    ``AlreadyExists`` is unknown even though it is a 409: the Job under the reserved
    name may be this claim's own, created by a response that never arrived.
    """
    if isinstance(error, AlreadyExists):
        return CreateOutcome.UNKNOWN
    if isinstance(error, Refused):
        return CreateOutcome.REFUSED_BEFORE_STORING
    if isinstance(error, ApiError):
        return CreateOutcome.UNKNOWN
    # A client-side exception (a bug, a socket error before a status) says nothing
    # about the store either.
    return CreateOutcome.UNKNOWN
