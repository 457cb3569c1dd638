"""The Job's entrypoint: run the executor, then say what happened, twice.

    python -m runner

Reads the environment the Job builder writes (see ``config``), runs the executor
under the claim's execution deadline (``supervise``), decides the account
(``decide``), and writes it as a result frame on stdout (the Pod log the controller
reads) and as a summary into the termination message (which outlives the log).

The exit status is never the outcome: the controller reads frames, and a Job's exit
code says nothing about what the database went through. It is still meaningful to a
person reading ``kubectl get pods``:

    0  a frame was written (whatever it says)
    2  no frame could be bound: the operation or its ID is missing or invalid
    3  a frame was decided and could not be written to stdout

Nothing here prints an environment value: the database URL is in the environment,
and a sentence that echoed "what was wrong with it" would publish it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from runner.config import (
    Refusal,
    RunConfig,
    bind,
    executor_argv,
    prepare,
    termination_log,
)
from runner.decide import decide, refused, too_large
from runner.errors import ConfigurationError, FrameTooLarge, SummaryRefused
from runner.protocol import Frame, encode_frame
from runner.result import RunnerResult
from runner.summary import encode_summary, summary_of, write_summary
from runner.supervise import Limits, Relay, stop_signals, supervise, write_all

EXIT_FRAME_WRITTEN: Final = 0
EXIT_UNBOUND: Final = 2
EXIT_FRAME_UNWRITTEN: Final = 3
PREFIX: Final = "ptah-runner: "


def _say(fd: int) -> Callable[[str], None]:
    def say(sentence: str) -> None:
        # When stderr is gone there is nowhere left to say it.
        with contextlib.suppress(OSError):
            write_all(fd, (PREFIX + sentence + "\n").encode("utf-8", "replace"))

    return say


def run_child(config: RunConfig, env: Mapping[str, str], stderr_fd: int) -> RunnerResult:
    """Run the executor under the deadline and decide its account."""
    deadline: float | None = None
    if config.execution_not_after is not None:
        # The deadline is wall-clock; the wait is measured on the monotonic clock, so a
        # clock step during the run neither shortens nor stretches it.
        remaining = (config.execution_not_after - datetime.now(UTC)).total_seconds()
        deadline = time.monotonic() + remaining
    relay = Relay(lambda data: write_all(stderr_fd, data), config.redactor)
    limits = Limits(kill_grace=config.kill_grace_seconds, drain=config.drain_seconds)
    with stop_signals() as (stop_requested, stop_fd):
        child = supervise(
            executor_argv(config),
            env=env,
            deadline=deadline,
            relay=relay,
            limits=limits,
            stop_fd=stop_fd,
            stop_requested=stop_requested,
        )
    return decide(config, child)


def describe(result: RunnerResult) -> str:
    """One sentence for a person reading the log; the frame is what the controller reads."""
    head = f"{result.operation} {result.operation_id}"
    if result.error is None:
        return f"{head} succeeded"
    state = "is uncertain" if result.uncertain else "failed"
    return f"{head} {state} ({result.error.code}): {result.error.message}"


def publish(
    result: RunnerResult,
    *,
    config: RunConfig | None,
    stdout_fd: int,
    summary_path: Path,
    say: Callable[[str], None],
) -> int:
    """Write the frame, then the summary; the exit status the runner ends with."""
    try:
        encoded = encode_frame(result)
    except FrameTooLarge:
        assert config is not None  # a refusal carries no section and always fits
        result = too_large(config, result)
        encoded = encode_frame(result)
    say(describe(result))
    try:
        write_all(stdout_fd, encoded.data)
    except OSError as error:
        say(f"the result frame could not be written: {error.strerror or error}")
        return EXIT_FRAME_UNWRITTEN
    try:
        write_summary(encode_summary(summary_of(Frame(result, encoded.digest))), summary_path)
    except (OSError, SummaryRefused) as error:
        # The frame stands; only the fallback for a lost log is missing.
        reason = error.strerror if isinstance(error, OSError) else str(error)
        say(f"the termination summary could not be written to {summary_path}: {reason}")
    return EXIT_FRAME_WRITTEN


def main(
    environ: Mapping[str, str] | None = None, *, stdout_fd: int = 1, stderr_fd: int = 2
) -> int:
    env = dict(os.environ if environ is None else environ)
    say = _say(stderr_fd)
    try:
        operation, operation_id = bind(env)
    except ConfigurationError as error:
        say(f"no result frame can be written: {error}")
        return EXIT_UNBOUND
    prepared = prepare(env, operation, operation_id, now=datetime.now(UTC))
    config: RunConfig | None = None
    if isinstance(prepared, Refusal):
        result = refused(operation, operation_id, prepared)
    else:
        config = prepared
        result = run_child(config, env, stderr_fd)
    return publish(
        result,
        config=config,
        stdout_fd=stdout_fd,
        summary_path=termination_log(env),
        say=say,
    )
