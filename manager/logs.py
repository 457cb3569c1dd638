"""JSON logs: one line per event, on standard output, at ``PTAH_LOG_LEVEL``.

Every logger of the process (the controller's, the webhook's, uvicorn's) goes through
the one handler installed here, so a log collector parses every line the same way.
The webhook's decision lines are JSON already; their fields are merged into the line
rather than nested as a string, so a reviewer filters them like any other field.
A traceback is a field of its line, never lines of its own. A line written during a
pass carries the pass's fields (``controller.context.passlog``: kind, namespace, resource,
operation, attempt, phase; null until the pass has read them, or when the resource
has no claim), and a record's ``extra={"fields": {...}}`` adds its own.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final, TextIO

import orjson

from controller import current_fields
from webhook.observability import DECISION_LOGGER

LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields of one record's line. Pure."""
    fields: dict[str, Any] = {
        "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname.lower(),
        "logger": record.name,
    }
    message = record.getMessage()
    merged = False
    if record.name == DECISION_LOGGER and message.startswith("{"):
        try:
            decoded = orjson.loads(message)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            fields.update({k: v for k, v in decoded.items() if k not in fields})
            merged = True
    if not merged:
        fields["message"] = message
    # A pass's fields are all kept, null included (no claim: no operation, no attempt),
    # so every line of a pass has the same keys; a record's own extras drop their nulls.
    fields.update({k: v for k, v in current_fields().items() if k not in fields})
    extra = getattr(record, "fields", None)
    if isinstance(extra, dict):
        fields.update({k: v for k, v in extra.items() if k not in fields and v is not None})
    if record.exc_info:
        fields["exception"] = logging.Formatter().formatException(record.exc_info)
    return fields


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return orjson.dumps(record_fields(record), default=str).decode()


def configure(level: str, stream: TextIO | None = None) -> None:
    """Send every logger's records, as JSON lines, to ``stream`` (stdout)."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(LEVELS[level])
    # uvicorn's loggers would otherwise keep their own plain-text handlers.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        named = logging.getLogger(name)
        named.handlers.clear()
        named.propagate = True
