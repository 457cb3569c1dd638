"""python -m webhook serve | docs | explain

serve     the webhook over HTTPS: --tls-cert/--tls-key, or the pair in --cert-dir
          ($PTAH_WEBHOOK_CERT_DIR); with neither, a local CA and certificate are
          generated (into --cert-dir when given) and the CA's path is printed
docs      print docs/admission-rules.md, generated from the rule registry
explain   judge a saved AdmissionReview against objects from a file, offline, and
          print the rule trail; exits 0 when the review would be admitted, 1 otherwise
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from jobclaim import scratch_images_of
from webhook.docs import render
from webhook.engine import Engine
from webhook.explain import explain_files
from webhook.rules import DEFAULT_MANAGER_USERNAME, ENDPOINT_PATHS, ImagePins, Settings
from webhook.serving import local_certificates, serve, serving_pair
from webhook.wiring import api_reader

# The chart's environment for the manager's container.
PORT_ENV: Final = "PTAH_WEBHOOK_PORT"
CERT_DIR_ENV: Final = "PTAH_WEBHOOK_CERT_DIR"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webhook",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve_command = commands.add_parser("serve", help="serve the webhook over HTTPS")
    serve_command.add_argument("--host", default="0.0.0.0")
    serve_command.add_argument("--port", type=int, default=int(os.environ.get(PORT_ENV) or "8443"))
    serve_command.add_argument("--tls-cert", type=Path, help="serving certificate (PEM)")
    serve_command.add_argument("--tls-key", type=Path, help="its private key (PEM)")
    serve_command.add_argument(
        "--cert-dir",
        type=Path,
        default=Path(os.environ[CERT_DIR_ENV]) if os.environ.get(CERT_DIR_ENV) else None,
        help="serve its tls.crt and tls.key, or generate a local CA and certificate into it",
    )
    serve_command.add_argument("--kubeconfig", type=Path, help="default: in-cluster")
    serve_command.add_argument("--context", help="kubeconfig context")
    serve_command.add_argument("--manager-username", default=DEFAULT_MANAGER_USERNAME)
    _pin_arguments(serve_command)

    commands.add_parser("docs", help="print the admission rules document")

    explain = commands.add_parser("explain", help="judge a saved review offline")
    explain.add_argument("review", type=Path, help="an AdmissionReview (JSON)")
    explain.add_argument("--objects", type=Path, help="the objects the rules read (YAML)")
    explain.add_argument("--manager-username", default=DEFAULT_MANAGER_USERNAME)
    _pin_arguments(explain)
    explain.add_argument(
        "--endpoint",
        choices=tuple(ENDPOINT_PATHS),
        help="default: inferred from the review's resource",
    )
    return parser


# The images every operation Job is pinned to: the chart's values, which the manager's
# container also reads (``manager.config``). Without all four no Job is admitted.
PIN_ENV: Final = {
    "executor_image": "PTAH_EXECUTOR_IMAGE",
    "runner_image": "PTAH_RUNNER_IMAGE",
    "manager_image": "PTAH_MANAGER_IMAGE",
    "ptah_version": "PTAH_VERSION",
}


# The chart's execution.scratchImages, read like the pins; optional (empty: none named).
SCRATCH_ENV: Final = {
    "scratch_postgresql": "PTAH_SCRATCH_IMAGE_POSTGRESQL",
    "scratch_mysql": "PTAH_SCRATCH_IMAGE_MYSQL",
}


# Four-eyes, the chart's approvals.requireDistinctApprover, read like the pins.
FOUR_EYES_ENV: Final = "PTAH_REQUIRE_DISTINCT_APPROVER"


def _four_eyes_default() -> bool:
    raw = os.environ.get(FOUR_EYES_ENV, "false")
    if raw not in ("true", "false"):
        # A typo must not quietly turn four-eyes off.
        raise SystemExit(f"{FOUR_EYES_ENV} must be true or false, not {raw!r}")
    return raw == "true"


def _pin_arguments(parser: argparse.ArgumentParser) -> None:
    for field, env in PIN_ENV.items():
        flag = "--" + field.replace("_", "-")
        parser.add_argument(flag, default=os.environ.get(env), help=f"default: ${env}")
    for field, env in SCRATCH_ENV.items():
        flag = "--" + field.replace("_", "-")
        parser.add_argument(flag, default=os.environ.get(env, ""), help=f"default: ${env}")
    parser.add_argument(
        "--require-distinct-approver",
        action=argparse.BooleanOptionalAction,
        default=_four_eyes_default(),
        help=f"four-eyes (default: ${FOUR_EYES_ENV} is true)",
    )


def _settings(args: argparse.Namespace) -> Settings:
    values = {field: getattr(args, field) for field in PIN_ENV}
    scratch = scratch_images_of(args.scratch_postgresql, args.scratch_mysql)
    pins = ImagePins(**values, scratch_images=scratch) if all(values.values()) else None
    return Settings(
        manager_username=args.manager_username,
        pins=pins,
        require_distinct_approver=args.require_distinct_approver,
    )


def _pair(args: argparse.Namespace) -> tuple[Path, Path]:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise SystemExit("give both --tls-cert and --tls-key, or neither")
    if args.tls_cert is not None:
        return args.tls_cert, args.tls_key
    directory = args.cert_dir or Path(tempfile.mkdtemp(prefix="ptah-webhook-certs-"))
    found = serving_pair(directory)
    if found is not None:
        return found
    local = local_certificates(directory)
    print(f"serving with a generated certificate; trust the CA at {local.ca}", flush=True)
    return local.cert, local.key


async def _serve(args: argparse.Namespace) -> None:
    cert, key = _pair(args)
    reader = api_reader(args.kubeconfig, context=args.context)
    engine = Engine(reader, _settings(args))
    try:
        await serve(engine, cert=cert, key=key, host=args.host, port=args.port)
    finally:
        engine.close()
        reader.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "docs":
        sys.stdout.write(render())
        return 0
    if args.command == "explain":
        settings = _settings(args)
        outcome, text = explain_files(
            args.review, args.objects, endpoint=args.endpoint, settings=settings
        )
        print(text)
        return 0 if outcome.decision.allowed else 1
    # Decision lines are JSON already; the format adds nothing to them.
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
