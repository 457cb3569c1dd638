"""The Job's entrypoint: run the executor, then say what happened, twice.

    python -m runner

Reads the environment the Job builder writes (see ``config``), runs the executor
under the claim's execution deadline (``supervise``), decides the account
(``decide``), creates it as a result record through the API server under the Pod's
own token (``protocol``, ``recorder``: what the controller reads), and writes a
summary into the termination message (which outlives an API server it could not
reach). The Pod log gets one line naming the record and its digest, never the result.

The exit status is never the outcome: the controller reads records, and a Job's exit
code says nothing about what the database went through. It is still meaningful to a
person reading ``kubectl get pods``:

    0  the record was written (whatever it says)
    2  no result could be bound: the operation or its ID is missing or invalid
    3  a result was decided and no record of it could be written

Nothing here prints an environment value: the database URL is in the environment,
and a sentence that echoed "what was wrong with it" would publish it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from runner import ptahcli
from runner.config import (
    ENV_OCI_CA_FILE,
    RunConfig,
    StartRefusal,
    bind,
    prepare,
    termination_log,
)
from runner.decide import (
    ChildOutcome,
    PlanRun,
    apply_account,
    history_account,
    interrupted,
    migration_account,
    noting_no_dev_database,
    observe_account,
    plan_account,
    refused,
    resolve_account,
    sha256_digest,
    too_large,
    verify_account,
)
from runner.errors import ConfigurationError, RecordUnwritten, ResultTooLarge, SummaryRefused
from runner.planfile import (
    MAX_PLAN_BYTES,
    PlanRefused,
    decode_plan,
    reconstruct,
    write_private,
)
from runner.protocol import (
    DigestedResult,
    EncodedResult,
    encode_result,
    pod_identity,
    record_for,
    record_line,
)
from runner.recorder import Recorder, api_recorder
from runner.result import RunnerResult
from runner.scratchdb import STOPPED, wait_until_ready
from runner.summary import encode_summary, summary_of, write_summary
from runner.supervise import Limits, Relay, stop_signals, supervise, write_all

EXIT_RECORDED: Final = 0
EXIT_UNBOUND: Final = 2
EXIT_UNRECORDED: Final = 3
PREFIX: Final = "ptah-runner: "
# What the runner echoes of an error to its own stderr (the record carries less).
MAX_ECHO: Final = 4096
MAX_POLICY_BYTES: Final = 1024 * 1024
MAX_CA_BYTES: Final = 1024 * 1024
# Where the checked copy of the registry CA bundle is staged for ptah.
CA_SNAPSHOT: Final = "registry-ca.pem"


def _say(fd: int) -> Callable[[str], None]:
    def say(sentence: str) -> None:
        # When stderr is gone there is nowhere left to say it.
        with contextlib.suppress(OSError):
            data = (PREFIX + sentence).encode("utf-8", "replace")[:MAX_ECHO]
            write_all(fd, data + b"\n")

    return say


class _Refused(Exception):
    """The run stops before a child it has not started: nothing changed."""

    def __init__(self, refusal: StartRefusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class _Session:
    """One run's ptah children: each under the deadline, each checked before exec."""

    def __init__(self, config: RunConfig, stderr_fd: int, stop: tuple[Callable[[], bool], int]):
        self.config = config
        self.stderr_fd = stderr_fd
        self.relay = Relay(lambda data: write_all(stderr_fd, data), config.redactor)
        self.stop_requested, self.stop_fd = stop
        self.limits = Limits(kill_grace=config.kill_grace_seconds, drain=config.drain_seconds)

    def run(self, step: ptahcli.Step) -> ChildOutcome:
        config = self.config
        problem = ptahcli.argv_problem(step.argv, config.redactor) or (
            ptahcli.database_env_problem(step)
        )
        if problem:
            raise _Refused(StartRefusal("credential_in_argv", problem))
        deadline: float | None = None
        if config.execution_not_after is not None:
            # Checked again immediately before exec: preparing the run (the plan's
            # chunks, an earlier step) takes time, and a child started after the
            # deadline would run while the Lease may already be someone else's.
            remaining = (config.execution_not_after - datetime.now(UTC)).total_seconds()
            if remaining <= 0:
                raise _Refused(
                    StartRefusal(
                        "execution_deadline_passed",
                        "the claim's execution deadline passed before ptah ran",
                    )
                )
            # The deadline is wall-clock; the wait is measured on the monotonic clock,
            # so a clock step during the run neither shortens nor stretches it.
            deadline = time.monotonic() + remaining
        return supervise(
            step.argv,
            env=dict(step.env),
            deadline=deadline,
            relay=self.relay if step.relay_stderr else None,
            limits=self.limits,
            stop_fd=self.stop_fd,
            stop_requested=self.stop_requested,
        )


def _read_bounded(path: str, limit: int) -> bytes | None:
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def _prepare_apply(config: RunConfig) -> int:
    """Rebuild, check and write the approved plan; its statement count."""
    try:
        content = reconstruct(config.plan_dir, config.plan_content_digest)
        plan = decode_plan(content, config.engine)
        write_private(ptahcli.work_path(config, ptahcli.APPLY_PLAN), content)
    except PlanRefused as error:
        raise _Refused(StartRefusal(error.code, str(error))) from None
    except OSError as error:
        raise _Refused(
            StartRefusal("plan_unreadable", f"the plan cannot be staged: {error.strerror}")
        ) from None
    return len(plan.statements)


def _stage_registry_ca(config: RunConfig, env: Mapping[str, str]) -> Mapping[str, str]:
    """The child's environment with ptah pointed at a checked copy of the CA bundle.

    The mounted key is a ConfigMap the kubelet may swap under the Pod at any time; the
    copy is the bytes that matched the claim's pin, and the only ones ptah reads.
    """
    if not config.registry_ca_file:
        return env
    data = _read_bounded(config.registry_ca_file, MAX_CA_BYTES)
    if data is None:
        raise _Refused(
            StartRefusal("registry_ca_unreadable", "the registry CA bundle cannot be read")
        )
    if sha256_digest(data) != config.registry_ca_digest:
        raise _Refused(
            StartRefusal(
                "registry_ca_mismatch",
                f"the registry CA bundle is {sha256_digest(data)}, not "
                f"{config.registry_ca_digest}, the one the claim pinned",
            )
        )
    snapshot = ptahcli.work_path(config, CA_SNAPSHOT)
    try:
        write_private(snapshot, data)
    except OSError as error:
        raise _Refused(
            StartRefusal(
                "registry_ca_unreadable",
                f"the registry CA bundle cannot be staged: {error.strerror}",
            )
        ) from None
    return {**env, ENV_OCI_CA_FILE: snapshot}


def _await_dev_server(config: RunConfig, session: _Session, say: Callable[[str], None]) -> None:
    """Wait until the operator-provided scratch database answers (runner.scratchdb), at
    most until the claim's deadline; refuse the run (nothing started) if it never does."""
    server = config.dev_server
    if server is None:
        return
    seconds = config.dev_ready_seconds
    if config.execution_not_after is not None:
        remaining = (config.execution_not_after - datetime.now(UTC)).total_seconds()
        seconds = min(seconds, remaining)
    problem = wait_until_ready(server, seconds, stopped=session.stop_requested, say=say)
    if problem is not None:
        code = "runner_terminated" if problem == STOPPED else "dev_database_unready"
        raise _Refused(StartRefusal(code, problem))


def _operate(config: RunConfig, env: Mapping[str, str], session: _Session) -> RunnerResult:
    _await_dev_server(config, session, _say(session.stderr_fd))
    env = _stage_registry_ca(config, env)
    steps = ptahcli.steps(config, env)
    operation = config.operation
    if operation == "resolve":
        child = session.run(steps[0])
        return interrupted(config, child) or resolve_account(config, child)
    if operation == "verify":
        policy = _read_bounded(config.verification_policy, MAX_POLICY_BYTES)
        if policy is None:
            raise _Refused(
                StartRefusal("configuration_invalid", "the verification policy cannot be read")
            )
        verified = session.run(steps[0])
        stopped = interrupted(config, verified)
        if stopped is not None:
            return stopped
        inspected = session.run(steps[1]) if verified.code == 0 else None
        return verify_account(config, verified, inspected, sha256_digest(policy))
    if operation == "observe":
        child = session.run(steps[0])
        return interrupted(config, child) or observe_account(config, child)
    if operation == "plan":
        return _plan(config, steps, session)
    if operation == "apply":
        count = _prepare_apply(config)
        return apply_account(config, session.run(steps[0]), count)
    if operation == "migration-history":
        child = session.run(steps[0])
        return interrupted(config, child) or history_account(config, child)
    try:
        write_private(ptahcli.work_path(config, ptahcli.SEQUENCE_FILE), config.sequence_document)
    except OSError as error:
        raise _Refused(
            StartRefusal(
                "configuration_invalid", f"the approved sequence cannot be staged: {error.strerror}"
            )
        ) from None
    return migration_account(config, session.run(steps[0]))


def _plan(config: RunConfig, steps: tuple[ptahcli.Step, ...], session: _Session) -> RunnerResult:
    """Plan twice and compare, then have ptah dry-run the saved plan."""
    runs: list[PlanRun] = []
    for step, name in zip(steps[:2], (ptahcli.FIRST_PLAN, ptahcli.SECOND_PLAN), strict=True):
        child = session.run(step)
        saved = _read_bounded(ptahcli.work_path(config, name), MAX_PLAN_BYTES)
        runs.append(PlanRun(child, saved))
        if interrupted(config, child) is not None or child.code != 0:
            break  # the account says why; a second plan would say nothing new
    second = runs[1] if len(runs) > 1 else None
    validation = None
    if second is not None and second.saved is not None and runs[0].saved == second.saved:
        validation = session.run(steps[2])
    return plan_account(config, runs[0], second, validation)


def run_child(config: RunConfig, env: Mapping[str, str], stderr_fd: int) -> RunnerResult:
    """Run ptah for the operation under the deadline and decide its account."""
    work = tempfile.mkdtemp(prefix="ptah-runner-", dir=config.work_dir)
    try:
        config = dataclasses.replace(config, work_dir=work)
        with stop_signals() as stop:
            try:
                result = _operate(config, env, _Session(config, stderr_fd, stop))
                return noting_no_dev_database(config, result)
            except _Refused as refusal:
                return refused(config.operation, config.operation_id, refusal.refusal)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def describe(result: RunnerResult) -> str:
    """One sentence for a person reading the log; the record is what the controller reads."""
    head = f"{result.operation} {result.operation_id}"
    if result.error is None:
        return f"{head} succeeded"
    state = "is uncertain" if result.uncertain else "failed"
    return f"{head} {state} ({result.error.code}): {result.error.message}"


def _record(
    result: RunnerResult,
    encoded: EncodedResult,
    env: Mapping[str, str],
    recorder: Recorder | None,
) -> tuple[bytes | None, str | None]:
    """Create the record: the log line naming it, or why there is none."""
    identity = pod_identity(env)
    if isinstance(identity, str):
        return None, identity
    if recorder is None:
        made = api_recorder(env)
        if isinstance(made, str):
            return None, made
        recorder = made
    try:
        record = record_for(identity, result, encoded)
    except ValueError as error:
        # The downward API's values are the kubelet's; a record they cannot name is
        # still no reason to lose the summary.
        return None, f"the result cannot be put in a record: {error}"
    try:
        recorder.create(record)
    except RecordUnwritten as error:
        return None, str(error)
    return record_line(identity, encoded.digest), None


def publish(
    result: RunnerResult,
    *,
    config: RunConfig | None,
    env: Mapping[str, str],
    recorder: Recorder | None,
    stdout_fd: int,
    summary_path: Path,
    say: Callable[[str], None],
) -> int:
    """Write the record, then the summary; the exit status the runner ends with."""
    try:
        encoded = encode_result(result)
    except ResultTooLarge:
        assert config is not None  # a refusal carries no section and always fits
        result = too_large(config, result)
        encoded = encode_result(result)
    say(describe(result))
    line, problem = _record(result, encoded, env, recorder)
    if line is not None:
        with contextlib.suppress(OSError):
            write_all(stdout_fd, line)
    else:
        say(f"no result record could be written: {problem}")
    try:
        summary = summary_of(DigestedResult(result, encoded.digest))
        write_summary(encode_summary(summary), summary_path)
    except (OSError, SummaryRefused) as error:
        # The record stands; only the fallback for an unwritten record is missing.
        reason = error.strerror if isinstance(error, OSError) else str(error)
        say(f"the termination summary could not be written to {summary_path}: {reason}")
    return EXIT_RECORDED if line is not None else EXIT_UNRECORDED


def main(
    environ: Mapping[str, str] | None = None,
    *,
    stdout_fd: int = 1,
    stderr_fd: int = 2,
    recorder: Recorder | None = None,
) -> int:
    """Run the operation and publish its result. ``recorder`` is where records go (the
    API server, as the Pod's own token, when None)."""
    env = dict(os.environ if environ is None else environ)
    say = _say(stderr_fd)
    try:
        operation, operation_id = bind(env)
    except ConfigurationError as error:
        say(f"no result can be bound to an attempt: {error}")
        return EXIT_UNBOUND
    prepared = prepare(env, operation, operation_id, now=datetime.now(UTC))
    config: RunConfig | None = None
    if isinstance(prepared, StartRefusal):
        result = refused(operation, operation_id, prepared)
    else:
        config = prepared
        result = run_child(config, env, stderr_fd)
    return publish(
        result,
        config=config,
        env=env,
        recorder=recorder,
        stdout_fd=stdout_fd,
        summary_path=termination_log(env),
        say=say,
    )
