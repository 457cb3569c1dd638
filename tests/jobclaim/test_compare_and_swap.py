"""The one compare-and-swap retry (jobclaim.apiserver.compare_and_swap)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobclaim.apiserver import (
    CAS_ATTEMPTS,
    AlreadyExists,
    ApiError,
    Conflict,
    NotFound,
    compare_and_swap,
)


def racing(losses: int, error: ApiError) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(len(calls))
        if len(calls) <= losses:
            raise error
        return "won"

    return calls, attempt


@pytest.mark.parametrize("losses", [0, 1, CAS_ATTEMPTS - 1])
def test_an_attempt_that_loses_fewer_races_than_allowed_wins(losses: int) -> None:
    calls, attempt = racing(losses, Conflict("stale"))
    assert compare_and_swap(attempt) == "won"
    assert len(calls) == losses + 1


def test_the_last_lost_race_is_raised_after_every_attempt() -> None:
    calls, attempt = racing(CAS_ATTEMPTS, Conflict("stale"))
    with pytest.raises(Conflict, match="stale"):
        compare_and_swap(attempt)
    assert len(calls) == CAS_ATTEMPTS


def test_only_the_named_races_are_retried() -> None:
    calls, attempt = racing(1, AlreadyExists("taken"))
    with pytest.raises(AlreadyExists):
        compare_and_swap(attempt)
    assert len(calls) == 1
    calls, attempt = racing(1, AlreadyExists("taken"))
    assert compare_and_swap(attempt, races=(Conflict, AlreadyExists)) == "won"
    calls, attempt = racing(1, NotFound("gone"))
    with pytest.raises(NotFound):
        compare_and_swap(attempt)
    assert len(calls) == 1
