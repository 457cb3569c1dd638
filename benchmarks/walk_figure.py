"""The walk figure (issue 28): how many times a reader following one reconcile pass
moves between the controller's modules, and how often back into one already left.

One pass of a PtahSchema is traced with ``sys.setprofile``: every Python frame the
interpreter enters or returns to whose module is under ``controller.`` is noted in
order, consecutive notes of the same module collapse into one *stay*, and a stay in a
module the walk already left earlier is a *return* (so returns = stays - modules).
Frames outside the controller (``jobclaim``, ``kube.fake``, pydantic) are skipped:
a detour through them does not end a stay. Properties count (a property read is a
trip to the module that defines it, for a reader too), and so does a dataclass built
in another controller module (its generated ``__init__`` runs there); a plain field
read is no trip at all, which is why the pass gathers its facts into fields once.

Two counts are printed for each pass: *frames* notes every frame entered and every
caller returned to (the reader's eye: after ``f()`` they are back in the caller);
*entries* notes only frames entered (a call trace: coming back from a callee is not
a new entry). Issue 28's target (60 stays / 30 returns) is measured as the issue
says, by a call trace counting entries into modules already left: *entries*;
*frames* is the stricter figure, printed beside it.

Two passes are measured on the in-memory API the controller tests use
(``tests/support/dispatchworld.py``):

- *dispatch*: an approved plan whose Apply is claimed; the traced pass is the one
  that goes through the dispatch sequence and creates the Apply Job (the issue's
  figure);
- *quiet*: a PtahSchema standing InSync with nothing due, one pass that writes nothing.

Each scenario is run once untraced first, so imports and first-use caches are not
counted. Run: ``.venv/bin/python benchmarks/walk_figure.py`` (``--modules`` lists the
stays of each walk).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.runtime.lifecyclepass import run_pass
from controller.runtime.reconciler import Key
from tests.support.dispatchworld import Rig, add_insync_schema, add_schema, make_rig

PREFIX = "controller."
# The target issue 28 sets for the dispatch walk.
TARGET_STAYS, TARGET_RETURNS = 60, 30
# What the walks are held to (tests/controller/test_walk_figure.py): the figures
# reached so far, in stays by entries. A change that makes a pass harder to follow
# fails there; one that makes it easier lowers these.
CEILINGS: dict[str, int] = {"dispatch": 49, "quiet": 66}


@dataclass(frozen=True, slots=True)
class Walk:
    stays: list[str]

    @property
    def modules(self) -> int:
        return len(set(self.stays))

    @property
    def returns(self) -> int:
        return len(self.stays) - self.modules

    def line(self, label: str) -> str:
        return (
            f"{label}: {len(self.stays)} stays in {self.modules} modules, "
            f"{self.returns} returns to a module already left"
        )


def over_ceiling(name: str, walk: Walk, ceiling: int) -> str | None:
    """Why ``walk`` is worse than the figure it is held to, or None. Pure."""
    if len(walk.stays) <= ceiling:
        return None
    return (
        f"the {name} walk grew to {len(walk.stays)} stays (ceiling {ceiling}): one pass now "
        f"moves between controller modules more often; run benchmarks/walk_figure.py "
        f"--modules to see where, and cut it back rather than raise the ceiling"
    )


def collapse(modules: list[str]) -> list[str]:
    """Consecutive notes of one module are one stay."""
    stays: list[str] = []
    for module in modules:
        if not stays or stays[-1] != module:
            stays.append(module)
    return stays


def trace(action: Callable[[], object], *, returns_too: bool = True) -> Walk:
    """The controller modules ``action`` walks through, in order; with
    ``returns_too`` a return to a caller is noted as well as each entry."""
    notes: list[str] = []

    def note(frame: FrameType | None) -> None:
        if frame is None:
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith(PREFIX):
            notes.append(module)

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            note(frame)
        elif event == "return" and returns_too:
            note(frame.f_back)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return Walk(collapse(notes))


def _pass(rig: Rig, key: Key) -> Callable[[], object]:
    return lambda: run_pass(rig.env, key.kind, key.namespace, key.name)


def dispatch_walk(*, returns_too: bool = True) -> Walk:
    """The pass that creates the Apply Job of an approved plan."""
    rig = make_rig()
    key = add_schema(rig)
    for _ in range(20):
        before = rig.job_creates()
        walk = trace(_pass(rig, key), returns_too=returns_too)
        if rig.job_creates() > before:
            return walk
    raise SystemExit("no pass created the Apply Job within 20 passes")


def quiet_walk(*, returns_too: bool = True) -> Walk:
    """One pass over a PtahSchema standing InSync with nothing due."""
    rig = make_rig()
    key = add_insync_schema(rig, "orders", coordination_key="orders-primary")
    rig.settle(key)
    return trace(_pass(rig, key), returns_too=returns_too)


def main(argv: list[str]) -> int:
    # Warm-up: imports and first-use caches belong to no pass.
    dispatch_walk()
    quiet_walk()
    walks = {
        "dispatch (frames)": dispatch_walk(),
        "dispatch (entries)": dispatch_walk(returns_too=False),
        "quiet (frames)": quiet_walk(),
        "quiet (entries)": quiet_walk(returns_too=False),
    }
    for label, walk in walks.items():
        print(walk.line(label))
        if "--modules" in argv:
            for stay in walk.stays:
                print(f"    {stay}")
    d = walks["dispatch (entries)"]
    verdict = "within" if len(d.stays) <= TARGET_STAYS and d.returns <= TARGET_RETURNS else "over"
    print(f"target (dispatch, entries): {TARGET_STAYS} stays / {TARGET_RETURNS} returns: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
