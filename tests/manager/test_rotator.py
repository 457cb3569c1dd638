"""``python -m manager.rotator`` in the cluster's CronJob: each step said once.

The CronJob's log is what a platform engineer reads when a rotation stalls; the
rotation's own logger already says every step, so the program must not say it again.
"""

from __future__ import annotations

import argparse
import base64
import logging
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

import certs
from jobclaim.apiserver import SECRETS, VALIDATING_WEBHOOK_CONFIGURATIONS
from kube.fake.inmemory import InMemoryApi
from manager import rotator

NAMESPACE = "ptah-system"


def cluster_with_certificates() -> InMemoryApi:
    """The chart's Secret and one webhook configuration trusting its CA."""
    now = datetime.now(UTC)
    ca = certs.generate_ca(now=now)
    leaf = certs.issue_serving_certificate(
        ca, dns_names=certs.service_dns_names("ptah-operator-webhook", NAMESPACE), now=now
    )
    api = InMemoryApi()
    files = {
        certs.CA_CERT: ca.cert_pem(),
        certs.CA_KEY: ca.key_pem(),
        certs.TLS_CERT: leaf.cert_pem(),
        certs.TLS_KEY: leaf.key_pem(),
    }
    api.create(
        SECRETS,
        NAMESPACE,
        {
            "metadata": {"name": "tls"},
            "type": "kubernetes.io/tls",
            "data": {name: base64.b64encode(data).decode() for name, data in files.items()},
        },
    )
    api.create(
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        None,
        {
            "metadata": {"name": "hook"},
            "webhooks": [
                {
                    "name": "w.operator.ptah.run",
                    "clientConfig": {"caBundle": base64.b64encode(ca.cert_pem()).decode()},
                }
            ],
        },
    )
    return api


@pytest.mark.parametrize("force", ["serving", "ca"])
def test_each_step_is_said_once(force: str, caplog: pytest.LogCaptureFixture) -> None:
    api = cluster_with_certificates()
    args = rotator.parser().parse_args(
        [
            f"--namespace={NAMESPACE}",
            "--secret=tls",
            "--validating=hook",
            f"--force={force}",
            "--settle=0s",
        ]
    )
    printed: list[str] = []
    with caplog.at_level(logging.INFO):
        assert rotator.rotate(args, api, printed.append) == 0
    said = Counter(printed + [record.getMessage() for record in caplog.records])
    # The control: the steps were said at all.
    requested = "a CA rotation" if force == "ca" else "a serving certificate rotation"
    assert said[f"{requested} was requested"] == 1, said
    assert [line for line, times in said.items() if times > 1] == []


# --- starting from nothing: the chart renders no certificate ------------------------


def empty_configuration(api: InMemoryApi, name: str) -> None:
    """A configuration as the chart renders it: no caBundle at all."""
    api.create(
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        None,
        {"metadata": {"name": name}, "webhooks": [{"name": "w.operator.ptah.run"}]},
    )


def first_run(*extra: str) -> argparse.Namespace:
    return rotator.parser().parse_args(
        [f"--namespace={NAMESPACE}", "--secret=tls", "--validating=hook", "--settle=0s", *extra]
    )


def test_without_a_service_a_missing_secret_is_an_error() -> None:
    api = InMemoryApi()
    empty_configuration(api, "hook")
    with pytest.raises(certs.RotationError, match="does not exist: issue the first certificate"):
        rotator.rotate(first_run(), api, lambda line: None)


def test_with_a_service_the_secret_is_created_and_every_bundle_trusts_it() -> None:
    api = InMemoryApi()
    empty_configuration(api, "hook")
    printed: list[str] = []
    args = first_run("--service=ptah-operator-webhook")
    assert rotator.rotate(args, api, printed.append) == 0
    secret = api.get(SECRETS, NAMESPACE, "tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == (
        "ptah-operator-cert-rotator"
    )
    data = {key: base64.b64decode(value) for key, value in secret["data"].items()}
    ca = certs.load_certificate(data[certs.CA_CERT])
    leaf = certs.load_certificate(data[certs.TLS_CERT])
    assert certs.is_issued_by(leaf, ca)
    assert "ptah-operator-webhook.ptah-system.svc" in certs.subject_alt_names(leaf)[0]
    hook = api.get(VALIDATING_WEBHOOK_CONFIGURATIONS, None, "hook")
    bundle = base64.b64decode(hook["webhooks"][0]["clientConfig"]["caBundle"])
    assert certs.bundle_fingerprints(bundle) == {certs.fingerprint(ca)}
    # The bundle before the Secret: no manager can serve (it mounts the Secret) before
    # every configuration trusts what it will serve.
    assert printed[:2] == [
        "hook: caBundle published for the new CA, before its Secret exists",
        f"Secret {NAMESPACE}/tls: created with the new CA and serving certificate for "
        "ptah-operator-webhook",
    ]
    published = int(hook["metadata"]["resourceVersion"])
    assert published < int(secret["metadata"]["resourceVersion"])
    # A second run finds it and changes nothing: the certificate the cluster trusts stays.
    assert rotator.rotate(args, api, printed.append) == 0
    assert api.get(SECRETS, NAMESPACE, "tls")["data"] == secret["data"]


def test_a_run_waits_for_the_configurations_the_install_is_creating() -> None:
    api = InMemoryApi()
    printed: list[str] = []
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        # The install creates the configuration while the run waits.
        slept.append(seconds)
        empty_configuration(api, "hook")

    args = first_run("--service=ptah-operator-webhook", "--wait-for-configurations=1m")
    bundles = certs.KubeBundles(api, ["hook"])
    rotator.wait_for_configurations(
        bundles,
        args.wait_for_configurations,
        printed.append,
        sleep=sleep,
    )
    assert slept == [rotator.CONFIGURATION_POLL_SECONDS]
    assert printed == ["waiting for the webhook configuration(s) hook to exist"]


def test_a_configuration_that_never_appears_ends_the_run_with_its_name() -> None:
    api = InMemoryApi()
    times = iter([0.0, 0.0, 30.0, 61.0])
    bundles = certs.KubeBundles(api, ["hook"])
    with pytest.raises(certs.RotationError, match="hook did not appear within 0:01:00"):
        rotator.wait_for_configurations(
            bundles,
            timedelta(minutes=1),
            lambda line: None,
            sleep=lambda s: None,
            clock=lambda: next(times),
        )
