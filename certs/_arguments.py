"""The rotation's command-line arguments, shared by every program that runs one.

``python -m certs rotate`` (a directory) and ``python -m manager.rotator`` (the
cluster's Secret) take the same policy, probe and timeout, read the same way, so a
platform team tunes both with one vocabulary.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta

from certs._authority import DEFAULT_CA_VALIDITY, DEFAULT_SERVING_VALIDITY, fingerprint
from certs._describe import parse_duration
from certs._errors import CertificateError
from certs._rotation import Force, RotationPolicy
from certs._serving import fetch_served_certificate

__all__ = ["add_rotation_arguments", "duration_argument", "rotation_policy", "served_probe"]


def duration_argument(text: str) -> timedelta:
    """An argparse type: a Go-style duration (``2160h``, ``1h30m``)."""
    try:
        return parse_duration(text)
    except CertificateError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def add_rotation_arguments(parser: argparse.ArgumentParser) -> None:
    """--force, the policy's lifetimes and windows, --settle, --probe and --timeout."""
    defaults = RotationPolicy()
    parser.add_argument("--force", choices=[f.value for f in Force], help="rotate even if not due")
    parser.add_argument("--settle", type=duration_argument, default=defaults.settle)
    parser.add_argument("--ca-validity", type=duration_argument, default=DEFAULT_CA_VALIDITY)
    parser.add_argument(
        "--serving-validity", type=duration_argument, default=DEFAULT_SERVING_VALIDITY
    )
    parser.add_argument(
        "--ca-renew-before", type=duration_argument, default=defaults.ca_renew_before
    )
    parser.add_argument(
        "--serving-renew-before", type=duration_argument, default=defaults.serving_renew_before
    )
    parser.add_argument(
        "--probe",
        type=_host_port,
        metavar="HOST:PORT",
        help="the running webhook server, to confirm it serves the new certificate",
    )
    parser.add_argument(
        "--timeout", type=duration_argument, help="stop (exit 3) rather than wait past this long"
    )


def rotation_policy(args: argparse.Namespace) -> RotationPolicy:
    return RotationPolicy(
        ca_validity=args.ca_validity,
        serving_validity=args.serving_validity,
        ca_renew_before=args.ca_renew_before,
        serving_renew_before=args.serving_renew_before,
        settle=args.settle,
    )


def served_probe(
    args: argparse.Namespace, out: Callable[[str], None]
) -> Callable[[], str | None] | None:
    """The fingerprint the ``--probe`` server presents, or None without ``--probe``."""
    if args.probe is None:
        return None
    host, port = args.probe
    reported: set[str] = set()

    def probe() -> str | None:
        try:
            return fingerprint(fetch_served_certificate(host, port))
        except CertificateError as error:
            # Said once: the rotation observes before every step.
            if str(error) not in reported:
                reported.add(str(error))
                out(f"probe failed, relying on the settle time: {error}")
            return None

    return probe
