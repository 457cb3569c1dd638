"""Fault scenario 7 on the real cluster: the webhook's certificates rotated under reviews.

On the lab cluster with the chart installed (``lab_run``), the chart's certificate
rotator runs the way the cluster runs it: a Job made from the CronJob's jobTemplate
(what ``kubectl create job --from=cronjob/ptah-operator-cert-rotator`` makes), in the
manager's image, under the rotator's own ServiceAccount, against the installed
Secret and webhook configurations. The lab runs no CronJob controller and nothing is
due for a year, so each Job adds three arguments to the chart's: ``--force`` (what to
rotate), a shorter ``--settle`` (the chart's 2m covers the kubelet's Secret sync with
no probe; the scenario's budget is three minutes) and ``--probe`` at the manager Pod,
so the old CA is dropped only once the manager is seen serving the new certificate
(with the chart's one replica the probe is exact; the rotator's docstring says why a
Service probe would not be).

Meanwhile reviews flow round after round through the real path, the API server calling
the webhook in the manager Pod over TLS, dry runs that store nothing:

- the manager's status write of this scenario's own (suspended) PtahSchema: the
  validating ``manager-state`` configuration, admitted (200);
- the manager's Job create: the validating ``controller-write`` configuration, which
  answers with its refusal (403, the webhook's own sentence);
- a person's PtahSchema create: the mutating ``stamp`` then the validating
  ``decisions`` configuration, admitted (201).

Every answer is counted; any other answer (a failed call to the webhook is the API
server's HTTP 500 "failed calling webhook") is a failed review, and there must be
none: before, during a serving rotation, during a CA rotation with the overlap
bundle, and after. The Secret and all four caBundles are read back to show each
rotation happened, and the served certificate is fetched from the Pod. The installed
RBAC is asked (SubjectAccessReview) whether the manager holds any verb on the
webhook configurations or the admission policies: it must not (the rendered chart is
held to the same by ``tests/chart/test_chart_render.py``). The figures (reviews sent
and failed, each Job's duration, time until the new certificate was served) are
printed, not asserted. The environment is left with the new CA trusted everywhere
and served, which is what the later scenarios need.
"""

from __future__ import annotations

import base64
import copy
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import httpx
import pytest

import certs
from jobclaim.apiserver import (
    JOBS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NAMESPACES,
    PODS,
    PTAHSCHEMAS,
    SECRETS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Object,
    Resource,
)
from lab import install
from lab import run as nodeless
from lab.cluster import LocalCluster
from lab.clusterrun import MANAGER_NAMESPACE, LabRun
from tests.cluster.clusterkit import Api, poll, probe_job, schema_gone
from tests.cluster.managers import chart_upgraded
from tests.support.reviews import Traffic

pytestmark = pytest.mark.cluster

CRONJOB: Final = "ptah-operator-cert-rotator"
CRONJOBS: Final = Resource("batch", "v1", "cronjobs", "CronJob", has_status=True)
MANAGER_USER: Final = f"system:serviceaccount:{MANAGER_NAMESPACE}:ptah-operator"
ROTATOR_USER: Final = f"system:serviceaccount:{MANAGER_NAMESPACE}:ptah-operator-cert-rotator"
ADMISSION: Final = "admissionregistration.k8s.io"
VERBS: Final = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# The API server loads a changed webhook configuration from its informer within
# moments; the rest of the chart's settle is the kubelet's sync, which the probe covers.
SETTLE: Final = "10s"
PACE: Final = 0.1
# Each phase must see this many reviews, so "none failed" is about traffic that happened.
MIN_REVIEWS: Final = 10
# A Job's Pod scheduled and started, plus the kubelet's Secret sync (a minute by
# default) that the CA rotation waits for, on a shared 2-core machine.
ROTATION_DEADLINE: Final = 300.0


@dataclass(frozen=True)
class Rotation:
    """The chart's rotator as installed: its CronJob, Secret and configurations."""

    cronjob: Object
    secret: str
    validating: tuple[str, ...]
    mutating: tuple[str, ...]

    @classmethod
    def installed(cls, run: LabRun) -> Rotation:
        cronjob = run.admin.get(CRONJOBS, MANAGER_NAMESPACE, CRONJOB)
        args = _container(cronjob["spec"]["jobTemplate"])["args"]

        def values(flag: str) -> tuple[str, ...]:
            return tuple(a.split("=", 1)[1] for a in args if a.startswith(f"--{flag}="))

        (secret,) = values("secret")
        return cls(cronjob, secret, values("validating"), values("mutating"))

    def secret_data(self, run: LabRun) -> dict[str, bytes]:
        found = run.admin.get(SECRETS, MANAGER_NAMESPACE, self.secret)
        return {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()}

    def bundles(self, run: LabRun) -> dict[str, frozenset[str]]:
        """The fingerprints each managed configuration's caBundle trusts."""
        out = {}
        for resource, names in (
            (VALIDATING_WEBHOOK_CONFIGURATIONS, self.validating),
            (MUTATING_WEBHOOK_CONFIGURATIONS, self.mutating),
        ):
            for name in names:
                bundle = certs.bundle_of(run.admin.get(resource, None, name))
                out[name] = certs.bundle_fingerprints(bundle)
        return out


def _container(template: Object) -> dict[str, Any]:
    containers: list[dict[str, Any]] = template["spec"]["template"]["spec"]["containers"]
    (rotator,) = [c for c in containers if c["name"] == "rotator"]
    return rotator


def _job_from_cronjob(cronjob: Object, name: str, extra: list[str]) -> Object:
    """What ``kubectl create job --from=cronjob/...`` makes, with ``extra`` arguments."""
    template = copy.deepcopy(cronjob["spec"]["jobTemplate"])
    meta = template.get("metadata") or {}
    _container(template)["args"] = [*_container(template)["args"], *extra]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": meta.get("labels") or {},
            "annotations": {
                **(meta.get("annotations") or {}),
                "cronjob.kubernetes.io/instantiate": "manual",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": cronjob["metadata"]["name"],
                    "uid": cronjob["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }


def _manager_endpoints(run: LabRun) -> list[tuple[str, int]]:
    """Each running manager Pod's address and webhook port."""
    deployment = run.admin.get(install.DEPLOYMENTS, MANAGER_NAMESPACE, install.RELEASE)
    selector = deployment["spec"]["selector"]["matchLabels"]
    found = []
    for pod in run.admin.list(PODS, MANAGER_NAMESPACE, label_selector=selector):
        ip = (pod.get("status") or {}).get("podIP")
        if pod["metadata"].get("deletionTimestamp") or not ip:
            continue
        ports = [
            p["containerPort"]
            for c in pod["spec"]["containers"]
            for p in c.get("ports") or []
            if p.get("name") == "webhook"
        ]
        found.append((str(ip), int(ports[0])))
    return found


def _served(run: LabRun) -> set[str]:
    """The fingerprints the manager Pods present (unverified: which one is in service)."""
    return {
        certs.fingerprint(certs.fetch_served_certificate(ip, port))
        for ip, port in _manager_endpoints(run)
    }


def _leaf(data: dict[str, bytes]) -> str:
    return certs.fingerprint(certs.load_certificate(data[certs.TLS_CERT]))


def _ca(data: dict[str, bytes]) -> str:
    return certs.fingerprint(certs.load_certificate(data[certs.CA_CERT]))


def _allowed(api: Api, user: str, verb: str, resource: str, name: str = "") -> bool:
    """What the installed RBAC answers for a ServiceAccount (every binding counted)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{MANAGER_NAMESPACE}",
                "system:authenticated",
            ],
            "resourceAttributes": {
                "group": ADMISSION,
                "resource": resource,
                "verb": verb,
                "name": name,
            },
        },
    }
    answer = api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


def _review(cluster: LocalCluster, namespace: str, schema: str, traffic: Traffic) -> None:
    """Write through the four webhook configurations without pause (dry runs)."""
    client = Api.from_kubeconfig(cluster.kubeconfig("admin"))
    base = f"/apis/operator.ptah.run/v1alpha1/namespaces/{namespace}/ptahschemas"
    as_manager = {"Impersonate-User": MANAGER_USER}
    job = probe_job("rotation-probe")
    fresh: Object = nodeless.example_schema(namespace, "")
    fresh["spec"]["suspend"] = True
    dry = {"dryRun": "All"}
    # (what, the answer's code, a part of the answer, the call)
    calls: list[tuple[str, int, str, Any]] = [
        (
            "manager status write",
            200,
            schema,
            lambda: client.http.patch(
                f"{base}/{schema}/status",
                params=dry,
                json={"status": {"phase": "Pending"}},
                headers={**as_manager, "Content-Type": "application/merge-patch+json"},
            ),
        ),
        (
            "manager job create",
            403,
            # A 403 naming the webhook is its refusal: RBAC's does not name it, and a
            # failed call is a 500.
            "controller-write.operator.ptah.run",
            lambda: client.http.post(
                f"/apis/batch/v1/namespaces/{namespace}/jobs",
                params=dry,
                json=job,
                headers=as_manager,
            ),
        ),
        (
            "person schema create",
            201,
            "probe-",
            lambda: client.http.post(
                base,
                params=dry,
                json={
                    "apiVersion": "operator.ptah.run/v1alpha1",
                    "kind": "PtahSchema",
                    **fresh,
                    "metadata": {"name": f"probe-{uuid.uuid4().hex[:8]}"},
                },
            ),
        ),
    ]
    try:
        while not traffic.stop.is_set():
            for what, expected, saying, call in calls:
                try:
                    answer: httpx.Response | Exception = call()
                except httpx.HTTPError as error:
                    answer = error
                traffic.count(what, answer, expected, saying)
            # A pause between rounds, not a synchronization: a shared 2-core machine
            # carries the manager, the kubelet and this loop, and every window of the
            # rotation (seconds each) still sees tens of reviews.
            traffic.stop.wait(PACE)
    finally:
        client.http.close()


@pytest.fixture
def own_schema(lab_run: LabRun, namespace: str) -> Iterator[str]:
    """A suspended PtahSchema of the scenario's own: the manager claims no work for it."""
    schema = nodeless.example_schema(namespace, "rotation")
    schema["spec"]["suspend"] = True
    lab_run.admin.create(PTAHSCHEMAS, namespace, schema)
    try:
        yield "rotation"
    finally:
        lab_run.admin.delete(PTAHSCHEMAS, namespace, "rotation")
        # The manager removes its finalizer on its own time.
        poll(
            "the scenario's PtahSchema deleted", lambda: schema_gone(lab_run, namespace, "rotation")
        )
        lab_run.admin.delete(NAMESPACES, None, namespace)


@pytest.fixture
def rotation_jobs(lab_run: LabRun) -> Iterator[list[str]]:
    """The rotation Jobs the scenario made; deleted (with their Pods) at the end.

    A rotation stopped half-way (the scenario failed) is finished by one more run of
    the rotator, as the next scheduled run would: the shared environment is left
    with one CA in every bundle and its certificate served.
    """
    made: list[str] = []
    yield made
    try:
        rotation = Rotation.installed(lab_run)
        if certs.STATE_FILE in rotation.secret_data(lab_run):
            print("# a rotation was left in progress: one more run of the rotator finishes it")
            _run_job(lab_run, rotation, made, "finish", [f"--settle={SETTLE}", _probe(lab_run)])
    finally:
        for name in made:
            lab_run.admin.delete(JOBS, MANAGER_NAMESPACE, name)


def _probe(run: LabRun) -> str:
    endpoints = _manager_endpoints(run)
    # With one replica the probe at its Pod is exact; with more it would see one.
    assert len(endpoints) == 1, endpoints
    ip, port = endpoints[0]
    return f"--probe={ip}:{port}"


def _finished(run: LabRun, name: str) -> str | None:
    job = run.admin.get(JOBS, MANAGER_NAMESPACE, name)
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def _job_log(run: LabRun, api: Api, name: str) -> str:
    pods = run.admin.list(
        PODS, MANAGER_NAMESPACE, label_selector={"batch.kubernetes.io/job-name": name}
    )
    return "\n".join(
        api.text(f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{pod['metadata']['name']}/log")
        for pod in pods
    )


def _run_job(
    run: LabRun, rotation: Rotation, made: list[str], what: str, extra: list[str]
) -> float:
    """Run the chart's rotator once as a Job of its CronJob; how long it took."""
    name = f"rotation-{what}-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    run.admin.create(JOBS, MANAGER_NAMESPACE, _job_from_cronjob(rotation.cronjob, name, extra))
    made.append(name)
    outcome = poll(
        f"the rotation Job {name} finished",
        lambda: _finished(run, name),
        timeout=ROTATION_DEADLINE,
    )
    took = time.monotonic() - began
    api = Api.from_kubeconfig(run.lab.kubeconfig("admin"))
    try:
        log = _job_log(run, api, name)
    finally:
        api.http.close()
    print(f"# the rotator's Job {name}: {outcome} after {took:.1f}s; its log:")
    print("\n".join(f"#   {line}" for line in log.splitlines()))
    assert outcome == "Complete", f"the rotation Job {name} failed"
    return took


def _served_now(run: LabRun, wanted: str) -> bool | None:
    """Whether every manager Pod presents ``wanted``; None while one does not (yet)."""
    try:
        return True if _served(run) == {wanted} else None
    except certs.CertificateError:
        return None


def test_certificates_rotate_under_continuous_reviews_with_no_failed_review(
    lab_run: LabRun,
    api: Api,
    cluster: LocalCluster,
    namespace: str,
    own_schema: str,
    rotation_jobs: list[str],
) -> None:
    rotation = Rotation.installed(lab_run)
    traffic = Traffic()
    reviewer = threading.Thread(
        target=_review, args=(cluster, namespace, own_schema, traffic), daemon=True
    )
    try:
        _rbac(lab_run, api, rotation)
        reviewer.start()
        _scenario(lab_run, rotation, rotation_jobs, traffic)
    except BaseException:
        _explain(lab_run, api, rotation, rotation_jobs, traffic)
        raise
    finally:
        traffic.stop.set()
        if reviewer.is_alive():
            reviewer.join(timeout=60)
    sent = sum(traffic.counts.values())
    print(f"# reviews sent {sent} by phase {traffic.counts}; failed {len(traffic.failures)}")
    assert traffic.failures == []
    for phase in ("before", "serving", "ca", "after"):
        assert traffic.counts.get(phase, 0) >= MIN_REVIEWS, traffic.counts


def _rbac(run: LabRun, api: Api, rotation: Rotation) -> None:
    """The installed RBAC: the manager holds no verb on what constrains it; the rotator
    patches the chart's configurations by name, and those are every configuration that
    calls the manager's webhook Service."""
    calling = {
        config["metadata"]["name"]
        for resource in (VALIDATING_WEBHOOK_CONFIGURATIONS, MUTATING_WEBHOOK_CONFIGURATIONS)
        for config in run.admin.list(resource, None)
        if any(
            (w.get("clientConfig") or {}).get("service", {}).get("namespace") == MANAGER_NAMESPACE
            for w in config.get("webhooks") or []
        )
    }
    assert calling == {*rotation.validating, *rotation.mutating}
    asked = [
        ("validatingwebhookconfigurations", ("", *rotation.validating)),
        ("mutatingwebhookconfigurations", ("", *rotation.mutating)),
        ("validatingadmissionpolicies", ("",)),
        ("validatingadmissionpolicybindings", ("",)),
    ]
    held = [
        (verb, resource, name)
        for resource, names in asked
        for name in names
        for verb in VERBS
        if _allowed(api, MANAGER_USER, verb, resource, name)
    ]
    questions = sum(len(names) for _, names in asked) * len(VERBS)
    print(f"# the manager's installed RBAC on {ADMISSION}: {questions} questions, allowed {held}")
    assert held == []
    # The control: the same questions can be answered yes, for the rotator only.
    for resource, names in asked[:2]:
        for name in names[1:]:
            assert _allowed(api, ROTATOR_USER, "patch", resource, name), (resource, name)
            assert not _allowed(api, ROTATOR_USER, "delete", resource, name), (resource, name)
        assert not _allowed(api, ROTATOR_USER, "patch", resource), resource


def _scenario(run: LabRun, rotation: Rotation, made: list[str], traffic: Traffic) -> None:
    before = rotation.secret_data(run)
    assert _served(run) == {_leaf(before)}, "the manager serves the Secret's certificate"
    assert set(rotation.bundles(run).values()) == {frozenset({_ca(before)})}
    poll(
        "reviews before the rotation",
        lambda: traffic.counts.get("before", 0) >= MIN_REVIEWS or None,
    )
    assert traffic.failures == [], "the reviews fail before anything rotates"

    traffic.phase = "serving"
    took = _run_job(run, rotation, made, "serving", ["--force=serving", f"--settle={SETTLE}"])
    written = time.monotonic()
    serving = rotation.secret_data(run)
    assert _leaf(serving) != _leaf(before)
    assert _ca(serving) == _ca(before)
    assert set(rotation.bundles(run).values()) == {frozenset({_ca(before)})}
    # The kubelet projects a changed Secret on its own sync (a minute by default),
    # and the manager reloads the files within seconds of that.
    poll("the manager serving the new certificate", lambda: _served_now(run, _leaf(serving)))
    switch = time.monotonic() - written
    print(
        f"# serving rotation: Job {took:.1f}s, "
        f"Secret written -> new certificate served {switch:.1f}s"
    )

    traffic.phase = "ca"
    took = _run_job(run, rotation, made, "ca", ["--force=ca", f"--settle={SETTLE}", _probe(run)])
    rotated = rotation.secret_data(run)
    assert _ca(rotated) != _ca(before)
    assert _leaf(rotated) not in (_leaf(before), _leaf(serving))
    assert certs.is_issued_by(
        certs.load_certificate(rotated[certs.TLS_CERT]),
        certs.load_certificate(rotated[certs.CA_CERT]),
    )
    assert certs.STATE_FILE not in rotated, "the CA rotation is not finished"
    # The overlap is over: every configuration, the mutating one too, trusts the new
    # CA alone, and the manager serves the certificate it signed.
    assert rotation.bundles(run) == {
        name: frozenset({_ca(rotated)}) for name in (*rotation.validating, *rotation.mutating)
    }
    assert _served(run) == {_leaf(rotated)}
    print(
        f"# CA rotation with the overlap bundle: Job {took:.1f}s "
        "(publish, settle, swap, served, drop)"
    )

    traffic.phase = "after"
    poll(
        "reviews after the rotation", lambda: traffic.counts.get("after", 0) >= MIN_REVIEWS or None
    )


def _explain(run: LabRun, api: Api, rotation: Rotation, made: list[str], traffic: Traffic) -> None:
    """What the cluster holds about the rotation, printed when the scenario fails."""
    print(f"# reviews by phase {traffic.counts}; failed {len(traffic.failures)}, the first:")
    for failure in traffic.failures[:10]:
        print(f"#   {failure}")
    data = rotation.secret_data(run)
    print(f"# the Secret's keys: {sorted(data)}; ca {_ca(data)[:16]}, tls {_leaf(data)[:16]}")
    for name, trusted in rotation.bundles(run).items():
        print(f"# the caBundle of {name}: {sorted(f[:16] for f in trusted)}")
    try:
        print(f"# served: {sorted(f[:16] for f in _served(run))}")
    except certs.CertificateError as error:
        print(f"# served: {error}")
    for name in made:
        print(f"# the log of the Job {name}:\n{_job_log(run, api, name)}")
    for ip, _port in _manager_endpoints(run):
        for pod in run.admin.list(PODS, MANAGER_NAMESPACE):
            if (pod.get("status") or {}).get("podIP") == ip:
                pod_name = pod["metadata"]["name"]
                log = api.text(
                    f"/api/v1/namespaces/{MANAGER_NAMESPACE}/pods/{pod_name}/log", tailLines="60"
                )
                print(f"# the log of {pod_name}, last 60 lines:\n{log}")


def test_a_chart_upgrade_during_a_rotation_keeps_every_published_bundle(lab_run: LabRun) -> None:
    """A ``helm upgrade`` while a CA rotation's overlap bundle stands (old CA and new)
    keeps the bundle the rotator published in every configuration, the mutating one
    too. Rendering the Secret's one CA over it (as the chart did for the mutating
    configuration) made helm's server-side apply refuse the whole upgrade, the field
    being the rotator's ("UPGRADE FAILED: conflict ... .clientConfig.caBundle", seen on
    the lab cluster); forced, it would drop the CA the next serving certificate is
    issued by."""
    run = lab_run
    rotation = Rotation.installed(run)
    configurations = [
        *((VALIDATING_WEBHOOK_CONFIGURATIONS, name) for name in rotation.validating),
        *((MUTATING_WEBHOOK_CONFIGURATIONS, name) for name in rotation.mutating),
    ]
    saved = {name: run.admin.get(resource, None, name) for resource, name in configurations}
    incoming = certs.generate_ca(now=datetime.now(UTC)).cert_pem()
    overlap = rotation.secret_data(run)["ca.crt"] + incoming
    try:
        for resource, name in configurations:
            published = copy.deepcopy(run.admin.get(resource, None, name))
            for webhook in published["webhooks"]:
                webhook["clientConfig"]["caBundle"] = base64.b64encode(overlap).decode()
            run.admin.replace(resource, None, published)
        chart_upgraded(run, {})
        kept = rotation.bundles(run)
        print(f"# after the upgrade: {kept}")
        assert kept == {name: certs.bundle_fingerprints(overlap) for _, name in configurations}
    finally:
        for resource, name in configurations:
            current = run.admin.get(resource, None, name)
            current["webhooks"] = saved[name]["webhooks"]
            run.admin.replace(resource, None, current)
