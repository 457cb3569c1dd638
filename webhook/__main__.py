"""``python -m webhook serve | docs | explain``.

serve     the webhook over HTTPS (a local CA and certificate are generated when no
          --tls-cert/--tls-key is given; the CA path is printed for the client)
docs      print docs/admission-rules.md, generated from the rule registry
explain   judge a saved AdmissionReview against objects from a file, offline, and
          print the rule trail; exits 0 when the review would be admitted, 1 otherwise
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import certs
from webhook.app import create_app
from webhook.docs import render
from webhook.engine import Engine
from webhook.explain import explain_files
from webhook.rules import CONTROLLER_WRITE, DEFAULT_MANAGER_USERNAME, MANAGER_STATE, Settings
from webhook.serving import local_certificates, manager_namespace, readiness, uvicorn_server
from webhook.wiring import api_reader


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m webhook", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the webhook over HTTPS")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8443)
    serve.add_argument("--tls-cert", type=Path, help="serving certificate (PEM)")
    serve.add_argument("--tls-key", type=Path, help="its private key (PEM)")
    serve.add_argument("--cert-dir", type=Path, help="where to generate a local CA and certificate")
    serve.add_argument("--kubeconfig", type=Path, help="default: the Pod's service account")
    serve.add_argument("--context", help="kubeconfig context")
    serve.add_argument("--manager-username", default=DEFAULT_MANAGER_USERNAME)

    commands.add_parser("docs", help="print the admission rules document")

    explain = commands.add_parser("explain", help="judge a saved review offline")
    explain.add_argument("review", type=Path, help="an AdmissionReview (JSON)")
    explain.add_argument("--objects", type=Path, help="the objects the rules read (YAML)")
    explain.add_argument("--manager-username", default=DEFAULT_MANAGER_USERNAME)
    explain.add_argument(
        "--endpoint",
        choices=(CONTROLLER_WRITE, MANAGER_STATE),
        help="default: inferred from the review's resource",
    )
    return parser


async def _serve(args: argparse.Namespace) -> None:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise SystemExit("give both --tls-cert and --tls-key, or neither")
    if args.tls_cert is None:
        directory = args.cert_dir or Path(tempfile.mkdtemp(prefix="ptah-webhook-certs-"))
        local = local_certificates(directory)
        print(f"serving with a generated certificate; trust the CA at {local.ca}", flush=True)
        cert, key = local.cert, local.key
    else:
        cert, key = args.tls_cert, args.tls_key
    tls = certs.ReloadingTLS(cert, key)
    reader = api_reader(args.kubeconfig, context=args.context)
    engine = Engine(reader, Settings(manager_username=args.manager_username))
    namespace = manager_namespace(args.manager_username)
    app = create_app(engine, readiness=readiness(tls, reader, namespace=namespace))
    # Everything built so far lives as long as the process; frozen, it is not rescanned
    # by every collection a review's short-lived JSON trees trigger.
    gc.collect()
    gc.freeze()
    try:
        await certs.serve_reloading(uvicorn_server(app, tls, host=args.host, port=args.port), tls)
    finally:
        engine.close()
        reader.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "docs":
        sys.stdout.write(render())
        return 0
    if args.command == "explain":
        settings = Settings(manager_username=args.manager_username)
        outcome, text = explain_files(args.review, args.objects, settings=settings)
        print(text)
        return 0 if outcome.decision.allowed else 1
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
