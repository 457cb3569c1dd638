"""Running the executor: its output read, its stderr relayed, its time bounded.

The imperative shell around ``decide``. One thread, one selector, no sleeps: the
loop waits on the child's two pipes, on its exit (a pidfd where the kernel has them,
a short poll where it does not) and on the runner's own stop signal, with a timeout
that is always the next instant something must happen.

* The child runs in a new session, so its whole process group can be signalled:
  SIGTERM at the deadline, SIGKILL a grace period later, and SIGKILL again once the
  child has exited, so nothing it started outlives the account the runner gives.
  An executor's helper that kept running after the runner handed back its account
  could still write to a database the controller believes is free.
* Exit is noticed without reaping (``WNOWAIT``): the group is killed while its
  leader is still a zombie, so its process-group ID cannot have been reused.
* The child's stderr is relayed line by line into the Pod log, every line prefixed,
  so nothing the child prints can pass for a line of the runner's own, and
  redacted, so the database URL never reaches the log;
  or, with no relay (``schema plan``/``schema apply``, which quote SQL), discarded.
* A descendant that holds the child's pipes open after the child exited is noticed
  (the pipes do not close within the drain window) and reported, because its output
  and its writes are then unaccounted for.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from runner.config import Redactor
from runner.decide import ChildOutcome, ChildStop

RELAY_PREFIX: Final = b"[executor] "
MAX_STDOUT: Final = 8 * 1024 * 1024
# The relay is capped so a chatty executor cannot fill the node's log storage.
MAX_RELAY: Final = 1024 * 1024
MAX_RELAY_LINE: Final = 4096
# Kept, never printed, to tell a usage error from a crash (``decide.usage_error``).
STDERR_HEAD: Final = 8192
POLL_SECONDS: Final = 0.05
_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    kill_grace: float = 10.0
    drain: float = 2.0
    stdout_bytes: int = MAX_STDOUT


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Relay:
    """Copies the child's stderr into the runner's, a prefixed and redacted line at a time."""

    def __init__(
        self,
        write: Callable[[bytes], None],
        redactor: Redactor,
        *,
        line_limit: int = MAX_RELAY_LINE,
        total_limit: int = MAX_RELAY,
    ) -> None:
        self._write = write
        self._redactor = redactor
        self._line_limit = line_limit
        self._budget = total_limit
        self._pending = b""
        self._skipping = False  # inside an overlong line already emitted in part
        self._withheld = False

    def feed(self, chunk: bytes) -> None:
        self._pending += chunk
        while True:
            end = self._pending.find(b"\n")
            if end < 0:
                break
            line, self._pending = self._pending[:end], self._pending[end + 1 :]
            if self._skipping:
                self._skipping = False
            else:
                self._emit(line)
        # Keep enough of an overlong line to redact a secret that straddles the cut.
        if len(self._pending) > self._line_limit + self._redactor.longest:
            if not self._skipping:
                self._emit(self._pending)
                self._skipping = True
            self._pending = b""

    def close(self) -> None:
        if self._pending and not self._skipping:
            self._emit(self._pending)
        self._pending, self._skipping = b"", False

    def _emit(self, line: bytes) -> None:
        if self._withheld:
            return
        line = self._redactor.data(line.removesuffix(b"\r"))
        if len(line) > self._line_limit:
            line = line[: self._line_limit] + b" [line truncated]"
        data = RELAY_PREFIX + line + b"\n"
        if len(data) > self._budget:
            self._withheld = True
            data = RELAY_PREFIX + b"further output withheld: the relay limit was reached\n"
        self._budget -= len(data)
        with contextlib.suppress(OSError):
            self._write(data)


def _kill_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def group_survivors(pgid: int, leader: int, proc_root: Path = Path("/proc")) -> list[int]:
    """Live processes (not zombies) of a process group other than its leader.

    Read from /proc: a signal cannot tell a live member from the unreaped leader. An
    unreadable /proc answers "none", which only loses this extra check.
    """
    found: list[int] = []
    try:
        entries = [e for e in proc_root.iterdir() if e.name.isdigit()]
    except OSError:
        return found
    for entry in entries:
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        member = len(fields) >= 3 and fields[2] == str(pgid) and fields[0] != "Z"
        if member and int(entry.name) != leader:
            found.append(int(entry.name))
    return found


def _reason(error: OSError) -> str:
    text = (error.strerror or type(error).__name__).rstrip(".")
    return text[:1].lower() + text[1:]


class _Supervision:
    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        *,
        deadline: float | None,
        limits: Limits,
        relay: Relay | None,
        stop_fd: int | None,
        stop_requested: Callable[[], bool],
        clock: Callable[[], float],
        use_pidfd: bool,
    ) -> None:
        self.proc = proc
        self.deadline = deadline
        self.limits = limits
        self.relay = relay
        self.stop_fd = stop_fd
        self.stop_requested = stop_requested
        self.clock = clock
        self.selector = selectors.DefaultSelector()
        self.pidfd: int | None = None
        if use_pidfd:
            with contextlib.suppress(OSError, AttributeError):
                self.pidfd = os.pidfd_open(proc.pid)
        self.stop = ChildStop.EXITED
        self.stopping = False
        self.kill_at: float | None = None
        self.killed = False
        self.exited = False
        self.drain_until = 0.0
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.problem: str | None = None
        self.open_pipes = 0

    def run(self) -> ChildOutcome:
        for pipe in (self.proc.stdout, self.proc.stderr):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self.selector.register(pipe, selectors.EVENT_READ)
            self.open_pipes += 1
        if self.pidfd is not None:
            self.selector.register(self.pidfd, selectors.EVENT_READ)
        if self.stop_fd is not None:
            self.selector.register(self.stop_fd, selectors.EVENT_READ)
        while not self._finished():
            for key, _ in self.selector.select(self._timeout()):
                self._ready(key.fileobj)
        return self._outcome()

    def _finished(self) -> bool:
        now = self.clock()
        if not self.exited and _exited(self.proc.pid):
            # Asked first: a child that has exited by itself was not stopped, however
            # late the loop noticed; its report is whole and it writes no more.
            self.exited = True
            self.drain_until = now + self.limits.drain
            if self.pidfd is not None:
                self.selector.unregister(self.pidfd)
        if not self.exited:
            if not self.stopping and self.stop_requested():
                self._begin_stop(ChildStop.TERMINATED, now)
            elif not self.stopping and self.deadline is not None and now >= self.deadline:
                self._begin_stop(ChildStop.DEADLINE, now)
            if self.kill_at is not None and not self.killed and now >= self.kill_at:
                _kill_group(self.proc.pid, signal.SIGKILL)
                self.killed = True
            return False
        if self.open_pipes == 0:
            return True
        if now >= self.drain_until:
            self.problem = self.problem or (
                "a process the executor started still held its output after it exited"
            )
            return True
        return False

    def _begin_stop(self, why: ChildStop, now: float) -> None:
        self.stop, self.stopping = why, True
        _kill_group(self.proc.pid, signal.SIGTERM)
        self.kill_at = now + self.limits.kill_grace

    def _timeout(self) -> float | None:
        now = self.clock()
        moments: list[float] = []
        if self.exited:
            moments.append(self.drain_until)
        else:
            if not self.stopping and self.deadline is not None:
                moments.append(self.deadline)
            if self.kill_at is not None and not self.killed:
                moments.append(self.kill_at)
        wait = max(0.0, min(moments) - now) if moments else None
        if self.pidfd is None and not self.exited:
            wait = POLL_SECONDS if wait is None else min(wait, POLL_SECONDS)
        return wait

    def _ready(self, source: object) -> None:
        if source is self.proc.stdout or source is self.proc.stderr:
            self._read(source)  # type: ignore[arg-type]
        elif isinstance(source, int) and source == self.stop_fd:
            with contextlib.suppress(BlockingIOError, InterruptedError):
                os.read(source, 512)  # the wakeup bytes; the flag says what happened
        # A readable pidfd needs nothing: _finished asks waitid on every turn.

    def _read(self, pipe: IO[bytes]) -> None:
        try:
            chunk = os.read(pipe.fileno(), _CHUNK)
        except BlockingIOError:
            return
        except OSError as error:
            self.problem = (
                self.problem or f"the executor's output could not be read: {_reason(error)}"
            )
            chunk = b""
        if chunk:
            if pipe is self.proc.stderr:
                self.stderr += chunk[: max(0, STDERR_HEAD - len(self.stderr))]
                if self.relay is not None:
                    self.relay.feed(chunk)
            elif len(self.stdout) + len(chunk) <= self.limits.stdout_bytes:
                self.stdout += chunk
            else:
                self.problem = self.problem or (
                    f"the executor's report is longer than {self.limits.stdout_bytes} bytes"
                )
            return
        self.selector.unregister(pipe)
        self.open_pipes -= 1
        if pipe is self.proc.stderr and self.relay is not None:
            self.relay.close()

    def _outcome(self) -> ChildOutcome:
        # Asked before the kill, while the leader is an unreaped zombie: a helper still
        # running when the executor reported may have written after it.
        clean = self.stop is ChildStop.EXITED and self.problem is None
        if clean and group_survivors(self.proc.pid, self.proc.pid):
            self.problem = "a process the executor started was still running after it exited"
        _kill_group(self.proc.pid, signal.SIGKILL)
        returncode = self.proc.wait()
        return ChildOutcome(
            started=True,
            stop=self.stop,
            returncode=returncode,
            stdout=bytes(self.stdout),
            stderr=bytes(self.stderr),
            output_problem=self.problem,
        )

    def close(self) -> None:
        self.selector.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        if self.proc.returncode is None:
            # Only on an unexpected error: never leave the group behind.
            _kill_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.relay is not None:
            self.relay.close()


def supervise(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    deadline: float | None,
    relay: Relay | None,
    limits: Limits = Limits(),
    stop_fd: int | None = None,
    stop_requested: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    use_pidfd: bool = True,
) -> ChildOutcome:
    """Run the executor to completion, or to the deadline; ``deadline`` is on ``clock``."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as error:
        return ChildOutcome(started=False, start_error=_reason(error))
    supervision = _Supervision(
        proc,
        deadline=deadline,
        limits=limits,
        relay=relay,
        stop_fd=stop_fd,
        stop_requested=stop_requested,
        clock=clock,
        use_pidfd=use_pidfd,
    )
    try:
        return supervision.run()
    finally:
        supervision.close()


@contextlib.contextmanager
def stop_signals(
    signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT),
) -> Iterator[tuple[Callable[[], bool], int]]:
    """While inside: SIGTERM and SIGINT set a flag and wake the supervising loop.

    Without this the kubelet's SIGTERM would end the runner and leave the child, in
    its own session, running with nobody to account for it.
    """
    received: list[int] = []
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    previous = {
        signum: signal.signal(signum, lambda n, _f: received.append(n)) for signum in signals
    }
    try:
        yield (lambda: bool(received)), read_end
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(previous_fd)
        os.close(read_end)
        os.close(write_end)
