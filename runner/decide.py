"""From what the child did to the account the runner gives: one pure function.

The executor reports on its stdout one JSON object: the result's fields the runner
cannot know itself (the database it opened, whether its mutation started, its error,
its operation's section). The runner adds what only it knows (the protocol version,
the operation and attempt, the child's exit status) and holds the two together.

Whenever the runner cannot establish what a mutating child did, the account is
``uncertain``, never ``failed``: a child killed at the deadline, one that crashed,
one whose output was cut or garbled, one whose exit status contradicts its report,
may each have changed the database, and a "failed" would let the controller plan
again over a change nobody recorded. Only a child that never started, or one that
reported in full that it refused before changing anything, failed for certain.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from runner.config import Redactor, Refusal, RunConfig
from runner.result import (
    MAX_MESSAGE,
    MUTATING,
    RUNNER_PROTOCOL_VERSION,
    ErrorReport,
    RunnerResult,
    first_problem,
    runner_operation,
    strict_json,
)

# The fields only the runner may state; an executor that states them is not believed.
RUNNER_FIELDS: Final = ("protocolVersion", "operation", "operationId", "childExitCode")
_WHITESPACE: Final = re.compile(r"[\x00-\x20\x7f]+")


class Stop(enum.Enum):
    """Why the child stopped."""

    EXITED = "exited"  # on its own
    DEADLINE = "deadline"  # killed at the claim's execution deadline
    TERMINATED = "terminated"  # killed because the runner itself was asked to stop


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What supervising the child established. ``returncode`` is Popen's (-n: signal n)."""

    started: bool
    start_error: str | None = None
    stop: Stop = Stop.EXITED
    returncode: int | None = None
    stdout: bytes = b""
    # Why the child's stdout cannot be taken as its whole report, or None.
    output_problem: str | None = None


def exit_code(returncode: int | None) -> int:
    """The child's exit status as a shell spells it: 128+n for a death by signal n."""
    if returncode is None:
        return -1
    return min(255, 128 - returncode if returncode < 0 else returncode)


def one_line(text: str, redactor: Redactor, limit: int = MAX_MESSAGE) -> str:
    """Redacted, on one line, and short enough for a frame."""
    text = _WHITESPACE.sub(" ", redactor.text(text)).strip() or "no message"
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def refused(operation: str, operation_id: str, refusal: Refusal) -> RunnerResult:
    """The frame of a run that started nothing: certain that nothing changed."""
    flag = False if MUTATING[operation] else None
    return RunnerResult(
        protocol_version=refusal.protocol_version,
        operation=runner_operation(operation),
        operation_id=operation_id,
        child_exit_code=-1,
        mutation_started=flag,
        uncertain=flag,
        error=ErrorReport(code=refusal.code, message=refusal.message),
    )


def unaccounted(config: RunConfig, code: int, error: str, message: str) -> RunnerResult:
    """The frame of a run whose effect the runner cannot establish."""
    flag = True if config.mutating else None
    return RunnerResult(
        protocol_version=RUNNER_PROTOCOL_VERSION,
        operation=runner_operation(config.operation),
        operation_id=config.operation_id,
        child_exit_code=code,
        mutation_started=flag,
        uncertain=flag,
        error=ErrorReport(code=error, message=one_line(message, config.redactor)),
    )


def _redacted(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, list):
        return [_redacted(item, redactor) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, redactor) for key, item in value.items()}
    return value


INVALID: Final = "executor_report_invalid"
INCONSISTENT: Final = "executor_inconsistent"


def _report(config: RunConfig, code: int, stdout: bytes) -> RunnerResult | tuple[str, str]:
    """The child's report joined with what the runner knows, or the code and reason why not."""
    try:
        report = strict_json(stdout)
    except ValueError as error:
        return INVALID, f"the executor's report is not JSON: {error}"
    if not isinstance(report, dict):
        return INVALID, "the executor's report is not a JSON object"
    named = sorted(set(report) & set(RUNNER_FIELDS))
    if named:
        return INVALID, f"the executor's report states {', '.join(named)}, which the runner states"
    if report.get("error") is None and code != 0:
        return INCONSISTENT, f"the executor exited {code} and reported success"
    if report.get("error") is not None and code == 0:
        return INCONSISTENT, "the executor exited 0 and reported an error"
    # Nothing the child wrote reaches the log unredacted, whatever field it hid it in.
    report = _redacted(report, config.redactor)
    reported = report.get("error")
    if isinstance(reported, dict) and isinstance(reported.get("message"), str):
        report["error"] = {**reported, "message": one_line(reported["message"], config.redactor)}
    report.update(
        protocolVersion=RUNNER_PROTOCOL_VERSION,
        operation=config.operation,
        operationId=config.operation_id,
        childExitCode=code,
    )
    try:
        return RunnerResult.from_wire(report)
    except ValidationError as problem:
        return INVALID, f"the executor's report is invalid: {first_problem(problem)}"


def _disagreement(config: RunConfig, result: RunnerResult) -> str | None:
    """Why a well-formed report still cannot be believed, or None."""
    applied = result.apply
    if applied is not None and applied.plan_content_digest != config.plan_content_digest:
        return "the executor reports applying another plan than the one it was given"
    run = result.migration_run
    if run is not None:
        versions = tuple(run.applied_versions)
        if versions != config.expect_sequence[: len(versions)]:
            return "the executor reports applying versions outside the approved sequence"
    return None


def decide(config: RunConfig, child: ChildOutcome) -> RunnerResult:
    """The account of one run."""
    if not child.started:
        reason = child.start_error or "it could not be started"
        return refused(
            config.operation,
            config.operation_id,
            Refusal("executor_unavailable", f"the executor did not start: {reason}"),
        )
    code = exit_code(child.returncode)
    if child.stop is Stop.DEADLINE:
        return unaccounted(
            config,
            code,
            "deadline_exceeded",
            "the executor was stopped at the claim's execution deadline",
        )
    if child.stop is Stop.TERMINATED:
        return unaccounted(
            config,
            code,
            "runner_terminated",
            "the runner was told to stop and stopped the executor before it finished",
        )
    if child.output_problem is not None:
        return unaccounted(config, code, "executor_output_unreadable", child.output_problem)
    if child.returncode is not None and child.returncode < 0:
        return unaccounted(
            config, code, "executor_crashed", f"the executor was killed by signal {code - 128}"
        )
    result = _report(config, code, child.stdout)
    if isinstance(result, tuple):
        return unaccounted(config, code, *result)
    problem = _disagreement(config, result)
    if problem:
        return unaccounted(config, code, INCONSISTENT, problem)
    return result


def too_large(config: RunConfig, result: RunnerResult) -> RunnerResult:
    """The account that replaces one too large for a frame; it keeps no section."""
    # For a mutating run this is uncertain: what it reported is lost with the rest.
    message = "the executor's result is larger than a result frame may carry"
    return unaccounted(config, result.child_exit_code, "result_too_large", message)
