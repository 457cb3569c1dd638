"""ReloadingTLS on its own: what it reloads, what it refuses, and what it keeps serving.

Handshakes here run in memory against `tls.context`, the very object uvicorn
listens with, so they exercise the SNI-callback switch the server relies on.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from certs_support import DNS_NAMES, SERVICE_NAME, handshake, material, write_files
from cryptography import x509

from certs import (
    TLS_CERT,
    TLS_KEY,
    CertificateError,
    CertifiedKey,
    ReloadingTLS,
    atomic_write,
    build_uvicorn_server,
    issue_serving_certificate,
)


def _served_serial(tls: ReloadingTLS) -> int:
    m = material(live=True)
    trust = (m.old_ca.cert_pem() + m.new_ca.cert_pem()).decode()
    client = ssl.create_default_context(cadata=trust)
    return x509.load_der_x509_certificate(
        handshake(client, tls.context, SERVICE_NAME)
    ).serial_number


@pytest.fixture
def tls(tmp_path: Path) -> ReloadingTLS:
    cert, key = write_files(tmp_path, material(live=True).old_leaf)
    return ReloadingTLS(cert, key)


def _serial(pair: CertifiedKey) -> int:
    return pair.certificate.serial_number


def test_serves_the_files_it_was_given(tls: ReloadingTLS) -> None:
    old = material(live=True).old_leaf
    assert _served_serial(tls) == _serial(old)
    assert tls.certificate.serial_number == _serial(old)


def test_requires_tls_1_2_at_least(tls: ReloadingTLS, tmp_path: Path) -> None:
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_2
    m = material(live=True)
    client = ssl.create_default_context(cadata=m.old_ca.cert_pem().decode())
    client.maximum_version = ssl.TLSVersion.TLSv1_2  # the oldest version allowed still works
    handshake(client, tls.context, SERVICE_NAME)


def test_a_new_pair_is_served_to_new_handshakes(tls: ReloadingTLS, tmp_path: Path) -> None:
    context = tls.context
    new = material(live=True).new_leaf
    write_files(tmp_path, new)
    assert tls.reload_if_changed() is True
    assert tls.context is context  # uvicorn keeps listening with the same object
    assert _served_serial(tls) == _serial(new)
    assert tls.reload_if_changed() is False  # nothing changed since


def test_content_not_mtime_decides(tls: ReloadingTLS, tmp_path: Path) -> None:
    cert = tmp_path / TLS_CERT
    stat = cert.stat()
    os.utime(cert, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    atomic_write(cert, cert.read_bytes())  # same bytes, new inode and mtime
    assert tls.reload_if_changed() is False
    new = material(live=True).new_leaf
    write_files(tmp_path, new)
    for path in (cert, tmp_path / TLS_KEY):
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime as before
    assert tls.reload_if_changed() is True
    assert _served_serial(tls) == _serial(new)


def _half_written(tmp_path: Path) -> None:
    pem = material(live=True).new_leaf.cert_pem()
    (tmp_path / TLS_CERT).write_bytes(pem[: len(pem) // 2])


def _mismatched(tmp_path: Path) -> None:
    # What a reader sees between the two renames of a swap: new key, old certificate.
    atomic_write(tmp_path / TLS_KEY, material(live=True).new_leaf.key_pem())


def _expired(tmp_path: Path) -> None:
    m = material(live=True)
    past = datetime.now(UTC) - timedelta(days=10)
    leaf = issue_serving_certificate(
        m.old_ca, dns_names=DNS_NAMES, now=past, validity=timedelta(days=1)
    )
    write_files(tmp_path, leaf)


def _missing(tmp_path: Path) -> None:
    (tmp_path / TLS_KEY).unlink()


@pytest.mark.parametrize(
    ("damage", "sentence"),
    [
        (_half_written, "tls.crt does not hold a readable PEM certificate"),
        (_mismatched, "the private key does not belong to tls.crt"),
        (_expired, "tls.crt expired at"),
        (_missing, "cannot read"),
    ],
)
def test_a_bad_pair_is_refused_once_and_the_old_one_keeps_serving(
    tls: ReloadingTLS,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    damage: object,
    sentence: str,
) -> None:
    old = material(live=True).old_leaf
    damage(tmp_path)  # type: ignore[operator]
    with caplog.at_level(logging.WARNING, logger="certs.serving"):
        assert tls.reload_if_changed() is False
        assert tls.reload_if_changed() is False
    refusals = [r.getMessage() for r in caplog.records if "refusing" in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert sentence in refusals[0]
    assert f"still serving serial {_serial(old):#x}" in refusals[0]
    assert _served_serial(tls) == _serial(old)
    # Once the pair is whole again it is taken.
    new = material(live=True).new_leaf
    write_files(tmp_path, new)
    assert tls.reload_if_changed() is True
    assert _served_serial(tls) == _serial(new)


def test_a_server_cannot_start_on_a_bad_pair(tmp_path: Path) -> None:
    write_files(tmp_path, material(live=True).old_leaf)
    _mismatched(tmp_path)
    with pytest.raises(CertificateError, match=r"does not belong to tls\.crt"):
        ReloadingTLS(tmp_path / TLS_CERT, tmp_path / TLS_KEY)


def test_reusing_load_cert_chain_would_have_broken_the_server(tmp_path: Path) -> None:
    # The failure ReloadingTLS's design avoids, pinned so the reason stays true:
    # a refused load_cert_chain on a live context leaves it unable to handshake.
    m = material(live=True)
    cert, key = write_files(tmp_path, m.old_leaf)
    live = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    live.load_cert_chain(cert, key)
    atomic_write(tmp_path / TLS_CERT, m.new_leaf.cert_pem())  # key still the old one
    with pytest.raises(ssl.SSLError):
        live.load_cert_chain(cert, key)
    client = ssl.create_default_context(cadata=m.old_ca.cert_pem().decode())
    with pytest.raises(ssl.SSLError):
        handshake(client, live, SERVICE_NAME)


def test_uvicorn_tls_options_are_rejected(tls: ReloadingTLS) -> None:
    with pytest.raises(CertificateError, match="ssl_certfile"):
        build_uvicorn_server(object(), tls, host="127.0.0.1", port=0, ssl_certfile="x")


def test_trouble_outside_the_files_is_retried_without_a_change(
    tls: ReloadingTLS,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    new = material(live=True).new_leaf
    write_files(tmp_path, new)

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", full_disk)
    with caplog.at_level(logging.WARNING, logger="certs.serving"):
        assert tls.reload_if_changed() is False
    assert "cannot stage the new pair for loading: no space left on device" in caplog.text
    monkeypatch.undo()
    # Same files, no change on disk: still taken once the trouble is gone.
    assert tls.reload_if_changed() is True
    assert _served_serial(tls) == _serial(new)
