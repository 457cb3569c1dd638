"""The one RFC 3339 spelling every side writes and reads (jobclaim.times)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobclaim.times import RFC3339, micro_timestamp, parse_time, timestamp, utc_now

MOMENT = datetime(2026, 12, 2, 12, 5, 7, 123456, tzinfo=UTC)


def test_a_time_is_written_in_whole_seconds_and_a_micro_time_in_microseconds() -> None:
    assert timestamp(MOMENT) == "2026-12-02T12:05:07Z"
    assert micro_timestamp(MOMENT) == "2026-12-02T12:05:07.123456Z"
    east = MOMENT.astimezone(timezone(timedelta(hours=2)))
    assert (timestamp(east), micro_timestamp(east)) == (timestamp(MOMENT), micro_timestamp(MOMENT))


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("2026-12-02T12:05:07Z", True),
        ("2026-12-02T12:05:07.123456789Z", True),
        ("2026-12-02T14:05:07+02:00", True),
        ("2026-12-02T12:05:07", False),  # no zone: whose noon?
        ("2026-12-02 12:05:07Z", False),
        ("2026-12-02T12:05Z", False),
        ("20261202T120507Z", False),
        ("", False),
        (None, False),
        (1733140000, False),
    ],
)
def test_only_the_api_servers_spelling_is_read_as_a_time(text: object, read: bool) -> None:
    assert (parse_time(text) is not None) is read


# From year 1000: strftime does not pad a shorter year on every libc.
@given(st.datetimes(min_value=datetime(1000, 1, 1), timezones=st.just(UTC)))
def test_every_written_time_reads_back_as_itself(moment: datetime) -> None:
    assert parse_time(micro_timestamp(moment)) == moment
    assert parse_time(timestamp(moment)) == moment.replace(microsecond=0)
    assert RFC3339.fullmatch(timestamp(moment))


def test_the_clock_is_aware_and_in_utc() -> None:
    assert utc_now().tzinfo is UTC
