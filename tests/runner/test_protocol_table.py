"""The frame reader, one log per row: a control row first, then each way a log can
differ from a clean frame, with the error type and whether it may still arrive."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from runner.errors import (
    ForeignFrame,
    FrameError,
    FrameNotFound,
    FrameTooLarge,
    IncompleteFrame,
    MalformedFrame,
)
from runner.protocol import (
    FOOTER,
    LOG_BUDGET_BYTES,
    MARKER,
    MAX_INTERLEAVED_BYTES,
    MAX_PAYLOAD_BYTES,
    encode_frame,
    header_digests,
    parse_result_for,
)
from runner.result import RunnerResult, encode_json
from tests.runner.support import OP_ID, OTHER_ID, result, wire

GOOD = encode_frame(result("apply"))
SECOND = encode_frame(
    result("apply", apply={"planContentDigest": "sha256:" + "e" * 64, "statementCount": 7})
)
HEADER, PAYLOAD, END, _ = GOOD.data.split(b"\n")


def raw_frame(payload: bytes, *, length: int | None = None, digest: str | None = None) -> bytes:
    """A frame around any payload, with the header's length and digest overridable."""
    length = len(payload) if length is None else length
    digest = hashlib.sha256(payload).hexdigest() if digest is None else digest
    return MARKER + b" %d %s\n" % (length, digest.encode()) + payload + b"\n" + FOOTER + b"\n"


def noise(size: int) -> bytes:
    line = b"x" * 99 + b"\n"
    return line * (size // len(line)) + b"y" * (size % len(line) - 1) + b"\n"


@dataclass(frozen=True)
class Row:
    name: str
    log: bytes | str
    error: type[FrameError] | None = None
    may_still_arrive: bool = False
    operation: str = "apply"
    operation_id: str = OP_ID
    check: Callable[[RunnerResult], bool] | None = None


ROWS = [
    Row("control: a frame between other lines", b"starting\n" + GOOD.data + b"done\n"),
    Row("empty log", b"", FrameNotFound, True),
    Row("only other lines", b"hello\nworld\n", FrameNotFound, True),
    Row("cut inside the header", GOOD.data[:30], IncompleteFrame, True),
    Row("cut after the header", HEADER + b"\n", IncompleteFrame, True),
    Row("cut inside the payload", HEADER + b"\n" + PAYLOAD[:50], IncompleteFrame, True),
    Row("cut before the footer", HEADER + b"\n" + PAYLOAD + b"\n", IncompleteFrame, True),
    Row("footer without its newline", GOOD.data[:-1], IncompleteFrame, True),
    Row(
        "interleaved lines inside the frame",
        HEADER + b"\nruntime says hi\n" + PAYLOAD + b"\nand again\n" + END + b"\n",
    ),
    Row(
        "64 KiB interleaved before the payload",
        HEADER + b"\n" + noise(MAX_INTERLEAVED_BYTES) + PAYLOAD + b"\n" + END + b"\n",
    ),
    Row(
        "more than 64 KiB before the payload",
        HEADER + b"\n" + noise(MAX_INTERLEAVED_BYTES + 200) + PAYLOAD + b"\n" + END + b"\n",
        MalformedFrame,
    ),
    Row(
        "more than 64 KiB before the footer",
        HEADER + b"\n" + PAYLOAD + b"\n" + noise(MAX_INTERLEAVED_BYTES + 200) + END + b"\n",
        MalformedFrame,
    ),
    Row(
        "more than 64 KiB of lines after the header and no end yet",
        HEADER + b"\n" + noise(MAX_INTERLEAVED_BYTES + 200),
        MalformedFrame,
    ),
    Row("header longer than 96 bytes", HEADER + b" " * 40 + b"\n" + PAYLOAD, MalformedFrame),
    Row(
        "header declaring more than a frame holds",
        raw_frame(PAYLOAD, length=MAX_PAYLOAD_BYTES + 1),
        FrameTooLarge,
    ),
    Row("header declaring too few bytes", raw_frame(b"{}"), MalformedFrame),
    Row("header that is not a header", MARKER + b" hello\n", MalformedFrame),
    Row(
        "header with a zero-padded length",
        raw_frame(PAYLOAD).replace(b"V1 ", b"V1 0"),
        MalformedFrame,
    ),
    Row(
        "digest mismatch",
        raw_frame(PAYLOAD, digest="0" * 64),
        MalformedFrame,
    ),
    Row(
        "payload changed after the header was written",
        GOOD.data.replace(b'"statementCount":2', b'"statementCount":3'),
        MalformedFrame,
    ),
    Row("header length off by one", raw_frame(PAYLOAD, length=len(PAYLOAD) + 1), MalformedFrame),
    Row("payload not JSON", raw_frame(b"x" * 80), MalformedFrame),
    Row(
        "payload not a valid result",
        raw_frame(encode_json(wire("apply", mutationStarted=False))),
        MalformedFrame,
    ),
    Row(
        "foreign operation ID",
        encode_frame(result("apply", operationId=OTHER_ID)).data,
        ForeignFrame,
    ),
    Row("foreign operation", encode_frame(result("plan")).data, ForeignFrame),
    Row(
        "two frames: the last valid wins",
        GOOD.data + SECOND.data,
        check=lambda r: r.apply is not None and r.apply.statement_count == 7,
    ),
    Row(
        "two frames: a broken later one does not displace a valid one",
        GOOD.data + raw_frame(b"z" * 80),
        check=lambda r: r.apply is not None and r.apply.statement_count == 2,
    ),
    Row(
        "two frames: a later one still arriving",
        GOOD.data + SECOND.data[:-30],
        IncompleteFrame,
        True,
    ),
    Row(
        "two frames: the later valid one is foreign",
        GOOD.data + encode_frame(result("apply", operationId=OTHER_ID)).data,
        ForeignFrame,
    ),
    Row("marker inside a line is not a header", b"[executor] " + GOOD.data, FrameNotFound, True),
    Row("lines ending in CRLF", GOOD.data.replace(b"\n", b"\r\n"), MalformedFrame),
    Row("the log as text", "résumé\n" + GOOD.data.decode() + "ok\n"),
    Row("undecodable bytes around the frame", b"\xff\xfe\x00\n" + GOOD.data + b"\x80\n"),
    Row(
        "a frame beyond the budget is not read",
        GOOD.data + noise(LOG_BUDGET_BYTES + 100),
        FrameNotFound,
        True,
    ),
    Row("a frame at the end of a log beyond the budget", noise(LOG_BUDGET_BYTES) + GOOD.data),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_frame_reader(row: Row) -> None:
    if row.error is None:
        frame = parse_result_for(row.log, row.operation, row.operation_id)
        assert frame.result.operation == row.operation
        assert frame.result.operation_id == row.operation_id
        if row.check is not None:
            assert row.check(frame.result)
        return
    with pytest.raises(FrameError) as caught:
        parse_result_for(row.log, row.operation, row.operation_id)
    assert type(caught.value) is row.error, caught.value
    assert caught.value.may_still_arrive is row.may_still_arrive
    assert str(caught.value) == str(caught.value).lower()[:1] + str(caught.value)[1:]


def test_the_winning_frame_names_its_payload_digest() -> None:
    frame = parse_result_for(GOOD.data, "apply", OP_ID)
    assert frame.digest == GOOD.digest == "sha256:" + hashlib.sha256(PAYLOAD).hexdigest()


def test_a_frame_of_another_protocol_version_is_foreign() -> None:
    with pytest.raises(ForeignFrame, match="protocol 6, not 5"):
        parse_result_for(GOOD.data, "apply", OP_ID, protocol_version=5)


def test_header_digests_name_every_header_and_none_for_a_broken_one() -> None:
    log = GOOD.data + MARKER + b" nonsense\n" + SECOND.data
    assert header_digests(log) == (GOOD.digest, None, SECOND.digest)
    assert header_digests(b"nothing here\n") == ()


@pytest.mark.parametrize("payload_ok", [True, False], ids=["payload intact", "payload forged"])
def test_a_log_full_of_headers_is_read_in_one_pass(payload_ok: bool) -> None:
    # Every header looks up the one payload line instead of rescanning the lines after
    # it, and the payload is decoded once, so a budget full of headers completes.
    payload = PAYLOAD if payload_ok else PAYLOAD.replace(b"apply", b"APPLY")
    forged = (HEADER + b"\n") * (LOG_BUDGET_BYTES // (len(HEADER) + 1) - 10)
    log = forged + payload + b"\n" + END + b"\n"
    assert len(header_digests(log)) > 40_000
    if payload_ok:
        assert parse_result_for(log, "apply", OP_ID).digest == GOOD.digest
    else:
        with pytest.raises(MalformedFrame):
            parse_result_for(log, "apply", OP_ID)
