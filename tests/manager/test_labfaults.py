"""The lab's fault points park a pass only at the write its resource's annotation names,
and a manager is given them only in a lab configuration."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import cast

import pytest

from controller.mutationlifecycle import Driver, Step
from controller.pieces.faultpoints import Boundary
from jobclaim.api import ObjectMeta, PtahMigration
from kube.fake.inmemory import InMemoryApi
from manager.config import load
from manager.labfaults import ANNOTATION, LabFaultPoints
from manager.process import Manager
from tests.controller.test_faultpoints import CLAIM
from tests.manager.support import CHART_ENV
from tests.manager.test_config import LAB_EXECUTOR


class Park(threading.Event):
    """A park that records each wait and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return True


def _migration(annotations: dict[str, str] | None) -> PtahMigration:
    # Only the metadata is read: the rest of the resource is not built.
    meta = ObjectMeta(name="m", namespace="n", annotations=annotations)
    return cast(PtahMigration, SimpleNamespace(metadata=meta))


@pytest.mark.parametrize(
    ("annotations", "boundary", "parks"),
    [
        ({ANNOTATION: "mark"}, Boundary.MARK, True),
        ({ANNOTATION: "mark"}, Boundary.CREATE, False),
        ({ANNOTATION: "create"}, Boundary.CREATE, True),
        ({"other": "mark"}, Boundary.MARK, False),
        (None, Boundary.MARK, False),
    ],
)
def test_a_pass_parks_only_at_the_named_write(
    annotations: dict[str, str] | None, boundary: Boundary, parks: bool
) -> None:
    park = Park()
    LabFaultPoints(park).after(boundary, _migration(annotations), CLAIM)
    assert park.waits == (1 if parks else 0)


@pytest.mark.parametrize("lab", [False, True], ids=["production", "lab"])
def test_only_a_lab_manager_gets_fault_points_and_a_swapped_order(lab: bool) -> None:
    env = dict(CHART_ENV)
    if lab:
        env |= {
            "PTAH_EXECUTOR_IMAGE": LAB_EXECUTOR,
            "PTAH_LAB_FAULT_POINTS": "true",
            "PTAH_LAB_SWAP_STEPS": "mark,create",
        }
    manager = Manager(load(env))
    reconciler = manager._new_reconciler(InMemoryApi(), threading.Event())
    assert isinstance(reconciler.env.faults, LabFaultPoints) is lab
    expected = Driver.swapped(Step.MARK, Step.CREATE) if lab else Driver()
    assert reconciler.env.driver.order == expected.order
