"""The runner protocol: what an operation Job says happened, and how it is read.

The Job's container runs ``python -m runner`` (``run``), which runs the executor
under the claim's deadline, creates a result record under its own Pod's token and
writes a summary to its termination message. The controller reads the record back
with ``account_for`` (for a migration Apply whose record is missing, the summary).
The readers are pure and bounded.
"""

from runner.errors import (
    ConfigurationError,
    ForeignRecord,
    MalformedRecord,
    RecordError,
    RecordNotFound,
    RecordUnwritten,
    ResultTooLarge,
    RunnerError,
    SummaryRefused,
)
from runner.protocol import (
    RECORD_MARKER,
    DigestedResult,
    EncodedResult,
    PodIdentity,
    binding_problem,
    encode_result,
    pod_identity,
    record_for,
    record_line,
    result_of_record,
)
from runner.result import (
    DATABASE_OPERATIONS,
    MUTATING,
    RUNNER_OPERATIONS,
    RUNNER_PROTOCOL_VERSION,
    RunnerResult,
    decode_result,
)
from runner.summary import (
    MAX_SUMMARY_BYTES,
    SUMMARY_MARKER,
    Account,
    MigrationSummary,
    Summary,
    account_for,
    encode_summary,
    parse_summary_for,
    summary_of,
    write_summary,
)

__all__ = [
    "DATABASE_OPERATIONS",
    "MAX_SUMMARY_BYTES",
    "MUTATING",
    "RECORD_MARKER",
    "RUNNER_OPERATIONS",
    "RUNNER_PROTOCOL_VERSION",
    "SUMMARY_MARKER",
    "Account",
    "ConfigurationError",
    "DigestedResult",
    "EncodedResult",
    "ForeignRecord",
    "MalformedRecord",
    "MigrationSummary",
    "PodIdentity",
    "RecordError",
    "RecordNotFound",
    "RecordUnwritten",
    "ResultTooLarge",
    "RunnerError",
    "RunnerResult",
    "Summary",
    "SummaryRefused",
    "account_for",
    "binding_problem",
    "decode_result",
    "encode_result",
    "encode_summary",
    "parse_summary_for",
    "pod_identity",
    "record_for",
    "record_line",
    "result_of_record",
    "summary_of",
    "write_summary",
]
