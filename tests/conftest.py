"""Session-wide test rules that no one directory owns."""

from __future__ import annotations

import pytest

from tests.support import examples

# Before the Hypothesis plugin reads --hypothesis-profile (make check passes `check`).
examples.register()

# The fixtures more than one folder uses, each defined once (so a session fixture is one
# per session): the real API server, the built tools, the loopback registry, the stub
# API server over loopback HTTP.
pytest_plugins = [
    "tests.support.controlplane",
    "tests.support.tools",
    "tests.support.registry",
    "tests.support.kubestub",
    # make unit's parallel run: the lab cluster's tests in one xdist worker, first.
    "tests.support.xdistrun",
]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that reaches the ``helm`` fixture (directly or through a render),
    and every test that reaches ``promtool`` or ``kube_score`` (built the same way,
    ``make promtool``, ``make kube-score``).

    The fixture runs ``make helm``, which builds helm from its Go module when it is
    missing (minutes, cold): the mark lets a fast run (``make check``) leave those tests
    out by marker, like the other tests that need something built, and it is derived
    from the fixtures, so a new chart test cannot forget it. tryfirst: pytest's own
    ``-m`` deselection runs in this same hook and must see the mark.
    """
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "helm" in fixtures:
            item.add_marker(pytest.mark.helm)
        if "promtool" in fixtures:
            item.add_marker(pytest.mark.promtool)
        # And for kube-score (`make kube-score`), which tests/chart runs on the renders.
        if "kube_score" in fixtures:
            item.add_marker(pytest.mark.kube_score)
        # The same for Debian's Lua (`make lua`), which tests/gitops runs.
        if "lua" in fixtures:
            item.add_marker(pytest.mark.lua)
        # And kstatus (`make kstatus`, a Go build), which tests/gitops runs.
        if "kstatus" in fixtures:
            item.add_marker(pytest.mark.kstatus)
