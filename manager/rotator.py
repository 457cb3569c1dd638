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

With ``--service`` it also starts from nothing: when the Secret does not exist, a new
CA and a serving certificate for that Service's names are issued, the CA published in
every caBundle, and only then the Secret created (the chart renders no certificate, so
every ``helm template`` of it is the same bytes). The chart's install Job runs it so,
with ``--wait-for-configurations``: it first waits for the webhook configurations the
same install is creating. Until the Secret exists no manager Pod starts (it mounts
the Secret), so every webhook fails closed with nobody to call, and once one serves,
every caBundle already trusts it.

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
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import certs
from jobclaim.apiserver import ApiClient
from kube.client import KubeApi
from manager import logs

log = logging.getLogger("manager.rotator")

EXIT_ERROR: Final = 1
EXIT_WAITING: Final = 3
# The labels of the Secret the rotator creates: it is the rotator's, not Helm's.
SECRET_LABELS: Final = {
    "app.kubernetes.io/name": "ptah-operator",
    "app.kubernetes.io/part-of": "ptah-operator",
    "app.kubernetes.io/component": "webhook-certificate",
    "app.kubernetes.io/managed-by": "ptah-operator-cert-rotator",
}
# How often a run waiting for the webhook configurations looks again.
CONFIGURATION_POLL_SECONDS: Final = 1.0


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
    made.add_argument(
        "--service",
        help="the webhook Service: when the Secret does not exist, create it with a new CA "
        "and a serving certificate for this Service's names in --namespace",
    )
    made.add_argument(
        "--wait-for-configurations",
        type=certs.duration_argument,
        metavar="DURATION",
        help="wait up to this long for every named webhook configuration to exist "
        "before publishing (the install creates them beside this run)",
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
        if args.wait_for_configurations is not None:
            wait_for_configurations(bundles, args.wait_for_configurations, out)
        if args.service is not None and not store.exists():
            first(args, policy, store, bundles, out)
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


def first(
    args: argparse.Namespace,
    policy: certs.RotationPolicy,
    store: certs.SecretDirectory,
    bundles: certs.KubeBundles,
    out: Callable[[str], None],
) -> None:
    """Issue the first CA and serving certificate: every caBundle first, then the Secret.

    In that order, no webhook is ever called with a certificate its caBundle does not
    trust: until the Secret exists no manager Pod can start (it mounts the Secret), so
    the API server has no endpoint to call and every webhook fails closed; from the
    moment one serves, the bundles trust it. A run stopped in between left bundles that
    trust a CA nobody serves, which the next run simply overwrites with its own.
    """
    issued = certs.first_certificates(
        certs.service_dns_names(args.service, args.namespace),
        now=datetime.now(UTC),
        ca_validity=policy.ca_validity,
        serving_validity=policy.serving_validity,
    )
    for name in sorted(bundles.read()):
        bundles.write(name, issued[certs.CA_CERT])
        out(f"{name}: caBundle published for the new CA, before its Secret exists")
    if store.create(issued, SECRET_LABELS):
        out(f"{store}: created with the new CA and serving certificate for {args.service}")
    # Else another run created it first: the rotation below publishes that one's CA.


def wait_for_configurations(
    bundles: certs.KubeBundles,
    patience: timedelta,
    out: Callable[[str], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once every managed configuration exists; a RotationError after ``patience``.

    Publishing to the ones that exist and leaving the rest would leave those webhooks
    on an empty caBundle, failing closed, until the next scheduled run hours later.
    """
    end = clock() + patience.total_seconds()
    said: list[str] = []
    while missing := bundles.missing():
        if clock() >= end:
            raise certs.RotationError(
                f"the webhook configuration(s) {', '.join(missing)} did not appear within "
                f"{patience}; is the chart installed in full?"
            )
        if missing != said:
            out(f"waiting for the webhook configuration(s) {', '.join(missing)} to exist")
            said = missing
        sleep(CONFIGURATION_POLL_SECONDS)


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
