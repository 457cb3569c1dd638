"""Serving the app over TLS only, with a certificate that can be replaced live.

The API server calls a webhook over HTTPS and nothing else, so there is no plain-HTTP
listener at all. The certificate and key are read from files through
``certs.ReloadingTLS`` (TLS 1.2 or newer; a rotated pair is picked up without a
restart). For a local run with no files given, a CA and a serving certificate for
``localhost``/``127.0.0.1`` are generated into a directory first, and the CA is left
there for the client (or a webhook configuration's ``caBundle``) to trust.
"""

from __future__ import annotations

import gc
import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import uvicorn

import certs
from jobclaim.apiserver import PTAHSCHEMAS, ApiReader, NotFound
from jobclaim.times import utc_now
from webhook.app import create_app
from webhook.engine import Engine
from webhook.rules import DEFAULT_MANAGER_USERNAME

LOCAL_HOSTS: Final = ("localhost",)
LOCAL_IPS: Final = ("127.0.0.1", "::1")
# A name reserved for the probe: reading it answers NotFound from a readable API
# server and proves the read path (credentials, RBAC, network) end to end.
PROBE_NAME: Final = "ptah-webhook-readiness-probe"


@dataclass(frozen=True, slots=True)
class LocalCertificates:
    ca: Path
    cert: Path
    key: Path


def local_certificates(
    directory: Path,
    *,
    hosts: Sequence[str] = LOCAL_HOSTS,
    ips: Sequence[str] = LOCAL_IPS,
    now: datetime | None = None,
    validity: timedelta = timedelta(days=30),
) -> LocalCertificates:
    """Generate a CA and a serving certificate for a local run into ``directory``.

    Only the CA certificate is kept, never its key: nothing local needs to issue
    again, and a CA key left on disk is one more thing that could mint a certificate.
    """
    moment = now or utc_now()
    directory.mkdir(parents=True, exist_ok=True)
    ca = certs.generate_ca(now=moment, validity=validity, common_name="ptah-webhook-local-ca")
    leaf = certs.issue_serving_certificate(
        ca,
        dns_names=list(hosts),
        ip_addresses=[ipaddress.ip_address(ip) for ip in ips],
        now=moment,
        validity=validity,
    )
    found = LocalCertificates(
        directory / certs.CA_CERT, directory / certs.TLS_CERT, directory / certs.TLS_KEY
    )
    certs.atomic_write(found.ca, ca.cert_pem())
    certs.atomic_write(found.cert, leaf.cert_pem())
    certs.atomic_write(found.key, leaf.key_pem())
    return found


def manager_namespace(username: str = DEFAULT_MANAGER_USERNAME) -> str:
    """The namespace of a ``system:serviceaccount:<namespace>:<name>`` username."""
    parts = username.split(":")
    if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] and parts[2]:
        return parts[2]
    return "default"


def certificate_problems(tls: certs.ReloadingTLS | None, now: datetime) -> list[str]:
    """A loaded, unexpired serving certificate, or what is wrong with it."""
    if tls is None:
        return ["no serving certificate is loaded"]
    if tls.certificate.not_valid_after_utc <= now:
        return ["the serving certificate has expired"]
    return []


def readiness(
    tls: certs.ReloadingTLS | None,
    reader: ApiReader,
    *,
    namespace: str,
    clock: Callable[[], datetime] = utc_now,
) -> Callable[[], list[str]]:
    """What ``/readyz`` checks in a local webhook run: a loaded, unexpired certificate
    and a readable API server, read on each probe. The manager judges the second from
    cached facts instead (``manager.readiness``), as a slow API server must not fail
    every replica's probe at once."""

    def problems() -> list[str]:
        found = certificate_problems(tls, clock())
        try:
            reader.get(PTAHSCHEMAS, namespace, PROBE_NAME)
        except NotFound:
            pass
        except Exception as error:
            found.append(f"the API server is not readable: {error}".lower())
        return found

    return problems


def uvicorn_server(
    app: Any, tls: certs.ReloadingTLS, *, host: str, port: int, **options: Any
) -> uvicorn.Server:
    """A uvicorn server over ``tls``; its access log is off (the decision log is ours).

    ``options`` override the defaults below (the manager passes ``log_config=None`` so
    uvicorn's lines go through its JSON handler, not uvicorn's own).
    """
    settings: dict[str, Any] = {
        "access_log": False,
        "server_header": False,
        "log_level": "warning",
        # A request the API server gave up on is not worth finishing after shutdown.
        "timeout_graceful_shutdown": 5,
        **options,
    }
    return certs.build_uvicorn_server(app, tls, host=host, port=port, **settings)


def serving_pair(directory: Path) -> tuple[Path, Path] | None:
    """The directory's ``tls.crt``/``tls.key``, when both are there (a mounted Secret)."""
    cert, key = directory / certs.TLS_CERT, directory / certs.TLS_KEY
    return (cert, key) if cert.is_file() and key.is_file() else None


async def serve(
    engine: Engine,
    *,
    cert: Path,
    key: Path,
    host: str,
    port: int,
    reload_interval: float = certs.DEFAULT_RELOAD_INTERVAL,
) -> None:
    """Serve the webhook for ``engine`` over TLS until cancelled.

    The entry point for a process that hosts the webhook beside other work (the
    manager does): it builds the app, readiness included, and reloads the pair at
    ``cert``/``key`` when it changes on disk.
    """
    tls = certs.ReloadingTLS(cert, key)
    namespace = manager_namespace(engine.settings.manager_username)
    app = create_app(engine, readiness=readiness(tls, engine.reader, namespace=namespace))
    server = uvicorn_server(app, tls, host=host, port=port)
    # Everything built so far lives as long as the process; frozen, it is not rescanned
    # by every collection a review's short-lived JSON trees trigger.
    gc.collect()
    gc.freeze()
    await certs.serve_reloading(server, tls, reload_interval=reload_interval)
