"""Waiting for what the API server does on its own time: a bounded poll.

Used only where nothing announces the change we wait for (a CRD becoming
Established, a webhook configuration coming into force, a Job controller's Pod);
a failure is a ``TimeoutError`` saying what was waited for, never a silent return.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["DEADLINE", "until"]

# Bounds a failure of something the API server does asynchronously; never waited
# out when things work.
DEADLINE: Final = 60.0


def until(condition: Callable[[], bool], what: str, *, deadline: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds. Used only for what the API server does on
    its own time and announces nowhere we can wait on."""
    end = time.monotonic() + deadline
    pause = 0.05
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(f"gave up after {deadline:.0f}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
