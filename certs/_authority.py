"""Issuing certificates: a private CA and the webhook's serving certificate.

Everything here is pure apart from key generation and the random serial: time is
always an argument, so tests can issue certificates "in the past" or "near expiry"
without touching the clock.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    PrivateKeyTypes,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from certs._errors import InvalidCertificateError, KeyMismatchError

__all__ = [
    "BACKDATE",
    "DEFAULT_CA_VALIDITY",
    "DEFAULT_SERVING_VALIDITY",
    "CertifiedKey",
    "IPAddressType",
    "bundle_fingerprints",
    "fingerprint",
    "generate_ca",
    "is_issued_by",
    "issue_serving_certificate",
    "load_certificate",
    "load_certificates",
    "load_private_key",
    "random_serial",
    "service_dns_names",
    "subject_alt_names",
    "verify_serving_chain",
]

DEFAULT_CA_VALIDITY = timedelta(hours=26280)
DEFAULT_SERVING_VALIDITY = timedelta(hours=2160)
# Certificates start a little in the past: a node whose clock lags the issuer's by
# a minute would otherwise reject a freshly rotated certificate as "not yet valid".
BACKDATE = timedelta(minutes=5)

IPAddressType = ipaddress.IPv4Address | ipaddress.IPv6Address


def random_serial() -> int:
    """A random, positive serial of at most 128 bits.

    Random rather than sequential because two CAs generated from the same state
    (a crashed and re-run rotation) must never issue colliding serials, and positive
    because RFC 5280 requires it (and Go's TLS stack rejects negative ones).
    """
    while True:
        serial = secrets.randbits(128)
        if serial > 0:
            return serial


def fingerprint(certificate: x509.Certificate) -> str:
    """The lower-case hex SHA-256 of the certificate's DER encoding."""
    return certificate.fingerprint(hashes.SHA256()).hex()


@dataclass(frozen=True)
class CertifiedKey:
    """A certificate and the private key it certifies, already checked to match."""

    certificate: x509.Certificate
    key: PrivateKeyTypes

    @classmethod
    def from_pem(
        cls, cert_pem: bytes, key_pem: bytes, *, what: str = "certificate"
    ) -> CertifiedKey:
        """Parse a PEM pair; the first certificate in `cert_pem` is the one the key must match.

        `what` names the pair in error sentences ("tls.crt", "ca.crt", ...).
        """
        certificate = load_certificates(cert_pem, what=what)[0]
        key = load_private_key(key_pem, what=f"the key of {what}")
        if _spki(certificate.public_key()) != _spki(key.public_key()):
            raise KeyMismatchError(f"the private key does not belong to {what}")
        return cls(certificate, key)

    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        # Unencrypted PKCS#8: the files are protected by mode 0600 (and, in a
        # cluster, by the Secret), and a passphrase would have to live next to them.
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _spki(public_key: object) -> bytes:
    if not hasattr(public_key, "public_bytes"):
        raise InvalidCertificateError("the key type is not supported")
    encoded: bytes = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return encoded


def load_certificates(pem: bytes, *, what: str = "the input") -> list[x509.Certificate]:
    """Every certificate in a PEM blob, in order; at least one or an error."""
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError as error:
        raise InvalidCertificateError(f"{what} does not hold a readable PEM certificate") from error
    return certificates


def load_certificate(pem: bytes, *, what: str = "the input") -> x509.Certificate:
    """The first certificate of a PEM blob."""
    return load_certificates(pem, what=what)[0]


def load_private_key(pem: bytes, *, what: str = "the key") -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise InvalidCertificateError(
            f"{what} is not a readable unencrypted PEM private key"
        ) from error


def bundle_fingerprints(pem: bytes) -> frozenset[str]:
    """The fingerprints of the certificates in a caBundle; empty when it holds none.

    Tolerant on purpose: a caBundle someone filled with junk is simply "not the
    bundle we want" and gets replaced, rather than wedging the rotation.
    """
    try:
        return frozenset(fingerprint(c) for c in x509.load_pem_x509_certificates(pem))
    except ValueError:
        return frozenset()


def is_issued_by(certificate: x509.Certificate, issuer: x509.Certificate) -> bool:
    """Whether `issuer`'s key signed `certificate` (names and signature both match)."""
    try:
        certificate.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(now: datetime, validity: timedelta) -> tuple[datetime, datetime]:
    if validity <= timedelta(0):
        raise InvalidCertificateError("the validity must be a positive duration")
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    # X.509 times have whole seconds; truncating here keeps "what we asked for" and
    # "what the certificate says" equal, which the rotation thresholds compare.
    start = now.astimezone(UTC).replace(microsecond=0)
    return start - BACKDATE, start + validity


def generate_ca(
    *,
    now: datetime,
    validity: timedelta = DEFAULT_CA_VALIDITY,
    common_name: str = "ptah-webhook-ca",
) -> CertifiedKey:
    """A self-signed ECDSA P-256 CA that may sign leaves only (pathlen 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(now, validity)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(random_serial())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        # pathlen 0: a stolen serving key must not be able to mint further CAs
        # even if someone mistakenly marks a leaf as a CA.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertifiedKey(certificate, key)


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The four names a Service is reached by; the API server dials `<svc>.<ns>.svc`."""
    for label, value in (("service", service), ("namespace", namespace)):
        if not _is_dns_label(value):
            raise InvalidCertificateError(
                f"the {label} name {value!r} is not a valid DNS label "
                "(lower-case letters, digits and '-', at most 63 characters)"
            )
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )


def _is_dns_label(value: str) -> bool:
    return (
        0 < len(value) <= 63
        and value[0].isalnum()
        and value[-1].isalnum()
        and all(c.isdigit() or ("a" <= c <= "z") or c == "-" for c in value)
    )


def issue_serving_certificate(
    ca: CertifiedKey,
    *,
    dns_names: Sequence[str],
    ip_addresses: Iterable[IPAddressType] = (),
    now: datetime,
    validity: timedelta = DEFAULT_SERVING_VALIDITY,
) -> CertifiedKey:
    """A serverAuth leaf for the given names, signed by `ca`.

    Its notAfter never exceeds the CA's: a leaf that outlives its issuer only looks
    valid, and rotation would otherwise plan by a date that cannot be honoured.
    """
    ips = list(ip_addresses)
    if not dns_names and not ips:
        raise InvalidCertificateError("a serving certificate needs at least one DNS name or IP")
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(now, validity)
    not_after = min(not_after, ca.certificate.not_valid_after_utc)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ips]
    common_name = dns_names[0] if dns_names else str(ips[0])
    signing_key = _issuer_key(ca.key)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(random_serial())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        # Go (the API server) ignores the CN: without SANs the certificate is unusable.
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
            critical=False,
        )
        .sign(signing_key, hashes.SHA256())
    )
    return CertifiedKey(certificate, key)


def _issuer_key(key: PrivateKeyTypes) -> CertificateIssuerPrivateKeyTypes:
    if not isinstance(
        key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    ):
        raise InvalidCertificateError("the CA key is of a type that cannot sign certificates")
    return key


def subject_alt_names(certificate: x509.Certificate) -> tuple[list[str], list[IPAddressType]]:
    """The DNS names and IP addresses a certificate is valid for."""
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return [], []
    dns = extension.value.get_values_for_type(x509.DNSName)
    ips = [
        ip
        for ip in extension.value.get_values_for_type(x509.IPAddress)
        if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address)
    ]
    return dns, ips


def verify_serving_chain(
    leaf: x509.Certificate,
    trusted: Sequence[x509.Certificate],
    *,
    now: datetime,
    name: str,
) -> None:
    """Check, as a TLS client would, that `leaf` is a valid server certificate for `name`
    chaining to one of `trusted`; raise `InvalidCertificateError` saying why not."""
    if not trusted:
        raise InvalidCertificateError("the trust bundle is empty")
    try:
        subject: x509.DNSName | x509.IPAddress = x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        subject = x509.DNSName(name)
    verifier = PolicyBuilder().store(Store(list(trusted))).time(now).build_server_verifier(subject)
    try:
        verifier.verify(leaf, [])
    except VerificationError as error:
        raise InvalidCertificateError(
            f"the certificate does not verify for {name}: {error}".lower()
        ) from error
