"""The lab's manager: the shipped manager plus the fault hooks, taken only beside the
lab's stand-in executor; the shipped manager knows neither variable."""

from __future__ import annotations

import re
import threading

import pytest

from controller import Driver, Step
from kube.fake.inmemory import InMemoryApi
from lab.labfaults import LabFaultPoints
from lab.manager import LabHooks, load
from manager.config import VARIABLES, ConfigError
from manager.config import load as load_config
from manager.process import Manager
from tests.support.managerenv import CHART_ENV

LAB_EXECUTOR = "10.88.0.1:5000/ptah/ptah-lab-executor@sha256:" + "2" * 64
LAB_ENV = {
    **CHART_ENV,
    "PTAH_EXECUTOR_IMAGE": LAB_EXECUTOR,
    "PTAH_LAB_FAULT_POINTS": "true",
    "PTAH_LAB_SWAP_STEPS": "mark,create",
}


def test_the_control_lab_environment_gives_both_hooks() -> None:
    assert load(LAB_ENV) == LabHooks(fault_points=True, swap_steps=(Step.MARK, Step.CREATE))


def test_the_lab_executor_alone_changes_nothing() -> None:
    assert load({**CHART_ENV, "PTAH_EXECUTOR_IMAGE": LAB_EXECUTOR}) == LabHooks()


# One change to the control environment per row, and the sentence it earns.
REFUSED = [
    (
        "fault points, production executor",
        {"PTAH_EXECUTOR_IMAGE": CHART_ENV["PTAH_EXECUTOR_IMAGE"]},
        "PTAH_LAB_FAULT_POINTS is for the lab only and is refused unless the executor image "
        "is the lab's stand-in",
    ),
    (
        "swapped steps, production executor",
        {"PTAH_EXECUTOR_IMAGE": CHART_ENV["PTAH_EXECUTOR_IMAGE"]},
        "PTAH_LAB_SWAP_STEPS is for the lab only",
    ),
    (
        "an executor merely named like the stand-in",
        {"PTAH_EXECUTOR_IMAGE": "registry.example.com/ptah-lab-executor-prod@sha256:" + "1" * 64},
        "PTAH_LAB_FAULT_POINTS is for the lab only",
    ),
    ("fault points, not a bool", {"PTAH_LAB_FAULT_POINTS": "on"}, "PTAH_LAB_FAULT_POINTS: 'on'"),
    (
        "one step swapped with itself",
        {"PTAH_LAB_SWAP_STEPS": "mark,mark"},
        "PTAH_LAB_SWAP_STEPS: 'mark,mark' is not two different dispatch steps",
    ),
    (
        "an unknown step",
        {"PTAH_LAB_SWAP_STEPS": "mark,launch"},
        "PTAH_LAB_SWAP_STEPS: 'mark,launch' is not two different dispatch steps",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_a_lab_value_out_of_place_is_refused(change: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load({**LAB_ENV, **change})
    assert any(message in problem for problem in refused.value.problems), refused.value.problems
    for problem in refused.value.problems:
        text = re.sub(r"'[^']*'|PTAH_[A-Z_*]+", "", problem)
        assert text == text.lower(), problem


@pytest.mark.parametrize("hooks", [LabHooks(), load(LAB_ENV)], ids=["none", "lab"])
def test_the_hooks_reach_each_pass_environment(hooks: LabHooks) -> None:
    manager = Manager(load_config(LAB_ENV), prepare=hooks.install)
    reconciler = manager._new_reconciler(InMemoryApi(), threading.Event())
    lab = hooks != LabHooks()
    assert isinstance(reconciler.env.faults, LabFaultPoints) is lab
    expected = Driver.swapped(Step.MARK, Step.CREATE) if lab else Driver()
    assert reconciler.env.driver.order == expected.order


def test_the_shipped_manager_reads_no_lab_variable_and_installs_no_hook() -> None:
    assert [v.name for v in VARIABLES if "LAB" in v.name] == []
    reconciler = Manager(load_config(LAB_ENV))._new_reconciler(InMemoryApi(), threading.Event())
    assert reconciler.env.faults is None
    assert reconciler.env.driver.order == Driver().order
