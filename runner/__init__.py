"""The runner protocol: what an operation Job says happened, and how it is read.

The Job's container runs ``python -m runner`` (``run``), which runs the
executor under the claim's deadline and writes a result frame to its log and a
summary to its termination message. The controller reads them back with
``parse_result_for`` and, for a migration Apply whose frame is missing, with
``account_for``. Both readers are pure and bounded.
"""

from runner.errors import (
    ConfigurationError,
    ForeignFrame,
    FrameError,
    FrameNotFound,
    FrameTooLarge,
    IncompleteFrame,
    MalformedFrame,
    RunnerError,
    SummaryRefused,
)
from runner.protocol import (
    FOOTER,
    LOG_BUDGET_BYTES,
    MARKER,
    MAX_HEADER_BYTES,
    MAX_INTERLEAVED_BYTES,
    MAX_PAYLOAD_BYTES,
    EncodedFrame,
    Frame,
    FrameCandidate,
    encode_frame,
    frame_for,
    header_digests,
    parse_result_for,
    scan_log,
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
    stand_in_problem,
    summary_of,
    write_summary,
)

__all__ = [
    "DATABASE_OPERATIONS",
    "FOOTER",
    "LOG_BUDGET_BYTES",
    "MARKER",
    "MAX_HEADER_BYTES",
    "MAX_INTERLEAVED_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_SUMMARY_BYTES",
    "MUTATING",
    "RUNNER_OPERATIONS",
    "RUNNER_PROTOCOL_VERSION",
    "SUMMARY_MARKER",
    "Account",
    "ConfigurationError",
    "EncodedFrame",
    "ForeignFrame",
    "Frame",
    "FrameCandidate",
    "FrameError",
    "FrameNotFound",
    "FrameTooLarge",
    "IncompleteFrame",
    "MalformedFrame",
    "MigrationSummary",
    "RunnerError",
    "RunnerResult",
    "Summary",
    "SummaryRefused",
    "account_for",
    "decode_result",
    "encode_frame",
    "encode_summary",
    "frame_for",
    "header_digests",
    "parse_result_for",
    "parse_summary_for",
    "scan_log",
    "stand_in_problem",
    "summary_of",
    "write_summary",
]
