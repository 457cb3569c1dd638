"""The real chart on the lab cluster: ``helm install`` with the images' digests.

The chart is installed the way a platform team installs it: packaged (``helm
package``, what ``make chart`` does), pushed as an OCI artifact to the lab's registry
(``helm push``), and installed from ``oci://`` with only the images given by
``--set``. ``helm install`` renders the packaged chart against the lab API server (which
reports its real version, so the chart's ``kubeVersion`` check is the real one),
creates its CRDs, RBAC, Services, webhook configurations, the rotator's install Job
and the manager Deployment, and returns. The chart renders no certificate: the Job
(``python -m manager.rotator --service ... --wait-for-configurations``) publishes
every caBundle, then creates the webhook's Secret; until then the manager Pod waits
for the Secret to mount and every webhook fails closed. The manager is ready when its
Deployment says so: the kubelet has pulled its image from the lab registry, started it
under the chart's security context, and its readiness probe (``/readyz`` over the
webhook's TLS, which also checks the webhook configurations trust the served
certificate) passes, and then once a dry-run request reaches the webhook through its
Service (the EndpointSlice follows Ready on its own time). The wait reports the Job
beside the Pods, and a failed Job ends it.
The API server reaches the webhook Service at the Pod's address on the bridge
(``--enable-aggregator-routing`` on the lab API server resolves a Service to its
endpoints rather than its cluster IP, which only exists in kube-proxy's rules).
"""

from __future__ import annotations

import re
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx
import yaml

from jobclaim.apiserver import JOBS, PODS, NotFound, Object, Resource
from kube.client import KubeApi

__all__ = [
    "CHART",
    "DEPLOYMENTS",
    "ChartInstall",
    "ChartSource",
    "InstallError",
    "deployment_line",
    "deployment_ready",
    "helm_install",
    "package_chart",
    "push_chart",
    "run_helm",
    "wait_ready",
    "webhook_served",
]

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
CHART: Final = REPO_ROOT / "charts" / "ptah-operator"
HELM: Final = REPO_ROOT / ".tools" / "bin" / "helm"
RELEASE: Final = "ptah-operator"
MANAGER_PODS: Final = {"app.kubernetes.io/name": RELEASE, "app.kubernetes.io/component": "manager"}
ROTATOR_JOBS: Final = {
    "app.kubernetes.io/name": RELEASE,
    "app.kubernetes.io/component": "cert-rotator",
}
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", "Deployment")


class InstallError(Exception):
    """The chart did not install, or its manager did not become ready."""


@dataclass(frozen=True)
class ChartSource:
    """Where ``helm install`` takes the chart from: an ``oci://`` reference at a
    version (a registry served over plain HTTP, as the lab's is), or a directory."""

    reference: str
    version: str | None = None
    plain_http: bool = False

    def arguments(self) -> list[str]:
        argv = [self.reference]
        if self.version is not None:
            argv += ["--version", self.version]
        if self.plain_http:
            argv.append("--plain-http")
        return argv

    def __str__(self) -> str:
        return self.reference + (f" --version {self.version}" if self.version else "")


def run_helm(argv: list[str], what: str, *, helm: Path = HELM, timeout: float = 120.0) -> str:
    done = subprocess.run(
        [str(helm), *argv], capture_output=True, text=True, check=False, timeout=timeout
    )
    if done.returncode != 0:
        raise InstallError(f"{what} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout + done.stderr


def package_chart(
    destination: Path, *, helm: Path = HELM, chart: Path = CHART, version: str | None = None
) -> Path:
    """``helm package`` the chart into ``destination`` (as ``version``, else Chart.yaml's);
    the archive's path."""
    destination.mkdir(parents=True, exist_ok=True)
    argv = ["package", str(chart), "--destination", str(destination)]
    if version is not None:
        argv += ["--version", version]
    said = run_helm(argv, "helm package", helm=helm)
    found = re.search(r"saved it to: (\S+\.tgz)", said)
    if found is None:
        raise InstallError(f"helm package said nothing of an archive: {said.strip()}")
    return Path(found.group(1))


def push_chart(package: Path, registry: str, *, helm: Path = HELM) -> ChartSource:
    """``helm push`` the archive to ``registry`` (plain HTTP) under ``charts/``; where
    it can be installed from. The version is the one helm reports it pushed."""
    said = run_helm(
        ["push", str(package), f"oci://{registry}/charts", "--plain-http"], "helm push", helm=helm
    )
    pushed = re.search(r"Pushed: \S+/charts/([a-z0-9-]+):(\S+)", said)
    if pushed is None:
        raise InstallError(f"helm push said nothing of what it pushed: {said.strip()}")
    return ChartSource(
        f"oci://{registry}/charts/{pushed.group(1)}", version=pushed.group(2), plain_http=True
    )


@dataclass(frozen=True)
class ChartInstall:
    """The values ``make run`` gives the chart: everything pinned by digest."""

    namespace: str
    manager_repository: str
    manager_digest: str
    executor_image: str
    runner_image: str
    ptah_version: str
    # One manager: a single node gains nothing from the second replica's spread, and
    # the machine is shared. Leader election stays on, as the chart requires it.
    replicas: int = 1
    # execution.scratchImages: (engine key, image pinned by digest), what a schema whose
    # spec.dev is provided runs beside ptah.
    scratch_images: tuple[tuple[str, str], ...] = ()
    # debug: the manager logs each watch event, pass start and API request too, which
    # the approval benchmark's trace reads (benchmarks/approvaltrace.py).
    log_level: str = "info"

    def values(self) -> list[str]:
        return [
            f"logLevel={self.log_level}",
            f"image.repository={self.manager_repository}",
            f"image.digest={self.manager_digest}",
            f"execution.executorImage={self.executor_image}",
            f"execution.runnerImage={self.runner_image}",
            f"execution.ptahVersion={self.ptah_version}",
            *(f"execution.scratchImages.{key}={image}" for key, image in self.scratch_images),
            f"replicaCount={self.replicas}",
            # The chart refuses a budget that would forbid evicting the one replica.
            f"podDisruptionBudget.enabled={str(self.replicas > 1).lower()}",
        ]


def helm_install(
    install: ChartInstall,
    kubeconfig: Path,
    *,
    source: ChartSource | None = None,
    helm: Path = HELM,
    timeout: float = 300.0,
) -> str:
    """``helm install`` the chart (from ``source``, else the checkout's directory);
    returns helm's own report."""
    argv = [
        str(helm),
        "install",
        RELEASE,
        *(source or ChartSource(str(CHART))).arguments(),
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        install.namespace,
        "--create-namespace",
    ]
    for value in install.values():
        # --set-string: a digest or version must never be read as a number.
        argv += ["--set-string" if "Version" in value else "--set", value]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if done.returncode != 0:
        raise InstallError(f"helm install failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def deployment_ready(deployment: Object) -> bool:
    """Every wanted replica of the current generation is updated and ready."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = int(spec.get("replicas", 1))
    return bool(
        status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
        and status.get("updatedReplicas", 0) == wanted
        and status.get("readyReplicas", 0) == wanted
        and status.get("replicas", 0) == wanted
    )


def job_condition(job: Object, kind: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def job_part(job: Object) -> str:
    status = job.get("status") or {}
    state = (
        "complete"
        if job_condition(job, "Complete")
        else "failed"
        if job_condition(job, "Failed")
        else "running"
    )
    return (
        f"job {job['metadata']['name']} {state} "
        f"(active={status.get('active', 0)} failed={status.get('failed', 0)})"
    )


def deployment_line(deployment: Object, pods: list[Object], jobs: Sequence[Object] = ()) -> str:
    """The Deployment's replicas, each Pod's phase and container state and each rotator
    Job's, on one line."""
    status = deployment.get("status") or {}
    parts = [
        f"Deployment {deployment['metadata']['name']}: "
        f"ready={status.get('readyReplicas', 0)}/{(deployment.get('spec') or {}).get('replicas')}"
    ]
    for pod in pods:
        pod_status = pod.get("status") or {}
        states = []
        for container in pod_status.get("containerStatuses") or []:
            state = container.get("state") or {}
            which = next(iter(state), "unknown")
            reason = (state.get(which) or {}).get("reason")
            states.append(f"{which}{f'({reason})' if reason else ''} ready={container['ready']}")
        parts.append(
            f"pod {pod['metadata']['name']} {pod_status.get('phase', '-')} {' '.join(states)}"
        )
    parts += [job_part(job) for job in jobs]
    return "; ".join(parts)


def wait_ready(
    admin: KubeApi,
    namespace: str,
    *,
    kubeconfig: Path,
    report: Callable[[str], None],
    timeout: float,
    check: Callable[[], None] = lambda: None,
) -> Object:
    """Wait for the manager Deployment to be ready, reporting each change of its state,
    then for its webhook to answer through its Service.

    Ready is the Pod's; the API server calls the webhook through the Service's
    EndpointSlice, which the endpoint controller and the API server's own informer
    update on their own time: a write right after Ready (a person's approval after an
    install or an upgrade) can still find "no endpoints available for service" and be
    refused, as it was in CI. So ready means a request reached the webhook.
    """
    end = time.monotonic() + timeout
    deployment = _deployment_ready(admin, namespace, report=report, end=end, check=check)
    while not webhook_served(kubeconfig, namespace):
        if time.monotonic() > end:
            raise InstallError(
                f"the manager was ready but its webhook did not answer through the Service "
                f"within {timeout:.0f}s"
            )
        # The endpoint controller and the API server's informer act on their own time.
        time.sleep(0.5)
    return deployment


def _deployment_ready(
    admin: KubeApi,
    namespace: str,
    *,
    report: Callable[[str], None],
    end: float,
    check: Callable[[], None],
) -> Object:
    timeout = end - time.monotonic()
    last = ""
    while True:
        check()
        try:
            deployment = admin.get(DEPLOYMENTS, namespace, RELEASE)
        except NotFound:
            deployment = {"metadata": {"name": RELEASE}}
        pods = admin.list(PODS, namespace, label_selector=MANAGER_PODS)
        jobs = admin.list(JOBS, namespace, label_selector=ROTATOR_JOBS)
        line = deployment_line(deployment, pods, jobs)
        if line != last:
            report(f"# {line}")
            last = line
        failed = [job["metadata"]["name"] for job in jobs if job_condition(job, "Failed")]
        if failed:
            raise InstallError(
                f"the certificate rotator's Job {', '.join(failed)} failed, so no caBundle "
                f"was published and the manager cannot become ready: {line}"
            )
        if deployment.get("status") and deployment_ready(deployment):
            return deployment
        if time.monotonic() > end:
            raise InstallError(f"the manager was not ready within {timeout:.0f}s: {line}")
        # The scheduler, the kubelet and the probes act on their own time.
        time.sleep(0.5)


# What the API server says when it could not reach the webhook's Pod at all. Any other
# answer came from the webhook: the empty probe is refused by the webhook itself
# ("failed to call webhook: the server rejected our request"), which proves it answers.
UNREACHED: Final = ("no endpoints available", "connection refused", "dial tcp")


def webhook_served(kubeconfig: Path, namespace: str) -> bool:
    """True once a dry-run approval create reaches the stamp webhook through its Service.

    The stamp webhook is mutating, so it is called before the API server validates the
    (deliberately empty) object: whatever the answer then says, the webhook was
    reached, unless the API server says it found no Pod to call. ``dryRun`` keeps the
    probe from being stored whatever happens.
    """
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    token = config["users"][0]["user"]["token"]
    with httpx.Client(
        base_url=cluster["server"],
        verify=ssl.create_default_context(cafile=cluster["certificate-authority"]),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30.0,
    ) as http:
        answer = http.post(
            f"/apis/operator.ptah.run/v1alpha1/namespaces/{namespace}/ptahschemaapprovals",
            params={"dryRun": "All"},
            json={
                "apiVersion": "operator.ptah.run/v1alpha1",
                "kind": "PtahSchemaApproval",
                "metadata": {"name": "ptah-webhook-probe"},
                "spec": {},
            },
        )
    return not any(sign in answer.text for sign in UNREACHED)
