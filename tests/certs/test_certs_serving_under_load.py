"""The certificate is swapped under a real uvicorn server while clients hammer it.

Proves, over loopback: no request fails, requests in flight across the swap
complete, and every connection opened after the reload presents the new
certificate. Every wait is on a condition with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from certs_support import material, write_files
from cryptography import x509
from fastapi import FastAPI

from certs import (
    ReloadingTLS,
    build_uvicorn_server,
    fetch_served_certificate,
    fingerprint,
    serve_reloading,
)

# A real uvicorn server over TLS under load: integration, left to `make test`.
pytestmark = pytest.mark.integration

CLIENTS = 8
BEFORE_SWAP = 15  # requests each client sends before the swap is started
AFTER_RELOAD = 15  # requests each client sends once the new certificate is confirmed
DURING_SWAP_LIMIT = 5000  # bounds the requests sent while the swap is in progress
SLOW_REQUESTS = 3
DEADLINE = 30.0  # generous upper bound for any awaited condition; not a timing assertion


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` on every loop turn until it holds; fail loudly at the deadline."""
    try:
        async with asyncio.timeout(DEADLINE):
            while not condition():
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"gave up waiting: {what}") from None


def peer_serial(response: httpx.Response) -> int:
    stream = response.extensions["network_stream"]
    ssl_object = stream.get_extra_info("ssl_object")
    der = ssl_object.getpeercert(binary_form=True)
    return int(x509.load_der_x509_certificate(der).serial_number)


@dataclass
class Load:
    completed: int = 0
    failures: list[str] = field(default_factory=list)
    # (serial presented, whether the reload had been confirmed before the connection opened)
    fresh_connections: list[tuple[int, bool]] = field(default_factory=list)
    slow_serials: list[int] = field(default_factory=list)
    slow_in_flight: int = 0
    swap_started: asyncio.Event = field(default_factory=asyncio.Event)
    confirmed: asyncio.Event = field(default_factory=asyncio.Event)


def make_app(release: asyncio.Event, load: Load) -> FastAPI:
    app = FastAPI()

    @app.get("/fast")
    async def fast() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/slow")
    async def slow() -> dict[str, bool]:
        # Held open across the swap: proves in-flight requests are not dropped.
        load.slow_in_flight += 1
        await release.wait()
        return {"ok": True}

    return app


async def _request(
    client: httpx.AsyncClient, load: Load, path: str, fresh: bool
) -> tuple[int, int] | None:
    confirmed_before = load.confirmed.is_set()
    headers = {"connection": "close"} if fresh else {}
    try:
        async with client.stream("GET", path, headers=headers) as response:
            serial = peer_serial(response)
            await response.aread()
            status = response.status_code
    except (httpx.HTTPError, ssl.SSLError, OSError) as error:
        load.failures.append(f"{path}: {type(error).__name__}: {error}")
        return None
    if status != 200:
        load.failures.append(f"{path}: status {status}")
        return None
    load.completed += 1
    if fresh:
        load.fresh_connections.append((serial, confirmed_before))
    return status, serial


async def fast_client(base_url: str, trust: ssl.SSLContext, load: Load, fresh: bool) -> None:
    """Before the swap, through it (until confirmed, bounded), and after it."""
    async with httpx.AsyncClient(base_url=base_url, verify=trust) as client:
        for _ in range(BEFORE_SWAP):
            await _request(client, load, "/fast", fresh)
        for _ in range(DURING_SWAP_LIMIT):
            if load.confirmed.is_set():
                break
            await _request(client, load, "/fast", fresh)
        else:
            load.failures.append("the reload was not confirmed within the request bound")
        for _ in range(AFTER_RELOAD):
            await _request(client, load, "/fast", fresh)


async def slow_client(base_url: str, trust: ssl.SSLContext, load: Load) -> None:
    async with httpx.AsyncClient(base_url=base_url, verify=trust, timeout=DEADLINE) as client:
        result = await _request(client, load, "/slow", fresh=False)
        if result is not None:
            load.slow_serials.append(result[1])


async def scenario(directory: Path) -> Load:
    m = material(live=True)
    cert, key = write_files(directory, m.old_leaf)
    tls = ReloadingTLS(cert, key)
    release = asyncio.Event()
    load = Load()
    server = build_uvicorn_server(
        make_app(release, load),
        tls,
        host="127.0.0.1",
        port=0,
        loop="asyncio",  # the event loop the webhook runs on; uvloop is not a dependency
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    serving = asyncio.create_task(serve_reloading(server, tls, reload_interval=0.01))
    try:
        await until(lambda: server.started, "the server started")
        port = server.servers[0].sockets[0].getsockname()[1]
        base_url = f"https://127.0.0.1:{port}"
        # The overlap bundle: what clients trust while a CA rotation is in progress.
        trust = ssl.create_default_context(
            cadata=(m.old_ca.cert_pem() + m.new_ca.cert_pem()).decode()
        )

        async def swap_when_warm() -> None:
            await until(
                lambda: (
                    load.completed >= CLIENTS * BEFORE_SWAP and load.slow_in_flight == SLOW_REQUESTS
                ),
                "the first round of requests completed and the slow ones are in flight",
            )
            load.swap_started.set()
            # Key first, as the rotation writes them: the reloader will meet the
            # mismatched in-between pair and must refuse it without a hiccup.
            write_files(directory, m.new_leaf)
            new = fingerprint(m.new_leaf.certificate)
            await until(lambda: fingerprint(tls.certificate) == new, "the new pair was loaded")
            served = await asyncio.to_thread(fetch_served_certificate, "127.0.0.1", port)
            assert fingerprint(served) == new
            load.confirmed.set()
            release.set()

        tasks: list[Awaitable[None]] = [
            fast_client(base_url, trust, load, fresh=index % 2 == 0) for index in range(CLIENTS)
        ]
        tasks += [slow_client(base_url, trust, load) for _ in range(SLOW_REQUESTS)]
        async with asyncio.timeout(DEADLINE * 2):
            await asyncio.gather(swap_when_warm(), *tasks)
    finally:
        release.set()
        server.should_exit = True
        await serving
    return load


def test_swapping_certificates_under_load_drops_nothing(tmp_path: Path) -> None:
    m = material(live=True)
    old, new = m.old_leaf.certificate.serial_number, m.new_leaf.certificate.serial_number
    load = asyncio.run(scenario(tmp_path))

    assert load.failures == []
    assert load.completed >= CLIENTS * (BEFORE_SWAP + AFTER_RELOAD) + SLOW_REQUESTS
    # In flight across the swap, on connections made with the old certificate.
    assert load.slow_serials == [old] * SLOW_REQUESTS
    after = [serial for serial, confirmed in load.fresh_connections if confirmed]
    before = [serial for serial, confirmed in load.fresh_connections if not confirmed]
    assert len(after) >= (CLIENTS // 2) * AFTER_RELOAD
    assert set(after) == {new}, "a connection opened after the reload presented the old cert"
    assert old in before


def test_a_server_whose_reloading_breaks_shuts_down_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rather than serve on until the certificate expires with nobody noticing.
    cert, key = write_files(tmp_path, material(live=True).old_leaf)
    tls = ReloadingTLS(cert, key)

    def broken() -> bool:
        raise RuntimeError("a bug in reloading")

    monkeypatch.setattr(tls, "reload_if_changed", broken)
    server = build_uvicorn_server(
        make_app(asyncio.Event(), Load()), tls, host="127.0.0.1", port=0, log_config=None
    )

    async def run() -> None:
        await serve_reloading(server, tls, reload_interval=0.01)

    with pytest.raises(RuntimeError, match="a bug in reloading"):
        asyncio.run(run())
    assert server.should_exit
