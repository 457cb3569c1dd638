"""The dispatch boundary: may-have-dispatched and what a failed create means."""

from __future__ import annotations

import pytest

from controller.mutationlifecycle import CreateOutcome, classify_create, may_have_dispatched
from jobclaim.apiserver import (
    AlreadyExists,
    Conflict,
    Invalid,
    NotFound,
    Refused,
    Unavailable,
)


@pytest.mark.parametrize(
    ("dispatch_started", "job_uid", "expected"),
    [
        (False, None, False),  # control: a fresh claim has not dispatched
        (False, "", False),
        (True, None, True),  # marked, no UID: what a lost create response leaves
        (False, "uid", True),
        (True, "uid", True),
    ],
)
def test_may_have_dispatched_is_the_mark_or_a_uid_and_nothing_else(
    dispatch_started: bool, job_uid: str | None, expected: bool
) -> None:
    assert may_have_dispatched(dispatch_started=dispatch_started, job_uid=job_uid) is expected


REFUSED = CreateOutcome.REFUSED_BEFORE_STORING
UNKNOWN = CreateOutcome.UNKNOWN


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (Refused("forbidden", status=403), REFUSED),
        (Refused("unauthorized", status=401), REFUSED),
        (Refused("bad request", status=400), REFUSED),
        (Invalid("spec.template: invalid", status=422), REFUSED),
        (Refused("too many requests", status=429), REFUSED),
        (Refused("failed calling webhook", status=500, reason="InternalError"), REFUSED),
        (AlreadyExists("exists", status=409), UNKNOWN),
        (Conflict("conflict", status=409), UNKNOWN),
        (Unavailable("timeout", status=504), UNKNOWN),
        (Unavailable("connection reset"), UNKNOWN),
        (NotFound("namespace gone", status=404), UNKNOWN),
        (RuntimeError("client bug"), UNKNOWN),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.value,
)
def test_only_a_provable_refusal_lets_the_claim_withdraw_its_mark(
    error: BaseException, expected: CreateOutcome
) -> None:
    assert classify_create(error) is expected
