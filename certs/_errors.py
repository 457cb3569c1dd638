"""The errors this package raises on purpose.

Every expected failure (bad input, unreadable files, a refused reload, a rotation
that cannot proceed) is a `CertificateError`, so callers — the CLI above all — can
report it as one clear sentence instead of a traceback, while a genuine bug still
surfaces as an ordinary exception.
"""

from __future__ import annotations

__all__ = [
    "CertificateError",
    "InvalidCertificateError",
    "KeyMismatchError",
    "RotationError",
    "StateFileError",
    "os_reason",
]


class CertificateError(Exception):
    """Base of every expected failure in `certs`; its message is a lower-case sentence."""


class InvalidCertificateError(CertificateError):
    """PEM that does not parse, or a certificate unfit for the job it was given."""


class KeyMismatchError(CertificateError):
    """A private key that does not belong to the certificate it is paired with."""


class StateFileError(CertificateError):
    """A rotation state file that exists but cannot be understood."""


class RotationError(CertificateError):
    """A rotation that cannot proceed safely from what was observed."""


def os_reason(error: OSError) -> str:
    """The lower-case reason of an OS error ("permission denied"), for error sentences."""
    return (error.strerror or str(error)).lower()
