"""Matches per second for a schema Apply Job, in each mode, beside a plain deep ``==``.

Target: a full-rebuild match in at most 50 µs (20,000/s on one core), envelope mode
faster. The deep ``==`` of the same two Job dicts, measured in the same run, is the
baseline the ratio is against: it is the floor any comparison of these objects pays.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobclaim import match
from tests.jobclaim.world import schema_world


def per_second(fn: object, number: int) -> float:
    timer = timeit.Timer(fn)  # type: ignore[arg-type]
    best = min(timer.repeat(repeat=5, number=number))
    return number / best


def main() -> None:
    world = schema_world("Apply")
    stored = world.stored
    rebuild = world.claim("rebuild-stored")
    envelope = world.claim("envelope")
    assert match(stored, rebuild) and match(stored, envelope)
    other = world.stored
    n = 2000
    baseline = per_second(lambda: stored == other, n)
    full = per_second(lambda: match(stored, rebuild), n)
    env = per_second(lambda: match(stored, envelope), n)
    print(f"deep == of two Job dicts : {baseline:12,.0f}/s")
    print(f"match, full rebuild      : {full:12,.0f}/s  ({1e6 / full:6.1f} µs)")
    print(f"match, envelope only     : {env:12,.0f}/s  ({1e6 / env:6.1f} µs)")
    print(f"ratio full / deep ==     : {baseline / full:8.1f}x slower")
    print(f"ratio envelope / full    : {full / env:8.2f}x  (below 1 means envelope is faster)")
    print(f"target full ≤ 50 µs      : {'met' if 1e6 / full <= 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
