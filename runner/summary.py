"""The termination summary: the result's gist in the Pod's termination message.

    PTAH_RUNNER_SUMMARY_V1 <compact ASCII JSON>\\n        (at most 2 KiB)

A result record can fail to be written (the API server unreachable from the node, the
node lost before the create) while the Pod object, and with it the termination
message, survives. For a migration Apply, whose account decides whether a database
may be handed back and whether a run stays unresolved, that second copy is worth
having, but only if it can never say more than the record would have:

* it is a projection of the result (``summary_of``) and names the result's digest;
* it is validated by the result's own rules and bound to the operation and attempt
  the same way (``account_problem``, ``binding_problem``);
* it stands in only for a migration Apply and only when the Job has no record at all:
  a record that is there and refused is never overruled by a summary.

The file is opened, never created: a runner that created ``/dev/termination-log``
somewhere the kubelet does not read would report success to nobody.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import Field, ValidationError, model_validator

from jobclaim.api import PtahResultRecord
from runner.errors import RecordNotFound, SummaryRefused
from runner.protocol import DigestedResult, binding_problem, result_of_record
from runner.result import (
    MAX_VERSIONS,
    RUNNER_PROTOCOL_VERSION,
    Count,
    Digest,
    ErrorCode,
    Model,
    OperationId,
    RunnerOperation,
    RunOutcome,
    Version,
    account_problem,
    encode_json,
    first_problem,
    migration_problem,
    strict_json,
)

SUMMARY_MARKER: Final = "PTAH_RUNNER_SUMMARY_V1"
MAX_SUMMARY_BYTES: Final = 2048
# The kubelet keeps at most 4 KiB of a container's message; more is not a message.
MAX_MESSAGE_BYTES: Final = 4096
TERMINATION_LOG: Final = Path("/dev/termination-log")


class MigrationSummary(Model):
    outcome: RunOutcome
    applied_count: Count
    first_applied: Version | None = None
    last_applied: Version | None = None

    @model_validator(mode="after")
    def _consistent(self) -> MigrationSummary:
        if self.applied_count > MAX_VERSIONS:
            raise ValueError(f"a run applies at most {MAX_VERSIONS} versions")
        named = (self.first_applied is not None, self.last_applied is not None)
        if named != (self.applied_count > 0,) * 2:
            raise ValueError("the first and last applied versions are named exactly when any is")
        if self.applied_count == 1 and self.first_applied != self.last_applied:
            raise ValueError("a run that applied one version names it first and last")
        return self


class Summary(Model):
    protocol_version: Annotated[int, Field(ge=1, le=2**31 - 1)]
    operation: RunnerOperation
    operation_id: OperationId
    result_digest: Digest
    mutation_started: bool | None = None
    uncertain: bool | None = None
    error_code: ErrorCode | None = None
    coordination_digest: Digest | None = None
    target_identity_digest: Digest | None = None
    migration: MigrationSummary | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Summary:
        problem = account_problem(
            self.operation,
            protocol_version=self.protocol_version,
            mutation_started=self.mutation_started,
            uncertain=self.uncertain,
            error_code=self.error_code,
            target_identity_digest=self.target_identity_digest,
            coordination_digest=self.coordination_digest,
        )
        run = self.migration
        if problem is None and self.operation != "migration-apply" and run is not None:
            problem = f"a {self.operation} summary carries no migration run"
        success = self.error_code is None
        if problem is None and self.operation == "migration-apply" and success and not run:
            problem = "a successful migration apply summary carries its run"
        if problem is None and run is not None:
            problem = migration_problem(
                run.outcome,
                run.applied_count,
                mutation_started=self.mutation_started,
                uncertain=self.uncertain,
                error=self.error_code is not None,
            )
        if problem:
            raise ValueError(problem)
        return self


def summary_of(recorded: DigestedResult) -> Summary:
    """The summary of a result: what the result says, less, and nothing else."""
    result = recorded.result
    run = result.migration_run
    migration = None
    if run is not None:
        applied = run.applied_versions
        migration = MigrationSummary(
            outcome=run.outcome,
            applied_count=len(applied),
            first_applied=applied[0] if applied else None,
            last_applied=applied[-1] if applied else None,
        )
    return Summary(
        protocol_version=result.protocol_version,
        operation=result.operation,
        operation_id=result.operation_id,
        result_digest=recorded.digest,
        mutation_started=result.mutation_started,
        uncertain=result.uncertain,
        error_code=result.error_code,
        coordination_digest=result.coordination_digest,
        target_identity_digest=result.target_identity_digest,
        migration=migration,
    )


def encode_summary(summary: Summary) -> bytes:
    line = SUMMARY_MARKER.encode("ascii") + b" " + encode_json(summary.to_wire()) + b"\n"
    if len(line) > MAX_SUMMARY_BYTES:
        # Unreachable with the model's bounds; refused rather than cut, which would
        # leave the kubelet a prefix that no longer parses.
        raise SummaryRefused(f"the summary encodes to {len(line)} bytes, more than 2 KiB")
    return line


def write_summary(data: bytes, path: Path = TERMINATION_LOG) -> None:
    """Replace the termination message with ``data``; the file must already exist."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _summary_line(message: str | bytes) -> str:
    if isinstance(message, bytes):
        try:
            message = message.decode("utf-8")
        except UnicodeDecodeError:
            raise SummaryRefused("the termination message is not UTF-8") from None
    if len(message.encode("utf-8")) > MAX_MESSAGE_BYTES:
        raise SummaryRefused(f"the termination message is longer than {MAX_MESSAGE_BYTES} bytes")
    count = message.count(SUMMARY_MARKER)
    if count != 1:
        # Two summaries are two accounts; choosing one would be a guess.
        raise SummaryRefused(f"the termination message holds {count} runner summaries, not one")
    # Runtime text may precede the summary; nothing may follow it but its newline.
    line = message[message.index(SUMMARY_MARKER) :].removesuffix("\n")
    if "\n" in line or "\r" in line:
        raise SummaryRefused("the runner summary is not the last line of the message")
    if len(line.encode("utf-8")) + 1 > MAX_SUMMARY_BYTES:
        raise SummaryRefused(f"the runner summary is longer than {MAX_SUMMARY_BYTES} bytes")
    body = line.removeprefix(SUMMARY_MARKER + " ")
    if body == line or not (body.startswith("{") and body.endswith("}")):
        raise SummaryRefused("the runner summary is not its marker, one space and a JSON object")
    return body


def parse_summary_for(
    message: str | bytes,
    operation: str,
    operation_id: str,
    *,
    protocol_version: int = RUNNER_PROTOCOL_VERSION,
) -> Summary:
    """The summary in a termination message, bound to this operation and attempt."""
    body = _summary_line(message)
    try:
        summary = Summary.from_wire(strict_json(body))
    except ValueError as error:
        # json.JSONDecodeError is a ValueError; "Extra data" is trailing data.
        if isinstance(error, ValidationError):
            raise SummaryRefused(f"the runner summary is invalid: {first_problem(error)}") from None
        raise SummaryRefused(f"the runner summary is not JSON: {error}") from None
    problem = binding_problem(
        summary.operation,
        summary.operation_id,
        summary.protocol_version,
        operation=operation,
        operation_id=operation_id,
        protocol_version=protocol_version,
    )
    if problem:
        raise SummaryRefused(f"the runner summary is not this attempt's: {problem}")
    return summary


@dataclass(frozen=True, slots=True)
class Account:
    """What a harvest may believe: the record, or for a migration Apply its summary."""

    source: Literal["record", "summary"]
    summary: Summary
    recorded: DigestedResult | None = None


def account_for(
    record: PtahResultRecord | None,
    termination_message: str | bytes | None,
    operation: str,
    operation_id: str,
    *,
    job_uid: str,
    protocol_version: int = RUNNER_PROTOCOL_VERSION,
) -> Account:
    """The account of one attempt from its Job's record, or its Pod's termination message.

    Raises ``MalformedRecord`` (or ``ForeignRecord``) for a record that is not this
    attempt's, ``RecordNotFound`` when there is no record and no summary may stand in,
    and ``SummaryRefused`` when one was offered and refused (the run is then unknown).
    """
    if record is not None:
        recorded = result_of_record(
            record, operation, operation_id, job_uid=job_uid, protocol_version=protocol_version
        )
        return Account("record", summary_of(recorded), recorded)
    if operation != "migration-apply" or termination_message is None:
        raise RecordNotFound("the Job has no result record")
    summary = parse_summary_for(
        termination_message, operation, operation_id, protocol_version=protocol_version
    )
    return Account("summary", summary)
