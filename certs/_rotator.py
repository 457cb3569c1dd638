"""The rotation's shell: observe, ask `decide`, perform the one step, repeat.

Holds no memory between steps on purpose: everything it knows it reads back from
the certificate directory, the state file and the bundles. A process killed after
any step is therefore indistinguishable from one that paused there, and a new
`Rotator` over the same directory carries on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from cryptography.x509.oid import NameOID

from certs._authority import (
    CertifiedKey,
    IPAddressType,
    generate_ca,
    issue_serving_certificate,
    load_certificate,
    subject_alt_names,
)
from certs._bundles import WebhookBundles
from certs._errors import CertificateError, RotationError, os_reason
from certs._files import (
    CA_CERT,
    CA_KEY,
    STATE_FILE,
    TLS_CERT,
    TLS_KEY,
    atomic_write,
    read_directory,
    read_optional,
    remove_durably,
)
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

__all__ = [
    "Clock",
    "RotationResult",
    "Rotator",
    "SystemClock",
    "ca_common_name",
    "first_certificates",
]

logger = logging.getLogger("certs.rotation")

# Far more than any rotation needs (3 phases x a handful of bundles and files); a
# run that gets here is oscillating, e.g. against a bundle store that drops writes.
_MAX_STEPS = 500
_CA_NAME = "ptah-webhook-ca"


class Clock(Protocol):
    def now(self) -> datetime: ...

    def sleep_until(self, moment: datetime) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep_until(self, moment: datetime) -> None:
        delay = (moment - self.now()).total_seconds()
        if delay > 0:
            time.sleep(delay)


def ca_common_name(now: datetime, previous: str | None = None) -> str:
    """`<base>@<unix seconds>`, the kube-apiserver convention for self-signed CAs.

    Old and new CA then differ in subject during the overlap, so neither a person
    reading a bundle nor a client looking issuers up by name can confuse them.
    """
    base = (previous or _CA_NAME).split("@", 1)[0] or _CA_NAME
    return f"{base}@{int(now.timestamp())}"


def first_certificates(
    dns_names: Sequence[str],
    *,
    now: datetime,
    ca_validity: timedelta,
    serving_validity: timedelta,
    ip_addresses: Iterable[IPAddressType] = (),
) -> dict[str, bytes]:
    """A new CA and a serving certificate it signed, as the four directory files.

    The one place a certificate directory starts from nothing (`python -m certs
    generate`, and the rotator creating the webhook's Secret): every later change
    is a rotation, which keeps trust.
    """
    ca = generate_ca(now=now, validity=ca_validity, common_name=ca_common_name(now))
    leaf = issue_serving_certificate(
        ca, dns_names=dns_names, ip_addresses=ip_addresses, now=now, validity=serving_validity
    )
    return {
        CA_KEY: ca.key_pem(),
        CA_CERT: ca.cert_pem(),
        TLS_KEY: leaf.key_pem(),
        TLS_CERT: leaf.cert_pem(),
    }


@dataclass(frozen=True)
class RotationResult:
    """What a `Rotator.run` did; `waiting` is set when it stopped at its deadline."""

    steps: list[Step] = field(default_factory=list)
    waiting: Wait | None = None
    outcome: Converged | None = None

    @property
    def completed(self) -> bool:
        return self.outcome is not None


class Rotator:
    """Drives the rotation of one certificate directory and its managed bundles.

    `probe`, when given, returns the SHA-256 fingerprint of the certificate the live
    webhook server presents (or None if it cannot tell); with it the old CA is
    dropped as soon as the new certificate is confirmed in service, without it
    only after `policy.settle`. With several webhook replicas a probe through the
    Service sees only one of them: probe each replica, or rely on the settle time.
    """

    def __init__(
        self,
        directory: Path,
        bundles: WebhookBundles,
        *,
        policy: RotationPolicy | None = None,
        clock: Clock | None = None,
        probe: Callable[[], str | None] | None = None,
        on_step: Callable[[Step], None] | None = None,
        after_step: Callable[[Step], None] | None = None,
    ) -> None:
        self.directory = directory
        self.bundles = bundles
        self.policy = policy or RotationPolicy()
        self.clock = clock or SystemClock()
        self.probe = probe
        self.on_step = on_step
        # Called once a step is durable where the rotator works (a directory): a store
        # behind it (a Secret) is brought level before the next step is decided.
        self.after_step = after_step

    def observe(self) -> Observation:
        state = self._read(self.directory / STATE_FILE)
        try:
            files = read_directory(self.directory)
        except OSError as error:
            raise CertificateError(f"cannot read {self.directory}: {os_reason(error)}") from error
        return Observation(
            files=files,
            record=RotationRecord.from_json(state) if state else None,
            bundles=self.bundles.read(),
            served_fingerprint=self.probe() if self.probe else None,
        )

    def plan(self, force: Force | None = None) -> Step:
        """The next step, without performing it."""
        return decide(self.observe(), now=self.clock.now(), policy=self.policy, force=force)

    def advance(self, force: Force | None = None) -> Step:
        """Perform exactly one step (one durable write, or one wait) and return it."""
        step = self.plan(force)
        self._perform(step)
        return step

    def run(
        self, force: Force | None = None, *, deadline: datetime | None = None
    ) -> RotationResult:
        """Advance until nothing is left to do, or until a wait would pass `deadline`."""
        steps: list[Step] = []
        for _ in range(_MAX_STEPS):
            step = self.plan(force)
            if isinstance(step, Converged):
                return RotationResult(steps, outcome=step)
            if isinstance(step, Wait) and deadline is not None and step.until > deadline:
                return RotationResult(steps, waiting=step)
            self._perform(step)
            steps.append(step)
            if isinstance(step, BeginRotation):
                # The request is honoured once; carrying it on would start another
                # rotation the moment this one completes.
                force = None
        raise RotationError(f"the rotation did not settle after {_MAX_STEPS} steps")

    def _perform(self, step: Step) -> None:
        if self.on_step is not None:
            self.on_step(step)
        logger.info("%s", step.reason)
        try:
            if isinstance(step, BeginRotation):
                record = self._begin(step.replace_ca)
                atomic_write(self.directory / STATE_FILE, record.to_json())
            elif isinstance(step, WriteRecord):
                atomic_write(self.directory / STATE_FILE, step.record.to_json())
            elif isinstance(step, PublishBundle):
                self.bundles.write(step.name, step.bundle)
            elif isinstance(step, WriteFile):
                atomic_write(self.directory / step.name, step.data)
            elif isinstance(step, ClearRecord):
                remove_durably(self.directory / STATE_FILE)
            elif isinstance(step, Wait):
                self.clock.sleep_until(step.until)
        except OSError as error:
            raise CertificateError(f"cannot update {self.directory}: {os_reason(error)}") from error
        if self.after_step is not None:
            self.after_step(step)

    def _begin(self, replace_ca: bool) -> RotationRecord:
        """Mint the next CA (if replacing it) and leaf; the leaf keeps the current SANs."""
        files = read_directory(self.directory)
        current_ca = CertifiedKey.from_pem(files.ca_cert, files.ca_key, what="ca.crt")
        dns_names, ip_addresses = subject_alt_names(
            load_certificate(files.tls_cert, what="tls.crt")
        )
        now = self.clock.now()
        if replace_ca:
            previous = current_ca.certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            name = str(previous[0].value) if previous else None
            signer = generate_ca(
                now=now, validity=self.policy.ca_validity, common_name=ca_common_name(now, name)
            )
            new_ca, new_ca_key = signer.cert_pem(), signer.key_pem()
        else:
            # Byte-identical to the files, so the swap does not rewrite the CA.
            signer, new_ca, new_ca_key = current_ca, files.ca_cert, files.ca_key
        leaf = issue_serving_certificate(
            signer,
            dns_names=dns_names,
            ip_addresses=ip_addresses,
            now=now,
            validity=self.policy.serving_validity,
        )
        return RotationRecord(
            phase=Phase.PUBLISH if replace_ca else Phase.SWAP,
            old_ca=current_ca.cert_pem(),
            new_ca=new_ca,
            new_ca_key=new_ca_key,
            new_leaf=leaf.cert_pem(),
            new_leaf_key=leaf.key_pem(),
            settle_until=now,
        )

    def _read(self, path: Path) -> bytes:
        try:
            return read_optional(path)
        except OSError as error:
            raise CertificateError(f"cannot read {path}: {os_reason(error)}") from error
