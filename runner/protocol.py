"""The result frame: how the runner tells the controller what happened, through its log.

    PTAH_RUNNER_RESULT_V1 <len> <sha256 hex of the payload>\\n
    <payload: compact ASCII JSON, exactly len bytes>\\n
    PTAH_RUNNER_RESULT_END_V1\\n

A Pod log is shared text: the runtime may interleave lines of the runner's stderr
between the lines of a frame, a log read may stop in the middle of one, and anything
else in the container can print. So the reader is strict about what it accepts and
bounded in what it reads:

* a header is a whole line of at most 96 bytes whose first word is the marker;
* its payload is the first complete line, at most 64 KiB of other lines later, whose
  SHA-256 is the header's; its footer follows at most 64 KiB of other lines later;
* only the last 64 x 64 KiB of a log are read, and a payload is at most 2 MiB;
* the last valid frame wins, unless a frame after it may still be arriving;
* the winner is refused unless it names the expected operation, operation ID and
  protocol version: a frame of another attempt is never this attempt's account.

The reader's work is linear in the bytes it reads: every line is hashed at most once
and every header finds its payload and footer by lookup, not by rescanning, so a log
full of forged headers costs no more than a log of noise.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from runner.errors import (
    ForeignFrame,
    FrameError,
    FrameNotFound,
    FrameTooLarge,
    IncompleteFrame,
    MalformedFrame,
)
from runner.result import (
    RUNNER_PROTOCOL_VERSION,
    RunnerResult,
    decode_result,
    encode_json,
)

MARKER: Final = b"PTAH_RUNNER_RESULT_V1"
FOOTER: Final = b"PTAH_RUNNER_RESULT_END_V1"
MAX_HEADER_BYTES: Final = 96
MAX_INTERLEAVED_BYTES: Final = 64 * 1024
LOG_BUDGET_BYTES: Final = 64 * 64 * 1024
MAX_PAYLOAD_BYTES: Final = 2 * 1024 * 1024
# No valid result encodes shorter; lines below it are never hashed.
MIN_PAYLOAD_BYTES: Final = 64

_HEADER_START: Final = re.compile(rb"(?m)^" + re.escape(MARKER) + rb"(?=[ \n]|\Z)")
_HEADER: Final = re.compile(re.escape(MARKER) + rb" ([1-9][0-9]{0,9}) ([0-9a-f]{64})")
_FOOTER_LINE: Final = re.compile(rb"(?m)^" + re.escape(FOOTER) + rb"\n")
_PAYLOAD_CANDIDATE: Final = re.compile(rb"(?m)^([^\n]{%d,})\n" % MIN_PAYLOAD_BYTES)


@dataclass(frozen=True, slots=True)
class EncodedFrame:
    data: bytes
    digest: str  # sha256:<hex> of the payload, which the termination summary names


@dataclass(frozen=True, slots=True)
class Frame:
    """A frame read from a log and bound to the operation that asked for it."""

    result: RunnerResult
    digest: str


@dataclass(frozen=True, slots=True)
class FrameCandidate:
    """One header line in a log and what became of it.

    ``digest`` is the header's (None when the header does not parse); ``payload`` is
    set when the frame is complete and its digest holds, ``error`` otherwise.
    """

    start: int
    digest: str | None
    payload: memoryview | None = None  # a view: headers sharing a payload share its bytes
    error: FrameError | None = None


def encode_frame(result: RunnerResult) -> EncodedFrame:
    payload = encode_json(result.to_wire())
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise FrameTooLarge(
            f"the result encodes to {len(payload)} bytes, more than a frame's {MAX_PAYLOAD_BYTES}"
        )
    hexdigest = hashlib.sha256(payload).hexdigest()
    header = MARKER + b" %d " % len(payload) + hexdigest.encode("ascii")
    return EncodedFrame(header + b"\n" + payload + b"\n" + FOOTER + b"\n", "sha256:" + hexdigest)


def _as_bytes(log: str | bytes) -> bytes:
    # A frame is pure ASCII, so replacing what does not encode cannot change one.
    data = log.encode("utf-8", "replace") if isinstance(log, str) else log
    if len(data) > LOG_BUDGET_BYTES:
        # The frame is the last thing the runner writes; read the end, from a line start.
        data = data[-LOG_BUDGET_BYTES:]
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data


class _Lines:
    """Complete lines of the log, indexed by the digest of their content.

    Only lines of a length some header declares are hashed, each once; equal digests
    are equal lines, so one length and a sorted list of starts describe them all.
    """

    def __init__(self, data: bytes, lengths: set[int]) -> None:
        self.data = data
        self.complete_end = data.rfind(b"\n") + 1
        self.by_digest: dict[bytes, tuple[int, list[int]]] = {}
        # Found by one regex scan rather than a split: a log of empty lines must not
        # cost a Python object per line.
        for match in _PAYLOAD_CANDIDATE.finditer(data):
            start, end = match.span(1)
            if end - start in lengths:
                digest = hashlib.sha256(match.group(1)).digest()
                self.by_digest.setdefault(digest, (end - start, []))[1].append(start)

    def first_after(self, digest: bytes, position: int) -> tuple[int, int] | None:
        """The length and start of the first line with this digest at or after position."""
        length, starts = self.by_digest.get(digest, (0, []))
        index = bisect.bisect_left(starts, position)
        return (length, starts[index]) if index < len(starts) else None

    def still_open(self, position: int) -> bool:
        """Whether a line may yet arrive within the interleaving allowance of position."""
        return self.complete_end - position <= MAX_INTERLEAVED_BYTES


def _headers(data: bytes) -> list[tuple[int, bytes | None]]:
    """Each header line's start and its text, None when the line is not yet complete."""
    found: list[tuple[int, bytes | None]] = []
    for match in _HEADER_START.finditer(data):
        end = data.find(b"\n", match.start())
        if end < 0 and len(data) - match.start() > MAX_HEADER_BYTES:
            end = len(data)  # too long to become a header, however it ends
        found.append((match.start(), data[match.start() : end] if end >= 0 else None))
    return found


def _parsed_header(line: bytes | None) -> tuple[int, bytes] | FrameError:
    if line is None:
        return IncompleteFrame("the log ends inside a frame header")
    if len(line) > MAX_HEADER_BYTES:
        return MalformedFrame(f"a frame header is longer than {MAX_HEADER_BYTES} bytes")
    match = _HEADER.fullmatch(line)
    if match is None:
        return MalformedFrame("a frame header is not '<marker> <length> <sha256 hex>'")
    length = int(match.group(1))
    if length > MAX_PAYLOAD_BYTES:
        return FrameTooLarge(
            f"a frame header declares {length} bytes, more than a frame's {MAX_PAYLOAD_BYTES}"
        )
    if length < MIN_PAYLOAD_BYTES:
        return MalformedFrame(f"a frame header declares {length} bytes, too few for a result")
    return length, bytes.fromhex(match.group(2).decode("ascii"))


def scan_log(log: str | bytes) -> tuple[FrameCandidate, ...]:
    """Every frame header in the (budgeted) log, in order, with what it led to.

    The one reader of frames: ``parse_result_for`` picks from what it returns, and the
    termination summary is checked against the same candidates' digests.
    """
    data = _as_bytes(log)
    headers = _headers(data)
    if not headers:
        return ()
    parsed = [(start, _parsed_header(line)) for start, line in headers]
    lengths = {p[0] for _, p in parsed if isinstance(p, tuple)}
    lines = _Lines(data, lengths)
    footers = [m.start() for m in _FOOTER_LINE.finditer(data)]
    return tuple(_candidate(start, header, lines, footers) for start, header in parsed)


def _candidate(
    start: int, header: tuple[int, bytes] | FrameError, lines: _Lines, footers: list[int]
) -> FrameCandidate:
    if isinstance(header, FrameError):
        return FrameCandidate(start, None, error=header)
    length, digest = header
    named = "sha256:" + digest.hex()
    after_header = lines.data.index(b"\n", start) + 1
    index = bisect.bisect_left(footers, after_header)
    closing = footers[index] if index < len(footers) else None
    found = lines.first_after(digest, after_header)
    if found is not None and closing is not None and found[1] > closing:
        found = None  # a footer closed this frame before any line with its digest
    if found is None or found[1] - after_header > MAX_INTERLEAVED_BYTES:
        if closing is not None:
            problem = "no line between a frame's header and its footer has the header's digest"
        elif lines.still_open(after_header):
            return FrameCandidate(
                start, named, error=IncompleteFrame("the log ends before a payload")
            )
        else:
            problem = f"no line within {MAX_INTERLEAVED_BYTES} bytes of a header has its digest"
        return FrameCandidate(start, named, error=MalformedFrame(problem))
    line_length, payload_at = found
    if line_length != length:
        # The digest names a line, but not one of the length the header declares.
        return FrameCandidate(
            start, named, error=MalformedFrame("a payload is not its declared size")
        )
    payload = memoryview(lines.data)[payload_at : payload_at + length]
    after_payload = payload_at + length + 1
    index = bisect.bisect_left(footers, after_payload)
    footer = footers[index] if index < len(footers) else None
    if footer is None or footer - after_payload > MAX_INTERLEAVED_BYTES:
        if lines.still_open(after_payload):
            return FrameCandidate(
                start, named, error=IncompleteFrame("the log ends before a footer")
            )
        return FrameCandidate(
            start,
            named,
            error=MalformedFrame(f"no footer within {MAX_INTERLEAVED_BYTES} bytes of a payload"),
        )
    return FrameCandidate(start, named, payload=payload)


def _decoded(
    candidate: FrameCandidate, memo: dict[str, RunnerResult | FrameError]
) -> RunnerResult | FrameError:
    payload, digest = candidate.payload, candidate.digest
    if payload is None or digest is None:
        assert candidate.error is not None
        return candidate.error
    # Headers may share one payload line; it is decoded once, however many point at it.
    if digest not in memo:
        try:
            memo[digest] = decode_result(bytes(payload))
        except ValueError as error:
            memo[digest] = MalformedFrame(f"a frame's payload is not a valid result: {error}")
    return memo[digest]


def last_valid(candidates: Iterable[FrameCandidate]) -> Frame:
    """The last frame whose payload is a valid result, or the error that explains none.

    A frame that may still be arriving after the last valid one outranks it: it is the
    newest word, and a reader that settled on the older one could contradict it.
    """
    still_arriving: FrameError | None = None
    latest_error: FrameError | None = None
    memo: dict[str, RunnerResult | FrameError] = {}
    for candidate in reversed(tuple(candidates)):
        decoded = _decoded(candidate, memo)
        if isinstance(decoded, RunnerResult):
            if still_arriving is not None:
                raise still_arriving
            assert candidate.digest is not None
            return Frame(decoded, candidate.digest)
        if decoded.may_still_arrive and still_arriving is None:
            still_arriving = decoded
        latest_error = latest_error or decoded
    if still_arriving is not None:
        raise still_arriving
    if latest_error is not None:
        raise latest_error
    raise FrameNotFound("the log holds no result frame")


def binding_problem(
    result_operation: str,
    result_operation_id: str,
    result_protocol: int,
    *,
    operation: str,
    operation_id: str,
    protocol_version: int,
) -> str | None:
    """Why an account is not this attempt's, or None. Shared with the summary."""
    if result_operation != operation:
        return f"it reports operation {result_operation!r}, not {operation!r}"
    if result_operation_id != operation_id:
        return f"it reports operation ID {result_operation_id!r}, not {operation_id!r}"
    if result_protocol != protocol_version:
        return f"it speaks runner protocol {result_protocol}, not {protocol_version}"
    return None


def frame_for(
    candidates: Iterable[FrameCandidate],
    operation: str,
    operation_id: str,
    *,
    protocol_version: int = RUNNER_PROTOCOL_VERSION,
) -> Frame:
    """The last valid of ``candidates``, refused unless it is this attempt's."""
    frame = last_valid(candidates)
    result = frame.result
    problem = binding_problem(
        result.operation,
        result.operation_id,
        result.protocol_version,
        operation=operation,
        operation_id=operation_id,
        protocol_version=protocol_version,
    )
    if problem:
        raise ForeignFrame(f"the last valid frame is not this attempt's: {problem}")
    return frame


def parse_result_for(
    log: str | bytes,
    operation: str,
    operation_id: str,
    *,
    protocol_version: int = RUNNER_PROTOCOL_VERSION,
) -> Frame:
    """The frame in ``log`` that accounts for this operation and attempt.

    Raises a ``FrameError``; its ``may_still_arrive`` says whether a later read of the
    same log could answer differently.
    """
    return frame_for(scan_log(log), operation, operation_id, protocol_version=protocol_version)


def header_digests(log: str | bytes) -> tuple[str | None, ...]:
    """The digest every frame header in the log names (None for a header that is broken)."""
    return tuple(candidate.digest for candidate in scan_log(log))
