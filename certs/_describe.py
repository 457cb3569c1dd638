"""Human-readable descriptions of certificates and durations, for the CLI and logs.

Pure: every function takes `now` rather than reading the clock, so "expires in"
texts are testable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography import x509

from certs._authority import fingerprint, subject_alt_names
from certs._errors import CertificateError

__all__ = [
    "describe_certificate",
    "format_duration",
    "format_rows",
    "format_time",
    "parse_duration",
]

_DURATION = re.compile(r"(\d+)([hms])")
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> timedelta:
    """Parse a Go-style duration of hours, minutes and seconds: "2160h", "1h30m", "90s".

    Go-style because that is how cert-manager and Kubernetes users already write
    certificate lifetimes; days are deliberately absent there too (DST-free hours).
    """
    position, seconds = 0, 0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        seconds += int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not text or position != len(text):
        raise CertificateError(
            f"{text!r} is not a duration; write hours, minutes or seconds such as 2160h or 1h30m"
        )
    return timedelta(seconds=seconds)


def format_duration(span: timedelta) -> str:
    """A short, coarse duration: "1094d 23h", "5h 3m", "42s"; negative spans get a minus."""
    if span < timedelta(0):
        return "-" + format_duration(-span)
    total = int(span.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


def format_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _expiry(certificate: x509.Certificate, now: datetime) -> str:
    if now < certificate.not_valid_before_utc:
        return (
            f"not valid yet (starts in {format_duration(certificate.not_valid_before_utc - now)})"
        )
    remaining = certificate.not_valid_after_utc - now
    if remaining <= timedelta(0):
        return f"expired {format_duration(-remaining)} ago"
    return f"expires in {format_duration(remaining)}"


def _is_ca(certificate: x509.Certificate) -> str:
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "no"
    if not constraints.ca:
        return "no"
    if constraints.path_length is None:
        return "yes"
    return f"yes (path length {constraints.path_length})"


def describe_certificate(certificate: x509.Certificate, *, now: datetime) -> list[tuple[str, str]]:
    """The facts an operator checks, as (label, value) rows in a fixed order."""
    dns, ips = subject_alt_names(certificate)
    sans = [f"DNS:{name}" for name in dns] + [f"IP:{ip}" for ip in ips]
    return [
        ("subject", certificate.subject.rfc4514_string()),
        ("issuer", certificate.issuer.rfc4514_string()),
        ("serial", f"{certificate.serial_number:#x}"),
        ("not before", format_time(certificate.not_valid_before_utc)),
        ("not after", format_time(certificate.not_valid_after_utc)),
        ("validity", _expiry(certificate, now)),
        ("sha256", fingerprint(certificate)),
        ("ca", _is_ca(certificate)),
        ("sans", ", ".join(sans) if sans else "none"),
    ]


def format_rows(rows: Sequence[tuple[str, str]], *, indent: str = "  ") -> str:
    width = max((len(label) for label, _ in rows), default=0)
    return "\n".join(f"{indent}{label + ':':<{width + 1}} {value}" for label, value in rows)
