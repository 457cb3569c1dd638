"""The chart renders no certificate: the same values render the same bytes, every time.

A GitOps controller (Argo CD, Flux) renders the chart on every sync and compares the
result with the cluster. A template that issued a CA (``genCA``) rendered a new key
and a new caBundle each time, so the release was never in sync and each sync undid
what the rotator had published; one that read the live Secret back (``lookup``)
cannot be rendered by those tools at all. Here: the rotator (or cert-manager, or the
user's own Secret) owns the certificate and every caBundle, and the chart renders
neither.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.support.chartrender import CHART, NAMESPACE, VALUES, Helm, Object, of_kind, only

pytestmark = pytest.mark.helm

CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
CONFIGURATIONS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
# Sprig's functions whose result is not a function of the values: keys, certificates,
# random strings, the clock, and the live cluster.
UNSTABLE = re.compile(
    r"\b(gen(CA|CAWithKey|PrivateKey|SelfSignedCert|SelfSignedCertWithKey|SignedCert"
    r"|SignedCertWithKey)|rand(Alpha|AlphaNum|Numeric|Ascii|Bytes|Int)|uuidv4|now|lookup"
    r"|htpasswd|date|dateInZone|unixEpoch)\b"
)


def render_args(values: list[Path], namespace: str = NAMESPACE) -> list[str]:
    args = ["template", "ptah-operator", str(CHART), "--namespace", namespace]
    for path in values:
        args += ["--values", str(path)]
    return args


@pytest.mark.parametrize(
    "values",
    [[VALUES / "required.yaml"], [VALUES / "custom.yaml"], *[[path] for path in CI_VALUES]],
    ids=lambda values: values[0].name,
)
def test_rendering_twice_gives_the_same_bytes(helm: Helm, values: list[Path]) -> None:
    first = helm.run(*render_args(values))
    second = helm.run(*render_args(values))
    assert first.returncode == 0, first.stderr
    assert first.stdout.encode() == second.stdout.encode()
    # The control: the comparison sees a change, so equal bytes above mean something.
    other = helm.run(*render_args(values, namespace="elsewhere"))
    assert other.returncode == 0, other.stderr
    assert other.stdout != first.stdout


def test_no_template_calls_a_function_whose_result_varies() -> None:
    templates = sorted((CHART / "templates").iterdir())
    found = [
        f"{path.name}: {match.group(0)}"
        for path in templates
        for match in UNSTABLE.finditer(path.read_text())
    ]
    # The control: the pattern finds what the chart rendered before this change.
    assert UNSTABLE.search('{{- $ca := genCAWithKey "ptah-webhook-ca" 365 $key }}')
    assert UNSTABLE.search('{{- $live := lookup "v1" "Secret" $ns $name }}')
    assert found == []


def test_neither_a_certificate_nor_a_ca_bundle_is_rendered(default_render: list[Object]) -> None:
    assert of_kind(default_render, "Secret") == []
    configurations = [o for o in default_render if o["kind"] in CONFIGURATIONS]
    assert len(configurations) == 4
    for configuration in configurations:
        for hook in configuration["webhooks"]:
            assert "caBundle" not in hook["clientConfig"], hook["name"]


def test_cert_manager_renders_no_ca_bundle_either(helm: Helm) -> None:
    objects = helm.render([VALUES / "required.yaml"], {"webhook.certManager.enabled": "true"})
    hooks = [h for o in objects if o["kind"] in CONFIGURATIONS for h in o["webhooks"]]
    assert len(hooks) >= 4
    assert [h["name"] for h in hooks if "caBundle" in h["clientConfig"]] == []


def init_job(objects: list[Object]) -> Object:
    (job,) = [j for j in of_kind(objects, "Job") if "-cert-init-" in j["metadata"]["name"]]
    return job


def test_the_install_job_runs_the_rotators_pod_and_waits_for_the_configurations(
    default_render: list[Object],
) -> None:
    job = init_job(default_render)
    cron = only(default_render, "CronJob", "ptah-operator-cert-rotator")
    scheduled = cron["spec"]["jobTemplate"]["spec"]["template"]
    installed = job["spec"]["template"]
    (scheduled_container,) = scheduled["spec"]["containers"]
    (installed_container,) = installed["spec"]["containers"]
    # The same Pod but one argument: the install waits for the configurations.
    assert installed_container["args"] == [
        *scheduled_container["args"],
        "--wait-for-configurations=5m",
    ]
    assert {**installed_container, "args": []} == {**scheduled_container, "args": []}
    assert {**installed["spec"], "containers": []} == {**scheduled["spec"], "containers": []}
    # Both may create the Secret, for the Service the manager serves behind.
    assert "--service=ptah-operator-webhook" in scheduled_container["args"]
    assert installed["spec"]["serviceAccountName"] == "ptah-operator-cert-rotator"
    # Not a Helm hook: `helm install --wait` waits for the manager, which is ready only
    # once this Job has published the caBundle.
    assert "helm.sh/hook" not in (job["metadata"].get("annotations") or {})


def test_the_install_jobs_name_follows_its_spec_and_nothing_else(helm: Helm) -> None:
    base = init_job(helm.render([VALUES / "required.yaml"]))["metadata"]["name"]
    same = init_job(helm.render([VALUES / "required.yaml"], {"logLevel": "debug"}))
    assert same["metadata"]["name"] == base
    # A Job's template is immutable: a changed Pod (here its image) is a new Job.
    changed = init_job(
        helm.render([VALUES / "required.yaml"], {"image.digest": "sha256:" + "9" * 64})
    )
    assert changed["metadata"]["name"] != base


def notes(helm: Helm, *settings: str) -> str:
    args = ["install", "ptah-operator", str(CHART), "--dry-run=client", "--namespace", NAMESPACE]
    args += ["--values", str(VALUES / "required.yaml")]
    for setting in settings:
        args += ["--set", setting]
    result = helm.run(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:", 1)[1]


def test_notes_say_who_issues_the_certificate_and_how_to_wait_for_it(helm: Helm) -> None:
    rotator = notes(helm)
    job = re.search(r"job/(ptah-operator-cert-init-[0-9a-f]{10})", rotator)
    assert job is not None, rotator
    assert "issued in the cluster, not by Helm" in rotator
    assert "helm uninstall` leaves it" in rotator
    assert "Helm leaves the CRDs and their objects behind" in rotator

    own = notes(helm, "webhook.certManager.enabled=true")
    assert "issued by cert-manager, not by Helm" in own
    assert "the chart's self-signed CA (Issuer ptah-operator-webhook-ca)" in own
    assert "cert-init" not in own

    theirs = notes(
        helm,
        "webhook.certManager.enabled=true",
        "webhook.certManager.issuerRef.name=platform-ca",
        "webhook.certManager.issuerRef.kind=ClusterIssuer",
    )
    assert "signed by the ClusterIssuer platform-ca" in theirs
    assert "self-signed" not in theirs


def test_an_existing_issuer_signs_and_the_chart_declares_no_ca(helm: Helm, tmp_path: Path) -> None:
    layer = tmp_path / "issuer.yaml"
    layer.write_text(
        yaml.safe_dump(
            {
                "webhook": {
                    "certManager": {
                        "enabled": True,
                        "issuerRef": {"name": "platform-ca", "kind": "ClusterIssuer"},
                    }
                }
            }
        )
    )
    objects = helm.render([VALUES / "required.yaml", layer])
    assert of_kind(objects, "Issuer") == []
    (certificate,) = of_kind(objects, "Certificate")
    assert certificate["spec"]["issuerRef"] == {
        "name": "platform-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    assert certificate["spec"]["secretName"] == "ptah-operator-webhook-tls"
    # The control: without issuerRef the chart declares its own CA and its Issuers.
    own = helm.render([VALUES / "required.yaml"], {"webhook.certManager.enabled": "true"})
    assert len(of_kind(own, "Issuer")) == 2
