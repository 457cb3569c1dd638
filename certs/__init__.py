"""Certificates for the webhook: issue them, rotate them without an outage, serve them live.

The webhook server serves over a reloading TLS context::

    tls = certs.ReloadingTLS("/certs/tls.crt", "/certs/tls.key")
    await certs.serve(app, tls, host="0.0.0.0", port=8443)

and a rotation is driven by `certs.Rotator(directory, bundles).run()`, where
`bundles` is any `certs.WebhookBundles` (in memory, a JSON file, or Kubernetes).
"""

from certs._arguments import (
    add_rotation_arguments,
    duration_argument,
    rotation_policy,
    served_probe,
)
from certs._authority import (
    BACKDATE,
    DEFAULT_CA_VALIDITY,
    DEFAULT_SERVING_VALIDITY,
    CertifiedKey,
    bundle_fingerprints,
    fingerprint,
    generate_ca,
    is_issued_by,
    issue_serving_certificate,
    load_certificate,
    load_certificates,
    load_private_key,
    service_dns_names,
    subject_alt_names,
    verify_serving_chain,
)
from certs._bundles import FileBundles, InMemoryBundles, WebhookBundles
from certs._describe import parse_duration
from certs._errors import (
    CertificateError,
    InvalidCertificateError,
    KeyMismatchError,
    RotationError,
    StateFileError,
)
from certs._files import (
    CA_CERT,
    CA_KEY,
    STATE_FILE,
    TLS_CERT,
    TLS_KEY,
    DirectoryContents,
    atomic_write,
    read_directory,
)
from certs._kubebundles import KubeBundles, bundle_of
from certs._rotation import (
    BeginRotation,
    ClearRecord,
    Converged,
    Force,
    Observation,
    Phase,
    PublishBundle,
    RotationPolicy,
    RotationRecord,
    Step,
    Wait,
    WriteFile,
    WriteRecord,
    decide,
)
from certs._rotator import Clock, RotationResult, Rotator, SystemClock, first_certificates
from certs._secretstore import SECRET_KEYS, SecretDirectory
from certs._serving import (
    DEFAULT_RELOAD_INTERVAL,
    ReloadingTLS,
    build_uvicorn_server,
    fetch_served_certificate,
    serve,
    serve_reloading,
)

__all__ = [
    "BACKDATE",
    "CA_CERT",
    "CA_KEY",
    "DEFAULT_CA_VALIDITY",
    "DEFAULT_RELOAD_INTERVAL",
    "DEFAULT_SERVING_VALIDITY",
    "SECRET_KEYS",
    "STATE_FILE",
    "TLS_CERT",
    "TLS_KEY",
    "BeginRotation",
    "CertificateError",
    "CertifiedKey",
    "ClearRecord",
    "Clock",
    "Converged",
    "DirectoryContents",
    "FileBundles",
    "Force",
    "InMemoryBundles",
    "InvalidCertificateError",
    "KeyMismatchError",
    "KubeBundles",
    "Observation",
    "Phase",
    "PublishBundle",
    "ReloadingTLS",
    "RotationError",
    "RotationPolicy",
    "RotationRecord",
    "RotationResult",
    "Rotator",
    "SecretDirectory",
    "StateFileError",
    "Step",
    "SystemClock",
    "Wait",
    "WebhookBundles",
    "WriteFile",
    "WriteRecord",
    "add_rotation_arguments",
    "atomic_write",
    "build_uvicorn_server",
    "bundle_fingerprints",
    "bundle_of",
    "decide",
    "duration_argument",
    "fetch_served_certificate",
    "fingerprint",
    "first_certificates",
    "generate_ca",
    "is_issued_by",
    "issue_serving_certificate",
    "load_certificate",
    "load_certificates",
    "load_private_key",
    "parse_duration",
    "read_directory",
    "rotation_policy",
    "serve",
    "serve_reloading",
    "served_probe",
    "service_dns_names",
    "subject_alt_names",
    "verify_serving_chain",
]
