"""The driver: a fixed order callers cannot change, a guard before any family code,
and a stop that ends the pass."""

from __future__ import annotations

import pytest

from controller.mutationlifecycle import (
    DISPATCH_ORDER,
    ClaimView,
    Driver,
    MayHaveDispatched,
    Step,
    Stop,
    snapshot_is_first_write,
    steps_for,
)
from jobclaim import migration_operation, schema_operation


class Recorder:
    def __init__(self, stop_at: Step | None = None) -> None:
        self.calls: list[Step] = []
        self.stop_at = stop_at

    def run(self, step: Step) -> Stop | None:
        self.calls.append(step)
        return Stop(f"stopped at {step.value}") if step is self.stop_at else None


LOCKED_READ = (Step.AUTHORIZE, Step.LEASE, Step.SNAPSHOT, Step.MARK, Step.CREATE, Step.CONFIRM)
APPLY = ClaimView(schema_operation("Apply"), dispatch_started=False, job_uid=None, stages_plan=True)


def test_the_order_is_the_spec_order() -> None:
    assert [s.value for s in DISPATCH_ORDER] == [
        "authorize", "lease", "stage", "snapshot", "consume", "mark", "create", "confirm", "record",
    ]  # fmt: skip
    assert Driver().order == DISPATCH_ORDER


def test_a_schema_apply_takes_every_step_in_order() -> None:
    recorder = Recorder()
    stop = Driver().dispatch(APPLY, recorder)
    assert recorder.calls == list(DISPATCH_ORDER)
    assert stop.reason == "the Job's UID is recorded"


@pytest.mark.parametrize("step", list(DISPATCH_ORDER))
def test_a_stopping_step_ends_the_pass(step: Step) -> None:
    recorder = Recorder(stop_at=step)
    stop = Driver().dispatch(APPLY, recorder)
    assert recorder.calls[-1] is step
    assert stop.reason == f"stopped at {step.value}"


@pytest.mark.parametrize(
    ("dispatch_started", "job_uid"), [(True, None), (False, "uid"), (True, "uid")]
)
def test_a_mutating_claim_that_may_have_dispatched_never_reaches_the_family(
    dispatch_started: bool, job_uid: str | None
) -> None:
    recorder = Recorder()
    claim = ClaimView(schema_operation("Apply"), dispatch_started, job_uid, stages_plan=True)
    stop = Driver().dispatch(claim, recorder)
    assert recorder.calls == []
    assert isinstance(stop.error, MayHaveDispatched)


def test_an_unknown_type_never_reaches_the_family() -> None:
    recorder = Recorder()
    claim = ClaimView(schema_operation("Vacuum"), False, None)
    assert "does not define" in Driver().dispatch(claim, recorder).reason
    assert recorder.calls == []


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (APPLY, DISPATCH_ORDER),
        (
            ClaimView(migration_operation("Apply"), False, None),
            tuple(s for s in DISPATCH_ORDER if s is not Step.STAGE),
        ),
        (
            ClaimView(schema_operation("Plan"), False, None),
            (
                Step.AUTHORIZE,
                Step.LEASE,
                Step.SNAPSHOT,
                Step.MARK,
                Step.CREATE,
                Step.CONFIRM,
                Step.RECORD,
            ),
        ),
        (
            ClaimView(schema_operation("Observe"), False, None, proof_outstanding=True),
            (
                Step.AUTHORIZE,
                Step.LEASE,
                Step.SNAPSHOT,
                Step.MARK,
                Step.CREATE,
                Step.CONFIRM,
                Step.RECORD,
            ),
        ),
        (
            ClaimView(schema_operation("Observe"), False, None),
            (Step.AUTHORIZE, Step.SNAPSHOT, Step.CREATE, Step.CONFIRM, Step.RECORD),
        ),
        (
            ClaimView(migration_operation("History"), False, None),
            (Step.AUTHORIZE, Step.SNAPSHOT, Step.CREATE, Step.CONFIRM, Step.RECORD),
        ),
    ],
)
def test_which_steps_a_claim_takes(claim: ClaimView, expected: tuple[Step, ...]) -> None:
    assert steps_for(claim) == expected


def test_a_read_only_claim_that_was_marked_may_still_dispatch() -> None:
    # Only mutating claims are guarded; a read-only retry runs under a new attempt.
    recorder = Recorder()
    claim = ClaimView(schema_operation("Plan"), True, None)
    Driver().dispatch(claim, recorder)
    assert recorder.calls


def test_a_swapped_driver_exchanges_exactly_two_steps() -> None:
    swapped = Driver.swapped(Step.CONSUME, Step.MARK)
    expected = list(DISPATCH_ORDER)
    i, j = expected.index(Step.CONSUME), expected.index(Step.MARK)
    expected[i], expected[j] = expected[j], expected[i]
    assert list(swapped.order) == expected
    assert Driver().order == DISPATCH_ORDER  # the production order is untouched


# (claim, whether its snapshot may ride in the claim's own status patch): only when the
# snapshot is the first durable write of its dispatch anyway.
FIRST_WRITE_ROWS = [
    ("observe, no proof", ClaimView(schema_operation("Observe"), False, None), True),
    ("resolve", ClaimView(schema_operation("Resolve"), False, None), True),
    ("history", ClaimView(migration_operation("History"), False, None), True),
    ("observe proving: the Lease comes first", ClaimView(
        schema_operation("Observe"), False, None, proof_outstanding=True), False),
    ("plan: the Lease comes first", ClaimView(schema_operation("Plan"), False, None), False),
    ("apply: Lease and stage come first", APPLY, False),
    ("migration apply: the Lease comes first", ClaimView(
        migration_operation("Apply"), False, None), False),
    ("an unknown type", ClaimView(schema_operation("Vacuum"), False, None), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("claim", "first"), [r[1:] for r in FIRST_WRITE_ROWS], ids=[r[0] for r in FIRST_WRITE_ROWS]
)
def test_the_snapshot_rides_with_the_claim_only_when_nothing_is_written_before_it(
    claim: ClaimView, first: bool
) -> None:
    assert snapshot_is_first_write(claim) is first


class _Claim:
    """The fields of a stored claim ``ClaimView.of`` reads (``ClaimFields``)."""

    def __init__(self, type: str, *, dispatch_started: bool = False, job_uid: str | None = None):
        self.type = type
        self.dispatch_started = dispatch_started
        self.job_uid = job_uid


@pytest.mark.parametrize(
    ("family", "claim", "proof_outstanding", "expected"),
    [
        # control: a schema's Apply, as stored, stages its plan
        ("schema", _Claim("Apply"), False, APPLY),
        # only a schema's Apply stages a plan: a migration's Apply does not
        (
            "migration",
            _Claim("Apply"),
            False,
            ClaimView(migration_operation("Apply"), False, None),
        ),
        # nor a schema's reading
        ("schema", _Claim("Plan"), False, ClaimView(schema_operation("Plan"), False, None)),
        # the mark and the Job UID are read off the claim as stored
        (
            "schema",
            _Claim("Apply", dispatch_started=True, job_uid="u1"),
            False,
            ClaimView(schema_operation("Apply"), True, "u1", stages_plan=True),
        ),
        # the proof outstanding is the pass's, handed in
        (
            "schema",
            _Claim("Observe"),
            True,
            ClaimView(schema_operation("Observe"), False, None, proof_outstanding=True),
        ),
    ],
)
def test_the_view_of_a_stored_claim(
    family: str, claim: _Claim, proof_outstanding: bool, expected: ClaimView
) -> None:
    info = expected.info
    assert ClaimView.of(family, claim, info, proof_outstanding=proof_outstanding) == expected
