"""Serving TLS whose certificate can be replaced while the server runs.

uvicorn builds one `ssl.SSLContext` at startup and never looks at the files again.
Calling `load_cert_chain` again on that live context is not safe: OpenSSL installs
the certificate and the key in two steps, and when the key turns out not to match
(a half-written pair) the context is left holding the new certificate with *no*
key, so every later handshake fails with "no shared cipher" — an outage caused by
a refused reload.

So the context uvicorn listens with never changes. Each accepted handshake runs
its SNI callback (OpenSSL calls it for every ClientHello, with or without a server
name), which points the connection at the newest fully-built context. A reload
builds a fresh context from a validated pair and swaps one reference: handshakes
see either the old context or the new one, never a mix, and connections already
established keep the context they started with, so in-flight requests finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509

from certs._authority import CertifiedKey, fingerprint
from certs._errors import (
    CertificateError,
    InvalidCertificateError,
    KeyMismatchError,
    os_reason,
)

__all__ = [
    "DEFAULT_RELOAD_INTERVAL",
    "ReloadingTLS",
    "build_uvicorn_server",
    "fetch_served_certificate",
    "serve",
    "serve_reloading",
]

logger = logging.getLogger("certs.serving")

DEFAULT_RELOAD_INTERVAL = 5.0


@dataclass(frozen=True)
class _Loaded:
    context: ssl.SSLContext
    certificate: x509.Certificate
    digest: bytes


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # The API server speaks TLS 1.2+; anything older is a downgrade target.
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _trouble(error: CertificateError) -> bytes:
    """A refusal key for a failure that is not the files' content; retried once it changes."""
    return hashlib.sha256(str(error).encode()).digest()


def _digest(cert_pem: bytes, key_pem: bytes) -> bytes:
    # Content, not mtime: kubelet's atomic Secret updates and `cp -p` both change
    # files without a telling mtime, and an unchanged rewrite should not reload.
    return hashlib.sha256(
        hashlib.sha256(cert_pem).digest() + hashlib.sha256(key_pem).digest()
    ).digest()


class ReloadingTLS:
    """Owns the TLS context of a server and swaps in new certificate files when they change.

    Construction loads `cert_path`/`key_path` and raises `CertificateError` if they
    are not a valid matching pair (a server should not start without one).
    Afterwards `reload_if_changed()` — called on demand or by `watch()` on a timer —
    installs a changed pair only if it is a complete, matching, unexpired pair;
    anything else is refused with one logged sentence and the current certificate
    keeps serving. Safe to call from any thread.
    """

    def __init__(
        self,
        cert_path: Path | str,
        key_path: Path | str,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self._clock = clock
        self._lock = threading.Lock()
        cert_pem, key_pem = self._read()
        self._active = self._build(cert_pem, key_pem)
        # The first context doubles as the listening one; only its SNI callback matters.
        self._listening = self._active.context
        self._listening.sni_callback = self._select
        self._refused: bytes | None = None

    @property
    def context(self) -> ssl.SSLContext:
        """The context to listen with; it stays the same object for the server's life."""
        return self._listening

    @property
    def certificate(self) -> x509.Certificate:
        """The certificate new handshakes present."""
        return self._active.certificate

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: ssl.SSLContext
    ) -> None:
        # One attribute read: a concurrent reload is seen entirely or not at all.
        connection.context = self._active.context

    def reload_if_changed(self) -> bool:
        """Install the files' pair if it changed and is valid; True when it was installed."""
        with self._lock:
            try:
                cert_pem, key_pem = self._read()
            except CertificateError as error:
                return self._refuse(_trouble(error), str(error))
            digest = _digest(cert_pem, key_pem)
            if digest in (self._active.digest, self._refused):
                return False
            try:
                loaded = self._build(cert_pem, key_pem)
            except (InvalidCertificateError, KeyMismatchError) as error:
                # Bad content stays bad: remembered by digest, not retried until it changes.
                return self._refuse(digest, str(error))
            except CertificateError as error:
                # Trouble around the content (a full /tmp): retried on the next check.
                return self._refuse(_trouble(error), str(error))
            self._active, self._refused = loaded, None
        logger.info(
            "reloaded the TLS certificate from %s: serial %#x, sha256 %s",
            self.cert_path,
            loaded.certificate.serial_number,
            fingerprint(loaded.certificate),
        )
        return True

    def _refuse(self, digest: bytes, reason: str) -> bool:
        # Logged once per distinct bad pair, not once per poll: a half-written pair
        # is normal for a moment and should not flood the log.
        if digest != self._refused:
            self._refused = digest
            logger.warning(
                "refusing to reload the TLS certificate: %s; still serving serial %#x",
                reason,
                self._active.certificate.serial_number,
            )
        return False

    async def watch(self, interval: float = DEFAULT_RELOAD_INTERVAL) -> None:
        """Check the files every `interval` seconds, forever (cancel to stop)."""
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()

    def _read(self) -> tuple[bytes, bytes]:
        try:
            return self.cert_path.read_bytes(), self.key_path.read_bytes()
        except OSError as error:
            raise CertificateError(
                f"cannot read {error.filename or self.cert_path}: {os_reason(error)}"
            ) from error

    def _build(self, cert_pem: bytes, key_pem: bytes) -> _Loaded:
        pair = CertifiedKey.from_pem(cert_pem, key_pem, what=self.cert_path.name)
        now = self._clock()
        expiry = pair.certificate.not_valid_after_utc
        if expiry <= now:
            raise InvalidCertificateError(
                f"{self.cert_path.name} expired at {expiry:%Y-%m-%d %H:%M:%S} UTC"
            )
        context = _server_context()
        # load_cert_chain only reads paths; loading the validated bytes (not the
        # files again) guarantees that what was checked is what gets served, even
        # if the files change between the two reads.
        try:
            with tempfile.TemporaryDirectory(prefix="certs-reload-") as scratch:
                cert_file, key_file = Path(scratch, "tls.crt"), Path(scratch, "tls.key")
                cert_file.write_bytes(cert_pem)
                key_file.touch(mode=0o600)
                key_file.write_bytes(key_pem)
                try:
                    context.load_cert_chain(cert_file, key_file)
                except ssl.SSLError as error:
                    raise InvalidCertificateError(
                        f"openssl refused {self.cert_path.name}: {error.reason or error}".lower()
                    ) from error
        except OSError as error:
            raise CertificateError(
                f"cannot stage the new pair for loading: {os_reason(error)}"
            ) from error
        return _Loaded(context, pair.certificate, _digest(cert_pem, key_pem))


def build_uvicorn_server(
    app: Any, tls: ReloadingTLS, *, host: str, port: int, **options: Any
) -> uvicorn.Server:
    """A uvicorn server listening with `tls.context`; `options` go to `uvicorn.Config`.

    uvicorn's own `ssl_*` options are rejected: they would build a second,
    non-reloading context and silently win.
    """
    conflicting = sorted(name for name in options if name.startswith("ssl_"))
    if conflicting:
        raise CertificateError(
            f"uvicorn TLS options cannot be combined with ReloadingTLS: {', '.join(conflicting)}"
        )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        ssl_context_factory=lambda _config, _default: tls.context,
        **options,
    )
    return uvicorn.Server(config)


async def serve_reloading(
    server: uvicorn.Server, tls: ReloadingTLS, *, reload_interval: float = DEFAULT_RELOAD_INTERVAL
) -> None:
    """Run `server` until it exits, checking the certificate files meanwhile."""
    watcher = asyncio.create_task(tls.watch(reload_interval), name="certs-reload")

    def stop_if_reloading_failed(task: asyncio.Task[None]) -> None:
        # A server that silently stopped reloading would serve until its certificate
        # expires and then fail every admission; stopping now lets the Pod restart
        # (and re-read the files) while the current certificate is still good.
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "certificate reloading stopped: %r; shutting the server down", task.exception()
            )
            server.should_exit = True

    watcher.add_done_callback(stop_if_reloading_failed)
    try:
        await server.serve()
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def serve(
    app: Any,
    tls: ReloadingTLS,
    *,
    host: str,
    port: int,
    reload_interval: float = DEFAULT_RELOAD_INTERVAL,
    **options: Any,
) -> None:
    """Serve `app` over HTTPS with certificates reloaded from disk; the webhook's entry point."""
    server = build_uvicorn_server(app, tls, host=host, port=port, **options)
    await serve_reloading(server, tls, reload_interval=reload_interval)


def fetch_served_certificate(host: str, port: int, *, timeout: float = 5.0) -> x509.Certificate:
    """The certificate a TLS server presents, without verifying it.

    Unverified on purpose: this answers "which certificate is in service", e.g.
    for a rotation deciding whether the old CA may go, and must work precisely
    when the trust store is the thing being changed.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host) as wrapped,
        ):
            der = wrapped.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as error:
        raise CertificateError(
            f"cannot fetch the certificate served at {host}:{port}: {error}".lower()
        ) from error
    if der is None:
        raise CertificateError(f"the server at {host}:{port} presented no certificate")
    return x509.load_der_x509_certificate(der)
