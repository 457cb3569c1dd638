"""The outcome tests' own fixture: a life in which no test asks for a claim."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controller.runtime import lifecyclepass
from controller.runtime.reconciler import Reconciler


@pytest.fixture
def no_requested_claims(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every claim here is the controller's own: asking for one fails the test."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a test asked for a claim")

    monkeypatch.setattr(lifecyclepass, "request_claim", refuse)
    monkeypatch.setattr(Reconciler, "claim", refuse)
    yield
