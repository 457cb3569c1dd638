"""What ``/healthz`` and ``/readyz`` answer: pure verdicts over snapshots.

Liveness is about this process being able to make progress: the controller loop must
keep turning (a campaign or renewal round every retry period) and no pass may run
longer than the stall period. A wedged pass holds its key forever; only a restart
frees it, which is what a failed liveness probe buys.

Readiness is about answering admission correctly: a loaded, unexpired certificate, a
readable API server, and a served certificate that each installed webhook
configuration's ``caBundle`` trusts (else the API server cannot call us, and every
write it sends here fails closed). A follower is ready: it serves the webhook.

Readiness is judged from cached facts, never from a call made for the probe: the
readiness refresher (``manager.readiness``) reads the API server on its own period
and records when a read last succeeded. A probe that called the API server itself
would, with a slow API server, time out on every replica at once, take them all out
of the webhook Service together, and the fail-closed webhooks would then refuse every
write; a read that succeeded within the window says the API server is readable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cryptography import x509

import certs
from controller import Key


@dataclass(frozen=True, slots=True)
class ControllerSnapshot:
    """The controller loop as the monitor last saw it (monotonic seconds)."""

    now: float
    loop_alive: bool
    stopping: bool
    last_turn: float
    passes: Mapping[int, tuple[Key, float]] = field(default_factory=dict)


def liveness_problems(snapshot: ControllerSnapshot, stall_seconds: float) -> list[str]:
    """What makes this process unable to progress; empty when it is live. Pure."""
    if snapshot.stopping:
        return []  # shutting down on purpose: the kubelet must not restart us meanwhile
    problems: list[str] = []
    if not snapshot.loop_alive:
        problems.append("the controller loop has ended")
    idle = snapshot.now - snapshot.last_turn
    if idle >= stall_seconds:
        problems.append(f"the controller loop has not turned for {idle:.0f}s")
    for key, started in sorted(snapshot.passes.values()):
        running = snapshot.now - started
        if running >= stall_seconds:
            problems.append(
                f"a pass over {key.kind} {key.namespace}/{key.name} has run for {running:.0f}s"
            )
    return problems


@dataclass(frozen=True, slots=True)
class ApiFacts:
    """What the readiness refresher last learned of the API server (monotonic seconds)."""

    now: float
    last_read: float | None = None
    last_error: str | None = None
    # The caBundles read at ``last_read``, by configuration name.
    bundles: Mapping[str, bytes] = field(default_factory=dict)


def api_problems(facts: ApiFacts, window_seconds: float) -> list[str]:
    """Stale facts, or none yet: the API server cannot be said to be readable. Pure."""
    failed = f"; the last read failed: {facts.last_error}" if facts.last_error else ""
    if facts.last_read is None:
        return [f"the API server has not been read yet{failed}"]
    age = facts.now - facts.last_read
    if age > window_seconds:
        return [
            f"the API server has not been read for {age:.0f}s "
            f"(more than {window_seconds:.0f}s){failed}"
        ]
    return []


def trust_problems(served: x509.Certificate, bundles: Mapping[str, bytes]) -> list[str]:
    """The webhook configurations whose caBundle does not trust ``served``. Pure."""
    problems: list[str] = []
    for name, bundle in sorted(bundles.items()):
        try:
            trusted = certs.load_certificates(bundle, what=f"the caBundle of {name}")
        except certs.CertificateError:
            trusted = []
        if not any(certs.is_issued_by(served, ca) for ca in trusted):
            problems.append(f"the caBundle of webhook configuration {name} does not trust it")
    return problems


class ControllerMonitor:
    """Records the loop's turns and the passes in flight; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_turn = clock()
        self._passes: dict[int, tuple[Key, float]] = {}
        self.loop_alive: Callable[[], bool] = lambda: True
        self.stopping = threading.Event()

    def turned(self) -> None:
        with self._lock:
            self._last_turn = self._clock()

    def started(self, key: Key) -> None:
        with self._lock:
            self._passes[threading.get_ident()] = (key, self._clock())

    def finished(self) -> None:
        with self._lock:
            self._passes.pop(threading.get_ident(), None)

    def snapshot(self) -> ControllerSnapshot:
        with self._lock:
            return ControllerSnapshot(
                now=self._clock(),
                loop_alive=self.loop_alive(),
                stopping=self.stopping.is_set(),
                last_turn=self._last_turn,
                passes=dict(self._passes),
            )
