"""SIGTERM and SIGINT as an exception, so a run can say what it did before it exits 128+N.

``Interrupted`` derives from ``BaseException``: no ``except Exception`` or
``except psycopg.Error`` on the way up may swallow it and carry on writing.
"""

from __future__ import annotations

import signal
from types import FrameType


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _raise)
