"""The manager loop: watches trigger, a work queue serializes, passes decide.

- Watches only say *which* resource may need a pass. A pass reads everything it
  decides from uncached (``lifecyclepass``), so a stale or missed watch event can
  delay work but never misdirect it.
- The queue hands a key to one worker at a time: a key added while it is being
  worked is run again after, never beside. Two workers on one resource would both
  see the same undispatched claim.
- A pass that failed is retried after the time it asked for, or else with exponential
  backoff, and its key is *held* until then: a watch event meanwhile defers to the hold's
  end instead of running at once. A failed pass's own status writes (a withdrawn
  dispatch marker) come back as watch events; without the hold a create refused by an
  unreachable webhook marked and withdrew several times a second instead of every
  ``REFUSED_RETRY``. A hold lasts at most ``HOLD_CAP``, so a real change waits no longer.
  One that asked for a requeue without failing is run again after that time *and* on
  any event (a Job finishing must not wait for the poll); one that did neither waits
  for a watch event.
- Only the elected leader works (``LeaderElector``): a worker takes a key only while
  the elector says it leads, so a leader that cannot renew within its renew deadline
  starts no pass after it, and the loop then stops the workers. Shutdown stops taking
  keys, lets each worker finish its pass, and gives the Lease back only once every
  worker has (a pass still running when the Lease is given back could write beside a
  successor's).
- Each pass's Events are sent after the pass (``events``).
- A ``PassObserver`` hears of each pass, each loop turn and each key's wait in the
  queue: the manager's health and metrics are read from it, never from the passes.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from controller.context import passlog
from controller.context.passcontext import Environment, Subject
from controller.mutationlifecycle import Stop
from controller.pieces.events import EventSink
from controller.pieces.watchscope import (
    CLUSTER,
    WatchScope,
    namespace_refusal,
    watch_labels,
    watch_targets,
)
from controller.runtime.leaderelection import LeaderElector
from controller.runtime.lifecyclepass import FAMILIES, PassResult, request_claim, run_pass
from jobclaim.apiserver import (
    JOBS,
    PTAHMIGRATIONAPPROVALS,
    PTAHSCHEMAAPPROVALS,
    ApiError,
    Object,
    Resource,
)

log = logging.getLogger(__name__)

# The longest a failed pass's key defers watch events: long enough that a pass's own
# status writes cannot loop it, short enough that a user's fix is taken up promptly.
HOLD_CAP: Final = 10.0


@dataclass(frozen=True, slots=True, order=True)
class Key:
    kind: str
    namespace: str
    name: str


class PassObserver(Protocol):
    """What the loop reports as it goes; every call must be quick and must not raise."""

    def loop_turned(self, leading: bool) -> None:
        """The campaign or leading loop went round once (a heartbeat)."""

    def pass_started(self, key: Key) -> None: ...

    def pass_finished(
        self,
        key: Key,
        stop: Stop,
        seconds: float,
        reasons: list[str],
        subject: Subject | None = None,
    ) -> None:
        """``reasons`` are the pass's Event reasons, in order; ``subject`` is the
        resource as the pass last read or wrote it (None: gone, or not read at all,
        which ``stop.error`` tells apart)."""

    def waited(self, seconds: float) -> None:
        """A key waited ``seconds`` in the queue between becoming ready and a worker."""


class Unobserved:
    """A pass observer that observes nothing: the default, and a base for one that
    observes only some of the calls."""

    def loop_turned(self, leading: bool) -> None:
        pass

    def pass_started(self, key: Key) -> None:
        pass

    def pass_finished(
        self,
        key: Key,
        stop: Stop,
        seconds: float,
        reasons: list[str],
        subject: Subject | None = None,
    ) -> None:
        pass

    def waited(self, seconds: float) -> None:
        pass


class WorkQueue:
    """A keyed queue: deduplicated, one holder per key, delays and backoff by ``clock``."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        base_delay: float = 0.05,
        max_delay: float = 300.0,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self._clock = clock
        self._on_wait = on_wait
        self._ready_since: dict[Key, float] = {}
        self._base = base_delay
        self._max = max_delay
        self._cond = threading.Condition()
        self._ready: deque[Key] = deque()
        self._queued: set[Key] = set()
        self._active: set[Key] = set()
        self._dirty: set[Key] = set()
        self._delayed: list[tuple[float, Key]] = []
        self._failures: dict[Key, int] = {}
        self._held_until: dict[Key, float] = {}
        self._closed = False

    def add(self, key: Key, *, after: float = 0.0) -> None:
        with self._cond:
            if self._closed:
                return
            held = self._held_until.get(key)
            if held is not None:
                # A failed pass's key: what comes before its retry waits for it.
                after = max(after, held - self._clock())
            if after > 0:
                heapq.heappush(self._delayed, (self._clock() + after, key))
            elif key in self._active:
                self._dirty.add(key)  # run again after the current pass, never beside it
            elif key not in self._queued:
                self._make_ready(key)
            self._cond.notify()

    def _make_ready(self, key: Key) -> None:
        self._queued.add(key)
        self._ready.append(key)
        self._ready_since[key] = self._clock()

    def add_with_backoff(self, key: Key, *, delay: float | None = None) -> float:
        """Add after ``delay`` if the failed pass named one, else after a delay that
        doubles with each consecutive failure of ``key``; hold the key until then,
        ``HOLD_CAP`` at most."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            if not delay:
                delay = min(self._max, self._base * float(2**failures))
            self._held_until[key] = self._clock() + min(delay, HOLD_CAP)
        self.add(key, after=delay)
        return delay

    def forget(self, key: Key) -> None:
        """``key``'s pass succeeded: its next failure backs off from the start."""
        with self._cond:
            self._failures.pop(key, None)
            self._held_until.pop(key, None)

    def _promote(self) -> float | None:
        """Move due delayed keys to ready; the seconds until the next one is due."""
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, key = heapq.heappop(self._delayed)
            held = self._held_until.get(key)
            if held is not None:
                if held > now:
                    # An older requeue (a reading's poll, a renewal) falling due inside
                    # a failed pass's hold: the hold's own retry is queued at its end.
                    continue
                del self._held_until[key]
            if key in self._active:
                self._dirty.add(key)
            elif key not in self._queued:
                self._make_ready(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> Key | None:
        """The next key, now marked active; None on timeout or shutdown."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                next_due = self._promote()
                if self._closed:
                    return None
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    self._active.add(key)
                    since = self._ready_since.pop(key, None)
                    if self._on_wait is not None and since is not None:
                        self._on_wait(self._clock() - since)
                    return key
                waits = [w for w in (next_due,) if w is not None]
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    waits.append(remaining)
                self._cond.wait(min(waits) if waits else None)

    def done(self, key: Key) -> None:
        with self._cond:
            self._active.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                # The usual way a pass's own write comes back: its watch event lands
                # while the pass still runs. A pass that failed holds its key.
                held = self._held_until.get(key, 0.0) - self._clock()
                if held > 0:
                    heapq.heappush(self._delayed, (self._clock() + held, key))
                elif key not in self._queued:
                    self._make_ready(key)
            self._cond.notify()

    def shut_down(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._ready) + len(self._delayed)


# What each watched kind says about which resource may need a pass.
_JOB_OWNERS: Final = frozenset(FAMILIES)
_APPROVAL_OWNER: Final = {
    PTAHSCHEMAAPPROVALS.kind: ("PtahSchema", "schemaRef"),
    PTAHMIGRATIONAPPROVALS.kind: ("PtahMigration", "migrationRef"),
}


def resume_from(current: str | None, seen: object) -> str | None:
    """Where the next watch resumes after an event whose object is at ``seen``. Pure.

    A watch begun without a version opens with one ADDED event per existing object,
    in no order: resuming from the *last* one's version resumed from an old object's,
    which the server had compacted away (410 "too old resource version"), so every
    ten seconds the watch broke, started over, and queued every resource again (seen
    on the lab cluster). The newest version seen is kept instead. Versions are opaque
    to clients in general; the API server's are etcd revisions, decimal integers, and
    one that is not is taken as it comes.
    """
    if not seen:
        return current
    text = str(seen)
    if current is not None and current.isdecimal() and text.isdecimal():
        return text if int(text) > int(current) else current
    return text


def watch_pause_after(lasted: float, timeout: float, pause: float) -> float:
    """The pause before a watch that ended cleanly after ``lasted`` seconds is opened
    again. Pure.

    One the server ended at its timeout is opened again at once, from the newest
    version seen: pausing there too left a window, every ``timeout``, in which a change
    (a person's approval among them) waited up to ``pause`` unheard (issue 34's
    trace). One that ended early still pauses, so a server closing every watch at once
    is not asked again in a tight loop. A broken watch always pauses (``_watch``).
    """
    return 0.0 if lasted >= timeout / 2 else pause


def keys_for(resource: Resource, obj: Object) -> list[Key]:
    """The resources a watch event about ``obj`` may concern. Pure."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    if resource.kind in FAMILIES:
        return [Key(resource.kind, namespace, str(meta.get("name") or ""))]
    if resource.kind == JOBS.kind:
        refs = meta.get("ownerReferences") or []
        return [
            Key(ref["kind"], namespace, ref["name"])
            for ref in refs
            if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") in _JOB_OWNERS
        ]
    owner = _APPROVAL_OWNER.get(resource.kind)
    if owner is not None:
        ref = (obj.get("spec") or {}).get(owner[1]) or {}
        if isinstance(ref, dict) and ref.get("name"):
            return [Key(owner[0], namespace, str(ref["name"]))]
    return []


WATCHED: Final = (
    *(family.resource for family in FAMILIES.values()),
    JOBS,
    PTAHSCHEMAAPPROVALS,
    PTAHMIGRATIONAPPROVALS,
)


class Reconciler:
    """Runs passes for keys, by hand (``reconcile``) or from watches (``run``)."""

    def __init__(
        self,
        env: Environment,
        events: EventSink,
        *,
        namespace: str | None = None,
        scope: WatchScope | None = None,
        elector: LeaderElector | None = None,
        queue: WorkQueue | None = None,
        workers: int = 2,
        watch_pause: float = 1.0,
        watch_timeout: int = 10,
        observer: PassObserver | None = None,
    ) -> None:
        self.env = env
        self.events = events
        # ``namespace`` is the one-namespace scope of the lab and older callers.
        self.scope = scope or (WatchScope((namespace,)) if namespace else CLUSTER)
        self.elector = elector
        self.observer: PassObserver = observer or Unobserved()
        self.queue = queue or WorkQueue(on_wait=self.observer.waited)
        self.workers = workers
        self.watch_pause = watch_pause
        # The server ends each watch after this long, which bounds how long a stop
        # waits for a quiet watch; the watch is simply re-established.
        self.watch_timeout = watch_timeout
        self.passes = 0
        # Each worker's pass hands its Event reasons to the observer through this.
        self._reasons = threading.local()

    # -- one pass ----------------------------------------------------------------------

    def reconcile(self, key: Key) -> Stop:
        """One pass over ``key``; its Events are sent after it."""
        return self._finish(run_pass(self.env, key.kind, key.namespace, key.name))

    def claim(self, key: Key, operation: str) -> Stop:
        """Claim ``operation`` on ``key`` through the family's operation table."""
        result = self._finish(request_claim(self.env, key.kind, key.namespace, key.name, operation))
        self.queue.add(key)
        return result

    def _finish(self, result: PassResult) -> Stop:
        self.passes += 1
        regarding = result.regarding
        reasons: list[str] = []
        if regarding is not None and result.ctx is not None:
            for record in result.ctx.event_records():
                reasons.append(record.reason)
                self.events.emit(regarding, record)
        self._reasons.reasons = reasons
        self._reasons.subject = result.ctx.subject if result.ctx is not None else None
        return result.stop

    def process(self, key: Key) -> Stop:
        """One queued pass and its requeue decision."""
        with passlog.pass_fields(key.kind, key.namespace, key.name) as fields:
            return self._process(key, fields)

    def _process(self, key: Key, fields: dict[str, Any]) -> Stop:
        scope = self.scope
        outside = (
            None if scope.cluster_wide else namespace_refusal(self.env.api, scope, key.namespace)
        )
        if outside is not None:
            # Not ours: no pass, no Event, no status write. A namespace whose labels
            # could not be read is tried again later, never served on a guess.
            log.debug("%s: %s", key, outside.reason)
            if outside.retry:
                self.queue.add_with_backoff(key, delay=None)
            else:
                self.queue.forget(key)
            return Stop(outside.reason)
        self.observer.pass_started(key)
        log.debug("pass starts")  # the dequeue, for a trace; the end is the "pass:" line
        started = time.monotonic()
        self._reasons.reasons = []
        self._reasons.subject = None
        try:
            stop = self.reconcile(key)
        except Exception as error:  # a bug must not kill the worker; backoff retries it
            log.exception("a pass over %s failed", key)
            stop = Stop("the pass raised", error=error)
        seconds = time.monotonic() - started
        reasons: list[str] = list(self._reasons.reasons)
        subject: Subject | None = self._reasons.subject
        self.observer.pass_finished(key, stop, seconds, reasons, subject)
        if subject is not None:
            fields.update(passlog.subject_fields(subject))
        # A pass that crossed a boundary (a claim, a dispatch, a harvest, a retirement)
        # is said at info; a quiet one at debug.
        log.log(
            logging.INFO if reasons else logging.DEBUG,
            "pass: %s",
            stop.reason,
            extra={"fields": {"events": reasons, "durationMs": round(seconds * 1000, 3)}},
        )
        if stop.error is not None:
            # A pass that names its own retry (a refused create: REFUSED_RETRY) keeps
            # that cadence; growing it would leave a Job uncreated for minutes after
            # the webhook is back.
            self.queue.add_with_backoff(key, delay=stop.requeue_after)
            log.info("%s: %s (%s)", key, stop.reason, stop.error)
        else:
            self.queue.forget(key)
            if stop.requeue_after is not None:
                self.queue.add(key, after=stop.requeue_after)
        return stop

    # -- the loop ----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Campaign, then work until ``stop`` is set or leadership is lost."""
        elector = self.elector
        while elector is not None and not elector.try_acquire_or_renew():
            self.observer.loop_turned(False)
            if stop.wait(elector.retry_period):
                return
        if elector is not None:
            log.info("became leader", extra={"fields": {"identity": elector.identity}})
        watchers = [
            threading.Thread(target=self._watch, args=(r, where, stop), daemon=True)
            for r in WATCHED
            for where in watch_targets(self.scope)
        ]
        workers = [
            threading.Thread(target=self._work, args=(stop,), daemon=True)
            for _ in range(self.workers)
        ]
        for thread in (*watchers, *workers):
            thread.start()
        try:
            while not stop.is_set():
                self.observer.loop_turned(True)
                if elector is None:
                    stop.wait(1.0)
                    continue
                if not elector.try_acquire_or_renew() and not elector.leading:
                    log.warning("leadership lost; stopping the workers")
                    break
                # Wake by the renew deadline at the latest, so a failed renewal is
                # noticed when it matters, not a whole retry period later.
                stop.wait(max(0.0, min(elector.retry_period, elector.seconds_left())))
        finally:
            stop.set()
            self.queue.shut_down()
            for thread in workers:
                thread.join()
            # A watch only queues keys into the closed queue now; it ends when its
            # stream does, at most ``watch_timeout`` later, and nothing waits for it.
            if elector is not None:
                elector.release()

    def _may_work(self) -> bool:
        return self.elector is None or self.elector.leading

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set() and self.work_one(stop):
            pass

    def work_one(self, stop: threading.Event, timeout: float | None = None) -> bool:
        """Take one key and run its pass, if this process may still work; False once
        the queue is closed (or nothing came within ``timeout``)."""
        key = self.queue.get(timeout)
        if key is None:
            return False
        try:
            if not self._may_work():
                # Past the renew deadline no pass starts: the key stays queued for
                # whoever leads next (the next leader's watch finds it anyway).
                self.queue.add(key)
                stop.wait(0.05)
            else:
                self.process(key)
        finally:
            self.queue.done(key)
        return True

    def _watch(self, resource: Resource, namespace: str | None, stop: threading.Event) -> None:
        version: str | None = None
        while not stop.is_set():
            opened = time.monotonic()
            try:
                events = self.env.api.watch(
                    resource,
                    namespace,
                    resource_version=version,
                    timeout_seconds=self.watch_timeout,
                    label_selector=watch_labels(resource),
                )
                for event in events:
                    if stop.is_set():
                        return
                    obj = event.object
                    version = resume_from(version, obj.get("metadata", {}).get("resourceVersion"))
                    # When the manager heard of a change: the first mark of a trace of
                    # the approval path (benchmarks/approvaltrace.py); debug only.
                    log.debug(
                        "watch: %s %s %s",
                        resource.kind,
                        event.type,
                        obj.get("metadata", {}).get("name"),
                    )
                    for key in keys_for(resource, obj):
                        self.queue.add(key)
                lasted = time.monotonic() - opened
                if not watch_pause_after(lasted, self.watch_timeout, self.watch_pause):
                    continue
            except ApiError as error:  # the server's answer: said in a line, no traceback
                log.warning("the %s watch broke (%s); watching afresh", resource.plural, error)
                version = None
            except Exception:  # a broken watch is re-established; decisions never rely on it
                log.exception("the %s watch broke; watching afresh", resource.plural)
                version = None
            stop.wait(self.watch_pause)
