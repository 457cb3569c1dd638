"""The one canonical JSON form and the digest and value formats built on it.

Every fingerprint, digest and deterministic name in the operator is computed from
these bytes, so two callers can only agree when they share this module: a second
serializer that orders keys differently would make the controller and the webhook
disagree about an identical object.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import orjson

DIGEST_PATTERN: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
EPOCH_PATTERN: Final = re.compile(r"^v1-[0-9a-f]{32}$")
PINNED_IMAGE_PATTERN: Final = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
# Canonical positive int32 in decimal: no sign, no leading zero, no padding.
CANONICAL_POSITIVE_INT: Final = re.compile(r"^[1-9][0-9]{0,9}$")
INT32_MAX: Final = 2**31 - 1
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def canonical_json(value: Any) -> bytes:
    """Serialize ``value`` to sorted-key, compact, UTF-8 JSON (no escaping of non-ASCII).

    The bytes equal ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``; orjson produces them an order of magnitude faster, which
    matters because the webhook digests a Pod template on every request. Values that
    JSON cannot spell are refused: non-string keys and integers beyond 64 bits raise.
    Non-finite floats never reach here: the wire models refuse them on decode.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError as error:
        raise ValueError(f"value has no canonical JSON form: {error}") from error


def sha256_digest(data: bytes) -> str:
    """The ``sha256:<64 hex>`` form every recorded digest uses."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """Digest of the canonical JSON form of ``value``."""
    return sha256_digest(canonical_json(value))


def is_digest(value: object) -> bool:
    return isinstance(value, str) and DIGEST_PATTERN.fullmatch(value) is not None


def is_epoch(value: object) -> bool:
    return isinstance(value, str) and EPOCH_PATTERN.fullmatch(value) is not None


def is_pinned_image(value: object) -> bool:
    return isinstance(value, str) and PINNED_IMAGE_PATTERN.fullmatch(value) is not None


def is_canonical_positive_int32(value: object) -> bool:
    """True for ``"1"``..``"2147483647"``; ``"01"``, ``"+1"`` and ``"0"`` are ambiguous.

    Exactly ``CANONICAL_POSITIVE_INT``, spelled with string methods: ``match`` asks this
    of every Job it holds to an envelope, and ASCII ``isdigit`` is ``[0-9]``.
    """
    return (
        isinstance(value, str)
        and 0 < len(value) <= 10
        and value.isascii()
        and value.isdigit()
        and value[0] != "0"
        and int(value) <= INT32_MAX
    )


def is_clean_text(value: object, *, limit: int = 128) -> bool:
    """Non-empty, at most ``limit`` UTF-8 bytes, no edge whitespace, no control characters.

    Used for recorded versions and revisions: a value that differs only in padding or
    an invisible character would read the same to a person and differently to a matcher.
    """
    if not isinstance(value, str) or not value or value != value.strip():
        return False
    if value.isascii():
        # The common case, without encoding or a regular expression: one byte per
        # character, and an ASCII character is printable exactly when it is not one
        # of the control characters ``_CONTROL`` names.
        return len(value) <= limit and value.isprintable()
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 form, so no API server could have stored it;
        # it is not text, and raising here would turn a refusal into an error.
        return False
    return len(encoded) <= limit and _CONTROL.search(value) is None
