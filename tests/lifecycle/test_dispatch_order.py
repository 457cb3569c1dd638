"""The dispatch order, step by step: a fault at every step leaves a state the next pass
recovers from, and every boundary fails when its two steps are exchanged.

Each row takes one resource of one family from its approved plan towards its Job
with one fault armed at one dispatch step (``faultrig.StepApi`` maps every API call
to its step):

- ``fails``: the step's first call fails and nothing is stored (for ``confirm``, the
  read-back; for ``authorize``, which writes nothing, the re-read of the plan);
- ``stops``: the call goes through, then it and every later call fail until a
  restart: the process crashed right after the step's write;
- ``contended``: before the pass in which the step first runs, a second claimant
  holds the realm, taken through the real locker (it waits out a Lease it did not
  see renewed for a whole duration by its own clock, as another manager would).
  Contention is injected between passes on purpose: within a pass no time passes,
  and a Lease renewed a moment ago cannot lapse by anyone's honest clock;
- ``refused``: at the same point the authorization moves (a spec edit bumps the
  generation) *and* a second claimant holds the realm, as the original's row did:
  the claim must be retired by its next pass, without waiting for the realm;
- ``replaced``: right before the step's first call, in the middle of the pass, the
  approval is replaced by another of the same name. Up to and including ``consume``
  that refuses the claim; after it the dispatch was already paid for and goes on.

After every pass the row reads what the API server holds (``faultrig.Holding``) and
checks the invariants (``faultrig.invariant_problems``). Then it clears the fault,
restarts, lets the contender go and runs a bounded number of passes, and judges the
outcome (``outcome_problems``). Every row in the spec's order must come out clean.

``test_each_boundary_fails_with_its_steps_swapped`` is mutation testing of the
order: every row runs again under ``Driver.swapped(a, b)``, and at least one row must
report the problem that boundary exists to prevent. A boundary whose swap passes
every row would be a test that proves nothing.

Both backends. Every world gets a fresh site (``tests.lifecycle.backends``): on the
in-memory double, or on the real kube-apiserver of the lab/controlplane harness, where
the manager calls the server as the manager identity with the chart's permissions,
through the same ``StepApi`` around the real adapter ``kube.client.KubeApi``, and
every read of what is held goes through the adapter protocol (``Site.peek``). Which
tests run on which backend follows one rule (a test runs on both when it asks for the
``backend`` fixture, whose params are ``BACKENDS``): a check whose verdict depends on
what an API server stores and answers runs on both, the real one marked
``controlplane``; a check that judges only the suite's own code or the pure core runs
on the double. So on both: the whole
matrix (both families, every step, every fault, and the control rows), the rig's
control and protocol checks, the stop between a Lease write and its epoch, and each
swapped boundary's witnesses, which must report on the real server the problem they
report on the double (without them nothing would show that a real row can fail at
all). On the double only: the rows' coverage, the witnesses' names, the record
check's own bite, and, under each swapped boundary, the rerun of every row that is
not a witness. Those reruns look for a boundary whose exchange no row notices, a
property of the order in the pure core (``Driver``) that no backend changes; they are
eight times the matrix, and on the real server would cost that much to prove again
what the double proves.

The records a retirement owes (``status.pendingObservation``, ``status.unresolvedRun``)
are issue 5. Until they are written, a claim whose outcome is unknown stays marked
and must never get a second Job; the record checks here switch on by themselves as
soon as a pass writes either field (see ``outcome_problems``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import pytest

from controller.context.passcontext import PassContext
from controller.mutationlifecycle import DISPATCH_ORDER, Driver, Step, Stop
from controller.stages import claimsupervision
from controller.stages.claimwrites import retired_status
from jobclaim import lease_name
from jobclaim.apiserver import (
    LEASES,
)
from tests.lifecycle.backends import DOUBLE, MEMORY, Backend, InMemory
from tests.lifecycle.worlds import MIGRATION, SCHEMA, Family, World
from tests.support.faultrig import (
    JOB_UNMARKED,
    MARK_CONTENDED,
    MARK_NO_PROJECTION,
    MARK_NO_SNAPSHOT,
    MARK_UNHELD,
    MARK_UNSPENT,
    Armed,
    Holding,
    Seen,
    invariant_problems,
)

# How many passes a fault has to fire in, how many passes a contended claim is
# watched while the realm is someone else's, and how many the recovery gets.
FAULT_PASSES: Final = 4
CONTENDED_PASSES: Final = 2
RECOVERY_PASSES: Final = 8

# Outcome problems (the invariants' own are in faultrig).
NOT_FIRED = "the fault never fired"
TWO_JOBS = "more than one Job was created"
RECREATED = "a marked claim without a Job created one after the restart"
REFUSED_DISPATCHED = "a refused claim dispatched"
REFUSED_WAITED = "a refused claim was not retired by its next pass"
REFUSED_KEPT = "a refused claim was never retired"
NEVER_REACHED = "the claim never reached its Job"
RETIRED_NO_RECORD = "a marked claim was retired without the record the spec owes"
UNKNOWN_NO_RECORD = "an unknown outcome was left without the record the spec owes"
RECORD_UNCONFIRMED = "a Job UID was recorded without a confirm read after the create"


FAULTS: Final = ("fails", "stops", "contended", "refused", "replaced")


@dataclass(frozen=True)
class Row:
    family: Family
    step: Step | None  # None: the control row
    fault: str

    @property
    def id(self) -> str:
        return f"{self.family.name}-{self.step.value if self.step else 'none'}-{self.fault}"

    @property
    def refuses(self) -> bool:
        """Whether the spec's order must refuse this claim rather than dispatch it."""
        if self.fault == "refused":
            return True
        if self.fault == "replaced" and self.step is not None:
            return DISPATCH_ORDER.index(self.step) <= DISPATCH_ORDER.index(Step.CONSUME)
        return False


def _rows() -> list[Row]:
    rows: list[Row] = []
    for family in (SCHEMA, MIGRATION):
        rows.append(Row(family, None, "control"))
        for step in DISPATCH_ORDER:
            if family is MIGRATION and step is Step.STAGE:
                continue  # a migration plan carries no SQL to project
            rows.extend(Row(family, step, fault) for fault in FAULTS)
    return rows


ROWS: Final = _rows()

# Both backends for every test that asks for ``backend`` (tests/lifecycle/conftest.py);
# the rule that decides which tests ask is in the module docstring ("Both backends").


_FIRST_PASSES: dict[tuple[str, str, tuple[Step, ...]], dict[Step, int]] = {}


def first_passes(family: Family, driver: Driver, backend: Backend) -> dict[Step, int]:
    """In which pass (from 1) each step first makes a call, on a fault-free run.

    Every world starts from the same objects, clocks and nonces, so the answer
    depends only on the backend, the family and the order; it is computed once for
    each (a backend's own run decides, so a server that took another path would be
    contended where it really runs the step)."""
    cache_key = (backend.name, family.name, driver.order)
    cached = _FIRST_PASSES.get(cache_key)
    if cached is not None:
        return cached
    world = World.make(family, driver, backend)
    found: dict[Step, int] = {}
    for index in range(1, FAULT_PASSES + 1):
        start = len(world.api.log)
        world.run()
        for call in world.api.log[start:]:
            if call.step is not None:
                found.setdefault(call.step, index)
    _FIRST_PASSES[cache_key] = found
    return found


# -- one row ---------------------------------------------------------------------------


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)

    def add(self, *problems: str) -> None:
        self.problems.extend(p for p in problems if p not in self.problems)


def _watch_the_realm_at_the_mark(world: World, report: Report) -> None:
    """The mark is the moment the realm must be ours: check it as it is written."""

    def watch(seen: Seen) -> None:
        if seen.step is not Step.MARK:
            return
        holding = world.holding()
        if holding.lease_holder and holding.lease_holder != holding.claim_holder:
            report.add(MARK_CONTENDED)

    world.api.watchers.append(watch)


def run_row(row: Row, driver: Driver, backend: Backend = DOUBLE) -> list[str]:
    """Run one row under ``driver`` on a fresh site of ``backend``; the problems it
    found, in the order found."""
    world = World.make(row.family, driver, backend)
    api = world.api
    report = Report()
    _watch_the_realm_at_the_mark(world, report)
    armed: Armed | None = None
    # When the authorization moved (a call sequence number) and the Job name of the
    # claim it refused: a later claim under a new approval is a new decision.
    moved: list[tuple[int, str]] = []

    def move_now() -> None:
        moved.append((len(api.log), str(world.holding().claim.get("jobName") or "")))

    inject_before: int | None = None
    if row.fault in ("fails", "stops") and row.step is not None:
        armed = api.arm(row.step, "fail" if row.fault == "fails" else "stop")
    elif row.fault == "replaced" and row.step is not None:

        def replace() -> None:
            move_now()
            world.replace_approval()

        armed = api.arm(row.step, None, before=replace)
    elif row.fault in ("contended", "refused") and row.step is not None:
        inject_before = first_passes(row.family, driver, backend).get(row.step)

    marked_ids: set[str] = set()
    excused = False
    claim_id = ""

    def observe() -> Holding:
        nonlocal claim_id
        holding = world.holding()
        report.add(*invariant_problems(holding))
        if holding.marked:
            marked_ids.add(str(holding.claim["id"]))
        claim_id = claim_id or str(holding.claim.get("id") or "")
        return holding

    fired = row.fault == "control"
    for index in range(1, FAULT_PASSES + 1):
        if index == inject_before and world.contend():
            if row.fault == "refused":
                move_now()
                world.bump_generation()
            fired = True
        world.run()
        holding = observe()
        if index == inject_before and row.fault == "refused" and holding.claim:
            report.add(REFUSED_WAITED)
        if armed is not None and armed.fired:
            fired = True
            # A fault that leaves a mark and no Job is the one place an unknown outcome
            # is the right answer: the process stopped between the mark and the create,
            # or the create's answer was an error that says nothing about the store.
            excused = holding.marked and holding.claimed_job is None
        if fired:
            break
    if not fired:
        report.add(NOT_FIRED)
        return report.problems
    if row.fault == "contended":
        for _ in range(CONTENDED_PASSES):
            world.run()
            observe()

    # Recover: the fault is cleared, the process is back, the contender lets go.
    api.restart()
    world.contender.release()
    final = at_restart = observe()
    creates_before = len(api.job_creates())
    for _ in range(RECOVERY_PASSES):
        world.run()
        # The last pass's reading is the final one (no pass runs after it), and on
        # a real server every reading costs its round trips.
        final = observe()
    report.add(
        *outcome_problems(
            row,
            world,
            final,
            marked_without_job=at_restart.marked and at_restart.claimed_job is None,
            creates_before=creates_before,
            moved=moved[0] if moved else None,
            marked_ids=marked_ids,
            excused=excused,
            claim_id=claim_id,
        )
    )
    return report.problems


def outcome_problems(
    row: Row,
    world: World,
    final: Holding,
    *,
    marked_without_job: bool,
    creates_before: int,
    moved: tuple[int, str] | None,
    marked_ids: set[str],
    excused: bool,
    claim_id: str,
) -> list[str]:
    api = world.api
    creates = api.job_creates()
    problems: list[str] = list(dict.fromkeys(world.raised))
    if len(creates) > 1 or len(final.job_uid_by_name) > 1:
        problems.append(TWO_JOBS)
    if marked_without_job and len(creates) > creates_before:
        problems.append(RECREATED)
    same_claim = bool(final.claim) and final.claim.get("id") == claim_id
    if row.refuses:
        if moved is not None and any(c.seq >= moved[0] and c.name == moved[1] for c in creates):
            problems.append(REFUSED_DISPATCHED)
        if same_claim:
            problems.append(REFUSED_KEPT)
    elif not excused and not (
        same_claim and final.claim.get("jobUID") and final.claim["jobUID"] == final.claimed_job
    ):
        problems.append(NEVER_REACHED)
    # The records of issue 5. A marked claim that is gone must have left its record
    # (no row here finishes its Job, so no row's account is settled by a result). A
    # claim still marked without a Job is today's answer to an unknown outcome; once
    # any pass writes the family's record, the row demands it for that outcome.
    live = str(final.claim.get("id") or "")
    if marked_ids - {live} and row.family.record not in final.records:
        problems.append(RETIRED_NO_RECORD)
    records_written = row.family.record in api.status_fields
    if excused and records_written and row.family.record not in final.records:
        problems.append(UNKNOWN_NO_RECORD)
    # Every recorded UID follows a confirm read that came after the Job's create.
    last_create: int | None = None
    confirmed = False
    for call in api.log:
        if call.step is Step.CREATE and call.wrote:
            last_create, confirmed = call.seq, False
        elif call.step is Step.CONFIRM and call.ok and last_create is not None:
            confirmed = True
        elif call.step is Step.RECORD and call.wrote and not confirmed:
            problems.append(RECORD_UNCONFIRMED)
            break
    return problems


# -- the spec's order ------------------------------------------------------------------


def test_the_rows_cover_every_step_and_fault_with_a_control_first() -> None:
    assert ROWS[0].fault == "control"
    for family in (SCHEMA, MIGRATION):
        steps = {row.step for row in ROWS if row.family is family and row.step is not None}
        wanted = set(DISPATCH_ORDER) - ({Step.STAGE} if family is MIGRATION else set())
        assert steps == wanted
        for step in steps:
            faults = {row.fault for row in ROWS if row.family is family and row.step is step}
            assert faults == set(FAULTS)


def test_the_control_row_reaches_its_job_with_every_step_in_order(backend: Backend) -> None:
    """The rig's own control: attribution sees every step, in the spec's order."""
    for family in (SCHEMA, MIGRATION):
        world = World.make(family, Driver(), backend)
        for _ in range(3):
            world.run()
        seen: list[Step] = []
        for call in world.api.steps(ok=True):
            if call.step is not None and call.step not in seen:
                seen.append(call.step)
        expected = [s for s in DISPATCH_ORDER if family is SCHEMA or s is not Step.STAGE]
        assert seen == expected
        holding = world.holding()
        assert holding.claimed_job and holding.claim["jobUID"] == holding.claimed_job
        assert holding.lease_holder == holding.claim_holder
        site = world.site
        lease = site.peek(
            LEASES, site.lease_namespace, lease_name(holding.claim["coordinationDigest"])
        )
        assert lease is not None


def test_the_rig_needs_nothing_of_the_api_but_its_protocol(backend: Backend) -> None:
    """Step attribution on the double reads the store through its ``peek``; read
    through the adapter protocol alone, on the double or on the real server, it
    attributes the same calls to the same steps, so the rows mean the same on both."""
    other = InMemory(protocol_only=True) if backend.name == MEMORY else backend
    for family in (SCHEMA, MIGRATION):
        seen = []
        for each in (DOUBLE, other):
            world = World.make(family, Driver(), each)
            for _ in range(3):
                world.run()
            seen.append([(c.step, c.verb, c.resource) for c in world.api.steps()])
        assert seen[0] == seen[1]
        assert seen[0]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_each_dispatch_step_leaves_a_state_the_next_pass_recovers_from(
    row: Row, backend: Backend
) -> None:
    assert run_row(row, Driver(), backend) == []


# -- the boundaries, exchanged ---------------------------------------------------------


@dataclass(frozen=True)
class Boundary:
    first: Step
    second: Step
    # The rows (without the family) that must fail when the two steps are exchanged,
    # each with the problem the boundary prevents: the window the spec names for it.
    witnesses: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return f"{self.first.value}<->{self.second.value}"

    def witness_rows(self) -> list[tuple[Row, str]]:
        """Each witness's row in every family that has it, with the problem it must
        report under the exchange."""
        by_id = {row.id: row for row in ROWS}
        found: list[tuple[Row, str]] = []
        for witness, problem in self.witnesses:
            for family in (SCHEMA, MIGRATION):
                if family is MIGRATION and Step.STAGE in (self.first, self.second):
                    continue  # a migration stages nothing: exchanging stage moves nothing
                row = by_id.get(f"{family.name}-{witness}")
                if row is not None:
                    found.append((row, problem))
        return found


# The adjacent pairs whose exchange changes nothing observable (stage and snapshot
# are both durable before the mark either way) are not listed; every pair that orders
# a dependency against the mark, the create against its cover and its read-back, and
# authorization against the realm is.
BOUNDARIES: Final = [
    # A claim whose authorization moved is retired without waiting for the realm.
    Boundary(Step.AUTHORIZE, Step.LEASE, (("authorize-refused", REFUSED_WAITED),)),
    # Everything a Job depends on is durable before the mark that says one may exist.
    Boundary(
        Step.LEASE,
        Step.MARK,
        (("none-control", MARK_UNHELD), ("authorize-contended", MARK_CONTENDED)),
    ),
    Boundary(Step.STAGE, Step.MARK, (("mark-stops", MARK_NO_PROJECTION),)),
    Boundary(Step.SNAPSHOT, Step.MARK, (("mark-stops", MARK_NO_SNAPSHOT),)),
    Boundary(Step.CONSUME, Step.MARK, (("mark-stops", MARK_UNSPENT),)),
    # The mark covers the one create.
    Boundary(Step.MARK, Step.CREATE, (("create-stops", JOB_UNMARKED),)),
    # The created Job is read back before its UID is recorded.
    Boundary(Step.CREATE, Step.CONFIRM, (("none-control", NEVER_REACHED),)),
    Boundary(Step.CONFIRM, Step.RECORD, (("none-control", RECORD_UNCONFIRMED),)),
]


def test_every_witness_names_a_row() -> None:
    for boundary in BOUNDARIES:
        named = {row.id for row, _ in boundary.witness_rows()}
        for witness, _ in boundary.witnesses:
            assert f"schema-{witness}" in named or f"migration-{witness}" in named


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=[b.id for b in BOUNDARIES])
def test_each_boundary_fails_with_its_steps_swapped(boundary: Boundary, backend: Backend) -> None:
    """Rows run again with the boundary's steps exchanged. Its witnesses, in each
    family that has them, must report the problem the boundary prevents; and some row
    must fail at all, or the boundary is a test that proves nothing. On the double
    every row runs again; on the real server the witnesses alone (the module
    docstring says why)."""
    driver = Driver.swapped(boundary.first, boundary.second)
    witnesses = boundary.witness_rows()
    rows = ROWS if backend.name == MEMORY else [row for row, _ in witnesses]
    found = {row.id: run_row(row, driver, backend) for row in rows}
    assert any(found.values()), f"exchanging {boundary.id} passes every row"
    for row, problem in witnesses:
        assert problem in found[row.id], (row.id, found[row.id])


def test_the_record_check_bites(monkeypatch: pytest.MonkeyPatch) -> None:
    """A supervision that drops an unknown outcome's claim without writing its record
    must fail the rows that stop between the mark and the create."""

    def drop(ctx: PassContext, reason: str) -> Stop:
        del reason
        assert ctx.status is not None
        ctx.write_status(retired_status(ctx.status, drop_plan=False))
        return Stop("dropped without a record")

    monkeypatch.setattr(claimsupervision, "record_unaccounted", drop)
    for family in (SCHEMA, MIGRATION):
        assert RETIRED_NO_RECORD in run_row(Row(family, Step.MARK, "stops"), Driver())


# -- a stop between the Lease write and its epoch write ----------------------------------


def _suspend(world: World) -> None:
    site = world.site
    site.api.patch_spec(world.family.resource, site.namespace, world.key.name, {"suspend": True})


def _rotate(world: World) -> None:
    config = world.env.config
    binding = dataclasses.replace(config.binding, ptah_version="v9.9.9")
    world.env = dataclasses.replace(
        world.env,
        config=dataclasses.replace(config, binding=binding),
        epochs=lambda: "v1-" + "f" * 32,
    )


@pytest.mark.parametrize("retire", [_suspend, _rotate], ids=["suspended", "rotated"])
@pytest.mark.parametrize("family", [SCHEMA, MIGRATION], ids=["schema", "migration"])
def test_a_claim_retired_after_a_stop_at_its_lease_hands_the_realm_back(
    family: Family, retire: Callable[[World], None], backend: Backend
) -> None:
    world = World.make(family, Driver(), backend)
    world.run()  # the claim, with its placeholder epoch
    realm = lease_name(world.holding().claim["coordinationDigest"])
    world.api.arm(Step.LEASE, "stop")
    world.run()  # the Lease is written; the process stops before the epoch write
    world.api.restart()
    retire(world)
    for _ in range(3):
        world.run()
        if not world.holding().claim:
            break
    assert not world.holding().claim
    lease = world.site.peek(LEASES, world.site.lease_namespace, realm)
    assert lease is not None
    # Released at once: otherwise every other claimant would wait out a full duration.
    assert lease["spec"]["holderIdentity"] == ""
