"""The lab executor trusts a registry's private CA as ptah does: ``PTAH_OCI_CA_FILE``
names a PEM bundle trusted in addition to the system roots (ptah's docs/oci.md).

A registry on loopback that presents a certificate only a test CA signed; a control
row that trusts that CA, then one change per row, refused with its sentence."""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import certs
from lab.executor import cli

MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.stokaro.ptah.schema.v1",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": "", "size": 2},
        "layers": [],
    }
).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()


class _Registry(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/v2/shop/schema/manifests/v1":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Content-Length", str(len(MANIFEST)))
        self.end_headers()
        self.wfile.write(MANIFEST)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the executor's sentences, not the server's log."""


def _write_ca(directory: Path, name: str, now: datetime) -> certs.CertifiedKey:
    ca = certs.generate_ca(now=now, common_name=name)
    (directory / f"{name}.pem").write_bytes(ca.cert_pem())
    return ca


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A TLS registry on loopback, and the directory holding its CA (registry-ca.pem)
    and a CA that signed nothing it serves (other-ca.pem)."""
    directory = tmp_path_factory.mktemp("registry-tls")
    now = datetime.now(UTC)
    ca = _write_ca(directory, "registry-ca", now)
    _write_ca(directory, "other-ca", now)
    leaf = certs.issue_serving_certificate(
        ca, dns_names=["localhost"], ip_addresses=[ipaddress.ip_address("127.0.0.1")], now=now
    )
    (directory / "tls.crt").write_bytes(leaf.cert_pem())
    (directory / "tls.key").write_bytes(leaf.key_pem())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", directory
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _resolve(registry: str, env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["oci", "resolve", f"oci://{registry}/shop/schema:v1", "--format", "json"]
    code = cli.main(argv, env, out, err)
    return code, out.getvalue(), err.getvalue()


# (row, PTAH_OCI_CA_FILE as a file name in the registry's directory, the sentence)
ROWS: list[tuple[str, str, str | None]] = [
    ("the registry's own CA", "registry-ca.pem", None),
    ("a CA that signed nothing the registry serves", "other-ca.pem", "cannot reach the registry"),
    ("a bundle that is not there", "missing.pem", "cannot read the registry CA bundle"),
    ("a bundle that is not PEM", "tls.key", "cannot read the registry CA bundle"),
]


@pytest.mark.parametrize(("row", "bundle", "sentence"), ROWS, ids=[r[0] for r in ROWS])
def test_the_registry_is_trusted_only_under_the_ca_bundle_that_signed_it(
    registry: tuple[str, Path], row: str, bundle: str, sentence: str | None
) -> None:
    host, directory = registry
    code, out, err = _resolve(host, {"PTAH_OCI_CA_FILE": str(directory / bundle)})
    if sentence is None:
        assert code == 0, err
        assert json.loads(out)["digest"] == DIGEST
        return
    assert code != 0 and out == ""
    assert sentence in err, err
