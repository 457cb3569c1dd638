"""The HTTP surface: the admission endpoints, health, readiness and metrics.

The endpoints are the registry's (``webhook.rules.ENDPOINT_PATHS``): three validating
ones and the mutating stamp. ``create_app`` is the one place they are served, so any
program that serves the webhook serves all of them.

The handlers are the thin edge of the shell. They take the raw body (the engine
decodes it strictly itself; FastAPI's own model binding would drop unknown fields and
keep one of two duplicates), let the engine judge it (the rule on the loop, its reads
in worker threads, because the reader blocks on the API server), then log, count and
answer. A handler that fails after all
of that still answers a refusing AdmissionReview: nothing here can turn an exception
into "allowed".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol, cast

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from webhook.engine import Engine, Outcome
from webhook.observability import Metrics, log_decision
from webhook.review import MAX_BODY_BYTES, response
from webhook.rules import ENDPOINT_PATHS, Endpoint

METRICS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
# What is wrong (empty when nothing is): readiness and liveness are both asked this way.
Readiness = Callable[[], Sequence[str]]


class DecisionObserver(Protocol):
    """Counts each decision (``webhook.observability.Metrics``, or the manager's)."""

    def observe(self, endpoint: Endpoint, outcome: Outcome, seconds: float) -> None: ...


_log = logging.getLogger("webhook.app")


def _json(body: object, status: int) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def create_app(
    engine: Engine,
    *,
    readiness: Readiness | None = None,
    liveness: Readiness | None = None,
    metrics: Metrics | None = None,
    observer: DecisionObserver | None = None,
    decision_logger: logging.Logger | None = None,
) -> FastAPI:
    """The webhook app. ``readiness`` and ``liveness`` list what is wrong (empty when
    nothing is). With an ``observer`` the decisions are counted there and this app
    serves no ``/metrics`` (the manager serves them on its own port)."""
    app = FastAPI(
        title="ptah-operator admission webhook",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    counters = metrics or Metrics()
    app.state.metrics = counters
    app.state.engine = engine
    observe = observer.observe if observer is not None else counters.observe

    async def judge(endpoint: Endpoint, request: Request) -> Response:
        started = time.perf_counter()
        try:
            body = await _bounded_body(request)
            outcome: Outcome = await engine.decide_async(endpoint, body)
            seconds = time.perf_counter() - started
            log_decision(endpoint, outcome, seconds, decision_logger)
            observe(endpoint, outcome, seconds)
            return _json(outcome.body(), outcome.http_status)
        except Exception:
            # Logging or counting failed, or the body could not be read: still a refusal.
            _log.exception("the %s handler failed; the request is refused", endpoint)
            failed = response("", allowed=False, code=500, message="the webhook failed")
            return _json(failed, 500)

    # Every endpoint the registry names, and only those: a new one is served by adding
    # it to ENDPOINT_PATHS and the engine's JUDGES, nowhere else.
    for endpoint, path in ENDPOINT_PATHS.items():
        app.add_api_route(path, _handler(judge, endpoint), methods=["POST"], name=endpoint)

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        # Asked on the loop itself: a loop too busy to answer is not healthy either.
        problems = list(liveness()) if liveness else []
        if problems:
            return PlainTextResponse("unhealthy: " + "; ".join(problems) + "\n", status_code=503)
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz() -> PlainTextResponse:
        problems = list(await run_in_threadpool(readiness)) if readiness else []
        if problems:
            return PlainTextResponse("not ready: " + "; ".join(problems) + "\n", status_code=503)
        return PlainTextResponse("ok")

    if observer is None:

        @app.get("/metrics")
        async def prometheus() -> Response:
            return Response(counters.render(), media_type=METRICS_CONTENT_TYPE)

    return app


def _handler(
    judge: Callable[[Endpoint, Request], Awaitable[Response]], endpoint: str
) -> Callable[[Request], Awaitable[Response]]:
    known = cast(Endpoint, endpoint)

    async def handle(request: Request) -> Response:
        return await judge(known, request)

    return handle


async def _bounded_body(request: Request) -> bytes:
    """The request body, read no further than a review can be long.

    Oversized bodies are cut one byte past the limit, so the engine still answers
    "too large" with a 400 without this process buffering whatever a client sends.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            break
    return b"".join(chunks)[: MAX_BODY_BYTES + 1]
