"""The lab cluster's certificate authority and the identities it issues.

The API server trusts this CA for client certificates (``--client-ca-file``),
so the node authenticates as ``system:node:NAME`` in ``system:nodes`` (which
the Node authorizer and NodeRestriction key on), the scheduler and kube-proxy
as the users the API server's bootstrap RBAC already binds, and the API
server itself, when it calls the kubelet for logs, as a member of
``system:masters``. The kubelet's serving certificate comes from the same CA
so the API server verifies whom it talks to.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs import BACKDATE, CertifiedKey, generate_ca, issue_serving_certificate

__all__ = [
    "ClientIdentity",
    "LabPKI",
    "issue_client_certificate",
    "write_kubeconfig",
]

IPAddressType = ipaddress.IPv4Address | ipaddress.IPv6Address

# One lab cluster lives for a test session or a `make run`; a day is plenty.
_VALIDITY = timedelta(days=1)


@dataclass(frozen=True)
class ClientIdentity:
    """A user (certificate CN) and its groups (certificate O)."""

    name: str
    user: str
    groups: tuple[str, ...] = ()


def issue_client_certificate(
    ca: CertifiedKey, identity: ClientIdentity, *, now: datetime
) -> CertifiedKey:
    """A clientAuth leaf: the API server reads the user from CN, groups from O."""
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in identity.groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, identity.user))
    start = now.replace(microsecond=0) - BACKDATE
    signing_key = ca.key
    if not isinstance(signing_key, ec.EllipticCurvePrivateKey):
        raise TypeError("the lab CA's key must be an ECDSA key")
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(min(start + _VALIDITY, ca.certificate.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(signing_key, hashes.SHA256())
    )
    return CertifiedKey(certificate, key)


def _write_private(path: Path, data: bytes) -> None:
    # Keys and kubeconfigs are credentials: owner-only from the first byte.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class LabPKI:
    """A fresh CA in a directory, and the files of what it issued."""

    def __init__(self, directory: Path, *, now: datetime) -> None:
        self.directory = directory
        self._now = now
        directory.mkdir(parents=True, exist_ok=True)
        self._ca = generate_ca(now=now, validity=_VALIDITY, common_name="ptah-lab-ca")
        self.ca_cert = directory / "ca.crt"
        self.ca_cert.write_bytes(self._ca.cert_pem())
        _write_private(directory / "ca.key", self._ca.key_pem())

    def client(self, identity: ClientIdentity) -> tuple[Path, Path]:
        """Issue a client certificate; returns (certificate, key) paths."""
        issued = issue_client_certificate(self._ca, identity, now=self._now)
        return self._write(identity.name, issued)

    def serving(self, name: str, ips: Sequence[IPAddressType]) -> tuple[Path, Path]:
        """Issue a serving certificate for IP addresses; returns (certificate, key)."""
        issued = issue_serving_certificate(
            self._ca, dns_names=(), ip_addresses=ips, now=self._now, validity=_VALIDITY
        )
        return self._write(name, issued)

    def _write(self, name: str, issued: CertifiedKey) -> tuple[Path, Path]:
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert.write_bytes(issued.cert_pem())
        _write_private(key, issued.key_pem())
        return cert, key


def write_kubeconfig(
    path: Path, *, server: str, server_ca: Path, user: str, cert: Path, key: Path
) -> Path:
    """A kubeconfig that authenticates with a client certificate."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "ptah-lab",
                "cluster": {"server": server, "certificate-authority": str(server_ca)},
            }
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": user, "context": {"cluster": "ptah-lab", "user": user}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, yaml.safe_dump(config, sort_keys=False).encode())
    return path
