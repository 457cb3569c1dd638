"""The certificate directory on disk: its file names, and writing them atomically.

A reader (the webhook server, a kubelet-synced volume, a re-run rotation) must only
ever see a whole old file or a whole new one: a torn `tls.crt` would be refused by
the reloader at best, and at worst be mistaken for "no certificate" by a rotation.
Hence every write goes to a temporary file in the same directory (so the rename
cannot cross filesystems), is fsynced, then renamed over the target.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "PRIVATE_FILES",
    "STATE_FILE",
    "TLS_CERT",
    "TLS_KEY",
    "DirectoryContents",
    "atomic_write",
    "read_directory",
    "read_optional",
    "remove_durably",
]

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
# The rotation's durable memory; it holds the next private keys, hence private.
STATE_FILE = "rotation.json"
PRIVATE_FILES = frozenset({CA_KEY, TLS_KEY, STATE_FILE})

_PRIVATE_MODE = 0o600
_PUBLIC_MODE = 0o644


def atomic_write(path: Path, data: bytes, *, private: bool | None = None) -> None:
    """Replace `path` with `data` so that readers see either the old or the new file.

    `private` defaults to whether the file name is one of `PRIVATE_FILES`; private
    files get mode 0600 from their first byte on (the temporary file is created
    0600), so a key is never readable by others, not even for a moment.
    """
    if private is None:
        private = path.name in PRIVATE_FILES
    directory = path.parent
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as stream:
            os.fchmod(stream.fileno(), _PRIVATE_MODE if private else _PUBLIC_MODE)
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        Path(temporary).replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(temporary).unlink()
        raise
    _fsync_directory(directory)


def remove_durably(path: Path) -> None:
    """Delete `path` (if present) and make the deletion survive a power cut."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    # The rename is only durable once the directory entry is: without this a crash
    # can resurrect the old file after we already acted on the new one.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_optional(path: Path) -> bytes:
    """The file's bytes, or b"" when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


@dataclass(frozen=True)
class DirectoryContents:
    """The four certificate files as bytes (b"" for a missing one)."""

    ca_cert: bytes
    ca_key: bytes
    tls_cert: bytes
    tls_key: bytes

    def by_name(self) -> dict[str, bytes]:
        return {
            CA_CERT: self.ca_cert,
            CA_KEY: self.ca_key,
            TLS_CERT: self.tls_cert,
            TLS_KEY: self.tls_key,
        }


def read_directory(directory: Path) -> DirectoryContents:
    return DirectoryContents(
        ca_cert=read_optional(directory / CA_CERT),
        ca_key=read_optional(directory / CA_KEY),
        tls_cert=read_optional(directory / TLS_CERT),
        tls_key=read_optional(directory / TLS_KEY),
    )
