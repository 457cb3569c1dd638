"""Shared test material: certificates generated once, and helpers to write and handshake them."""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from certs import (
    TLS_CERT,
    TLS_KEY,
    CertifiedKey,
    atomic_write,
    generate_ca,
    issue_serving_certificate,
    service_dns_names,
)

# Fake-clock tests live in 2031 so that no test can pass by accident of today's date.
T0 = datetime(2031, 3, 1, 12, 0, 0, tzinfo=UTC)
SERVICE_NAME = "ptah-webhook.ptah.svc"
DNS_NAMES = service_dns_names("ptah-webhook", "ptah")


@dataclass(frozen=True)
class Material:
    """Two generations of CA and leaf, generated once: key generation is the slow part."""

    old_ca: CertifiedKey
    old_leaf: CertifiedKey
    new_ca: CertifiedKey
    new_leaf: CertifiedKey
    stranger_ca: CertifiedKey


@cache
def material(live: bool = False) -> Material:
    """Issued at T0 for fake-clock tests, or (`live`) now, for real TLS handshakes."""
    now = datetime.now(UTC) if live else T0
    ips = [ipaddress.IPv4Address("127.0.0.1")]
    old_ca = generate_ca(now=now, common_name="old-ca")
    new_ca = generate_ca(now=now, common_name="new-ca")
    stranger = generate_ca(now=now, common_name="stranger-ca")
    return Material(
        old_ca=old_ca,
        old_leaf=issue_serving_certificate(old_ca, dns_names=DNS_NAMES, ip_addresses=ips, now=now),
        new_ca=new_ca,
        new_leaf=issue_serving_certificate(new_ca, dns_names=DNS_NAMES, ip_addresses=ips, now=now),
        stranger_ca=stranger,
    )


def write_files(directory: Path, pair: CertifiedKey) -> tuple[Path, Path]:
    """Write a pair as tls.crt/tls.key (key first, atomically, as the rotation does)."""
    atomic_write(directory / TLS_KEY, pair.key_pem())
    atomic_write(directory / TLS_CERT, pair.cert_pem())
    return directory / TLS_CERT, directory / TLS_KEY


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, hostname: str) -> bytes:
    """Run a TLS handshake in memory; return the certificate the client saw (DER)."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    from_client, from_server = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(to_client, from_client, server_hostname=hostname)
    server_side = server.wrap_bio(to_server, from_server, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        to_server.write(from_client.read())
        to_client.write(from_server.read())
        if all(done.values()):
            peer = client_side.getpeercert(binary_form=True)
            assert peer is not None
            return peer
    raise AssertionError("the handshake did not complete")
