"""The fault points: each Apply boundary of the spec's "process stopped" table is named
once, right after its write, from what the write changed.

A control row per boundary and one change per row that must name nothing; then the
wiring: an Apply taken through its dispatch on the double tells the fault points
every boundary, in the table's order, each once, and the write before each was made.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.pieces.faultpoints import Boundary, Operation, Subject, crossed
from jobclaim.apiserver import JOBS
from tests.support.applyclaims import CLAIM, MARKED, OTHER, READ, RECORDED
from tests.support.dispatchworld import NS, add_migration, add_schema, make_rig

ROWS: list[tuple[str, Operation | None, Operation | None, list[Boundary]]] = [
    ("the claim stored", None, CLAIM, [Boundary.CLAIM]),
    ("a read-only claim stored", None, READ, []),
    ("the mark", CLAIM, MARKED, [Boundary.MARK]),
    ("the mark written again", MARKED, MARKED, []),
    ("the mark withdrawn", MARKED, CLAIM, []),
    ("the UID recorded", MARKED, RECORDED, [Boundary.RECORD]),
    ("an unrelated write under the claim", RECORDED, RECORDED, []),
    ("the claim cleared", RECORDED, None, [Boundary.OUTCOME]),
    ("a read-only claim cleared", READ, None, []),
    ("the claim replaced by another", CLAIM, OTHER, [Boundary.OUTCOME, Boundary.CLAIM]),
    ("nothing before or after", None, None, []),
]


@pytest.mark.parametrize(
    ("before", "after", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_each_write_names_the_boundary_it_crossed(
    before: Operation | None, after: Operation | None, expected: list[Boundary]
) -> None:
    assert [boundary for boundary, _ in crossed(before, after)] == expected


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[Boundary, str, bool, str | None]] = []

    def after(self, boundary: Boundary, subject: Subject, operation: Operation) -> None:
        self.seen.append((boundary, operation.id, operation.dispatch_started, operation.job_uid))


@pytest.mark.parametrize("add", [add_schema, add_migration], ids=["schema", "migration"])
def test_an_apply_tells_every_boundary_once_in_the_tables_order(add: Any) -> None:
    rig = make_rig()
    recorder = Recorder()
    rig.env.faults = recorder
    key = add(rig)
    rig.settle(key)
    (job,) = rig.jobs()
    uid = job["metadata"]["uid"]
    boundaries = [seen[0] for seen in recorder.seen]
    assert boundaries == [Boundary.CLAIM, Boundary.MARK, Boundary.CREATE, Boundary.RECORD]
    assert len({seen[1] for seen in recorder.seen}) == 1  # one claim throughout
    # Each told after its own write: the mark before the create, the UID after it.
    assert [seen[2] for seen in recorder.seen] == [False, True, True, True]
    assert recorder.seen[-1][3] == uid
    # A Job gone under a marked claim: the outcome patch retires the claim as unknown.
    rig.api.delete(JOBS, NS, job["metadata"]["name"])
    for _ in range(3):
        rig.settle(key)
    assert [seen[0] for seen in recorder.seen][4:] == [Boundary.OUTCOME]


def test_a_manager_without_fault_points_is_told_nothing() -> None:
    rig = make_rig()
    assert rig.env.faults is None
    key = add_migration(rig)
    rig.settle(key)
    assert len(rig.jobs()) == 1
