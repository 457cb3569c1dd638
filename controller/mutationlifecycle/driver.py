"""The one dispatch sequence both families take a claim through to its one create.

    authorize → lease → stage → snapshot → consume → mark → create → confirm → record

Each step's durable write is made before the next step starts, so every state a
stopped process can leave is one the next pass recognizes (the spec's table of
durable writes). The order lives here and callers cannot change it: a family
supplies what each step does, never when. ``Driver.swapped`` exists only so tests
can prove each boundary matters by exchanging its two steps and watching it fail.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Protocol

from controller.mutationlifecycle.boundary import may_have_dispatched
from jobclaim import OperationInfo
from jobclaim.errors import PtahError


class Step(enum.Enum):
    AUTHORIZE = "authorize"
    LEASE = "lease"
    STAGE = "stage"
    SNAPSHOT = "snapshot"
    CONSUME = "consume"
    MARK = "mark"
    CREATE = "create"
    CONFIRM = "confirm"
    RECORD = "record"


DISPATCH_ORDER: Final = tuple(Step)


@dataclass(frozen=True, slots=True)
class Stop:
    """A step ended the pass. ``requeue_after`` in seconds; ``error`` for the log."""

    reason: str
    requeue_after: float | None = None
    error: BaseException | None = None


class ClaimFields(Protocol):
    """The fields of a stored claim (either family's) the driver reads."""

    @property
    def type(self) -> str: ...

    @property
    def dispatch_started(self) -> bool: ...

    @property
    def job_uid(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ClaimView:
    """What the driver itself reads of a claim: enough to guard and to pick steps."""

    info: OperationInfo
    dispatch_started: bool
    job_uid: str | None
    proof_outstanding: bool = False
    stages_plan: bool = False

    @classmethod
    def of(
        cls, family: str, claim: ClaimFields, info: OperationInfo, *, proof_outstanding: bool
    ) -> ClaimView:
        """The view of ``claim`` (of ``family``, whose operation table says ``info``):
        made where the driver is asked, once per dispatch, not per stored version."""
        return cls(
            info=info,
            dispatch_started=claim.dispatch_started,
            job_uid=claim.job_uid,
            proof_outstanding=proof_outstanding,
            # Only a schema's Apply runs a plan the Pod reads from projections.
            stages_plan=family == "schema" and claim.type == "Apply",
        )


class DispatchSteps(Protocol):
    """What a family supplies: the work of each step, returning a Stop to end the pass.

    ``None`` means the step's durable write (if any) is done and the next step may
    start. A step that wrote something the next pass must see before going on (the
    Lease epoch, the admission snapshot) returns a Stop itself.
    """

    def run(self, step: Step) -> Stop | None: ...


class MayHaveDispatched(PtahError):
    """A mutating claim that may already have a Job was handed to dispatch again, or to
    a retirement that would discard it as if it never ran: either would lose the
    account of a Job that may be running SQL. One meaning, one exception."""


def steps_for(claim: ClaimView) -> tuple[Step, ...]:
    """Which steps a claim takes. Read-only claims without a Lease have no mark."""
    holds_lock = claim.info.holds_lock(claim.proof_outstanding)
    skipped: set[Step] = set()
    if not holds_lock:
        skipped |= {Step.LEASE, Step.MARK}
    if not claim.stages_plan:
        skipped.add(Step.STAGE)
    if not claim.info.mutating:
        skipped.add(Step.CONSUME)
    return tuple(step for step in DISPATCH_ORDER if step not in skipped)


def snapshot_is_first_write(claim: ClaimView) -> bool:
    """Whether the snapshot is the first durable write of the claim's dispatch. Pure.

    True when the only step before it is ``authorize``, which writes nothing: the
    claim takes no Lease and stages no plan, so nothing the snapshot depends on is
    written before it. Such a claim's snapshot may be made durable in the status
    patch that persists the claim: that write is then both boundaries at once (the
    pass ends after it, and no Job exists yet), and the order of the durable writes
    the dispatch makes afterwards is the same nine-step order, from ``authorize``.
    """
    if not claim.info.known:
        return False  # nothing is dispatched for a type this build does not define
    steps = steps_for(claim)
    return Step.SNAPSHOT in steps and steps[: steps.index(Step.SNAPSHOT)] == (Step.AUTHORIZE,)


class Driver:
    """Runs the dispatch sequence in its fixed order."""

    __slots__ = ("_order",)

    def __init__(self) -> None:
        self._order: tuple[Step, ...] = DISPATCH_ORDER

    @property
    def order(self) -> tuple[Step, ...]:
        return self._order

    @classmethod
    def swapped(cls, first: Step, second: Step) -> Driver:
        """A driver with two steps exchanged. For the boundary tests only."""
        driver = cls()
        order = list(DISPATCH_ORDER)
        i, j = order.index(first), order.index(second)
        order[i], order[j] = order[j], order[i]
        driver._order = tuple(order)
        return driver

    def dispatch(self, claim: ClaimView, steps: DispatchSteps) -> Stop:
        """Take ``claim`` as far as it can go in this pass.

        A mutating claim that may have dispatched is refused before the family is
        called at all: a second create beside a Job that may be running SQL is the
        one thing this sequence exists to make impossible.
        """
        if not claim.info.known:
            return Stop("the claim names an operation this operator does not define")
        # Both decisions are made before any step runs: which steps the claim takes,
        # and whether it may be dispatched at all (pure, so their order is free).
        wanted = set(steps_for(claim))
        if claim.info.mutating and may_have_dispatched(
            dispatch_started=claim.dispatch_started, job_uid=claim.job_uid
        ):
            return Stop(
                "a mutating claim that may have dispatched is never dispatched again",
                error=MayHaveDispatched(
                    "a mutating claim that may have dispatched is never dispatched again"
                ),
            )
        for step in self._order:
            if step not in wanted:
                continue
            stop = steps.run(step)
            if stop is not None:
                return stop
        return Stop("the Job's UID is recorded", requeue_after=2.0)
