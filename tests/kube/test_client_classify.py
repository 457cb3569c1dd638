"""``classify``: every answer the API server can give, mapped to one domain error.

The mapping decides whether a failed Job create may be retried (``Refused``: nothing
was stored) or is an unknown outcome (everything else), so each row names the
answer a real kube-apiserver 1.37 gives and why it lands where it does.
"""

from __future__ import annotations

import json

import pytest

from jobclaim.apiserver import (
    AlreadyExists,
    ApiError,
    Conflict,
    Invalid,
    NotFound,
    Refused,
    Unavailable,
)
from kube.client import classify


def status(code: int, reason: str, message: str) -> str:
    """A ``metav1.Status`` body as the API server writes it."""
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    )


WEBHOOK_DOWN = (
    'Internal error occurred: failed calling webhook "jobs.ptah.example": failed to call '
    'webhook: Post "https://ptah-webhook.ptah-system.svc:443/validate?timeout=10s": dial tcp '
    "10.96.0.12:443: connect: connection refused"
)

# (status, HTTP reason, body, expected class, expected Status reason)
ROWS = [
    # Control row: a plain 404 is NotFound and nothing else.
    (404, "Not Found", status(404, "NotFound", 'jobs "x" not found'), NotFound, "NotFound"),
    # 409 splits on the Status reason: something stands under the name ...
    (
        409,
        "Conflict",
        status(409, "AlreadyExists", 'jobs "x" already exists'),
        AlreadyExists,
        "AlreadyExists",
    ),
    # ... or a precondition (resourceVersion, UID) failed.
    (
        409,
        "Conflict",
        status(409, "Conflict", 'Operation cannot be fulfilled on jobs "x"'),
        Conflict,
        "Conflict",
    ),
    # Refused before storing: authentication, authorization, a bad request, validation,
    # and priority-and-fairness shedding.
    (401, "Unauthorized", status(401, "Unauthorized", "Unauthorized"), Refused, "Unauthorized"),
    (403, "Forbidden", status(403, "Forbidden", "jobs is forbidden"), Refused, "Forbidden"),
    (400, "Bad Request", status(400, "BadRequest", "bad request"), Refused, "BadRequest"),
    (422, "Unprocessable Entity", status(422, "Invalid", "Job is invalid"), Invalid, "Invalid"),
    (429, "Too Many Requests", status(429, "TooManyRequests", "slow down"), Refused, ""),
    (406, "Not Acceptable", status(406, "NotAcceptable", "no"), Refused, "NotAcceptable"),
    (413, "Request Entity Too Large", "", Refused, "Request Entity Too Large"),
    # A fail-closed admission webhook that could not be called: admission runs before
    # storage, so this one 500 is a refusal.
    (500, "Internal Server Error", status(500, "InternalError", WEBHOOK_DOWN), Refused, ""),
    # Any other 500 may have followed the write.
    (
        500,
        "Internal Server Error",
        status(500, "InternalError", "resourceVersion should not be set"),
        Unavailable,
        "InternalError",
    ),
    (503, "Service Unavailable", status(503, "ServiceUnavailable", "x"), Unavailable, ""),
    # The server's own time-out: the write may still complete behind it.
    (504, "Gateway Timeout", status(504, "Timeout", "request timed out"), Unavailable, "Timeout"),
    # A proxy's time-out says nothing about the API server behind it.
    (408, "Request Timeout", "", Unavailable, "Request Timeout"),
    (410, "Gone", status(410, "Expired", "too old resource version"), Unavailable, "Expired"),
    # No answer at all: a client time-out or a refused connection.
    (None, "", None, Unavailable, ""),
    (0, "SSLError", "", Unavailable, ""),
]


@pytest.mark.parametrize(
    ("code", "http_reason", "body", "expected", "status_reason"),
    ROWS,
    ids=[f"{row[0]}-{row[3].__name__}" for row in ROWS],
)
def test_an_answer_maps_to_one_error(
    code: int | None,
    http_reason: str,
    body: str | None,
    expected: type[ApiError],
    status_reason: str,
) -> None:
    error = classify(code, http_reason, body)
    assert type(error) is expected
    assert error.status == (code or None)
    if status_reason:
        assert error.reason == status_reason


def test_the_message_is_the_status_message() -> None:
    error = classify(404, "Not Found", status(404, "NotFound", 'jobs "x" not found'))
    assert str(error) == 'jobs "x" not found'


def test_a_body_that_is_not_a_status_is_kept_as_text() -> None:
    error = classify(502, "Bad Gateway", b"<html>upstream connect error</html>")
    assert type(error) is Unavailable
    assert "upstream connect error" in str(error)


def test_the_webhook_sentence_counts_only_on_a_500() -> None:
    # A 504 whose message mentions the webhook timed out as a whole request: the
    # write may have been stored behind the time-out, so it stays unknown.
    error = classify(504, "Gateway Timeout", status(504, "Timeout", WEBHOOK_DOWN))
    assert type(error) is Unavailable


def test_invalid_is_a_refusal() -> None:
    # mutationlifecycle.classify_create tests isinstance(Refused): validation must be one.
    assert isinstance(classify(422, "", status(422, "Invalid", "x")), Refused)
