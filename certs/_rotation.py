"""The rotation's decisions: given what is on disk and published, what to do next.

Pure: `decide` looks at an `Observation` (the four certificate files, the durable
rotation record, the managed caBundles, optionally what the live server presents),
the time and a policy, and names exactly one next `Step`. The shell in
`certs._rotator` performs the step — each is one durable write or a wait — and asks
again. Because the decision is recomputed from observations every time, a process
that stops after any write resumes by simply running again.

A CA rotation goes through three phases, each recorded before it acts:

    publish  every managed caBundle becomes old CA + new CA ("overlap")
    swap     ca.key, ca.crt, tls.key, tls.crt are replaced by the new CA and a leaf it signed
    drop     every managed caBundle becomes the new CA alone

Safety invariant: at every step, the certificate the server presents chains to a CA
in every managed bundle. It holds because bundles only ever *gain* the new CA
before the served certificate changes, and only *lose* the old CA once the new
certificate is in service (confirmed by a probe, or after the settle time).
A serving-only rotation (same CA, new leaf) starts at "swap" and never touches bundles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from cryptography.hazmat.primitives.serialization import Encoding

from certs._authority import (
    DEFAULT_CA_VALIDITY,
    DEFAULT_SERVING_VALIDITY,
    CertifiedKey,
    bundle_fingerprints,
    fingerprint,
    is_issued_by,
    load_certificate,
)
from certs._describe import format_duration
from certs._errors import CertificateError, RotationError, StateFileError
from certs._files import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, DirectoryContents

__all__ = [
    "BeginRotation",
    "ClearRecord",
    "Converged",
    "Force",
    "Observation",
    "Phase",
    "PublishBundle",
    "RotationPolicy",
    "RotationRecord",
    "Step",
    "Wait",
    "WriteFile",
    "WriteRecord",
    "decide",
]


class Phase(StrEnum):
    PUBLISH = "publish"
    SWAP = "swap"
    DROP = "drop"


class Force(StrEnum):
    """Rotate now even though nothing is due."""

    CA = "ca"
    SERVING = "serving"


@dataclass(frozen=True)
class RotationPolicy:
    """Lifetimes, renewal windows and how long published changes take to take effect.

    `settle` is how long a change needs to reach its consumers: the API server
    watching webhook configurations (after a bundle is published) and the webhook
    server polling its files or a kubelet syncing a Secret volume (after a swap).
    """

    ca_validity: timedelta = DEFAULT_CA_VALIDITY
    serving_validity: timedelta = DEFAULT_SERVING_VALIDITY
    ca_renew_before: timedelta = timedelta(hours=4380)
    serving_renew_before: timedelta = timedelta(hours=720)
    settle: timedelta = timedelta(minutes=2)
    probe_interval: timedelta = timedelta(seconds=5)

    def __post_init__(self) -> None:
        # Each rule stops a rotation loop: a certificate that is "due" the moment it
        # is issued would be replaced again on every run, forever.
        if self.ca_renew_before >= self.ca_validity:
            raise CertificateError("the CA renewal window must be shorter than the CA validity")
        if self.serving_renew_before >= self.serving_validity:
            raise CertificateError(
                "the serving renewal window must be shorter than the serving validity"
            )
        # A leaf never outlives its CA; were the CA renewed later than the leaf, a
        # leaf capped by an ageing CA would be due immediately after every reissue.
        if self.serving_renew_before > self.ca_renew_before:
            raise CertificateError(
                "the serving renewal window must not be longer than the CA renewal window"
            )
        if self.settle < timedelta(0) or self.probe_interval <= timedelta(0):
            raise CertificateError("the settle time and probe interval must not be negative")


@dataclass(frozen=True)
class RotationRecord:
    """The durable memory of a rotation in progress (the state file).

    It holds the *next* CA and leaf with their keys, so a re-run writes exactly the
    same material instead of minting another CA that no bundle trusts yet.
    `old_ca` equals `new_ca` for a serving-only rotation.
    """

    phase: Phase
    old_ca: bytes
    new_ca: bytes
    new_ca_key: bytes
    new_leaf: bytes
    new_leaf_key: bytes
    settle_until: datetime

    @property
    def replaces_ca(self) -> bool:
        return self.old_fingerprint != self.new_fingerprint

    @property
    def old_fingerprint(self) -> str:
        return fingerprint(load_certificate(self.old_ca))

    @property
    def new_fingerprint(self) -> str:
        return fingerprint(load_certificate(self.new_ca))

    @property
    def new_leaf_fingerprint(self) -> str:
        return fingerprint(load_certificate(self.new_leaf))

    def overlap_bundle(self) -> bytes:
        """Old CA then new CA, re-encoded so two PEM files always concatenate cleanly."""
        new = _canonical(self.new_ca)
        return new if not self.replaces_ca else _canonical(self.old_ca) + new

    def files(self) -> dict[str, bytes]:
        """The swap's target files, in the order they are written.

        Keys before certificates, CA before leaf: a reader catching the directory
        between two renames sees a key that does not match its certificate, which
        the reloader refuses (keeping the old pair in service), rather than a
        certificate whose key has not arrived yet being half-loaded.
        """
        return {
            CA_KEY: self.new_ca_key,
            CA_CERT: self.new_ca,
            TLS_KEY: self.new_leaf_key,
            TLS_CERT: self.new_leaf,
        }

    def at(self, phase: Phase, settle_until: datetime) -> RotationRecord:
        return replace(self, phase=phase, settle_until=settle_until)

    def to_json(self) -> bytes:
        document = {
            "version": 1,
            "phase": self.phase.value,
            "old_ca": self.old_ca.decode("ascii"),
            "new_ca": self.new_ca.decode("ascii"),
            "new_ca_key": self.new_ca_key.decode("ascii"),
            "new_leaf": self.new_leaf.decode("ascii"),
            "new_leaf_key": self.new_leaf_key.decode("ascii"),
            "settle_until": self.settle_until.isoformat(),
        }
        return (json.dumps(document, indent=2) + "\n").encode("ascii")

    @classmethod
    def from_json(cls, data: bytes) -> RotationRecord:
        try:
            document = json.loads(data)
            if document.get("version") != 1:
                raise StateFileError("the rotation state file has an unknown version")
            record = cls(
                phase=Phase(document["phase"]),
                old_ca=document["old_ca"].encode("ascii"),
                new_ca=document["new_ca"].encode("ascii"),
                new_ca_key=document["new_ca_key"].encode("ascii"),
                new_leaf=document["new_leaf"].encode("ascii"),
                new_leaf_key=document["new_leaf_key"].encode("ascii"),
                settle_until=datetime.fromisoformat(document["settle_until"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeError) as error:
            raise StateFileError(
                "the rotation state file is not a valid rotation record"
            ) from error
        # A record whose material does not hang together would be executed faithfully
        # and break trust; refuse it instead.
        try:
            new_ca = CertifiedKey.from_pem(record.new_ca, record.new_ca_key, what="the new CA")
            leaf = CertifiedKey.from_pem(record.new_leaf, record.new_leaf_key, what="the new leaf")
            load_certificate(record.old_ca, what="the old CA")
        except CertificateError as error:
            raise StateFileError(f"the rotation state file is inconsistent: {error}") from error
        if not is_issued_by(leaf.certificate, new_ca.certificate):
            raise StateFileError("the rotation state file's new leaf is not signed by its new CA")
        if record.settle_until.tzinfo is None:
            raise StateFileError("the rotation state file's settle time has no time zone")
        return record


def _canonical(pem: bytes) -> bytes:
    return load_certificate(pem).public_bytes(Encoding.PEM)


@dataclass(frozen=True)
class Observation:
    """Everything the decision looks at, gathered by the shell in one go."""

    files: DirectoryContents
    record: RotationRecord | None
    bundles: Mapping[str, bytes]
    # What the live webhook server presents (SHA-256 of its certificate), when the
    # shell can probe it; None means "unknown", and the settle time stands in.
    served_fingerprint: str | None = None


@dataclass(frozen=True)
class Converged:
    reason: str


@dataclass(frozen=True)
class BeginRotation:
    """Generate the next CA (when `replace_ca`) and leaf, and record them: the shell's job."""

    replace_ca: bool
    reason: str


@dataclass(frozen=True)
class WriteRecord:
    record: RotationRecord
    reason: str


@dataclass(frozen=True)
class PublishBundle:
    name: str
    bundle: bytes
    reason: str


@dataclass(frozen=True)
class WriteFile:
    name: str
    data: bytes
    reason: str


@dataclass(frozen=True)
class Wait:
    until: datetime
    reason: str


@dataclass(frozen=True)
class ClearRecord:
    reason: str


Step = Converged | BeginRotation | WriteRecord | PublishBundle | WriteFile | Wait | ClearRecord


def decide(
    observation: Observation,
    *,
    now: datetime,
    policy: RotationPolicy,
    force: Force | None = None,
) -> Step:
    """The one next step; `force` only matters when no rotation is in progress."""
    if observation.record is None:
        return _idle(observation, now, policy, force)
    return _in_progress(observation.record, observation, now, policy)


def _idle(
    observation: Observation, now: datetime, policy: RotationPolicy, force: Force | None
) -> Step:
    files = observation.files
    if not files.ca_cert or not files.tls_cert:
        raise RotationError(
            "the certificate directory has no ca.crt or no tls.crt; "
            "run `python -m certs generate` first"
        )
    ca = CertifiedKey.from_pem(files.ca_cert, files.ca_key, what=CA_CERT)
    leaf = load_certificate(files.tls_cert, what=TLS_CERT)
    if not is_issued_by(leaf, ca.certificate):
        # No rotation is in progress, so nothing of ours produced this: guessing which
        # side is right could publish a bundle that trusts neither served cert.
        raise RotationError(
            "tls.crt is not signed by ca.crt and no rotation is in progress; "
            "restore the files or run `python -m certs generate --overwrite`"
        )
    ca_fingerprints = frozenset({fingerprint(ca.certificate)})
    for name in sorted(observation.bundles):
        if bundle_fingerprints(observation.bundles[name]) != ca_fingerprints:
            # Safe in both directions: the served leaf is signed by this CA.
            return PublishBundle(
                name, files.ca_cert, f"the caBundle of {name} is not exactly ca.crt"
            )

    ca_left = ca.certificate.not_valid_after_utc - now
    if force is Force.CA:
        return BeginRotation(replace_ca=True, reason="a CA rotation was requested")
    if ca_left <= policy.ca_renew_before:
        return BeginRotation(
            replace_ca=True,
            reason=f"the CA expires in {format_duration(ca_left)}, "
            f"within its renewal window of {format_duration(policy.ca_renew_before)}",
        )
    leaf_left = leaf.not_valid_after_utc - now
    if force is Force.SERVING:
        return BeginRotation(
            replace_ca=False, reason="a serving certificate rotation was requested"
        )
    if not _pair_matches(files.tls_cert, files.tls_key):
        return BeginRotation(replace_ca=False, reason="tls.key does not match tls.crt")
    if leaf_left <= policy.serving_renew_before:
        return BeginRotation(
            replace_ca=False,
            reason=f"the serving certificate expires in {format_duration(leaf_left)}, "
            f"within its renewal window of {format_duration(policy.serving_renew_before)}",
        )
    return Converged(
        f"nothing is due: the CA expires in {format_duration(ca_left)}, "
        f"the serving certificate in {format_duration(leaf_left)}"
    )


def _pair_matches(cert_pem: bytes, key_pem: bytes) -> bool:
    try:
        CertifiedKey.from_pem(cert_pem, key_pem)
    except CertificateError:
        return False
    return True


def _in_progress(
    record: RotationRecord, observation: Observation, now: datetime, policy: RotationPolicy
) -> Step:
    if record.phase is Phase.PUBLISH:
        return _publish(record, observation, now, policy)
    if record.phase is Phase.SWAP:
        return _swap(record, observation, now, policy)
    return _drop(record, observation, now, policy)


def _publish(
    record: RotationRecord, observation: Observation, now: datetime, policy: RotationPolicy
) -> Step:
    overlap = record.overlap_bundle()
    wanted = bundle_fingerprints(overlap)
    for name in sorted(observation.bundles):
        if bundle_fingerprints(observation.bundles[name]) != wanted:
            return PublishBundle(name, overlap, f"{name} must trust both the old and the new CA")
    return WriteRecord(
        record.at(Phase.SWAP, now + policy.settle),
        "every managed caBundle trusts both CAs; the serving certificate may be swapped "
        f"once the API server has seen them ({format_duration(policy.settle)})",
    )


def _swap(
    record: RotationRecord, observation: Observation, now: datetime, policy: RotationPolicy
) -> Step:
    wanted = bundle_fingerprints(record.overlap_bundle())
    for name in sorted(observation.bundles):
        if bundle_fingerprints(observation.bundles[name]) != wanted:
            # Someone (a chart upgrade, a restored backup) reverted a bundle, or a
            # new managed configuration appeared: swapping now could serve a leaf
            # that bundle does not trust, so go back and publish first.
            return WriteRecord(
                record.at(Phase.PUBLISH, now),
                f"the caBundle of {name} no longer trusts both CAs; publishing again",
            )
    if now < record.settle_until:
        return Wait(record.settle_until, "letting the API server pick up the overlap bundles")
    current = observation.files.by_name()
    for name, data in record.files().items():
        if current[name] != data:
            return WriteFile(name, data, f"installing the new {_role(name)}")
    if not record.replaces_ca:
        return ClearRecord("the serving certificate was replaced; the CA is unchanged")
    return WriteRecord(
        record.at(Phase.DROP, now + policy.settle),
        "the new certificate is on disk; the old CA may be dropped once the server serves it",
    )


def _drop(
    record: RotationRecord, observation: Observation, now: datetime, policy: RotationPolicy
) -> Step:
    current = observation.files.by_name()
    if any(current[name] != data for name, data in record.files().items()):
        # The served leaf might be the old one again; dropping its CA would break it.
        return WriteRecord(
            record.at(Phase.SWAP, now), "the certificate files changed; swapping again"
        )
    served = observation.served_fingerprint
    if served is not None:
        if served != record.new_leaf_fingerprint:
            return Wait(
                now + policy.probe_interval,
                "the webhook server still presents the previous certificate",
            )
    elif now < record.settle_until:
        return Wait(record.settle_until, "letting the webhook server load the new certificate")
    wanted = frozenset({record.new_fingerprint})
    for name in sorted(observation.bundles):
        if bundle_fingerprints(observation.bundles[name]) != wanted:
            return PublishBundle(name, record.new_ca, f"dropping the old CA from {name}")
    return ClearRecord("the CA rotation is complete; every managed caBundle holds only the new CA")


def _role(name: str) -> str:
    return {
        CA_KEY: "CA key",
        CA_CERT: "CA certificate",
        TLS_KEY: "serving key",
        TLS_CERT: "serving certificate",
    }[name]
