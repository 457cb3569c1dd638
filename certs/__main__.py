"""`python -m certs generate|inspect|rotate`: the certificate directory from a terminal.

Expected failures print one lower-case sentence and exit 1; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509

from certs._arguments import (
    add_rotation_arguments,
    duration_argument,
    rotation_policy,
    served_probe,
)
from certs._authority import (
    DEFAULT_CA_VALIDITY,
    DEFAULT_SERVING_VALIDITY,
    CertifiedKey,
    IPAddressType,
    is_issued_by,
    load_certificate,
    load_certificates,
    service_dns_names,
    subject_alt_names,
    verify_serving_chain,
)
from certs._bundles import FileBundles, InMemoryBundles, WebhookBundles
from certs._describe import (
    describe_certificate,
    format_duration,
    format_rows,
    format_time,
)
from certs._errors import CertificateError, os_reason
from certs._files import (
    CA_CERT,
    CA_KEY,
    STATE_FILE,
    TLS_CERT,
    TLS_KEY,
    atomic_write,
    read_optional,
)
from certs._rotation import (
    BeginRotation,
    ClearRecord,
    Force,
    PublishBundle,
    RotationRecord,
    Step,
    Wait,
    WriteFile,
    WriteRecord,
)
from certs._rotator import Rotator, first_certificates

__all__ = ["main"]

_PROG = "python -m certs"
EXIT_ERROR = 1
EXIT_WAITING = 3


def _now() -> datetime:
    return datetime.now(UTC)


_duration = duration_argument


def _ip(text: str) -> IPAddressType:
    try:
        return ipaddress.ip_address(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address") from error


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    generate = commands.add_parser("generate", help="create a CA and a serving certificate")
    generate.add_argument("--dir", type=Path, required=True, help="directory to write into")
    generate.add_argument("--service", required=True, help="the webhook Service name")
    generate.add_argument("--namespace", required=True, help="the webhook Service namespace")
    generate.add_argument(
        "--ip", type=_ip, action="append", default=[], help="an IP SAN, e.g. 127.0.0.1 (repeatable)"
    )
    generate.add_argument("--ca-validity", type=_duration, default=DEFAULT_CA_VALIDITY)
    generate.add_argument("--serving-validity", type=_duration, default=DEFAULT_SERVING_VALIDITY)
    generate.add_argument(
        "--overwrite", action="store_true", help="replace existing files (breaks published trust)"
    )

    inspect = commands.add_parser("inspect", help="describe a certificate directory or PEM file")
    target = inspect.add_mutually_exclusive_group(required=True)
    target.add_argument("--dir", type=Path, help="a certificate directory")
    target.add_argument("file", type=Path, nargs="?", help="a PEM file (certificate or bundle)")

    rotate = commands.add_parser("rotate", help="rotate what is due, to completion")
    rotate.add_argument("--dir", type=Path, required=True, help="the certificate directory")
    rotate.add_argument(
        "--bundles-file", type=Path, help="JSON file of webhook configuration name to caBundle"
    )
    rotate.add_argument(
        "--webhook",
        action="append",
        default=None,
        help="a managed configuration in the bundles file (repeatable); "
        "without it every entry in the file is managed",
    )
    add_rotation_arguments(rotate)
    return parser


def _generate(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    directory: Path = args.dir
    dns_names = service_dns_names(args.service, args.namespace)
    names = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        existing = [name for name in names if (directory / name).exists()]
        in_rotation = (directory / STATE_FILE).exists()
    except OSError as error:
        raise CertificateError(f"cannot use {directory}: {os_reason(error)}") from error
    if in_rotation:
        raise CertificateError(
            f"a rotation is in progress in {directory}; finish it with `{_PROG} rotate` first"
        )
    if existing and not args.overwrite:
        raise CertificateError(
            f"{directory} already holds {', '.join(existing)}; use `{_PROG} rotate` to replace "
            "them without breaking trust, or --overwrite to start over"
        )
    now = _now()
    contents = first_certificates(
        dns_names,
        now=now,
        ca_validity=args.ca_validity,
        serving_validity=args.serving_validity,
        ip_addresses=args.ip,
    )
    try:
        for name, data in contents.items():
            atomic_write(directory / name, data)
    except OSError as error:
        raise CertificateError(f"cannot write into {directory}: {os_reason(error)}") from error
    out(f"wrote {', '.join(str(directory / n) for n in contents)}")
    for name in (CA_CERT, TLS_CERT):
        certificate = load_certificate(contents[name], what=name)
        out(f"{name}\n{format_rows(describe_certificate(certificate, now=now))}")
    return 0


def _inspect(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    now = _now()
    if args.file is not None:
        certificates = load_certificates(_read(args.file), what=str(args.file))
        for index, certificate in enumerate(certificates, start=1):
            out(f"{args.file} certificate {index} of {len(certificates)}")
            out(format_rows(describe_certificate(certificate, now=now)))
        return 0
    directory: Path = args.dir
    ca = load_certificates(_read(directory / CA_CERT), what=CA_CERT)[0]
    leaf = load_certificates(_read(directory / TLS_CERT), what=TLS_CERT)[0]
    out(f"{directory / CA_CERT}\n{format_rows(describe_certificate(ca, now=now))}")
    out(f"{directory / TLS_CERT}\n{format_rows(describe_certificate(leaf, now=now))}")
    out(format_rows(_health(directory, ca, leaf, now), indent=""))
    return 0


def _health(
    directory: Path, ca: x509.Certificate, leaf: x509.Certificate, now: datetime
) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for cert_name, key_name in ((CA_CERT, CA_KEY), (TLS_CERT, TLS_KEY)):
        try:
            CertifiedKey.from_pem(
                _read(directory / cert_name), _read(directory / key_name), what=cert_name
            )
            rows.append((key_name, f"matches {cert_name}"))
        except CertificateError as error:
            rows.append((key_name, f"problem: {error}"))
    if not is_issued_by(leaf, ca):
        rows.append(("chain", f"{TLS_CERT} is not signed by {CA_CERT}"))
    else:
        dns, ips = subject_alt_names(leaf)
        problems = []
        for name in [*dns, *(str(ip) for ip in ips)]:
            try:
                verify_serving_chain(leaf, [ca], now=now, name=name)
            except CertificateError as error:
                problems.append(str(error))
        rows.append(("chain", "; ".join(problems) or f"{TLS_CERT} verifies against {CA_CERT}"))
    state = read_optional(directory / STATE_FILE)
    if not state:
        rows.append(("rotation", "none in progress"))
    else:
        record = RotationRecord.from_json(state)
        kind = "CA rotation" if record.replaces_ca else "serving certificate rotation"
        rows.append(("rotation", f"{kind} in phase {record.phase.value}"))
        rows.append(("new ca sha256", record.new_fingerprint))
        rows.append(("new tls sha256", record.new_leaf_fingerprint))
        rows.append(("settles at", format_time(record.settle_until)))
    return rows


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as error:
        raise CertificateError(f"{path} does not exist") from error
    except OSError as error:
        raise CertificateError(f"cannot read {path}: {os_reason(error)}") from error


def _describe_step(step: Step, directory: Path, now: datetime) -> str:
    if isinstance(step, BeginRotation):
        kind = "a CA rotation" if step.replace_ca else "a serving certificate rotation"
        return f"starting {kind}: {step.reason}"
    if isinstance(step, WriteRecord):
        return f"recorded phase {step.record.phase.value}: {step.reason}"
    if isinstance(step, PublishBundle):
        return f"published the caBundle of {step.name}: {step.reason}"
    if isinstance(step, WriteFile):
        return f"wrote {directory / step.name}: {step.reason}"
    if isinstance(step, Wait):
        return f"waiting {format_duration(step.until - now)}: {step.reason}"
    if isinstance(step, ClearRecord):
        return f"finished: {step.reason}"
    return f"nothing to do: {step.reason}"


def _rotate(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    directory: Path = args.dir
    bundles: WebhookBundles
    if args.bundles_file is None:
        out("no --bundles-file given: no caBundle will be published")
        bundles = InMemoryBundles({})
    else:
        file_bundles = FileBundles(args.bundles_file, args.webhook)
        if not file_bundles.managed_names():
            out(
                f"{args.bundles_file} names no webhook configuration: no caBundle will be published"
            )
        bundles = file_bundles
    policy = rotation_policy(args)
    probe = served_probe(args, out)
    rotator = Rotator(
        directory,
        bundles,
        policy=policy,
        probe=probe,
        on_step=lambda step: out(_describe_step(step, directory, _now())),
    )
    force = Force(args.force) if args.force else None
    deadline = _now() + args.timeout if args.timeout is not None else None
    result = rotator.run(force, deadline=deadline)
    if result.waiting is not None:
        out(
            f"stopped: {result.waiting.reason}; run rotate again after "
            f"{format_time(result.waiting.until)} to continue"
        )
        return EXIT_WAITING
    if result.outcome is not None and not result.steps:
        out(_describe_step(result.outcome, directory, _now()))
    return 0


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    args = _parser().parse_args(argv)
    commands = {"generate": _generate, "inspect": _inspect, "rotate": _rotate}
    try:
        return commands[args.command](args, out)
    except CertificateError as error:
        print(f"{_PROG}: error: {error}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
