"""How many examples a property test runs, under the Hypothesis profile in force.

Two profiles are registered by tests/conftest.py: ``full`` (the default, what
``make test`` and CI run) and ``check`` (``make check`` selects it with
``--hypothesis-profile=check``). A property test names its full count once,
``@settings(max_examples=examples(400))``; the check profile runs a tenth of it, so
the fast loop still exercises every property while the full suite keeps its depth.
An explicit ``max_examples`` would override any profile, which is why tests go
through this function instead of writing the number alone.
"""

from __future__ import annotations

from typing import Final

from hypothesis import settings

FULL: Final = "full"
CHECK: Final = "check"
# Hypothesis's own default; the full profile keeps it, so a test that names no count
# runs exactly what it ran before the profiles existed.
FULL_EXAMPLES: Final = 100
CHECK_EXAMPLES: Final = 10


def register() -> None:
    """Register both profiles and make ``full`` the default (tests/conftest.py calls
    this at import, before pytest's Hypothesis plugin loads ``--hypothesis-profile``)."""
    # No per-example deadline (Hypothesis's default is 200 ms): with the suite's two
    # workers beside the lab cluster on two cores, a wall-clock limit fails on the
    # machine's load, not on the property (seen: two full-suite failures at load ~20).
    # Speed has its own place, benchmarks/, where it is measured against a floor.
    settings.register_profile(FULL, max_examples=FULL_EXAMPLES, deadline=None)
    settings.register_profile(CHECK, max_examples=CHECK_EXAMPLES, deadline=None)
    settings.load_profile(FULL)


def examples(full: int) -> int:
    """``full`` under the full profile; the same share of it the profile in force
    takes of Hypothesis's default (a tenth under ``check``), and never fewer than one.
    Read at decoration time, which is after the plugin loaded the profile."""
    return max(1, full * settings().max_examples // FULL_EXAMPLES)
