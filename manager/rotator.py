"""``python -m manager.rotator``: the webhook's certificates, renewed inside the cluster.

The chart issues a CA and a serving certificate once; this program (the chart's
certificate-rotator CronJob, in the manager's image, under its own ServiceAccount)
keeps them alive. It pulls the webhook's Secret into a private directory, runs the
rotation ``certs`` implements (a serving certificate renewed under the same CA; a
CA renewed with the overlap bundle: old and new CA published together, the server
swapped once the bundle is in force, the old CA dropped once the new certificate is
served), pushes every step back to the Secret, and publishes each caBundle with a
PATCH of the named validating and mutating webhook configurations. It is the only
identity the chart lets patch them: the manager, which they constrain, has no verb
on them at all.

Everything it knows it reads back from the Secret and the configurations, so a run
stopped anywhere is continued by the next; a run whose next step is a wait longer
than ``--timeout`` stops with exit 3 and the next scheduled run goes on from there.
This module is the composition root (``certs`` imports no API client); the rotation
itself is ``certs.Rotator``. It logs JSON lines like the manager (``manager.logs``), so
one log pipeline parses both.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import certs
from jobclaim.apiserver import ApiClient
from kube.client import KubeApi
from manager import logs

log = logging.getLogger("manager.rotator")

EXIT_ERROR: Final = 1
EXIT_WAITING: Final = 3


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="python -m manager.rotator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    made.add_argument("--namespace", required=True, help="the webhook Secret's namespace")
    made.add_argument("--secret", required=True, help="the kubernetes.io/tls Secret")
    made.add_argument(
        "--validating",
        action="append",
        default=[],
        help="a ValidatingWebhookConfiguration whose caBundle is published",
    )
    made.add_argument(
        "--mutating",
        action="append",
        default=[],
        help="a MutatingWebhookConfiguration whose caBundle is published",
    )
    made.add_argument("--kubeconfig", type=Path, help="default: the Pod's service account")
    certs.add_rotation_arguments(made)
    return made


def rotate(args: argparse.Namespace, api: ApiClient, out: Callable[[str], None]) -> int:
    """One run of the rotation against the cluster; the exit code.

    Each step is said by the rotation's own logger (``certs.rotation``, on stdout from
    ``main``); ``out`` says only what the program adds: each Secret write, where a
    stopped run left off, the outcome. Said twice, the CronJob's log doubled every line.
    """
    policy = certs.rotation_policy(args)
    probe = certs.served_probe(args, out)
    bundles = certs.KubeBundles(api, args.validating, mutating=args.mutating)
    with tempfile.TemporaryDirectory(prefix="ptah-rotation-") as scratch:
        store = certs.SecretDirectory(api, args.namespace, args.secret, Path(scratch))
        store.pull()

        def pushed(step: certs.Step) -> None:
            if store.push():
                out(f"{store}: written after: {step.reason}")

        rotator = certs.Rotator(
            Path(scratch),
            bundles,
            policy=policy,
            probe=probe,
            after_step=pushed,
        )
        force = certs.Force(args.force) if args.force else None
        deadline = datetime.now(UTC) + args.timeout if args.timeout is not None else None
        result = rotator.run(force, deadline=deadline)
    if result.waiting is not None:
        out(
            f"stopped: {result.waiting.reason}; the next run continues after {result.waiting.until}"
        )
        return EXIT_WAITING
    if result.outcome is not None:
        out(result.outcome.reason)
    return 0


def _said(line: str) -> None:
    log.info(line)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = _said) -> int:
    args = parser().parse_args(argv)
    level = os.environ.get("PTAH_LOG_LEVEL", "info").lower()
    logs.configure(level if level in logs.LEVELS else "info")
    api = KubeApi.from_kubeconfig(args.kubeconfig) if args.kubeconfig else KubeApi.in_cluster()
    try:
        return rotate(args, api, out)
    except certs.CertificateError as error:
        log.error("the rotation failed: %s", error)
        return EXIT_ERROR
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())
