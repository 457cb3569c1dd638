"""The lab's long-running child processes: started with a log, stopped for sure.

Each runs in its own session (process group), so stopping it signals it and
whatever it started, and a terminal's Ctrl-C reaches the lab (which then tears
down in order) rather than every component at once. Each also gets the kernel's
parent-death signal, so a lab killed outright (SIGKILL) does not leave a
kubelet or containerd running on its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

__all__ = ["Child", "ChildExited", "alive", "run_checked", "signal_group", "wait_until"]

_PR_SET_PDEATHSIG = 1
# How much of a log an error message carries.
_TAIL_LINES = 30


class ChildExited(Exception):
    """A component the lab started is no longer running."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    # ProcessLookupError means the group is already empty, which is the goal.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def alive(pid: int) -> bool:
    """Whether pid names a process that has not yet exited (zombies count as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Child:
    """One component: its command, its log file, its process."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = tuple(argv)
        self.log_path = log_path
        self._env = dict(env) if env is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise ChildExited(f"{self.name} was never started")
        return self._process.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            # A file, not a pipe nobody drains, which would block the component.
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
            env=self._env,
        )

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def check(self) -> None:
        """Raise ChildExited, with the end of its log, when it has exited."""
        if self._process is None:
            raise ChildExited(f"{self.name} was never started")
        code = self._process.poll()
        if code is not None:
            raise ChildExited(f"{self.name} exited with code {code}; {self.log_tail()}")

    def stop(self, grace: float) -> str:
        """SIGTERM, then SIGKILL after ``grace`` seconds; "" or what went wrong.

        Whatever else is left in its process group is killed too.
        """
        process = self._process
        if process is None:
            return ""
        problem = ""
        try:
            if process.poll() is None:
                signal_group(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    signal_group(process.pid, signal.SIGKILL)
                    process.wait()
                    problem = f"{self.name} did not stop within {grace:.0f}s of SIGTERM"
            signal_group(process.pid, signal.SIGKILL)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
        return problem

    def wait_for_exit(self, timeout: float) -> int:
        """Wait for a one-shot command; returns its exit code."""
        if self._process is None:
            raise ChildExited(f"{self.name} was never started")
        try:
            return self._process.wait(timeout=timeout)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"cannot read {self.log_path}: {exc}"
        return f"last lines of {self.log_path}:\n" + "\n".join(lines[-_TAIL_LINES:])


def wait_until(
    what: str, ready: Callable[[], str], *, timeout: float, children: Sequence[Child]
) -> None:
    """Poll ``ready()`` until it returns "" (ready) or the deadline passes.

    ``ready`` returns "" when ready, else what it is still waiting for. A
    component is started once and becomes ready on its own time (a kubelet
    registers its node, containerd opens its socket); the poll has a deadline so
    a component that never gets there fails the start with the last reason
    instead of hanging, and it checks the children every round so one that dies
    is reported at once with its log.
    """
    deadline = time.monotonic() + timeout
    interval = 0.05
    last = "not checked yet"
    while True:
        for child in children:
            child.check()
        last = ready()
        if last == "":
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} was not ready within {timeout:.0f}s: {last}")
        time.sleep(interval)
        interval = min(interval * 2, 0.5)


def run_checked(
    argv: Sequence[str],
    *,
    what: str,
    error: type[Exception],
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run a one-shot tool to completion; its stdout, or ``error`` with the end of its output."""
    try:
        result = subprocess.run(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"cannot run {what}: {exc}") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-_TAIL_LINES:])
        raise error(f"{what} failed with exit code {result.returncode}:\n{tail}")
    return result.stdout
