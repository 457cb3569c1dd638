"""The termination summary: its writer, its parser table, and when it may stand in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import (
    ForeignFrame,
    FrameError,
    FrameNotFound,
    MalformedFrame,
    SummaryRefused,
)
from runner.protocol import MARKER, encode_frame, parse_result_for, scan_log
from runner.result import RunnerResult, encode_json
from runner.summary import (
    MAX_SUMMARY_BYTES,
    SUMMARY_MARKER,
    Summary,
    account_for,
    encode_summary,
    parse_summary_for,
    stand_in_problem,
    summary_of,
    write_summary,
)
from tests.runner.support import OP_ID, OTHER_ID, failed_wire, result

MIGRATION = encode_frame(result("migration-apply"))
PARTIAL = encode_frame(
    RunnerResult.from_wire(
        failed_wire(
            "migration-apply",
            mutationStarted=True,
            migrationRun={"outcome": "Partial", "appliedVersions": ["004"]},
        )
    )
)


def summary_wire(frame_data: bytes = MIGRATION.data, op: str = "migration-apply") -> dict[str, Any]:
    return summary_of(parse_result_for(frame_data, op, OP_ID)).to_wire()


def message(data: dict[str, Any], before: str = "") -> str:
    return before + SUMMARY_MARKER + " " + encode_json(data).decode() + "\n"


def test_the_summary_of_a_migration_run_counts_and_names_its_ends() -> None:
    summary = summary_of(parse_result_for(MIGRATION.data, "migration-apply", OP_ID))
    assert summary.frame_digest == MIGRATION.digest
    assert summary.migration is not None
    assert (summary.migration.applied_count, summary.migration.first_applied) == (2, "004")
    assert summary.migration.last_applied == "005"
    assert summary.mutation_started is True and summary.uncertain is False


def test_the_encoded_summary_is_one_line_within_2_kib_and_parses_back() -> None:
    longest = result("migration-apply", operationId="o" * 253)
    frame = encode_frame(longest)
    line = encode_summary(summary_of(parse_result_for(frame.data, "migration-apply", "o" * 253)))
    assert len(line) <= MAX_SUMMARY_BYTES and line.count(b"\n") == 1 and line.endswith(b"\n")
    parsed = parse_summary_for(line, "migration-apply", "o" * 253)
    assert parsed.frame_digest == frame.digest


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
PLAN_SUMMARY = summary_wire(encode_frame(result("plan")).data, "plan")
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
    ("another protocol", message({**GOOD, "protocolVersion": 4}), "runner protocol 4 is not 6"),
    (
        "the previous protocol",
        message({**GOOD, "protocolVersion": 5}),
        "runner protocol 5 is not 6",
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


# Stand-in: when the termination summary may speak for a migration Apply.
SUMMARY_TEXT = message(GOOD)
OTHER_SUMMARY = message(summary_wire(PARTIAL.data))
HEADER_ONLY = MIGRATION.data.split(b"\n")[0] + b"\n"
STAND_IN: list[tuple[str, str, bytes | None, str | None, str]] = [
    ("control: the frame itself", "migration-apply", MIGRATION.data, SUMMARY_TEXT, "frame"),
    ("no frame in the log", "migration-apply", b"runner started\n", SUMMARY_TEXT, "summary"),
    ("the log is gone", "migration-apply", None, SUMMARY_TEXT, "summary"),
    (
        "a frame cut off whose header agrees",
        "migration-apply",
        HEADER_ONLY,
        SUMMARY_TEXT,
        "summary",
    ),
    (
        "a frame cut off whose header disagrees",
        "migration-apply",
        HEADER_ONLY,
        OTHER_SUMMARY,
        "SummaryRefused",
    ),
    (
        "a broken header beside a cut-off frame",
        "migration-apply",
        MARKER + b" broken\n" + HEADER_ONLY,
        SUMMARY_TEXT,
        "SummaryRefused",
    ),
    (
        "a complete frame that is refused",
        "migration-apply",
        MIGRATION.data.replace(b"005", b"006"),
        SUMMARY_TEXT,
        "MalformedFrame",
    ),
    (
        "a foreign frame",
        "migration-apply",
        encode_frame(result("migration-apply", operationId=OTHER_ID)).data,
        SUMMARY_TEXT,
        "ForeignFrame",
    ),
    ("no termination message", "migration-apply", b"", None, "FrameNotFound"),
    (
        "a summary of another attempt",
        "migration-apply",
        b"",
        message({**GOOD, "operationId": OTHER_ID}),
        "SummaryRefused",
    ),
    (
        "a schema apply never reads its summary",
        "apply",
        b"",
        message(summary_wire(encode_frame(result("apply")).data, "apply")),
        "FrameNotFound",
    ),
]
ERRORS: dict[str, type[Exception]] = {
    "SummaryRefused": SummaryRefused,
    "MalformedFrame": MalformedFrame,
    "ForeignFrame": ForeignFrame,
    "FrameNotFound": FrameNotFound,
}


@pytest.mark.parametrize(
    ("name", "operation", "log", "text", "expected"), STAND_IN, ids=[r[0] for r in STAND_IN]
)
def test_when_a_summary_stands_in(
    name: str, operation: str, log: bytes | None, text: str | None, expected: str
) -> None:
    if expected in ("frame", "summary"):
        account = account_for(log, text, operation, OP_ID)
        assert account.source == expected
        assert account.summary.frame_digest == MIGRATION.digest
        assert (account.frame is not None) == (expected == "frame")
        return
    with pytest.raises(ERRORS[expected]) as caught:
        account_for(log, text, operation, OP_ID)
    assert type(caught.value) is ERRORS[expected]


@pytest.mark.parametrize("frame", [MIGRATION, PARTIAL], ids=["applied", "partial"])
def test_the_summary_concludes_exactly_what_its_frame_concludes(frame: Any) -> None:
    from_frame = account_for(frame.data, None, "migration-apply", OP_ID)
    summary_line = encode_summary(from_frame.summary)
    from_summary = account_for(b"", summary_line, "migration-apply", OP_ID)
    assert from_summary.summary == from_frame.summary


def test_the_stand_in_rule_is_one_pure_decision() -> None:
    summary = parse_summary_for(SUMMARY_TEXT, "migration-apply", OP_ID)
    not_found: FrameError = FrameNotFound("none")
    assert stand_in_problem("migration-apply", not_found, (), summary) is None
    assert "only a migration apply" in str(stand_in_problem("apply", not_found, (), summary))
    refused = stand_in_problem("migration-apply", MalformedFrame("bad"), (), summary)
    assert "refused, not missing" in str(refused)
    disagreeing = scan_log(encode_frame(result("migration-apply", operationId=OTHER_ID)).data)
    assert "another payload" in str(
        stand_in_problem("migration-apply", not_found, disagreeing, summary)
    )
