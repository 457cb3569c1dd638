"""The manager loop: the keyed queue, what watch events point at, leader election,
requeue decisions, Events per boundary, and a clean run and shutdown.

Time in the queue and the elector is an injected clock; the one threaded test waits
on an Event a listener sets, never on a sleep.
"""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.context.passcontext import Subject
from controller.mutationlifecycle import Stop
from controller.runtime.leaderelection import LeaderElector
from controller.runtime.reconciler import (
    HOLD_CAP,
    Key,
    Reconciler,
    WorkQueue,
    keys_for,
    resume_from,
    watch_pause_after,
)
from controller.stages.dispatch_steps import REFUSED_RETRY
from jobclaim.apiserver import (
    JOBS,
    LEASES,
    PTAHMIGRATIONAPPROVALS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAS,
    Object,
    Resource,
)
from kube.client import classify
from kube.fake.inmemory import InMemoryApi, matching
from tests.support.dispatchworld import (
    LEASE_NS,
    NS,
    Clocks,
    add_migration,
    add_schema,
    make_rig,
)

A = Key("PtahSchema", "ns", "a")
B = Key("PtahSchema", "ns", "b")


def test_the_queue_deduplicates_and_keeps_order() -> None:
    queue = WorkQueue(clock=Clocks().monotonic)
    for key in (A, B, A):
        queue.add(key)
    assert [queue.get(0), queue.get(0), queue.get(0)] == [A, B, None]


def test_a_key_is_never_handed_to_two_workers() -> None:
    queue = WorkQueue(clock=Clocks().monotonic)
    queue.add(A)
    assert queue.get(0) == A
    queue.add(A)  # a watch event while the pass runs
    assert queue.get(0) is None  # not beside the running pass
    queue.done(A)
    assert queue.get(0) == A  # but once more after it


def test_delays_and_backoff_follow_the_injected_clock() -> None:
    clocks = Clocks()
    queue = WorkQueue(clock=clocks.monotonic, base_delay=1.0, max_delay=4.0)
    assert [queue.add_with_backoff(A) for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    assert queue.get(0) is None
    clocks.advance(1.0)
    assert queue.get(0) is None  # held until the last failure's retry
    clocks.advance(3.0)
    assert queue.get(0) == A
    queue.done(A)
    queue.forget(A)
    assert queue.add_with_backoff(A) == 1.0
    queue.add(B, after=10.0)
    clocks.advance(9.0)
    assert queue.get(0) == A  # A's retry is due; B is not
    queue.done(A)
    assert queue.get(0) is None
    clocks.advance(1.0)
    assert queue.get(0) == B


def test_shutdown_wakes_every_waiting_worker() -> None:
    queue = WorkQueue(clock=Clocks().monotonic)
    queue.shut_down()
    assert queue.get() is None
    queue.add(A)
    assert len(queue) == 0


def _obj(**meta: object) -> Object:
    return {"metadata": {"namespace": "ns", **meta}}


JOB_OWNER = {"kind": "PtahSchema", "name": "a", "controller": True}
# (id, watched resource, object, the keys it triggers)
TRIGGERS: list[tuple[str, Resource, Object, list[Key]]] = [
    ("control-schema", PTAHSCHEMAS, _obj(name="a"), [A]),
    ("owned-job", JOBS, _obj(name="j", ownerReferences=[JOB_OWNER]), [A]),
    ("foreign-job", JOBS, _obj(name="j", ownerReferences=[{**JOB_OWNER, "kind": "CronJob"}]), []),
    ("unowned-job", JOBS, _obj(name="j"), []),
    ("schema-approval", PTAHSCHEMAAPPROVALS,
     {**_obj(name="x"), "spec": {"schemaRef": {"name": "a", "uid": "u"}}}, [A]),
    ("migration-approval", PTAHMIGRATIONAPPROVALS,
     {**_obj(name="x"), "spec": {"migrationRef": {"name": "m", "uid": "u"}}},
     [Key("PtahMigration", "ns", "m")]),
    ("a-lease", LEASES, _obj(name="ptah-t-x"), []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("resource", "obj", "keys"), [r[1:] for r in TRIGGERS], ids=[r[0] for r in TRIGGERS]
)
def test_what_a_watch_event_triggers(resource: Resource, obj: Object, keys: list[Key]) -> None:
    assert keys_for(resource, obj) == keys


# (id, seconds the watch lasted before the server ended it cleanly, pause before the next)
# with a 10 s watch timeout and a 1 s pause.
WATCH_ENDS: list[tuple[str, float, float]] = [
    ("control-ended-at-its-timeout", 10.0, 0.0),
    ("ended-at-half-its-timeout", 5.0, 0.0),
    ("ended-at-once", 0.0, 1.0),
    ("ended-early", 4.9, 1.0),
]


@pytest.mark.parametrize(
    ("lasted", "pause"), [r[1:] for r in WATCH_ENDS], ids=[r[0] for r in WATCH_ENDS]
)
def test_a_watch_ended_at_its_timeout_is_opened_again_at_once(lasted: float, pause: float) -> None:
    assert watch_pause_after(lasted, 10.0, 1.0) == pause, (
        "a watch ended at its timeout must reopen at once (a change waits unheard in the "
        "pause), and one ended early must pause (a tight loop against the server)"
    )


def test_one_leader_at_a_time_and_expiry_by_our_own_observation() -> None:
    api = InMemoryApi()
    clocks = Clocks()
    first = LeaderElector(api, LEASE_NS, "ptah-leader", "one", clock=clocks.monotonic)
    second = LeaderElector(api, LEASE_NS, "ptah-leader", "two", clock=clocks.monotonic)
    assert first.try_acquire_or_renew()
    assert not second.try_acquire_or_renew()  # first sighting starts our own count
    clocks.advance(first.duration - 1)
    assert not second.try_acquire_or_renew()
    assert first.try_acquire_or_renew()  # a renewal changes the record: count again
    assert not second.try_acquire_or_renew()
    clocks.advance(first.duration - 1)
    assert not second.try_acquire_or_renew()
    clocks.advance(1)
    assert not first.leading  # the silent leader stops before anyone may take over
    assert second.try_acquire_or_renew()
    second.release()
    assert first.try_acquire_or_renew()  # a released Lease is free at once


def test_a_pass_that_failed_backs_off_and_one_that_asked_is_requeued() -> None:
    rig = make_rig()
    key = add_schema(rig)
    queue = rig.reconciler.queue
    assert rig.reconciler.process(key).requeue_after == 0.0
    assert queue.get(0) == key
    queue.done(key)
    rig.api.fail_read(matching("get", PTAHSCHEMAS))
    failed = rig.reconciler.process(key)
    assert failed.error is not None
    assert queue.get(0) is None  # backed off, not immediate
    rig.reconciler.process(Key("PtahSchema", NS, "missing"))
    assert len(queue) == 1


def test_each_boundary_crossed_is_an_event() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.settle(key)
    assert rig.sink.reasons(key.name) == [
        "Claimed",
        "RealmLocked",
        "PlanProjected",
        "AdmissionResolved",
        "PlanProjected",
        "ApprovalConsumed",
        "DispatchMarked",
        "JobCreated",
        "OperationStarted",
    ]


def test_run_dispatches_from_watches_and_shuts_down_cleanly() -> None:
    rig = make_rig()
    schema = add_schema(rig)
    migration = add_migration(rig)
    started: set[str] = set()
    both = threading.Event()

    def listen(regarding: object, record: object) -> None:
        if getattr(record, "reason", "") == "OperationStarted":
            started.add(getattr(regarding, "name", ""))
            if len(started) == 2:
                both.set()

    rig.sink.listeners.append(listen)
    elector = LeaderElector(rig.api, LEASE_NS, "ptah-leader", "manager-0")
    reconciler = Reconciler(
        rig.env, rig.sink, namespace=NS, elector=elector, workers=2, watch_pause=0.01
    )
    stop = threading.Event()
    runner = threading.Thread(target=reconciler.run, args=(stop,))
    runner.start()
    try:
        assert both.wait(timeout=30), f"dispatched only {started}"
    finally:
        stop.set()
        runner.join(timeout=30)
    assert not runner.is_alive()
    assert started == {schema.name, migration.name}
    assert len(rig.jobs()) == 2
    leader = rig.api.get(LEASES, LEASE_NS, "ptah-leader")
    assert leader["spec"]["holderIdentity"] == ""  # given back on shutdown


def test_a_stop_without_error_or_requeue_waits_for_a_watch() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    rig.api.patch_spec(PTAHSCHEMAS, key.namespace, key.name, {"suspend": True})
    stop = rig.reconciler.process(key)
    assert stop.requeue_after is None and stop.error is None
    assert len(rig.reconciler.queue) == 0


def test_a_waiting_plan_is_requeued_for_its_refresh() -> None:
    # A plan awaiting an approval is woken by the approval's watch, and by the refresh
    # of its database an interval after the last reading (controller.pieces.freshness).
    rig = make_rig()
    key = add_schema(rig, approve=False)
    stop = rig.reconciler.process(key)
    assert stop.reason == "the plan awaits an approval"
    assert stop.requeue_after is not None and 0 < stop.requeue_after <= 600


class _Observed:
    def __init__(self) -> None:
        self.started: list[Key] = []
        self.finished: list[tuple[Key, str, list[str]]] = []
        self.waits: list[float] = []
        self.turns: list[bool] = []

    def loop_turned(self, leading: bool) -> None:
        self.turns.append(leading)

    def pass_started(self, key: Key) -> None:
        self.started.append(key)

    def pass_finished(
        self,
        key: Key,
        stop: Stop,
        seconds: float,
        reasons: list[str],
        subject: Subject | None = None,
    ) -> None:
        self.finished.append((key, stop.reason, reasons))

    def waited(self, seconds: float) -> None:
        self.waits.append(seconds)


def test_past_its_renew_deadline_a_worker_starts_no_pass() -> None:
    rig = make_rig()
    key = add_schema(rig)
    elector = LeaderElector(
        rig.api,
        LEASE_NS,
        "ptah-leader",
        "manager-0",
        duration_seconds=15,
        renew_deadline_seconds=10,
        retry_period_seconds=2,
        clock=rig.clocks.monotonic,
    )
    observed = _Observed()
    reconciler = Reconciler(rig.env, rig.sink, elector=elector, observer=observed)
    assert elector.try_acquire_or_renew()
    reconciler.queue.add(key)
    rig.clocks.advance(9)
    assert elector.leading
    rig.clocks.advance(1)  # no renewal for a whole renew deadline
    assert reconciler.work_one(threading.Event(), timeout=0)
    assert observed.started == []
    assert reconciler.queue.get(0) == key  # still queued for whoever leads next


def test_the_observer_hears_each_pass_with_its_event_reasons() -> None:
    rig = make_rig()
    key = add_schema(rig)
    observed = _Observed()
    reconciler = Reconciler(rig.env, rig.sink, observer=observed)
    reconciler.queue.add(key)
    assert reconciler.work_one(threading.Event(), timeout=0)
    assert observed.started == [key]
    ((finished_key, _reason, reasons),) = observed.finished
    assert finished_key == key
    assert reasons == rig.sink.reasons(key.name)[: len(reasons)] and reasons
    assert len(observed.waits) == 1


def test_a_failed_keys_watch_events_wait_for_its_retry_and_a_success_ends_the_hold() -> None:
    clocks = Clocks()
    queue = WorkQueue(clock=clocks.monotonic, base_delay=1.0, max_delay=60.0)
    queue.add(A)
    assert queue.get(0) == A  # a pass over A runs
    queue.add(A)  # the failing pass's own status write, back while the pass still runs
    assert [queue.add_with_backoff(A, delay=5.0) for _ in range(12)] == [5.0] * 12
    queue.done(A)
    queue.add(A)  # and once more after it
    queue.add(B)  # another key is not held
    assert queue.get(0) == B
    queue.done(B)
    clocks.advance(4.9)
    assert queue.get(0) is None
    clocks.advance(0.1)
    assert queue.get(0) == A
    queue.done(A)
    queue.forget(A)  # that pass succeeded
    queue.add(A)
    assert queue.get(0) == A


def test_an_older_requeue_falling_due_inside_a_hold_waits_for_it() -> None:
    clocks = Clocks()
    queue = WorkQueue(clock=clocks.monotonic, base_delay=1.0, max_delay=60.0)
    queue.add(A, after=2.0)  # a reading's poll, asked for by an earlier pass
    queue.add_with_backoff(A, delay=5.0)  # then a pass over A failed
    clocks.advance(2.0)
    assert queue.get(0) is None  # the poll falls due inside the hold
    clocks.advance(3.0)
    assert queue.get(0) == A


def test_a_hold_never_outlasts_its_cap_however_long_the_backoff() -> None:
    clocks = Clocks()
    queue = WorkQueue(clock=clocks.monotonic, base_delay=1000.0, max_delay=1000.0)
    assert queue.add_with_backoff(A) == 1000.0
    clocks.advance(HOLD_CAP)
    queue.add(A)  # a user's fix, after the hold: taken up now, not at the retry
    assert queue.get(0) == A


def test_a_create_refused_by_an_unreachable_webhook_is_retried_no_sooner_than_it_asked() -> None:
    rig = make_rig()
    key = add_schema(rig)
    refused = classify(
        500,
        "InternalError",
        '{"kind":"Status","reason":"InternalError",'
        '"message":"Internal error occurred: failed calling webhook \\"x\\""}',
    )
    rig.api.fail_before_write(matching("create", JOBS), refused, times=None)
    queue = rig.reconciler.queue
    stop = rig.reconciler.process(key)
    while stop.reason != "the create was refused before storing":
        assert queue.get(0) == key, stop
        queue.done(key)
        stop = rig.reconciler.process(key)
    assert (stop.requeue_after, stop.error is not None) == (REFUSED_RETRY, True)
    queue.add(key)  # the withdrawn marker's own watch event
    assert queue.get(0) is None  # waits for the retry instead of marking again at once


@given(st.lists(st.integers(min_value=1, max_value=10**9), min_size=1))
def test_a_watch_resumes_from_the_newest_version_it_saw_in_any_order(versions: list[int]) -> None:
    current: str | None = None
    for version in versions:
        current = resume_from(current, str(version))
    assert current == str(max(versions))


@pytest.mark.parametrize(
    ("current", "seen", "resumed"),
    [
        (None, "2309", "2309"),  # control: the first event sets it
        ("2309", "1413", "2309"),  # an old object's synthetic ADDED does not move it back
        ("2309", None, "2309"),  # an object without a version leaves it
        ("2309", "opaque-7", "opaque-7"),  # a non-revision version is taken as it comes
    ],
)
def test_what_one_event_does_to_the_resume_point(
    current: str | None, seen: str | None, resumed: str
) -> None:
    assert resume_from(current, seen) == resumed


def test_a_running_manager_retries_a_refused_create_once_per_refused_retry() -> None:
    # The whole loop, watches included: a pass's own status writes come back as watch
    # events and must not run it again before its retry. Real time, but only a lower
    # bound is asserted: a loaded machine makes fewer attempts, never more.
    rig = make_rig()
    add_migration(rig)
    refused = classify(
        500,
        "InternalError",
        '{"kind":"Status","reason":"InternalError",'
        '"message":"Internal error occurred: failed calling webhook \\\\"x\\\\""}',
    )
    withdrawn = threading.Event()
    withdrawals: list[float] = []

    def listen(regarding: object, record: object) -> None:
        if getattr(record, "reason", "") == "DispatchWithdrawn":
            withdrawals.append(time.monotonic())
            withdrawn.set()

    rig.sink.listeners.append(listen)
    rig.api.fail_before_write(matching("create", JOBS), refused, times=None)
    reconciler = Reconciler(rig.env, rig.sink, namespace=NS, workers=2, watch_pause=0.01)
    stop = threading.Event()
    runner = threading.Thread(target=reconciler.run, args=(stop,))
    runner.start()
    try:
        assert withdrawn.wait(timeout=30), "no create was refused"
        stop.wait(2.0)  # the window watched: a hot loop would withdraw dozens of times
    finally:
        stop.set()
        runner.join(timeout=30)
    assert len(withdrawals) == 1, [round(t - withdrawals[0], 2) for t in withdrawals]
