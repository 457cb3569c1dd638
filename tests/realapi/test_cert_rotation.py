"""The webhook's certificates rotated in the cluster under continuous reviews (issue 21).

The chart's rotator (``python -m manager.rotator``) runs here as its own identity,
holding exactly the grants the chart renders for it (the rotator's ClusterRole and
Role, their resource names pointed at this test's configurations and Secret). The
webhook is registered with the real API server by url and caBundle and serves from a
directory, as the manager serves from its mounted Secret; the kubelet that projects
the Secret into that directory is the one stand-in here: a thread that copies the
Secret's ``tls.crt`` and ``tls.key`` into the directory when they change, then asks
the server to reload, as ``ReloadingTLS.watch`` does on its timer.

Meanwhile two identities write through the webhooks without pause: the manager a
status write (the validating manager-state webhook) and the admin a PtahSchema
create (the mutating stamp webhook, then the validating decisions webhook), both as
dry runs. A serving rotation and then a CA rotation with the overlap bundle run to
completion, and not one review fails.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import httpx
import pytest

import certs
from jobclaim.apiserver import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PTAHSCHEMAS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    NotFound,
    Object,
)
from lab import run as localrun
from manager import rotator
from tests.support.chartrender import VALUES, Helm, HelmUnavailable, build_helm
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    Webhooked,
    operator,
    registered_webhook,
)
from tests.support.reviews import Traffic

pytestmark = pytest.mark.controlplane

NAMESPACE: Final = localrun.MANAGER_NAMESPACE
# Short lifetimes, each renewal window inside its validity, the leaf's inside the CA's.
POLICY: Final = (
    "--ca-validity=720h",
    "--serving-validity=240h",
    "--ca-renew-before=360h",
    "--serving-renew-before=80h",
    # How long the API server needs to load a published bundle: on loopback it is
    # milliseconds; the margin is the rotation's, not the test's.
    "--settle=3s",
    "--timeout=5m",
)
# Reviews each phase must see, so "none failed" is about traffic that happened.
MIN_REVIEWS: Final = 10


def issue(directory: Path) -> None:
    """A CA (with its key, which rotation needs) and a serving certificate for loopback."""
    now = datetime.now(UTC)
    ca = certs.generate_ca(now=now, validity=timedelta(hours=720))
    leaf = certs.issue_serving_certificate(
        ca,
        dns_names=["localhost"],
        ip_addresses=[ipaddress.ip_address("127.0.0.1")],
        now=now,
        validity=timedelta(hours=240),
    )
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in (
        (certs.CA_CERT, ca.cert_pem()),
        (certs.CA_KEY, ca.key_pem()),
        (certs.TLS_CERT, leaf.cert_pem()),
        (certs.TLS_KEY, leaf.key_pem()),
    ):
        certs.atomic_write(directory / name, data)


@dataclass
class Rig:
    operator: Operator
    staged: Webhooked
    hook: localrun.LocalWebhook
    served: Path
    secret: str
    validating: list[str]
    mutating: list[str]

    def secret_data(self) -> dict[str, bytes]:
        found = self.operator.admin.get(SECRETS, NAMESPACE, self.secret)
        return {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()}

    def bundles(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for kind, names in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, self.validating),
            (MUTATING_WEBHOOK_CONFIGURATIONS, self.mutating),
        ):
            for name in names:
                out[name] = certs.bundle_of(self.operator.admin.get(kind, None, name))
        return out

    def rotate(self, force: str) -> int:
        plane = self.operator.plane
        argv = [
            f"--kubeconfig={plane.kubeconfig('rotator')}",
            f"--namespace={NAMESPACE}",
            f"--secret={self.secret}",
            *(f"--validating={name}" for name in self.validating),
            *(f"--mutating={name}" for name in self.mutating),
            f"--probe=127.0.0.1:{self.hook.port}",
            f"--force={force}",
            *POLICY,
        ]
        return rotator.main(argv, out=lambda line: None)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = build_helm()
    except HelmUnavailable as error:
        pytest.fail(f"the rotation test needs helm to render the rotator's RBAC: {error}")
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


def grant_rotator(rig: Rig, helm: Helm, suffix: str) -> list[tuple[object, str, str | None]]:
    return grant_rotator_on(rig.operator, helm, suffix, rig.secret, rig.validating, rig.mutating)


def grant_rotator_on(
    operator: Operator,  # noqa: F811
    helm: Helm,
    suffix: str,
    secret: str,
    validating: list[str],
    mutating: list[str],
) -> list[tuple[object, str, str | None]]:
    """The chart's rotator roles and bindings, names pointed at this test's objects."""
    objects = helm.render([VALUES / "required.yaml"], extra=["--kube-version", "1.37.2"])
    made: list[tuple[object, str, str | None]] = []
    roles: list[Object] = []
    for obj in objects:
        if obj["metadata"]["name"] != "ptah-operator-cert-rotator" or obj["kind"] not in (
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ):
            continue
        obj["metadata"]["name"] = f"ptah-rotator-{suffix}"
        for rule in obj.get("rules", []):
            if rule["resources"] == ["validatingwebhookconfigurations"]:
                rule["resourceNames"] = validating
            elif rule["resources"] == ["mutatingwebhookconfigurations"]:
                rule["resourceNames"] = mutating
            elif rule["resources"] == ["secrets"] and "resourceNames" in rule:
                rule["resourceNames"] = [secret]
        if "roleRef" in obj:
            obj["roleRef"]["name"] = f"ptah-rotator-{suffix}"
        resource = {
            "ClusterRole": localrun.CLUSTER_ROLES,
            "ClusterRoleBinding": localrun.CLUSTER_ROLE_BINDINGS,
            "Role": localrun.ROLES,
            "RoleBinding": localrun.ROLE_BINDINGS,
        }[obj["kind"]]
        localrun.apply(operator.plane, resource, obj, identity="admin")
        made.append((resource, obj["metadata"]["name"], obj["metadata"].get("namespace")))
        if "rules" in obj:
            roles.append(obj)
    assert len(made) == 4, "the chart's rotator RBAC moved"
    # The rotator acts as soon as the rig is up; RBAC's cache takes a grant a moment
    # after its write (lab.run.until_granted), so wait until both roles are in force.
    for role in roles:
        localrun.until_granted(
            operator.plane, "rotator", role["rules"], role["metadata"].get("namespace")
        )
    return made


@pytest.fixture
def rig(
    operator: Operator,  # noqa: F811
    helm: Helm,
    tmp_path: Path,
) -> Iterator[Rig]:
    served = tmp_path / "served"
    issue(served)
    suffix = uuid.uuid4().hex[:8]
    secret = f"ptah-test-{suffix}-tls"
    operator.admin.create(
        SECRETS,
        NAMESPACE,
        {
            "metadata": {"name": secret},
            "type": "kubernetes.io/tls",
            "data": {
                name: base64.b64encode((served / name).read_bytes()).decode()
                for name in (certs.CA_CERT, certs.CA_KEY, certs.TLS_CERT, certs.TLS_KEY)
            },
        },
    )
    with registered_webhook(operator, served) as (staged, hook):
        validating = [
            c["metadata"]["name"]
            for c in operator.admin.list(VALIDATING_WEBHOOK_CONFIGURATIONS, None)
            if c["metadata"]["name"].startswith(staged.prefix)
        ]
        mutating = [
            c["metadata"]["name"]
            for c in operator.admin.list(MUTATING_WEBHOOK_CONFIGURATIONS, None)
            if c["metadata"]["name"].startswith(staged.prefix)
        ]
        assert validating and mutating
        made = Rig(operator, staged, hook, served, secret, validating, mutating)
        granted = grant_rotator(made, helm, suffix)
        try:
            yield made
        finally:
            for resource, name, namespace in granted:
                operator.admin.delete(resource, namespace, name)  # type: ignore[arg-type]
            operator.admin.delete(SECRETS, NAMESPACE, secret)


def project_secret(rig: Rig, stop: threading.Event) -> None:
    """The kubelet's stand-in: the Secret's pair into the served directory, then a
    reload, whenever the Secret changes (the kubelet syncs on its own period too)."""
    seen: dict[str, bytes] = {}
    while not stop.is_set():
        data = rig.secret_data()
        pair = {k: data[k] for k in (certs.TLS_CERT, certs.TLS_KEY) if k in data}
        if pair != seen and len(pair) == 2:
            # Key first, then certificate: ReloadingTLS installs only a matching
            # pair, so the moment in between keeps the old one serving.
            certs.atomic_write(rig.served / certs.TLS_KEY, pair[certs.TLS_KEY])
            certs.atomic_write(rig.served / certs.TLS_CERT, pair[certs.TLS_CERT])
            rig.hook.reload_certificate()
            seen = pair
        stop.wait(0.2)


def review(rig: Rig, traffic: Traffic) -> None:
    """Write through the webhooks without pause; every answer but the expected one is
    a failed review (a TLS failure is the API server's 500 "failed calling webhook")."""
    plane = rig.operator.plane
    namespace = rig.staged.namespace
    name = f"traffic-{uuid.uuid4().hex[:6]}"
    rig.operator.admin.create(PTAHSCHEMAS, namespace, localrun.example_schema(namespace, name))
    base = f"{plane.server_url}/apis/operator.ptah.run/v1alpha1/namespaces/{namespace}/ptahschemas"
    fresh: Object = localrun.example_schema(namespace, "")
    with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
        while not traffic.stop.is_set():
            status = http.patch(
                f"{base}/{name}/status",
                params={"dryRun": "All"},
                json={"status": {"phase": "Pending"}},
                headers={
                    "Authorization": f"Bearer {plane.token('manager')}",
                    "Content-Type": "application/merge-patch+json",
                },
            )
            fresh["metadata"]["name"] = f"probe-{uuid.uuid4().hex[:8]}"
            created = http.post(
                base,
                params={"dryRun": "All"},
                json={"apiVersion": "operator.ptah.run/v1alpha1", "kind": "PtahSchema", **fresh},
                headers={"Authorization": f"Bearer {plane.token('admin')}"},
            )
            traffic.count("manager status write", status, 200)
            traffic.count("admin schema create", created, 201)


def test_serving_and_ca_rotation_under_continuous_reviews_fail_no_review(rig: Rig) -> None:
    traffic = Traffic()
    kubelet_stop = threading.Event()
    threads = [
        threading.Thread(target=project_secret, args=(rig, kubelet_stop), daemon=True),
        threading.Thread(target=review, args=(rig, traffic), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        before = rig.secret_data()
        # Traffic flows before anything rotates (the control: the webhooks answer).
        localrun.until(lambda: traffic.counts.get("before", 0) >= MIN_REVIEWS, "reviews")

        traffic.phase = "serving"
        assert rig.rotate("serving") == 0
        serving = rig.secret_data()
        assert serving[certs.TLS_CERT] != before[certs.TLS_CERT]
        assert serving[certs.CA_CERT] == before[certs.CA_CERT]
        assert set(rig.bundles().values()) == {before[certs.CA_CERT]}

        traffic.phase = "ca"
        assert rig.rotate("ca") == 0
        rotated = rig.secret_data()
        assert rotated[certs.CA_CERT] != before[certs.CA_CERT]
        # The overlap is over: every configuration, the mutating one too, trusts the
        # new CA alone, and the server presents the Secret's certificate.
        assert set(rig.bundles().values()) == {rotated[certs.CA_CERT]}
        served = certs.fetch_served_certificate("127.0.0.1", rig.hook.port)
        assert certs.fingerprint(served) == certs.fingerprint(
            certs.load_certificate(rotated[certs.TLS_CERT])
        )
        traffic.phase = "after"
        localrun.until(lambda: traffic.counts.get("after", 0) >= MIN_REVIEWS, "reviews")
    finally:
        traffic.stop.set()
        kubelet_stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert traffic.failures == []
    for phase in ("before", "serving", "ca", "after"):
        assert traffic.counts.get(phase, 0) >= MIN_REVIEWS, traffic.counts
    print(f"reviews by phase: {traffic.counts}; failed: {len(traffic.failures)}")


def blank_configuration(name: str, mutating: bool) -> Object:
    """A configuration as the chart renders it: no caBundle. Its rule matches a
    resource nothing here writes, so the webhook behind it is never called."""
    hook: Object = {
        "name": f"w.{name}.operator.ptah.run",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": "nobody", "namespace": NAMESPACE, "port": 443}},
        "rules": [
            {
                "apiGroups": ["never.ptah.run"],
                "apiVersions": ["v1"],
                "resources": ["nothings"],
                "operations": ["CREATE"],
            }
        ],
    }
    if mutating:
        hook["reinvocationPolicy"] = "Never"
    return {"metadata": {"name": name}, "webhooks": [hook]}


def test_the_rotator_creates_the_secret_and_publishes_what_the_chart_no_longer_renders(
    operator: Operator,  # noqa: F811
    helm: Helm,
) -> None:
    """The install Job's run, as the chart grants it: no Secret and no configuration
    yet; the run waits for the configurations the install is creating, publishes the
    new CA in every caBundle, and only then creates the Secret the manager mounts."""
    suffix = uuid.uuid4().hex[:8]
    secret = f"ptah-test-{suffix}-tls"
    validating, mutating = [f"ptah-test-{suffix}-v"], [f"ptah-test-{suffix}-m"]
    granted = grant_rotator_on(operator, helm, suffix, secret, validating, mutating)
    said: list[str] = []

    def out(line: str) -> None:
        said.append(line)
        if line.startswith("waiting for the webhook configuration(s)"):
            # The install creates them while the run waits.
            operator.admin.create(
                VALIDATING_WEBHOOK_CONFIGURATIONS, None, blank_configuration(validating[0], False)
            )
            operator.admin.create(
                MUTATING_WEBHOOK_CONFIGURATIONS, None, blank_configuration(mutating[0], True)
            )

    try:
        code = rotator.main(
            [
                f"--kubeconfig={operator.plane.kubeconfig('rotator')}",
                f"--namespace={NAMESPACE}",
                f"--secret={secret}",
                "--service=ptah-operator-webhook",
                "--wait-for-configurations=1m",
                f"--validating={validating[0]}",
                f"--mutating={mutating[0]}",
                *POLICY,
            ],
            out=out,
        )
        assert code == 0, said
        # Waited for the configurations, published to both, and only then the Secret.
        assert said[0].startswith("waiting for the webhook configuration(s)"), said
        assert sorted(said[1:3]) == sorted(
            f"{name}: caBundle published for the new CA, before its Secret exists"
            for name in (*validating, *mutating)
        ), said
        created = f"Secret {NAMESPACE}/{secret}: created with the new CA and serving certificate"
        assert said[3] == f"{created} for ptah-operator-webhook", said
        data = operator.admin.get(SECRETS, NAMESPACE, secret)["data"]
        ca = certs.load_certificate(base64.b64decode(data[certs.CA_CERT]))
        for kind, name in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, validating[0]),
            (MUTATING_WEBHOOK_CONFIGURATIONS, mutating[0]),
        ):
            bundle = certs.bundle_of(operator.admin.get(kind, None, name))
            assert certs.bundle_fingerprints(bundle) == {certs.fingerprint(ca)}, name
    finally:
        for kind, name in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, validating[0]),
            (MUTATING_WEBHOOK_CONFIGURATIONS, mutating[0]),
            (SECRETS, secret),
        ):
            with contextlib.suppress(NotFound):
                operator.admin.delete(kind, NAMESPACE if kind is SECRETS else None, name)
        for resource, name, namespace in granted:
            operator.admin.delete(resource, namespace, name)  # type: ignore[arg-type]
