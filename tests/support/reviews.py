"""Admission reviews counted while the webhook's certificates rotate (issue 21).

The rotation scenarios (``tests/realapi/test_cert_rotation.py`` on a bare API server,
``tests/cluster/test_faults_rotation.py`` on the lab cluster) write through the
webhooks round after round and count every answer by phase; any answer but the
expected one, a failed call to the webhook above all, is a failed review.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import httpx


@dataclass
class Traffic:
    """Reviews made round after round until stopped, counted by phase."""

    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    phase: str = "before"
    stop: threading.Event = field(default_factory=threading.Event)

    def count(
        self, what: str, answer: httpx.Response | Exception, expected: int, saying: str = ""
    ) -> None:
        """One review's answer: ``expected`` with ``saying`` in it, or a failed review."""
        phase = self.phase
        self.counts[phase] = self.counts.get(phase, 0) + 1
        if isinstance(answer, Exception):
            self.failures.append(f"{phase} {what}: {answer!r}")
        elif answer.status_code != expected or saying not in answer.text:
            self.failures.append(f"{phase} {what}: {answer.status_code} {answer.text[:300]}")
