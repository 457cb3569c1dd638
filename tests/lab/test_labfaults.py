"""The lab's fault points park a pass only at the write its resource's annotation names
(tests/lab/test_labmanager.py: only the lab's manager is given them)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import cast

import pytest

from controller.pieces.faultpoints import Boundary
from jobclaim.api import ObjectMeta, PtahMigration
from lab.labfaults import ANNOTATION, LabFaultPoints
from tests.support.applyclaims import CLAIM


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
