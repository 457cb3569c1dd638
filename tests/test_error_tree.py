"""jobclaim.errors draws the whole error tree: every PtahError subclass any package
defines is named in that one drawing, so a reader finds each error's meaning there."""

from __future__ import annotations

import importlib
import pkgutil
import re

import jobclaim.errors
from jobclaim.errors import PtahError

PACKAGES = ("jobclaim", "kube", "runner", "controller", "webhook", "certs")


def _every_module() -> None:
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def _subclasses(root: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in root.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_every_operator_error_is_drawn_in_the_one_tree() -> None:
    _every_module()
    drawing = jobclaim.errors.__doc__ or ""
    ours = {c for c in _subclasses(PtahError) if c.__module__.split(".")[0] in PACKAGES}
    assert len(ours) >= 20
    named = set(re.findall(r"[─ ]([A-Z][A-Za-z]+)\b", drawing))
    missing = sorted(c.__name__ for c in ours if c.__name__ not in named)
    assert missing == []
