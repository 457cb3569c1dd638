"""``python -m manager.rotator`` in the cluster's CronJob: each step said once.

The CronJob's log is what a platform engineer reads when a rotation stalls; the
rotation's own logger already says every step, so the program must not say it again.
"""

from __future__ import annotations

import base64
import logging
from collections import Counter
from datetime import UTC, datetime

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
