"""python -m lab.manager: the shipped manager with the lab's fault hooks, the program of
the lab's manager image (images/lab-manager: the manager image plus the lab layer),
which the cluster's fault scenarios install.

The shipped manager holds no fault injection: no fault point, no swapped dispatch
order, no variable that turns either on, and its image and wheel hold no ``lab``. This
program reads the two lab variables the chart sets from its ``lab:`` values (the chart
then runs this program instead of ``ptah-manager``), refuses them unless the executor
image is the lab's stand-in, and hands the shipped manager a hook that installs them
into each pass's environment:

- ``PTAH_LAB_FAULT_POINTS=true``: an Apply stops dead after the durable write its
  resource's ``lab.ptah.run/stop-after`` annotation names (``lab.labfaults``);
- ``PTAH_LAB_SWAP_STEPS=first,second``: two dispatch steps exchanged
  (``Driver.swapped``), a build the fault suite must fail.

Everything else is the shipped manager's own configuration, process and exit codes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from controller import Driver, Environment, Step
from lab.labfaults import LabFaultPoints
from manager.__main__ import main as manager_main
from manager.config import Config, ConfigError
from manager.process import Manager

log = logging.getLogger("lab.manager")

# The last path segment of the lab's stand-in executor image (lab/clusterrun.py pushes
# it as <registry>/ptah/ptah-lab-executor).
LAB_EXECUTOR_REPOSITORY: Final = "ptah-lab-executor"
FAULT_POINTS: Final = "PTAH_LAB_FAULT_POINTS"
SWAP_STEPS: Final = "PTAH_LAB_SWAP_STEPS"
BOOLEANS: Final = {"true": True, "false": False, "": False}


def is_lab_executor(image: str) -> bool:
    """Whether ``image`` is the lab's stand-in executor (a repository named
    ``ptah-lab-executor``), which no production install pins: the real executor
    cannot be the lab's, and a manager whose Jobs run it changes no real database."""
    repository = image.split("@", 1)[0]
    return repository.rsplit("/", 1)[-1] == LAB_EXECUTOR_REPOSITORY


def _steps(raw: str) -> tuple[Step, Step] | None:
    if not raw:
        return None
    known = {step.value: step for step in Step}
    parts = raw.split(",")
    if len(parts) != 2 or any(part not in known for part in parts) or parts[0] == parts[1]:
        raise ValueError(
            f"{raw!r} is not two different dispatch steps, first,second "
            f"(each one of {', '.join(known)})"
        )
    return known[parts[0]], known[parts[1]]


@dataclass(frozen=True, slots=True)
class LabHooks:
    """What the lab changes in each pass's environment; nothing when both are off."""

    fault_points: bool = False
    swap_steps: tuple[Step, Step] | None = None

    def install(self, env: Environment) -> None:
        if self.fault_points:
            env.faults = LabFaultPoints()
        if self.swap_steps is not None:
            log.warning("lab: dispatch steps %s and %s exchanged", *self.swap_steps)
            env.driver = Driver.swapped(*self.swap_steps)


def load(env: Mapping[str, str]) -> LabHooks:
    """The lab hooks ``env`` asks for, or ``ConfigError`` naming each problem. Pure.

    A fault point in production would park a pass that may hold the database; a swapped
    step order would dispatch out of the spec's order. So either is taken only beside
    the lab's stand-in executor, whose Jobs change no real database.
    """
    problems: list[str] = []
    raw_points = env.get(FAULT_POINTS, "")
    fault_points = BOOLEANS.get(raw_points)
    if fault_points is None:
        problems.append(f"{FAULT_POINTS}: {raw_points!r} is not true or false")
    swap_steps = None
    try:
        swap_steps = _steps(env.get(SWAP_STEPS, ""))
    except ValueError as error:
        problems.append(f"{SWAP_STEPS}: {error}")
    executor = env.get("PTAH_EXECUTOR_IMAGE", "")
    if not is_lab_executor(executor):
        problems += [
            f"{name} is for the lab only and is refused unless the executor image is the "
            f"lab's stand-in (a repository named {LAB_EXECUTOR_REPOSITORY}), not {executor!r}"
            for name in (FAULT_POINTS, SWAP_STEPS)
            if env.get(name)
        ]
    if problems:
        raise ConfigError(problems)
    return LabHooks(fault_points=bool(fault_points), swap_steps=swap_steps)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """The shipped manager's ``main``, with the lab hooks installed (exit 2 when refused)."""
    env = os.environ if environ is None else environ
    try:
        hooks = load(env)
    except ConfigError as error:
        for problem in error.problems:
            print(f"ptah-lab-manager: {problem}", file=sys.stderr)
        return 2

    def make(config: Config) -> Manager:
        return Manager(config, prepare=hooks.install)

    return manager_main(argv, env, make=make)


if __name__ == "__main__":
    sys.exit(main())
