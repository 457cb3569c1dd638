"""The termination summary: its writer, its parser table, and when it may stand in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobclaim.api import PtahResultRecord
from runner.errors import (
    ForeignRecord,
    MalformedRecord,
    RecordNotFound,
    SummaryRefused,
)
from runner.protocol import DigestedResult, encode_result
from runner.result import RunnerResult, encode_json
from runner.summary import (
    MAX_SUMMARY_BYTES,
    SUMMARY_MARKER,
    Summary,
    account_for,
    encode_summary,
    parse_summary_for,
    summary_of,
    write_summary,
)
from tests.support.runnerrig import JOB_UID, OP_ID, OTHER_ID, failed_wire, record_of, result

MIGRATION_RESULT = result("migration-apply")
MIGRATION = encode_result(MIGRATION_RESULT)
PARTIAL_RESULT = RunnerResult.from_wire(
    failed_wire(
        "migration-apply",
        mutationStarted=True,
        migrationRun={"outcome": "Partial", "appliedVersions": ["004"]},
    )
)


def summary_wire(of: RunnerResult = MIGRATION_RESULT) -> dict[str, Any]:
    return summary_of(DigestedResult(of, encode_result(of).digest)).to_wire()


def message(data: dict[str, Any], before: str = "") -> str:
    return before + SUMMARY_MARKER + " " + encode_json(data).decode() + "\n"


def test_the_summary_of_a_migration_run_counts_and_names_its_ends() -> None:
    summary = summary_of(DigestedResult(MIGRATION_RESULT, MIGRATION.digest))
    assert summary.result_digest == MIGRATION.digest
    assert summary.migration is not None
    assert (summary.migration.applied_count, summary.migration.first_applied) == (2, "004")
    assert summary.migration.last_applied == "005"
    assert summary.mutation_started is True and summary.uncertain is False


def test_the_encoded_summary_is_one_line_within_2_kib_and_parses_back() -> None:
    longest = result("migration-apply", operationId="o" * 253)
    encoded = encode_result(longest)
    line = encode_summary(summary_of(DigestedResult(longest, encoded.digest)))
    assert len(line) <= MAX_SUMMARY_BYTES and line.count(b"\n") == 1 and line.endswith(b"\n")
    parsed = parse_summary_for(line, "migration-apply", "o" * 253)
    assert parsed.result_digest == encoded.digest


def test_the_summary_is_written_into_an_existing_file_and_never_creates_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "termination-log"
    path.write_text("an older, longer message that must not survive\n")
    write_summary(b"PTAH_RUNNER_SUMMARY_V1 {}\n", path)
    assert path.read_bytes() == b"PTAH_RUNNER_SUMMARY_V1 {}\n"
    missing = tmp_path / "absent"
    with pytest.raises(FileNotFoundError):
        write_summary(b"x", missing)
    assert not missing.exists()


GOOD = summary_wire()
PLAN_SUMMARY = summary_wire(result("plan"))
ROWS: list[tuple[str, str | bytes, str | None]] = [
    ("control: the summary alone", message(GOOD), None),
    ("runtime text before the marker", message(GOOD, before="runtime: oom\nnote "), None),
    ("without its newline", message(GOOD).rstrip("\n"), None),
    ("as bytes", message(GOOD).encode(), None),
    ("no marker", "the container exited\n", "holds 0 runner summaries"),
    ("two markers", message(GOOD) + message(GOOD), "holds 2 runner summaries"),
    ("a marker in runtime text too", "x " + SUMMARY_MARKER + "\n" + message(GOOD), "holds 2"),
    ("trailing data on the line", message(GOOD).rstrip("\n") + " extra\n", "JSON object"),
    ("a line after the summary", message(GOOD) + "more\n", "not the last line"),
    ("a second newline", message(GOOD) + "\n", "not the last line"),
    ("carriage return", message(GOOD).replace("\n", "\r\n"), "not the last line"),
    ("unknown field", message({**GOOD, "extra": 1}), "extra inputs are not permitted"),
    ("python field name", message({**GOOD, "operation_id": OP_ID}), "extra inputs"),
    ("foreign operation ID", message({**GOOD, "operationId": OTHER_ID}), "not this attempt's"),
    ("foreign operation", message(PLAN_SUMMARY), "reports operation 'plan'"),
    ("not JSON", SUMMARY_MARKER + " {nope}\n", "not JSON"),
    ("duplicate keys", SUMMARY_MARKER + ' {"a":1,"a":1}\n', "repeats a key"),
    ("no space after the marker", SUMMARY_MARKER + encode_json(GOOD).decode(), "one space"),
    ("padded JSON", SUMMARY_MARKER + " " + encode_json(GOOD).decode() + " ", "JSON object"),
    ("an error code on an applied run", message({**GOOD, "errorCode": "x"}), "carries no error"),
    ("longer than 2 KiB", SUMMARY_MARKER + " {" + " " * 2100 + "}", "longer than 2048"),
    ("longer than a message", "x" * 5000 + message(GOOD), "longer than 4096"),
    ("not UTF-8", b"\xff" + message(GOOD).encode(), "not UTF-8"),
    (
        "a read-only summary with mutation flags",
        message({**PLAN_SUMMARY, "mutationStarted": False, "uncertain": False}),
        "read-only operation reports no mutation flags",
    ),
    ("mutation flags missing", message({**GOOD, "uncertain": None}), "must say whether"),
    (
        "migration run without its flags right",
        message({**GOOD, "migration": {**GOOD["migration"], "appliedCount": 0}}),
        "named exactly when",
    ),
    (
        "success without its run",
        message({k: v for k, v in GOOD.items() if k != "migration"}),
        "carries its run",
    ),
    ("uncertain without an error", message({**GOOD, "uncertain": True}), "uncertain outcome"),
    ("another protocol", message({**GOOD, "protocolVersion": 4}), "runner protocol 4 is not 7"),
    (
        "the previous protocol",
        message({**GOOD, "protocolVersion": 6}),
        "runner protocol 6 is not 7",
    ),
]


@pytest.mark.parametrize(("name", "text", "problem"), ROWS, ids=[r[0] for r in ROWS])
def test_summary_parser(name: str, text: str | bytes, problem: str | None) -> None:
    if problem is None:
        summary = parse_summary_for(text, "migration-apply", OP_ID)
        assert isinstance(summary, Summary)
        return
    with pytest.raises(SummaryRefused, match=problem):
        parse_summary_for(text, "migration-apply", OP_ID)


# Stand-in: when the termination summary may speak for a migration Apply. Only when
# the Job has no record at all: a record that is there and refused is never overruled.
SUMMARY_TEXT = message(GOOD)


def _tampered(record: PtahResultRecord) -> PtahResultRecord:
    spec = record.spec.model_copy(update={"result": record.spec.result.replace("005", "006")})
    return record.model_copy(update={"spec": spec})


RECORD = record_of(MIGRATION_RESULT)
STAND_IN: list[tuple[str, str, PtahResultRecord | None, str | None, str]] = [
    ("control: the record itself", "migration-apply", RECORD, SUMMARY_TEXT, "record"),
    ("no record, a summary", "migration-apply", None, SUMMARY_TEXT, "summary"),
    ("a record that is refused", "migration-apply", _tampered(RECORD), SUMMARY_TEXT, "Malformed"),
    (
        "a foreign record",
        "migration-apply",
        record_of(result("migration-apply", operationId=OTHER_ID)),
        SUMMARY_TEXT,
        "Foreign",
    ),
    ("no record, no termination message", "migration-apply", None, None, "NotFound"),
    (
        "no record, and not a migration apply",
        "apply",
        None,
        message(summary_wire(result("apply"))),
        "NotFound",
    ),
]
ERRORS: dict[str, type[Exception]] = {
    "Malformed": MalformedRecord,
    "Foreign": ForeignRecord,
    "NotFound": RecordNotFound,
}


@pytest.mark.parametrize(
    ("operation", "record", "text", "expected"),
    [row[1:] for row in STAND_IN],
    ids=[row[0] for row in STAND_IN],
)
def test_when_a_summary_stands_in(
    operation: str, record: PtahResultRecord | None, text: str | None, expected: str
) -> None:
    if expected in ("record", "summary"):
        account = account_for(record, text, operation, OP_ID, job_uid=JOB_UID)
        assert account.source == expected
        assert account.summary.result_digest == MIGRATION.digest
        assert (account.recorded is not None) == (expected == "record")
        return
    with pytest.raises(ERRORS[expected]):
        account_for(record, text, operation, OP_ID, job_uid=JOB_UID)


def test_a_record_of_another_job_is_refused() -> None:
    with pytest.raises(MalformedRecord, match="speaks for Job UID"):
        account_for(RECORD, None, "migration-apply", OP_ID, job_uid="another-uid")


@pytest.mark.parametrize("of", [MIGRATION_RESULT, PARTIAL_RESULT], ids=["applied", "partial"])
def test_the_summary_concludes_exactly_what_its_record_concludes(of: RunnerResult) -> None:
    from_record = account_for(record_of(of), None, "migration-apply", OP_ID, job_uid=JOB_UID)
    summary_line = encode_summary(from_record.summary)
    from_summary = account_for(None, summary_line, "migration-apply", OP_ID, job_uid=JOB_UID)
    assert from_summary.summary == from_record.summary
