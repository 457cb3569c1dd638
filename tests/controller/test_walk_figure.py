"""The walk figure is held where issue 28's cuts left it (``benchmarks/walk_figure.py``).

The figure counts how often a reader following one traced pass moves between the
controller's modules (stays, by entries). It may only go down: a change that makes
the dispatch or the quiet pass bounce between modules more fails here with a sentence
saying which walk grew and how far.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from benchmarks.walk_figure import CEILINGS, Walk, dispatch_walk, over_ceiling, quiet_walk


def _walk(stays: int) -> Walk:
    # A synthetic walk of ``stays`` stays over two modules (only the count matters).
    return Walk([f"controller.m{i % 2}" for i in range(stays)])


@pytest.mark.parametrize(
    ("name", "stays", "ceiling", "message"),
    [
        # control: a walk at its ceiling passes
        ("dispatch", 49, 49, None),
        # one stay more than the ceiling fails, and says which walk and how far
        ("dispatch", 50, 49, "the dispatch walk grew to 50 stays (ceiling 49)"),
        ("quiet", 67, 66, "the quiet walk grew to 67 stays (ceiling 66)"),
    ],
)
def test_over_ceiling_table(name: str, stays: int, ceiling: int, message: str | None) -> None:
    problem = over_ceiling(name, _walk(stays), ceiling)
    if message is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(message), problem


@pytest.mark.parametrize(("name", "measure"), [("dispatch", dispatch_walk), ("quiet", quiet_walk)])
def test_walk_stays_under_its_ceiling(name: str, measure: Callable[..., Walk]) -> None:
    measure(returns_too=False)  # warm-up: imports and first-use caches belong to no pass
    walk = measure(returns_too=False)
    problem = over_ceiling(name, walk, CEILINGS[name])
    assert problem is None, problem
