"""Times on the wire: the one RFC 3339 pattern, format and parse, and the wall clock.

Every side writes and reads the API server's times (claims, Leases, Events, the
runner's deadline, a Job's terminal condition). One spelling here keeps them from
drifting: a time one side writes with a fraction another cannot parse would read as
absent, and an absent deadline or renewal is a different decision.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

# The API server's spelling: a zone is required, a fraction is optional.
RFC3339: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")

# A Go duration in the units a spec may use (``30s``, ``10m``, ``1h30m``, ``1.5h``,
# ``500ms``): the subset of Go's syntax both this parser and CEL's ``duration()`` read
# the same way. Unanchored, so RE2 and Python can each anchor it.
DURATION_PATTERN: Final = r"([0-9]+(\.[0-9]+)?(ms|s|m|h))+"
_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNITS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``30s``, ``10m``, ``1h30m``). Pure."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not a duration such as 30s, 10m or 1h")
    return float(sum(float(n) * _UNITS[unit] for n, unit in _DURATION_PART.findall(text)))


def utc_now() -> datetime:
    """The wall clock, aware and in UTC: the default every injectable clock falls back to."""
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """The RFC 3339 form the API server writes for a Time: whole seconds, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_timestamp(moment: datetime) -> str:
    """The RFC 3339 form of a MicroTime (Lease renewals, Event times): microseconds, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time with its zone, or None. Python reads many more spellings, and a
    spelling the API server never writes is not a time anyone recorded."""
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
