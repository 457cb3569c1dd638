"""Properties of the frame and summary readers over generated logs.

Whatever a log holds, the reader raises one of its typed errors or returns a frame of
the operation and attempt it was asked about: never another exception, never another
attempt's account.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import FrameError, SummaryRefused
from runner.protocol import FOOTER, MARKER, encode_frame, parse_result_for
from runner.result import RunnerResult
from runner.summary import encode_summary, parse_summary_for, summary_of
from tests.runner.support import OP_ID, OTHER_ID, failed_wire, result

OPERATIONS = ("apply", "plan", "migration-apply")
FRAMES = {
    (op, op_id): encode_frame(result(op, operationId=op_id))
    for op in OPERATIONS
    for op_id in (OP_ID, OTHER_ID)
}
FAILURE = encode_frame(RunnerResult.from_wire(failed_wire("apply")))
OWN = FRAMES[("apply", OP_ID)]

noise_lines = st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ") + b"\n")
frame_parts = st.sampled_from(
    [part + b"\n" for frame in FRAMES.values() for part in frame.data.split(b"\n")[:3]]
)
whole_frames = st.sampled_from([f.data for f in FRAMES.values()] + [FAILURE.data])
markers = st.sampled_from(
    [MARKER + b" ", MARKER + b" 300 " + b"a" * 64 + b"\n", FOOTER + b"\n", b"\n", b"\r"]
)
pieces = st.one_of(noise_lines, frame_parts, whole_frames, markers, st.binary(max_size=40))
logs = st.lists(pieces, max_size=30).map(b"".join)


def _check(log: bytes | str, operation: str = "apply", operation_id: str = OP_ID) -> None:
    try:
        frame = parse_result_for(log, operation, operation_id)
    except FrameError as error:
        assert isinstance(error.may_still_arrive, bool)
        return
    assert frame.result.operation == operation
    assert frame.result.operation_id == operation_id


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(logs, st.sampled_from(OPERATIONS), st.sampled_from((OP_ID, OTHER_ID)))
def test_any_log_gives_a_typed_error_or_this_attempts_frame(
    log: bytes, operation: str, operation_id: str
) -> None:
    _check(log, operation, operation_id)
    _check(log.decode("utf-8", "replace"), operation, operation_id)


@settings(max_examples=300)
@given(st.binary(max_size=2000))
def test_random_bytes_never_raise_anything_else(data: bytes) -> None:
    _check(data)


@settings(max_examples=300)
@given(logs, st.integers(min_value=0), st.binary(max_size=8), st.integers(0, 3))
def test_a_damaged_frame_is_refused_or_still_this_attempts(
    log: bytes, where: int, insert: bytes, cut: int
) -> None:
    # Damage anywhere: bytes inserted and removed inside or around our own frame.
    whole = log + OWN.data + log
    at = where % (len(whole) + 1)
    _check(whole[:at] + insert + whole[at + cut :])


@settings(max_examples=200)
@given(
    st.lists(noise_lines, max_size=6),
    st.lists(noise_lines, max_size=6),
    st.lists(noise_lines, max_size=6),
    st.lists(noise_lines, max_size=6),
)
def test_lines_interleaved_around_and_inside_a_frame_are_tolerated(
    before: list[bytes], inside_1: list[bytes], inside_2: list[bytes], after: list[bytes]
) -> None:
    header, payload, footer, _ = OWN.data.split(b"\n")
    # A footer among the lines inside would close the frame early: that is not noise.
    inside_1 = [p for p in inside_1 if p.rstrip(b"\n") not in (FOOTER, payload)]
    inside_2 = [p for p in inside_2 if p.rstrip(b"\n") != FOOTER]
    log = b"".join(
        [*before, header + b"\n", *inside_1, payload + b"\n", *inside_2, footer + b"\n", *after]
    )
    assert parse_result_for(log, "apply", OP_ID).digest == OWN.digest


@settings(max_examples=100)
@given(st.sampled_from(sorted(FRAMES)), st.integers(min_value=0))
def test_every_prefix_of_a_frame_may_still_arrive(key: tuple[str, str], cut: int) -> None:
    data = b"log line\n" + FRAMES[key].data
    prefix = data[: cut % len(data)]
    try:
        parse_result_for(prefix, *key)
    except FrameError as error:
        assert error.may_still_arrive, error
    else:
        raise AssertionError("a frame was read from a log that ends before its footer")


SUMMARY = encode_summary(summary_of(parse_result_for(OWN.data, "apply", OP_ID))).rstrip(b"\n")


@settings(max_examples=400)
@given(st.binary(max_size=60), st.integers(min_value=0), st.binary(max_size=6), st.integers(0, 3))
def test_any_termination_message_gives_a_refusal_or_this_attempts_summary(
    before: bytes, where: int, insert: bytes, cut: int
) -> None:
    whole = before + SUMMARY + b"\n"
    at = where % (len(whole) + 1)
    message = whole[:at] + insert + whole[at + cut :]
    for text in (message, message.decode("utf-8", "replace")):
        try:
            summary = parse_summary_for(text, "apply", OP_ID)
        except SummaryRefused:
            continue
        assert (summary.operation, summary.operation_id) == ("apply", OP_ID)
