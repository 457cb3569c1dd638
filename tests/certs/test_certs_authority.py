"""Issuing: the CA and serving certificates carry exactly the properties clients rely on."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import timedelta
from pathlib import Path

import pytest
from certs_support import DNS_NAMES, SERVICE_NAME, T0, handshake, material, write_files
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from hypothesis import given
from hypothesis import strategies as st

from certs import (
    BACKDATE,
    DEFAULT_CA_VALIDITY,
    DEFAULT_SERVING_VALIDITY,
    CertifiedKey,
    InvalidCertificateError,
    KeyMismatchError,
    bundle_fingerprints,
    fingerprint,
    generate_ca,
    is_issued_by,
    issue_serving_certificate,
    load_certificates,
    service_dns_names,
    subject_alt_names,
    verify_serving_chain,
)
from certs._authority import random_serial

LOCALHOST = ipaddress.IPv4Address("127.0.0.1")


def test_ca_is_a_p256_ca_that_may_only_sign_leaves() -> None:
    ca = generate_ca(now=T0).certificate
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    assert key.curve.name == "secp256r1"
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value.ca is True
    assert constraints.value.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert ca.subject == ca.issuer
    assert is_issued_by(ca, ca)


def test_default_validities_start_five_minutes_early() -> None:
    ca = generate_ca(now=T0)
    leaf = issue_serving_certificate(ca, dns_names=DNS_NAMES, now=T0)
    assert timedelta(minutes=5) == BACKDATE
    for certificate, validity in (
        (ca.certificate, DEFAULT_CA_VALIDITY),
        (leaf.certificate, DEFAULT_SERVING_VALIDITY),
    ):
        assert certificate.not_valid_before_utc == T0 - BACKDATE
        assert certificate.not_valid_after_utc == T0 + validity
    assert timedelta(hours=26280) == DEFAULT_CA_VALIDITY
    assert timedelta(hours=2160) == DEFAULT_SERVING_VALIDITY


def test_serving_certificate_names_the_service_and_loopback() -> None:
    ca = material().old_ca
    leaf = issue_serving_certificate(
        ca, dns_names=DNS_NAMES, ip_addresses=[LOCALHOST], now=T0
    ).certificate
    dns, ips = subject_alt_names(leaf)
    assert dns == [
        "ptah-webhook",
        "ptah-webhook.ptah",
        "ptah-webhook.ptah.svc",
        "ptah-webhook.ptah.svc.cluster.local",
    ]
    assert ips == [LOCALHOST]
    usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert is_issued_by(leaf, ca.certificate)
    for name in [*dns, "127.0.0.1"]:
        verify_serving_chain(leaf, [ca.certificate], now=T0, name=name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("other.ptah.svc", "a name not in the SANs"),
        ("127.0.0.2", "an IP not in the SANs"),
    ],
)
def test_serving_certificate_does_not_verify_for_other_names(name: str, why: str) -> None:
    m = material()
    with pytest.raises(InvalidCertificateError, match="does not verify"):
        verify_serving_chain(m.old_leaf.certificate, [m.old_ca.certificate], now=T0, name=name)


@pytest.mark.parametrize(
    ("trusted", "moment", "why"),
    [
        ("stranger", T0, "signed by a CA that is not in the bundle"),
        ("old", T0 + DEFAULT_SERVING_VALIDITY + timedelta(seconds=1), "expired"),
        ("old", T0 - BACKDATE - timedelta(seconds=1), "not valid yet"),
    ],
)
def test_chain_verification_rejects(trusted: str, moment: object, why: str) -> None:
    m = material()
    ca = m.stranger_ca if trusted == "stranger" else m.old_ca
    with pytest.raises(InvalidCertificateError):
        verify_serving_chain(
            m.old_leaf.certificate, [ca.certificate], now=moment, name=SERVICE_NAME
        )  # type: ignore[arg-type]


def test_openssl_accepts_the_chain_for_the_service_name(tmp_path: Path) -> None:
    # The second opinion that matters: a real TLS handshake, as the API server makes.
    m = material(live=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*write_files(tmp_path, m.old_leaf))
    client = ssl.create_default_context(cadata=m.old_ca.cert_pem().decode())
    peer = handshake(client, server, SERVICE_NAME)
    assert (
        x509.load_der_x509_certificate(peer).serial_number == m.old_leaf.certificate.serial_number
    )


def test_leaf_never_outlives_its_ca() -> None:
    ca = generate_ca(now=T0, validity=timedelta(hours=100))
    leaf = issue_serving_certificate(ca, dns_names=DNS_NAMES, now=T0, validity=timedelta(hours=500))
    assert leaf.certificate.not_valid_after_utc == ca.certificate.not_valid_after_utc


def test_serials_are_positive_and_use_128_bits() -> None:
    serials = [random_serial() for _ in range(1000)]
    assert all(0 < serial < 2**128 for serial in serials)
    # Half of them should need the top bit; none would if fewer bits were drawn.
    assert any(serial >= 2**127 for serial in serials)


def test_serials_differ_between_certificates() -> None:
    serials = {generate_ca(now=T0).certificate.serial_number for _ in range(20)}
    assert len(serials) == 20


def test_pem_round_trip_keeps_the_pair() -> None:
    pair = material().new_leaf
    again = CertifiedKey.from_pem(pair.cert_pem(), pair.key_pem())
    assert fingerprint(again.certificate) == fingerprint(pair.certificate)
    assert again.key_pem() == pair.key_pem()


def test_a_key_from_another_pair_is_a_mismatch() -> None:
    m = material()
    with pytest.raises(KeyMismatchError, match=r"does not belong to tls\.crt"):
        CertifiedKey.from_pem(m.new_leaf.cert_pem(), m.old_leaf.key_pem(), what="tls.crt")


@pytest.mark.parametrize(
    ("cert_pem", "key_pem", "message"),
    [
        (b"", b"", "does not hold a readable PEM certificate"),
        (b"-----BEGIN CERTIFICATE-----\nAAAA\n", b"", "does not hold a readable PEM certificate"),
        (None, b"garbage", "not a readable unencrypted PEM private key"),
    ],
)
def test_unreadable_pem_is_a_clear_error(
    cert_pem: bytes | None, key_pem: bytes, message: str
) -> None:
    cert = material().old_leaf.cert_pem() if cert_pem is None else cert_pem
    with pytest.raises(InvalidCertificateError, match=message):
        CertifiedKey.from_pem(cert, key_pem)


@given(
    st.binary(max_size=300) | st.builds(lambda b: b"-----BEGIN CERTIFICATE-----\n" + b, st.binary())
)
def test_junk_bundles_hold_no_certificates(junk: bytes) -> None:
    # Junk must read as "no CA" (and be replaced), never crash the rotation.
    assert bundle_fingerprints(junk) == frozenset()


def test_bundle_fingerprints_name_each_certificate() -> None:
    m = material()
    bundle = m.old_ca.cert_pem() + m.new_ca.cert_pem()
    assert bundle_fingerprints(bundle) == {
        fingerprint(m.old_ca.certificate),
        fingerprint(m.new_ca.certificate),
    }
    assert [c.serial_number for c in load_certificates(bundle)] == [
        m.old_ca.certificate.serial_number,
        m.new_ca.certificate.serial_number,
    ]


@pytest.mark.parametrize(
    ("service", "namespace"),
    [
        ("", "ptah"),
        ("Ptah", "ptah"),
        ("ptah_webhook", "ptah"),
        ("-ptah", "ptah"),
        ("ptah", "ptah-"),
        ("a" * 64, "ptah"),
        ("ptah", "ns.with.dots"),
    ],
)
def test_service_names_must_be_dns_labels(service: str, namespace: str) -> None:
    with pytest.raises(InvalidCertificateError, match="not a valid DNS label"):
        service_dns_names(service, namespace)


def test_a_serving_certificate_needs_a_name() -> None:
    with pytest.raises(InvalidCertificateError, match="at least one DNS name or IP"):
        issue_serving_certificate(material().old_ca, dns_names=[], now=T0)


def test_validity_must_be_positive() -> None:
    with pytest.raises(InvalidCertificateError, match="positive duration"):
        generate_ca(now=T0, validity=timedelta(0))
