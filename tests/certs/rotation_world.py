"""A rotation's world for tests: a fake clock, a lagging webhook server, managed bundles.

The simulated server models the one thing that makes rotation hard: it does not
see new files immediately. It reloads only when told to (or when fake time
passes), and, like `ReloadingTLS`, it refuses a certificate/key pair that does
not match and keeps serving what it had.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from certs_support import DNS_NAMES, SERVICE_NAME, T0
from cryptography import x509

from certs import (
    CA_CERT,
    CA_KEY,
    TLS_CERT,
    TLS_KEY,
    BeginRotation,
    CertificateError,
    CertifiedKey,
    Converged,
    Force,
    InMemoryBundles,
    RotationPolicy,
    Rotator,
    Step,
    atomic_write,
    generate_ca,
    issue_serving_certificate,
    load_certificates,
    read_directory,
    verify_serving_chain,
)


class FakeClock:
    """Time that only moves when the code under test waits; listeners hear every move."""

    def __init__(self, now: datetime = T0) -> None:
        self._now = now
        self.listeners: list[Callable[[], None]] = []

    def now(self) -> datetime:
        return self._now

    def sleep_until(self, moment: datetime) -> None:
        self._now = max(self._now, moment)
        for listener in self.listeners:
            listener()

    def advance(self, delta: timedelta) -> None:
        self.sleep_until(self._now + delta)


class SimulatedServer:
    """What the webhook server presents, reloaded from the directory only on `reload()`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        files = read_directory(directory)
        self.served = CertifiedKey.from_pem(files.tls_cert, files.tls_key)

    def reload(self) -> None:
        files = read_directory(self.directory)
        # A torn or mismatched pair is refused and the old one kept, as ReloadingTLS does.
        with contextlib.suppress(CertificateError):
            self.served = CertifiedKey.from_pem(files.tls_cert, files.tls_key)


class InvariantViolation(AssertionError):
    pass


def check_trust(served: x509.Certificate, bundles: dict[str, bytes], now: datetime) -> None:
    """Every managed bundle must let a client verify the served certificate, as a client would."""
    for name, bundle in sorted(bundles.items()):
        try:
            trusted = load_certificates(bundle)
            verify_serving_chain(served, trusted, now=now, name=SERVICE_NAME)
        except CertificateError as error:
            raise InvariantViolation(
                f"served serial {served.serial_number:#x} is not trusted by {name}: {error}"
            ) from error


@dataclass
class World:
    """A certificate directory, its managed bundles and a server, all on one fake clock."""

    directory: Path
    clock: FakeClock
    bundles: InMemoryBundles
    server: SimulatedServer
    unmanaged_before: dict[str, bytes] = field(default_factory=dict)

    def check(self) -> None:
        check_trust(self.server.served.certificate, self.bundles.read(), self.clock.now())

    def rotator(
        self,
        policy: RotationPolicy | None = None,
        probe: Callable[[], str | None] | None = None,
    ) -> Rotator:
        return Rotator(self.directory, self.bundles, clock=self.clock, policy=policy, probe=probe)

    def drive(self, rotator: Rotator, force: Force | None = None, limit: int = 100) -> list[Step]:
        """Advance to completion, checking the trust invariant after every single step."""
        steps: list[Step] = []
        for _ in range(limit):
            step = rotator.advance(force)
            if isinstance(step, Converged):
                return steps
            steps.append(step)
            if isinstance(step, BeginRotation):
                force = None  # honoured once, as Rotator.run does
            self.check()
        raise AssertionError(f"no convergence after {limit} steps: {steps[-5:]}")


def make_world(
    directory: Path,
    *,
    managed: tuple[str, ...] = ("ptah-validate", "ptah-validate-jobs"),
    now: datetime = T0,
    server_follows_clock: bool = True,
) -> World:
    ca = generate_ca(now=now)
    leaf = issue_serving_certificate(ca, dns_names=DNS_NAMES, now=now)
    atomic_write(directory / CA_KEY, ca.key_pem())
    atomic_write(directory / CA_CERT, ca.cert_pem())
    atomic_write(directory / TLS_KEY, leaf.key_pem())
    atomic_write(directory / TLS_CERT, leaf.cert_pem())
    clock = FakeClock(now)
    unmanaged = {"someone-elses-webhook": b"not ours, never touched"}
    bundles = InMemoryBundles(dict.fromkeys(managed, ca.cert_pem()), unmanaged)
    server = SimulatedServer(directory)
    if server_follows_clock:
        # The server catches up whenever time passes: the assumption `settle` encodes.
        clock.listeners.append(server.reload)
    return World(directory, clock, bundles, server, dict(unmanaged))
