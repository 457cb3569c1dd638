"""OCI artifacts over the distribution API: resolve, inspect, verify, pull (and push, for
the lab's own tooling and tests).

A schema artifact (``application/vnd.stokaro.ptah.schema.v1``) holds one layer, the
desired schema file. A migrations artifact (``...migrations.v1``) holds one layer per
file, each named by its ``org.opencontainers.image.title`` annotation. Every blob and
manifest read is checked against its digest before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from lab.executor.db import ExecutorError
from lab.executor.documents import (
    MIGRATIONS_ARTIFACT_TYPE,
    SCHEMA_ARTIFACT_TYPE,
    InspectLayer,
    InspectReport,
    ResolveReport,
    VerificationFinding,
    VerifyReport,
    render,
)

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
TITLE = "org.opencontainers.image.title"
_ACCEPT = ", ".join(
    [
        MANIFEST,
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_REF = re.compile(
    r"^(?P<host>[A-Za-z0-9.-]+(?::\d+)?|\[[0-9a-fA-F:]+\](?::\d+)?)/(?P<repo>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_TIMEOUT = httpx.Timeout(30.0)


@dataclass(frozen=True)
class Reference:
    text: str
    scheme_prefix: str
    host: str
    repo: str
    tag: str | None
    digest: str | None

    @property
    def target(self) -> str:
        return self.digest or self.tag or "latest"

    def pinned(self, digest: str) -> str:
        return f"{self.scheme_prefix}{self.host}/{self.repo}@{digest}"


def parse_reference(text: str) -> Reference:
    prefix = "oci://" if text.startswith("oci://") else ""
    match = _REF.match(text[len(prefix) :])
    if match is None:
        raise ExecutorError(
            f"{text!r} is not an oci reference such as oci://host:port/repo:tag or repo@sha256:..."
        )
    return Reference(text, prefix, match["host"], match["repo"], match["tag"], match["digest"])


def _base(ref: Reference, plain_http: bool, ca_file: str | None = None) -> str:
    host = (
        ref.host.rsplit(":", 1)[0] if not ref.host.startswith("[") else ref.host.split("]")[0] + "]"
    )
    # The lab's loopback registry speaks http; a CA bundle says the registry presents a
    # certificate, so it is spoken to over TLS wherever it is.
    loopback_http = host in _LOOPBACK and ca_file is None
    scheme = "http" if plain_http or loopback_http else "https"
    return f"{scheme}://{ref.host}/v2/{ref.repo}"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _get(
    client: httpx.Client, url: str, what: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    try:
        response = client.get(url, headers=headers)
    except httpx.HTTPError as error:
        raise ExecutorError(
            f"cannot reach the registry for {what}: {type(error).__name__}"
        ) from error
    if response.status_code != 200:
        raise ExecutorError(f"the registry answered {response.status_code} for {what}")
    return response


@dataclass(frozen=True)
class Fetched:
    ref: Reference
    digest: str
    media_type: str
    body: bytes
    manifest: dict[str, Any]


def fetch_manifest(
    client: httpx.Client, ref: Reference, plain_http: bool, ca_file: str | None = None
) -> Fetched:
    url = f"{_base(ref, plain_http, ca_file)}/manifests/{ref.target}"
    response = _get(client, url, ref.text, {"Accept": _ACCEPT})
    body = response.content
    digest = _sha256(body)
    if ref.digest and digest != ref.digest:
        raise ExecutorError(
            f"the registry's manifest for {ref.text} does not hash to the digest it was asked for"
        )
    try:
        manifest = json.loads(body)
    except ValueError as error:
        raise ExecutorError(f"the manifest of {ref.text} is not json") from error
    if not isinstance(manifest, dict):
        raise ExecutorError(f"the manifest of {ref.text} is not a json object")
    media_type = str(
        manifest.get("mediaType") or response.headers.get("content-type", "").split(";")[0]
    )
    return Fetched(ref, digest, media_type, body, manifest)


def _client(ca_file: str | None = None) -> httpx.Client:
    # No proxy and no credentials from the environment: the process that may hold a
    # database credential talks to the lab's registry only.
    return httpx.Client(
        timeout=_TIMEOUT, trust_env=False, follow_redirects=True, verify=_trust(ca_file)
    )


def _trust(ca_file: str | None) -> ssl.SSLContext | bool:
    """The system roots, and ``PTAH_OCI_CA_FILE``'s bundle in addition, as ptah trusts
    them (its docs/oci.md): naming an authority adds it, never replaces the roots."""
    if ca_file is None:
        return True
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError, ValueError) as error:
        raise ExecutorError(
            f"cannot read the registry CA bundle {ca_file} (PTAH_OCI_CA_FILE): "
            f"{type(error).__name__}"
        ) from error
    return context


def _artifact_type(manifest: dict[str, Any]) -> str:
    config = manifest.get("config")
    config_type = config.get("mediaType") if isinstance(config, dict) else None
    return str(manifest.get("artifactType") or config_type or "")


def _layers(fetched: Fetched) -> list[dict[str, Any]]:
    layers = fetched.manifest.get("layers")
    if not isinstance(layers, list) or not all(
        isinstance(layer, dict) and isinstance(layer.get("digest"), str) for layer in layers
    ):
        raise ExecutorError(f"the manifest of {fetched.ref.text} has no well-formed layers")
    return layers


def _fetch(text: str, plain_http: bool, ca_file: str | None) -> Fetched:
    with _client(ca_file) as client:
        return fetch_manifest(client, parse_reference(text), plain_http, ca_file)


def _descriptor(fetched: Fetched) -> dict[str, Any]:
    """The fields resolve and inspect share: what was asked, and the content it names."""
    return {
        "reference": fetched.ref.text,
        "pinned_reference": fetched.ref.pinned(fetched.digest),
        "digest": fetched.digest,
        "media_type": fetched.media_type,
        "size": len(fetched.body),
    }


def resolve(text: str, plain_http: bool, as_json: bool, ca_file: str | None = None) -> str:
    report = ResolveReport(**_descriptor(_fetch(text, plain_http, ca_file)))
    return render(report) if as_json else f"{report.pinned_reference}\n"


def inspect(text: str, plain_http: bool, as_json: bool, ca_file: str | None = None) -> str:
    fetched = _fetch(text, plain_http, ca_file)
    annotations = fetched.manifest.get("annotations") or {}
    report = InspectReport(
        **_descriptor(fetched),
        artifact_type=_artifact_type(fetched.manifest),
        annotations={str(k): str(v) for k, v in dict(annotations).items()},
        layers=[
            InspectLayer(
                media_type=str(layer.get("mediaType", "")),
                digest=layer["digest"],
                size=int(layer.get("size", 0)),
                title=(layer.get("annotations") or {}).get(TITLE),
            )
            for layer in _layers(fetched)
        ],
    )
    return render(report) if as_json else f"{report.pinned_reference} {report.artifact_type}\n"


_POLICY_KEYS = {
    "version",
    "require_digest_pin",
    "artifact_types",
    "require_annotations",
    "require_signature",
    "signature_artifact_types",
}


def load_policy(path: str) -> None:
    """Accept exactly the one policy kind the lab supports: ``require_digest_pin: true``."""
    try:
        policy = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise ExecutorError(f"cannot read the verification policy {path} as yaml") from error
    if not isinstance(policy, dict):
        raise ExecutorError(f"the verification policy {path} is not a yaml mapping")
    unknown = sorted(set(policy) - _POLICY_KEYS)
    if unknown:
        raise ExecutorError(f"the verification policy {path} has an unknown field {unknown[0]}")
    if policy.get("version") != 1:
        raise ExecutorError(f"the verification policy {path} must say version: 1")
    others = sorted(k for k in _POLICY_KEYS - {"version", "require_digest_pin"} if policy.get(k))
    if others:
        raise ExecutorError(
            f"the verification policy asks for {others[0]}, but the lab executor supports one "
            "policy kind only, a digest pin (require_digest_pin: true)"
        )
    if policy.get("require_digest_pin") is not True:
        raise ExecutorError(
            "the verification policy declares no requirement, so every artifact would pass; "
            "the lab executor's one policy kind is require_digest_pin: true"
        )


def verify(
    text: str, policy_path: str, plain_http: bool, as_json: bool, ca_file: str | None = None
) -> tuple[str, int]:
    load_policy(policy_path)
    fetched = _fetch(text, plain_http, ca_file)
    ref = fetched.ref
    satisfied: list[str] = []
    findings: list[VerificationFinding] = []
    if ref.digest:
        satisfied.append("require_digest_pin")
    else:
        findings.append(
            VerificationFinding(
                requirement="require_digest_pin",
                detail="the reference names a tag, which can be moved "
                "between approval and application",
            )
        )
    report = VerifyReport(
        reference=text, digest=fetched.digest, satisfied=satisfied, findings=findings
    )
    code = 1 if findings else 0
    if as_json:
        return render(report), code
    return "".join(
        [f"met {s}\n" for s in satisfied]
        + [f"REFUSED {f.requirement}: {f.detail}\n" for f in findings]
    ), code


def _blob(
    client: httpx.Client,
    fetched: Fetched,
    layer: dict[str, Any],
    plain_http: bool,
    ca_file: str | None = None,
) -> bytes:
    digest = layer["digest"]
    url = f"{_base(fetched.ref, plain_http, ca_file)}/blobs/{digest}"
    data = _get(client, url, f"blob {digest}").content
    if _sha256(data) != digest:
        raise ExecutorError(f"blob {digest} of {fetched.ref.text} does not hash to its digest")
    return data


def _expect_type(fetched: Fetched, wanted: str) -> None:
    found = _artifact_type(fetched.manifest)
    if found != wanted:
        raise ExecutorError(f"{fetched.ref.text} is a {found or 'untyped'} artifact, not {wanted}")


def pull_schema(text: str, out: str, plain_http: bool, ca_file: str | None = None) -> str:
    ref = parse_reference(text)
    with _client(ca_file) as client:
        fetched = fetch_manifest(client, ref, plain_http, ca_file)
        _expect_type(fetched, SCHEMA_ARTIFACT_TYPE)
        layers = _layers(fetched)
        if len(layers) != 1:
            raise ExecutorError(
                f"the schema artifact {text} has {len(layers)} layers; it must have exactly one"
            )
        data = _blob(client, fetched, layers[0], plain_http, ca_file)
    path = Path(out)
    temporary = path.with_name(f".{path.name}.pull")
    temporary.write_bytes(data)
    temporary.replace(path)
    return f"pulled {fetched.digest} to {out}\n"


_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def pull_migrations(text: str, out: str, plain_http: bool, ca_file: str | None = None) -> str:
    ref = parse_reference(text)
    files: dict[str, bytes] = {}
    with _client(ca_file) as client:
        fetched = fetch_manifest(client, ref, plain_http, ca_file)
        _expect_type(fetched, MIGRATIONS_ARTIFACT_TYPE)
        for layer in _layers(fetched):
            name = (layer.get("annotations") or {}).get(TITLE)
            if not isinstance(name, str) or not _SAFE_NAME.match(name) or name in files:
                raise ExecutorError(f"a layer of {text} is not named by a plain, unique file title")
            files[name] = _blob(client, fetched, layer, plain_http, ca_file)
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise ExecutorError(f"the output directory {out} is not empty")
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return f"pulled {fetched.digest} ({len(files)} files) to {out}\n"


def push_artifact(
    text: str,
    artifact_type: str,
    files: list[tuple[str, bytes]],
    *,
    plain_http: bool = False,
    layer_media_type: str = "application/octet-stream",
    annotations: dict[str, str] | None = None,
) -> str:
    """Push files as one artifact; returns the manifest digest."""
    ref = parse_reference(text)
    base = _base(ref, plain_http)
    with _client() as client:
        layers = []
        for name, data in [("", b"{}"), *files]:
            digest = _sha256(data)
            started = client.post(f"{base}/blobs/uploads/")
            if started.status_code != 202:
                raise ExecutorError(f"the registry refused an upload ({started.status_code})")
            location = str(started.headers["location"])
            separator = "&" if "?" in location else "?"
            url = location if location.startswith("http") else f"{base.split('/v2/')[0]}{location}"
            done = client.put(
                f"{url}{separator}digest={digest}",
                content=data,
                headers={"Content-Type": "application/octet-stream"},
            )
            if done.status_code != 201:
                raise ExecutorError(f"the registry refused blob {digest} ({done.status_code})")
            if name:
                layers.append(
                    {
                        "mediaType": layer_media_type,
                        "digest": digest,
                        "size": len(data),
                        "annotations": {TITLE: name},
                    }
                )
        manifest: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "artifactType": artifact_type,
            "config": {"mediaType": EMPTY, "digest": _sha256(b"{}"), "size": 2},
            "layers": layers,
        }
        if annotations:
            manifest["annotations"] = annotations
        body = json.dumps(manifest, separators=(",", ":")).encode()
        put = client.put(
            f"{base}/manifests/{ref.target}", content=body, headers={"Content-Type": MANIFEST}
        )
        if put.status_code != 201:
            raise ExecutorError(f"the registry refused the manifest ({put.status_code})")
    return _sha256(body)
