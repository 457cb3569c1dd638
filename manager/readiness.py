"""The facts ``/readyz`` is judged by, read from the API server off the probe's path.

A refresher thread reads, every ``PTAH_READY_REFRESH_SECONDS``: a reserved name in the
manager's namespace (its NotFound proves credentials, RBAC and the network end to
end) and each webhook configuration ``PTAH_WEBHOOK_CONFIGURATIONS`` names (their
caBundles). It records when a read last succeeded and why the last one failed. The
probe only reads that record (``manager.health.api_problems``): it answers at once
however slow the API server is, ready while a read succeeded within
``PTAH_READY_WINDOW_SECONDS``, unready once none has for longer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

import certs
from jobclaim.apiserver import PTAHSCHEMAS, VALIDATING_WEBHOOK_CONFIGURATIONS, ApiReader, NotFound
from jobclaim.times import utc_now
from manager.health import ApiFacts, api_problems, trust_problems
from webhook.serving import PROBE_NAME, certificate_problems

__all__ = ["ReadinessFacts", "cached_readiness"]

log = logging.getLogger("ptah.manager.readiness")


class ReadinessFacts:
    """The API server's readability as last seen; thread-safe."""

    def __init__(
        self,
        reader: ApiReader,
        *,
        namespace: str,
        configurations: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._namespace = namespace
        self._configurations = tuple(configurations)
        self._clock = clock
        self._changed = threading.Condition()
        self._last_read: float | None = None
        self._last_error: str | None = None
        self._bundles: dict[str, bytes] = {}
        self.reads = 0  # attempts so far, successful or not

    def refresh(self) -> None:
        """One read of everything readiness depends on; the outcome is recorded."""
        try:
            with contextlib.suppress(NotFound):
                self._reader.get(PTAHSCHEMAS, self._namespace, PROBE_NAME)
            bundles: dict[str, bytes] = {}
            for name in self._configurations:
                try:
                    configuration = self._reader.get(VALIDATING_WEBHOOK_CONFIGURATIONS, None, name)
                except NotFound:
                    continue  # not installed: the API server does not call us for it
                bundles[name] = certs.bundle_of(configuration)
        except Exception as error:
            reason = str(error).lower() or type(error).__name__
            with self._changed:
                if reason != self._last_error:
                    log.warning("readiness: the API server could not be read: %s", reason)
                self._last_error = reason
                self.reads += 1
                self._changed.notify_all()
            return
        with self._changed:
            self._last_read, self._last_error, self._bundles = self._clock(), None, bundles
            self.reads += 1
            self._changed.notify_all()

    def snapshot(self) -> ApiFacts:
        with self._changed:
            return ApiFacts(
                now=self._clock(),
                last_read=self._last_read,
                last_error=self._last_error,
                bundles=dict(self._bundles),
            )

    def wait_for_reads(self, count: int, timeout: float) -> bool:
        """Whether ``count`` reads have been attempted within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.reads >= count, timeout=timeout)

    def run(self, stopping: threading.Event, interval: float) -> None:
        """Refresh every ``interval`` seconds until ``stopping`` is set."""
        while not stopping.is_set():
            self.refresh()
            stopping.wait(interval)


def cached_readiness(
    tls: certs.ReloadingTLS | None,
    facts: ReadinessFacts,
    *,
    window_seconds: float,
    clock: Callable[[], datetime] = utc_now,
) -> Callable[[], list[str]]:
    """What ``/readyz`` answers: the certificate, then the recorded facts; no I/O."""

    def problems() -> list[str]:
        found = certificate_problems(tls, clock())
        snapshot = facts.snapshot()
        found += api_problems(snapshot, window_seconds)
        if tls is not None:
            found += trust_problems(tls.certificate, snapshot.bundles)
        return found

    return problems
