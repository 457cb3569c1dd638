"""``make run``: the operator against a real kube-apiserver on this machine.

It brings up the local control plane (``lab.localplane``), installs the
chart's CRDs by server-side apply, grants the manager the chart's permissions,
serves the admission webhook on 127.0.0.1 over TLS with a freshly generated CA and
registers it by ``url`` and ``caBundle``, runs the controller, then applies the
example PtahSchema and its approval from ``examples/`` and prints the resource's
progress (phase, claim, Job) until its Job is recorded. Ctrl-C tears it all down.

There is no kubelet, so no Pod ever runs: the controller claims its first reading
(Resolve) and its Job never starts. ``seed_plan`` stands in for the readings Resolve,
Verify, Observe and Plan: it withdraws that claim and writes what they would have
recorded (the plan, its chunks, ``status.source``, ``verification``, ``observation``
and ``status.plan``) and says so; everything after it is the real controller, the
real webhook and the real API server.

The pieces are importable so the real-API tests (tests/realapi) set up exactly
what this command sets up.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import json
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

import httpx
import yaml

import certs
from controller import (
    CONTROLLER_STATE_VERSION,
    ApiEventSink,
    BindingInputs,
    Environment,
    EventSink,
    Key,
    ManagerConfig,
    Reconciler,
    TargetLock,
    input_fingerprint,
    schema_operation,
)
from jobclaim import (
    SchemaPlanContent,
    build_plan_chunk,
    build_schema_plan,
    scratch_images_of,
    sha256_digest,
)
from jobclaim.api import (
    SPEC_WRITER_ANNOTATION,
    CurrentPlanStatus,
    ExecutionBindingStatus,
    ManagerRecord,
    PtahSchema,
    PtahSchemaPlan,
    PtahSchemaStatus,
)
from jobclaim.apiserver import (
    JOBS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NAMESPACES,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    SERVICEACCOUNTS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    AlreadyExists,
    ApiError,
    Conflict,
    NotFound,
    Object,
    Refused,
    Resource,
)
from jobclaim.stamps import STAMPED
from jobclaim.times import timestamp, utc_now
from kube.client import KubeApi
from lab.localmanager import (
    CHART_DEFAULTS,
    LOCAL_SCRATCH_IMAGES,
    ManagerProcess,
    local_environment,
)
from lab.localplane import LocalControlPlane
from lab.polling import DEADLINE, until
from lab.standin import ON_NODE, resolve_and_verify
from runner import RUNNER_PROTOCOL_VERSION
from webhook import CONTROLLER_WRITE, ENDPOINT_PATHS, MANAGER_STATE, Engine, Settings
from webhook.app import create_app
from webhook.rules import ImagePins
from webhook.serving import local_certificates, uvicorn_server

__all__ = [
    "CRD_DIR",
    "MANAGER_USERNAME",
    "LocalController",
    "LocalWebhook",
    "apply",
    "approval_for",
    "approve",
    "configuration_resource",
    "grant_manager",
    "grant_webhook_configurations",
    "install_crds",
    "main",
    "manager_config",
    "prepare_namespace",
    "progress_line",
    "register_webhooks",
    "seed_plan",
    "stood_in_line",
    "until",
    "until_granted",
    "webhook_configurations",
]

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
CRD_DIR: Final = REPO_ROOT / "charts" / "ptah-operator" / "crds"
EXAMPLES: Final = REPO_ROOT / "examples"
MANAGER_USERNAME: Final = "system:serviceaccount:ptah-system:ptah-operator"
# The chart's ptah.cel.specOrWriterChanged (a chart test holds the two equal): which
# PtahSchema and PtahMigration writes the stamp and decisions webhooks see.
_WRITER: Final = SPEC_WRITER_ANNOTATION
SPEC_OR_WRITER_CHANGED: Final = (
    "request.operation == 'CREATE' || object.spec != oldObject.spec || "
    f"(has(object.metadata.annotations) && '{_WRITER}' in object.metadata.annotations"
    f" ? [object.metadata.annotations['{_WRITER}']] : []) != "
    f"(has(oldObject.metadata.annotations) && '{_WRITER}' in oldObject.metadata.annotations"
    f" ? [oldObject.metadata.annotations['{_WRITER}']] : [])"
)
MANAGER_NAMESPACE: Final = "ptah-system"
FIELD_MANAGER: Final = "ptah-localrun"

CRDS: Final = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
CLUSTER_ROLES: Final = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS: Final = Resource(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterrolebindings",
    "ClusterRoleBinding",
    namespaced=False,
)
ROLES: Final = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS: Final = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")

# The execution binding and manager record a real installation reads from its chart
# values. No Pod runs here, so the images are never pulled; they are pinned by digest
# only because the builder and the webhook accept nothing else.
LOCAL_BINDING: Final = BindingInputs(
    controller_state_version=CONTROLLER_STATE_VERSION,
    ptah_version="1.9.0",
    executor_image="registry.example.com/ptah/executor@sha256:" + "1" * 64,
    runner_protocol_version=RUNNER_PROTOCOL_VERSION,
    # The examples' schemas say spec.dev provided; no Pod runs, so never pulled either.
    scratch_images=scratch_images_of(
        LOCAL_SCRATCH_IMAGES["PTAH_SCRATCH_IMAGE_POSTGRESQL"],
        LOCAL_SCRATCH_IMAGES["PTAH_SCRATCH_IMAGE_MYSQL"],
    ),
)
LOCAL_MANAGER: Final = ManagerRecord(
    controller_image="registry.example.com/ptah/ptah-operator@sha256:" + "2" * 64,
    controller_revision="local",
    runner_image="registry.example.com/ptah/runner@sha256:" + "3" * 64,
)
# The webhook pins what the chart's values would: the images above.
LOCAL_SETTINGS: Final = Settings(
    manager_username=MANAGER_USERNAME,
    pins=ImagePins(
        executor_image=LOCAL_BINDING.executor_image,
        runner_image=LOCAL_MANAGER.runner_image,
        manager_image=LOCAL_MANAGER.controller_image,
        ptah_version=LOCAL_BINDING.ptah_version,
        scratch_images=LOCAL_BINDING.scratch_images,
    ),
    coordination_namespace=MANAGER_NAMESPACE,
)
EXAMPLE_STATEMENTS: Final = b"CREATE TABLE orders (id bigint PRIMARY KEY);\n"

# The manager's ClusterRole, as charts/ptah-operator/templates/rbac.yaml grants it
# (its README justifies each rule). Written out here because rendering the chart
# needs helm, which `make run` should not have to build; tests/realapi/
# test_crds_and_chart.py holds these to the chart's rendered rules. Left out: the
# chart's patch of its own webhook configurations, which only rotation uses.
RESULT_WRITER_RULES: Final[list[Object]] = [
    {"apiGroups": ["operator.ptah.run"], "resources": ["ptahresultrecords"], "verbs": ["create"]}
]
MANAGER_RULES: Final[list[Object]] = [
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": ["ptahschemas", "ptahmigrations"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": ["ptahschemas/status", "ptahmigrations/status"],
        "verbs": ["get", "patch", "update"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": [
            "ptahschemas/finalizers",
            "ptahmigrations/finalizers",
            "ptahschemaplans/finalizers",
        ],
        "verbs": ["update"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": ["ptahschemaplans", "ptahschemaplanchunks", "ptahmigrationplans"],
        "verbs": ["get", "list", "watch", "create"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": ["ptahschemaplans/status"],
        "verbs": ["patch"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": [
            "ptahschemaapprovals",
            "ptahmigrationapprovals",
            "ptahmigrationrunacknowledgments",
            "ptahschemaproofsettlements",
        ],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": [
            "ptahschemaapprovals/status",
            "ptahmigrationapprovals/status",
            "ptahmigrationrunacknowledgments/status",
            "ptahschemaproofsettlements/status",
        ],
        "verbs": ["patch"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": ["ptahresultrecords"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["operator.ptah.run"],
        "resources": ["ptahrealms"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": ["operator.ptah.run"], "resources": ["ptahrealms/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get", "list", "watch", "create"],
    },
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["limitranges"], "verbs": ["list"]},
    {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["get"]},
    {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["priorityclasses"],
        "verbs": ["get", "list"],
    },
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]
LEASE_RULES: Final[list[Object]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
]


# -- RBAC grants in force ----------------------------------------------------------------

SUBJECT_ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def access_questions(rules: Sequence[Object], namespace: str | None) -> list[Object]:
    """The SubjectAccessReview ``resourceAttributes`` that together ask for every verb
    ``rules`` grant: one per API group, resource (``plural/subresource`` split), verb and
    resource name. A rule for non-resource URLs is refused: nothing here grants one,
    and leaving it out would report a grant in force that was never asked about."""
    questions: list[Object] = []
    for rule in rules:
        if rule.get("nonResourceURLs") or not rule.get("resources"):
            raise ValueError(f"only resource rules can be asked about, not {rule}")
        for group in rule.get("apiGroups") or [""]:
            for plural in rule["resources"]:
                resource, _, subresource = str(plural).partition("/")
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        question: Object = {
                            "group": group,
                            "resource": resource,
                            "subresource": subresource,
                            "verb": verb,
                            "name": name,
                        }
                        if namespace is not None:
                            question["namespace"] = namespace
                        questions.append(question)
    return questions


def until_granted(
    plane: LocalControlPlane,
    identity: str,
    rules: Sequence[Object],
    namespace: str | None = None,
    *,
    deadline: float = DEADLINE,
) -> None:
    """Return once RBAC allows ``identity`` everything ``rules`` grant (in ``namespace``,
    or cluster-wide when None).

    Call it after writing a Role or ClusterRole and its binding, before the identity
    uses them. The API server's RBAC authorizer reads roles and bindings from an
    informer cache, so a grant is in force a moment after its write returns, not at
    once: a request in between is refused with 403 (tests/realapi's smoke test flaked
    on exactly that). Nothing announces when the cache has caught up, so the grant is
    asked about until it holds, under a deadline. A SubjectAccessReview is answered by
    that same authorizer, so once it allows every verb of the grant, so will the
    identity's own requests; it is asked by the admin for the identity's user and
    groups, which is what RBAC matches bindings against.
    """
    who = plane.identities[identity]
    pending = access_questions(rules, namespace)
    if not pending:
        raise ValueError(f"no rules to wait for: the grant to {identity} names no verb")

    def allowed(http: httpx.Client, question: Object) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": who.user,
                "groups": [*who.groups, "system:authenticated"],
                "resourceAttributes": question,
            },
        }
        response = http.post(
            f"{plane.server_url}{SUBJECT_ACCESS_REVIEWS}",
            content=json.dumps(review).encode(),
            headers={
                "Authorization": f"Bearer {plane.token('admin')}",
                "Content-Type": "application/json",
            },
        )
        if response.status_code >= 300:
            # A review that cannot be asked is no answer: fail, never wait it out.
            raise ApiError(
                f"a subject access review for {who.user} answered "
                f"{response.status_code}: {response.text[:500]}",
                status=response.status_code,
            )
        return bool((response.json().get("status") or {}).get("allowed"))

    def in_force() -> bool:
        with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
            pending[:] = [q for q in pending if not allowed(http, q)]
        return not pending

    try:
        until(in_force, f"RBAC to allow {who.user} what was granted", deadline=deadline)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; still refused: {pending[:5]}") from None


# -- server-side apply -------------------------------------------------------------------


def apply(
    plane: LocalControlPlane,
    resource: Resource,
    obj: Object,
    *,
    identity: str,
    dry_run: bool = False,
) -> Object:
    """Server-side apply ``obj`` as ``identity`` (no kubectl: the HTTP PATCH it sends).

    ``force`` takes over fields another manager set: the run owns what it installs.
    ``dry_run`` has the server validate and admit the object without storing it.
    """
    meta = obj["metadata"]
    body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    namespace = f"/namespaces/{meta['namespace']}" if resource.namespaced else ""
    url = f"{plane.server_url}{prefix}{namespace}/{resource.plural}/{meta['name']}"
    with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
        response = http.patch(
            url,
            params={
                "fieldManager": FIELD_MANAGER,
                "force": "true",
                **({"dryRun": "All"} if dry_run else {}),
            },
            # JSON, which is YAML, and never a YAML scalar of our own: PyYAML writes
            # the label value 0971253e91 bare, and the server's YAML reads it back
            # as the number 9.71253e+96 and refuses the whole apply.
            content=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {plane.token(identity)}",
                "Content-Type": "application/apply-patch+yaml",
            },
        )
    if response.status_code >= 300:
        raise ApiError(
            f"server-side apply of {resource.kind} {meta['name']} answered "
            f"{response.status_code}: {response.text[:500]}",
            status=response.status_code,
        )
    answer: Object = response.json()
    return answer


def install_crds(plane: LocalControlPlane, admin: KubeApi) -> list[str]:
    """Apply every CRD the chart ships and return once each is served."""
    names: list[str] = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        names.append(apply(plane, CRDS, crd, identity="admin")["metadata"]["name"])

    def established() -> bool:
        for name in names:
            conditions = (admin.get(CRDS, None, name).get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    until(established, "the CRDs to become Established")

    def listable() -> bool:
        # After Established the API server answers 429 until its watch cache for the
        # new kind has filled; nothing announces that, so the list is retried.
        try:
            admin.list(PTAHSCHEMAS, "default")
            admin.list(PTAHSCHEMAAPPROVALS, "default")
        except ApiError:
            return False
        return True

    until(listable, "the PtahSchema kinds to be served")
    return names


def grant_manager(plane: LocalControlPlane, *, lease_namespace: str = MANAGER_NAMESPACE) -> None:
    """The chart's manager permissions, bound to the manager's service account."""
    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": MANAGER_USERNAME}
    apply(plane, NAMESPACES, {"metadata": {"name": lease_namespace}}, identity="admin")
    apply(
        plane,
        CLUSTER_ROLES,
        {"metadata": {"name": "ptah-operator-manager"}, "rules": MANAGER_RULES},
        identity="admin",
    )
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole"}
    apply(
        plane,
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": "ptah-operator-manager"},
            "roleRef": {**role_ref, "name": "ptah-operator-manager"},
            "subjects": [subject],
        },
        identity="admin",
    )
    leases = {"name": "ptah-operator-leases", "namespace": lease_namespace}
    apply(plane, ROLES, {"metadata": leases, "rules": LEASE_RULES}, identity="admin")
    apply(
        plane,
        ROLE_BINDINGS,
        {
            "metadata": leases,
            "roleRef": {**role_ref, "kind": "Role", "name": "ptah-operator-leases"},
            "subjects": [subject],
        },
        identity="admin",
    )
    # Every ServiceAccount may create result records; admission decides which Pod may
    # speak for which Job (the chart's ptah-operator-result-writer).
    writer = {"name": "ptah-operator-result-writer"}
    apply(
        plane, CLUSTER_ROLES, {"metadata": writer, "rules": RESULT_WRITER_RULES}, identity="admin"
    )
    apply(
        plane,
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": writer,
            "roleRef": {**role_ref, "name": "ptah-operator-result-writer"},
            "subjects": [
                {
                    "kind": "Group",
                    "apiGroup": "rbac.authorization.k8s.io",
                    "name": "system:serviceaccounts",
                }
            ],
        },
        identity="admin",
    )
    # The manager starts right after this; a grant not yet in force would refuse its
    # first requests (see until_granted).
    until_granted(plane, "manager", MANAGER_RULES)
    until_granted(plane, "manager", LEASE_RULES, lease_namespace)


def grant_webhook_configurations(plane: LocalControlPlane, names: Sequence[str]) -> None:
    """Read these webhook configurations by name: the lab's, not the chart's, grant.

    The chart grants the manager no verb on any webhook configuration (the webhooks
    constrain it; its certificate rotator alone may patch them). A local manager given
    ``PTAH_WEBHOOK_CONFIGURATIONS`` reads them for ``/readyz`` to check that their
    caBundle trusts the certificate it serves, so the lab grants ``get``, never
    ``patch``, per run and per test.
    """
    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": MANAGER_USERNAME}
    role = f"ptah-operator-webhooks-{names[0]}"[:253]
    rules = [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingwebhookconfigurations"],
            "resourceNames": list(names),
            "verbs": ["get"],
        }
    ]
    apply(plane, CLUSTER_ROLES, {"metadata": {"name": role}, "rules": rules}, identity="admin")
    apply(
        plane,
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [subject],
        },
        identity="admin",
    )
    until_granted(plane, "manager", rules)


# -- the webhook -------------------------------------------------------------------------


def reserve_port() -> socket.socket:
    """A loopback socket bound to a free port and not yet listening.

    Until a server listens on it, a connection to the port is refused at once, which
    is exactly a webhook that is down: the API server fails the call closed.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Connections accepted on it inherit this, and Linux lets the port be bound again
    # while they linger only if every socket on it says so.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class LocalWebhook:
    """The admission webhook served over TLS on 127.0.0.1, in a thread of this process.

    ``start`` and ``stop`` may alternate: each start serves a new uvicorn server on a
    fresh socket bound to the same port, so the registered URL stays right.
    """

    reader: KubeApi
    certificates: Path
    port: int = 0
    _sock: socket.socket | None = None
    _thread: threading.Thread | None = None
    _server: Any = None
    _engine: Engine | None = None
    _ca: bytes = b""
    _tls: certs.ReloadingTLS | None = field(default=None, repr=False)
    # What the chart's values would configure: the manager's name and the pinned images.
    settings: Settings = field(default=LOCAL_SETTINGS, repr=False)

    def __post_init__(self) -> None:
        # A directory that already holds a pair is reused, so two servers (the tests'
        # split Job endpoint) can sit behind one caBundle.
        ca = self.certificates / certs.CA_CERT
        cert, key = self.certificates / certs.TLS_CERT, self.certificates / certs.TLS_KEY
        if not (ca.exists() and cert.exists() and key.exists()):
            local_certificates(self.certificates)
        self._ca = ca.read_bytes()
        self._tls = certs.ReloadingTLS(cert, key)
        self._sock = reserve_port()
        self.port = int(self._sock.getsockname()[1])

    @property
    def ca_bundle(self) -> bytes:
        return self._ca

    def reload_certificate(self) -> bool:
        """Serve the directory's pair if it changed and is valid (the manager's
        ``ReloadingTLS.watch`` does this on a timer); whether a new pair is served."""
        assert self._tls is not None
        return self._tls.reload_if_changed()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            return
        assert self._tls is not None
        if self._sock is None:
            raise RuntimeError("the webhook was closed; it cannot serve again")
        sock = self._sock
        sock.listen(128)
        self._engine = Engine(self.reader, self.settings)
        server = uvicorn_server(
            create_app(self._engine), self._tls, host="127.0.0.1", port=self.port
        )
        # uvicorn takes signals only on the main thread, so make run's Ctrl-C stays ours.
        self._server = server
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])),
            name="webhook",
            daemon=True,
        )
        self._thread.start()
        until(lambda: bool(server.started) or not self._alive(), "the webhook to listen")
        if not server.started:
            raise RuntimeError("the webhook server stopped before it listened")

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        """Stop serving; connections to the port are refused until ``start``."""
        self._halt()
        # Bound again but not listening: the port stays ours and refuses connections.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self._sock = sock

    def close(self) -> None:
        """Stop serving and give the port up."""
        self._halt()

    def _halt(self) -> None:
        if self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=30)
            self._thread = None
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _manager_only() -> list[Object]:
    return [
        {
            "name": "manager-only",
            "expression": f"request.userInfo.username == '{MANAGER_USERNAME}'",
        }
    ]


def webhook_configurations(
    prefix: str,
    url: str,
    ca_bundle: bytes,
    *,
    jobs_url: str | None = None,
    namespace_selector: Object | None = None,
    stamp: bool = True,
) -> list[Object]:
    """The chart's configurations (templates/webhook.yaml), registered by ``url``; each
    carries its ``kind``, validating or mutating.

    ``jobs_url`` sends Job writes to another server than the rest, so a test can stop
    the Job endpoint alone while status writes and projections still go through.
    ``stamp=False`` leaves the mutating stamp webhook out, as a cluster would that
    bypassed it: its validating twin is still registered.
    """
    bundle = base64.b64encode(ca_bundle).decode()
    selector = namespace_selector or {}

    def hook(name: str, base: str, path: str, rules: list[Object], **more: Any) -> Object:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "namespaceSelector": selector,
            "clientConfig": {"url": f"{base}{path}", "caBundle": bundle},
            "rules": rules,
            **more,
        }

    def write_rules(*which: str) -> list[Object]:
        table: dict[str, Object] = {
            "jobs": {
                "apiGroups": ["batch"],
                "apiVersions": ["v1"],
                "resources": ["jobs"],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            },
            "configmaps": {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
                "operations": ["CREATE"],
                "scope": "Namespaced",
            },
            "plans": {
                "apiGroups": ["operator.ptah.run"],
                "apiVersions": ["v1alpha1"],
                "resources": ["ptahschemaplans", "ptahschemaplanchunks", "ptahmigrationplans"],
                "operations": ["CREATE"],
                "scope": "Namespaced",
            },
        }
        return [table[w] for w in which]

    path = ENDPOINT_PATHS[CONTROLLER_WRITE]
    if jobs_url is None:
        writes = [
            hook(
                "controller-write.operator.ptah.run",
                url,
                path,
                write_rules("jobs", "configmaps", "plans"),
                matchPolicy="Exact",
                matchConditions=_manager_only(),
            )
        ]
    else:
        writes = [
            hook(
                "jobs.controller-write.operator.ptah.run",
                jobs_url,
                path,
                write_rules("jobs"),
                matchPolicy="Exact",
                matchConditions=_manager_only(),
            ),
            hook(
                "controller-write.operator.ptah.run",
                url,
                path,
                write_rules("configmaps", "plans"),
                matchPolicy="Exact",
                matchConditions=_manager_only(),
            ),
        ]
    status = hook(
        "status.manager-state.operator.ptah.run",
        url,
        ENDPOINT_PATHS[MANAGER_STATE],
        [
            {
                "apiGroups": ["operator.ptah.run"],
                "apiVersions": ["*"],
                "resources": ["*/status"],
                "operations": ["UPDATE"],
                "scope": "Namespaced",
            }
        ],
        matchPolicy="Equivalent",
    )
    decision_rules = [
        {
            "apiGroups": ["operator.ptah.run"],
            "apiVersions": ["v1alpha1"],
            "resources": [kind.resource.plural for kind in STAMPED.values()],
            "operations": operations,
            "scope": "Namespaced",
        }
        for operations in (["CREATE"], ["CREATE", "UPDATE"])
    ]
    spec_rules = [
        {
            "apiGroups": ["operator.ptah.run"],
            "apiVersions": ["v1alpha1"],
            "resources": ["ptahschemas", "ptahmigrations"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
    ]
    changed = [{"name": "spec-or-writer-changed", "expression": SPEC_OR_WRITER_CHANGED}]
    mutate, validate = "/mutate-stamp", "/validate-decisions"
    stamping = {"matchPolicy": "Exact", "reinvocationPolicy": "IfNeeded"}
    configurations: list[Object] = [
        {
            "kind": VALIDATING_WEBHOOK_CONFIGURATIONS.kind,
            "metadata": {"name": f"{prefix}-controller-write"},
            "webhooks": writes,
        },
        {
            "kind": VALIDATING_WEBHOOK_CONFIGURATIONS.kind,
            "metadata": {"name": f"{prefix}-manager-state"},
            "webhooks": [status],
        },
        {
            "kind": VALIDATING_WEBHOOK_CONFIGURATIONS.kind,
            "metadata": {"name": f"{prefix}-decisions"},
            "webhooks": [
                hook(
                    "decisions.operator.ptah.run",
                    url,
                    validate,
                    [decision_rules[1]],
                    matchPolicy="Exact",
                ),
                hook(
                    "spec-writer.decisions.operator.ptah.run",
                    url,
                    validate,
                    spec_rules,
                    matchPolicy="Exact",
                    matchConditions=changed,
                ),
                hook(
                    "records.decisions.operator.ptah.run",
                    url,
                    "/validate-records",
                    [
                        {
                            "apiGroups": ["operator.ptah.run"],
                            "apiVersions": ["v1alpha1"],
                            "resources": ["ptahresultrecords"],
                            "operations": ["CREATE", "UPDATE"],
                            "scope": "Namespaced",
                        }
                    ],
                    matchPolicy="Exact",
                ),
            ],
        },
    ]
    if stamp:
        configurations.append(
            {
                "kind": MUTATING_WEBHOOK_CONFIGURATIONS.kind,
                "metadata": {"name": f"{prefix}-stamp"},
                "webhooks": [
                    hook(
                        "decisions.stamp.operator.ptah.run",
                        url,
                        mutate,
                        [decision_rules[0]],
                        **stamping,
                    ),
                    hook(
                        "spec-writer.stamp.operator.ptah.run",
                        url,
                        mutate,
                        spec_rules,
                        matchConditions=changed,
                        **stamping,
                    ),
                ],
            }
        )
    return configurations


def configuration_resource(configuration: Object) -> Resource:
    """Where a configuration of ``webhook_configurations`` is stored."""
    return (
        MUTATING_WEBHOOK_CONFIGURATIONS
        if configuration.get("kind") == MUTATING_WEBHOOK_CONFIGURATIONS.kind
        else VALIDATING_WEBHOOK_CONFIGURATIONS
    )


def register_webhooks(
    plane: LocalControlPlane, admin: KubeApi, configurations: Sequence[Object], probe_namespace: str
) -> None:
    """Apply the configurations and return once the API server calls the webhook.

    Nothing announces that a new configuration is in force, so a status write by the
    admin (which only the webhook refuses) is retried until it is refused.
    """
    for configuration in configurations:
        apply(plane, configuration_resource(configuration), configuration, identity="admin")
    probe = "ptah-localrun-probe"
    with contextlib.suppress(AlreadyExists):
        admin.create(PTAHSCHEMAS, probe_namespace, _probe_schema(probe))

    def refused() -> bool:
        current = admin.get(PTAHSCHEMAS, probe_namespace, probe)
        try:
            admin.patch_status(
                PTAHSCHEMAS,
                probe_namespace,
                probe,
                {"phase": "Pending"},
                resource_version=current["metadata"]["resourceVersion"],
            )
        except Refused as error:
            return "only the configured operator manager" in str(error)
        except Conflict:
            return False
        return False

    until(refused, "the API server to call the webhook")
    # The probe has served its purpose; a suspended schema left behind would only
    # puzzle whoever lists the namespace.
    with contextlib.suppress(NotFound):
        admin.delete(PTAHSCHEMAS, probe_namespace, probe)


def _probe_schema(name: str) -> Object:
    raw = keyed(yaml.safe_load((EXAMPLES / "ptahschema.yaml").read_text()), "orders-primary")
    # The admin creates it, and says so: the record the stamp webhook would write, so
    # the probe passes the decisions webhook whether or not the stamp is registered.
    raw["metadata"] = {"name": name, "annotations": {SPEC_WRITER_ANNOTATION: "admin"}}
    # Suspended: the controller never claims anything for the probe.
    raw["spec"]["suspend"] = True
    return dict(raw)


# -- the example resources ---------------------------------------------------------------


def prepare_namespace(admin: KubeApi, namespace: str, labels: dict[str, str] | None = None) -> None:
    """The namespace and its default ServiceAccount (no service-account controller runs
    here, and the admission snapshot binds the Job's ServiceAccount by UID)."""
    with contextlib.suppress(AlreadyExists):
        admin.create(NAMESPACES, None, {"metadata": {"name": namespace, "labels": labels or {}}})
    with contextlib.suppress(AlreadyExists):
        admin.create(SERVICEACCOUNTS, namespace, {"metadata": {"name": "default"}})


def example_realms() -> list[tuple[str, Object]]:
    """The PtahRealms the examples name, with the file each came from: every document of
    every ``examples/ptahrealm*.yaml``. What applies the examples unchanged creates these
    first, or the realm gate refuses them (a realm that does not exist admits nobody)."""
    return [
        (path.name, doc)
        for path in sorted(EXAMPLES.glob("ptahrealm*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def keyed(raw: Object, coordination_key: str) -> Object:
    """An example with its target on ``coordination_key`` instead of the realm it names.

    The examples name PtahRealms (examples/ptahrealm.yaml) that admit ``shop`` only;
    the node-less run and the real-API stages put them in namespaces of their own,
    which no example realm admits, and what they exercise is the lifecycle, not the
    realm (tests/realapi/test_realms.py is). A key is scoped to its namespace, so two
    stages never share a Lease through it.
    """
    target = raw["spec"]["target"]
    target.pop("realmRef", None)
    target.pop("sharedRealm", None)
    target["coordinationKey"] = coordination_key
    return raw


def example_schema(namespace: str, name: str = "orders") -> Object:
    raw = keyed(yaml.safe_load((EXAMPLES / "ptahschema.yaml").read_text()), "orders-primary")
    raw["metadata"] = {"name": name, "namespace": namespace}
    return dict(raw)


# The readings whose executor is stood in for, in the order the controller claims
# them: Resolve and Verify run on the stand-in node (lab.standin: their Jobs' own Pods
# record what they read, and the controller harvests it); Observe and Plan are written.
STOOD_IN: Final = ("Resolve", "Verify", "Observe", "Plan")
SEEDED_ARTIFACT: Final = "sha256:" + "5" * 64


def stood_in_line(plan: str) -> str:
    """What ``make run`` says about the readings it stands in for."""
    return (
        f"# STAND-IN for the readings {', '.join(STOOD_IN)}: there is no kubelet here, so "
        f"the {' and '.join(ON_NODE)} Pods' results were recorded under their own bound "
        "tokens and harvested by the controller; the Observe claim was withdrawn and what "
        f"Observe and Plan would have recorded (observation, and plan {plan} with its "
        "chunks) was written directly"
    )


def seed_plan(
    admin: KubeApi,
    manager: KubeApi,
    namespace: str,
    name: str,
    *,
    plane: LocalControlPlane,
    statements: Sequence[bytes] = (EXAMPLE_STATEMENTS,),
    await_reading: bool = True,
    destructive: bool = False,
) -> CurrentPlanStatus:
    """Stand in for the readings a node would run: Resolve, Verify, Observe and Plan.

    On a cluster the controller claims each reading, its Job runs, and the harvest
    records what it found; the Plan's harvest publishes the plan (a PtahSchemaPlan and
    its chunks) and records it in ``status.plan``. Here no Pod ever runs. Resolve and
    Verify run on the stand-in node (``lab.standin``): their Pods record what they
    read under their own bound tokens, as admission requires of a resolved artifact
    and a verification. Then this writes what Observe and Plan would have left: the
    plan and its chunks by the admin (the webhook admits a manager's plan only from a
    harvested Plan Job, which cannot exist here), and by the manager (the only
    identity allowed to write status) ``observation`` (drift), ``observedGeneration``
    and ``status.plan``, in the write that withdraws the claim then in flight (the
    controller's Observe), whose Job is then deleted, as its cleanup TTL would once
    harvested. Everything after this is the real controller deciding from the records.

    ``await_reading=False`` is for a caller that runs the controller's passes itself:
    Resolve and Verify are then claimed and harvested here, and any reading claimed
    by then is withdrawn.
    """
    resolve_and_verify(
        plane,
        admin,
        manager,
        namespace,
        name,
        digest=SEEDED_ARTIFACT,
        record=LOCAL_MANAGER,
        admission=manager_config().admission,
        await_reading=await_reading,
    )
    schema = admin.get(PTAHSCHEMAS, namespace, name)
    binding = (schema.get("status") or {}).get("executionBinding")
    if not binding:
        raise ValueError(f"PtahSchema {namespace}/{name} has no execution binding yet")
    epoch = binding["epoch"]
    data = list(statements)
    # Built by the same functions the manager publishes a Plan Job's reading with, so
    # the plan and its chunks are the exact objects a Plan Job would have produced.
    # build_schema_plan publishes for an active Plan claim; the claim it is handed
    # here exists only in memory, to say under which epoch the plan was computed.
    parsed = PtahSchema.model_validate(schema)
    planning = schema_operation(
        parsed,
        operation="Plan",
        fingerprint=input_fingerprint({"operation": "Plan", "seeded": True}),
        epoch=epoch,
        nonce=uuid.uuid4().bytes,
        started_at=timestamp(utc_now()),
    )
    status = PtahSchemaStatus.model_validate(schema.get("status") or {})
    planning_schema = parsed.model_copy(
        update={"status": status.model_copy(update={"active_operation": planning})}
    )
    built = build_schema_plan(
        planning_schema,
        binding=ExecutionBindingStatus.model_validate(binding),
        dispatched_by=LOCAL_MANAGER,
        content=SchemaPlanContent(
            content_digest=sha256_digest(b"".join(data)),
            statement_count=len(data),
            destructive=destructive,
            privilege_changes=(),
            chunks=tuple((sha256_digest(d), len(d)) for d in data),
        ),
    )
    stored_plan = PtahSchemaPlan.model_validate(admin.create(PTAHSCHEMAPLANS, namespace, built))
    for chunk in stored_plan.spec.chunks:
        admin.create(
            PTAHSCHEMAPLANCHUNKS,
            namespace,
            build_plan_chunk(stored_plan, chunk, data[chunk.index]),
        )
    plan = stored_plan.metadata.name
    plan_uid = stored_plan.metadata.uid
    assert plan is not None and plan_uid is not None
    current = CurrentPlanStatus(
        name=plan,
        uid=plan_uid,
        fingerprint=stored_plan.spec.fingerprint,
        content_digest=stored_plan.spec.content_digest,
        artifact_digest=SEEDED_ARTIFACT,
        execution_binding_id=epoch,
        controller_state_version=binding["controllerStateVersion"],
        ptah_version=binding["ptahVersion"],
        statement_count=len(data),
        chunk_count=len(data),
        destructive=destructive,
    )
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    readings = {
        "observation": {"observedAt": now, "artifactDigest": SEEDED_ARTIFACT, "drift": True},
        "plan": current.to_wire(),
    }
    # The controller may write status meanwhile; a Conflict means re-read and retry.
    while True:
        stored = manager.get(PTAHSCHEMAS, namespace, name)
        written = dict(stored.get("status") or {})
        job = (written.pop("activeOperation", None) or {}).get("jobName")
        try:
            manager.patch_status(
                PTAHSCHEMAS,
                namespace,
                name,
                # patch_status replaces status whole: keep what the controller wrote.
                {
                    **written,
                    **readings,
                    "observedGeneration": stored["metadata"]["generation"],
                    "phase": "Pending",
                },
                resource_version=stored["metadata"]["resourceVersion"],
            )
        except Conflict:
            continue
        break
    if job:
        with contextlib.suppress(NotFound):
            admin.delete(JOBS, namespace, job)
    return current


def approval_for(schema: Object, *, template: Path | None = None) -> Object:
    """The approval of the schema's current plan, from the approval template in
    ``examples/templates/``.

    The template names the plan by placeholders; this fills them in from the schema's
    ``metadata.uid`` and ``status.plan``, as a person would from
    ``kubectl get ptahschema -o yaml``. Pure: the caller creates it.
    """
    meta = schema["metadata"]
    plan = (schema.get("status") or {}).get("plan")
    if not plan:
        raise ValueError(f"PtahSchema {meta['namespace']}/{meta['name']} has no plan to approve")
    path = template or EXAMPLES / "templates" / "ptahschemaapproval.yaml"
    raw = yaml.safe_load(path.read_text())
    approval: Object = copy.deepcopy(raw)
    approval["metadata"] = {"name": f"{meta['name']}-approval", "namespace": meta["namespace"]}
    spec = approval["spec"]
    spec["schemaRef"] = {"name": meta["name"], "uid": meta["uid"]}
    spec["planRef"] = {"name": plan["name"], "uid": plan["uid"]}
    spec["planFingerprint"] = plan["fingerprint"]
    spec["executionBindingID"] = plan["executionBindingID"]
    spec["mutationRequestUID"] = str(uuid.uuid4())
    spec["approvedAt"] = timestamp(utc_now())
    return approval


def approve(admin: KubeApi, namespace: str, name: str) -> Object:
    """Create the approval of the schema's current plan (``approval_for``)."""
    return admin.create(
        PTAHSCHEMAAPPROVALS, namespace, approval_for(admin.get(PTAHSCHEMAS, namespace, name))
    )


# -- the controller ----------------------------------------------------------------------


def manager_config(lease_namespace: str = MANAGER_NAMESPACE) -> ManagerConfig:
    return ManagerConfig(
        manager=LOCAL_MANAGER, binding=LOCAL_BINDING, lease_namespace=lease_namespace
    )


@dataclass
class LocalController:
    """The controller's reconciler, watching as the manager, in threads of this process."""

    manager: KubeApi
    namespace: str | None = None
    config: ManagerConfig = field(default_factory=manager_config)
    events: EventSink | None = None
    reconciler: Reconciler = field(init=False)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        env = Environment(
            api=self.manager,
            config=self.config,
            lock=TargetLock(self.manager, self.config.lease_namespace),
        )
        events = self.events or ApiEventSink(self.manager, instance="ptah-localrun")
        self.reconciler = Reconciler(env, events, namespace=self.namespace)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.reconciler.run, args=(self._stop,), name="controller", daemon=True
        )
        self._thread.start()

    def stop(self, *, wait: float = 60.0) -> bool:
        """Stop taking work and wait up to ``wait`` seconds for the loop to end.

        Workers finish the pass they are in. The watch threads end only when their
        stream does (a long poll the API server closes on its own schedule, or at
        once when the server stops); they are daemon threads that only queue keys,
        so a caller that is about to stop the server need not wait for them.
        Returns whether the loop ended.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=wait)
            if self._thread.is_alive():
                return False
            self._thread = None
        return True

    def nudge(self, namespace: str, name: str) -> None:
        """Queue a pass now (a watch would, a moment later)."""
        self.reconciler.queue.add(Key("PtahSchema", namespace, name))


def progress_line(schema: Object) -> str:
    """Phase, claim and Job of a PtahSchema, on one line."""
    status = schema.get("status") or {}
    claim = status.get("activeOperation") or {}
    parts = [f"phase={status.get('phase') or '-'}"]
    parts.append(f"plan={(status.get('plan') or {}).get('name') or '-'}")
    if claim:
        parts.append(f"claim={claim.get('type')}/{str(claim.get('id'))[:12]}")
        parts.append(f"dispatchStarted={bool(claim.get('dispatchStarted'))}")
        parts.append(f"job={claim.get('jobName')}")
        parts.append(f"jobUID={claim.get('jobUID') or '-'}")
    else:
        parts.append("claim=-")
    return " ".join(parts)


def recorded_job(schema: Object) -> str | None:
    """The UID of the Job the schema's claim recorded, if it has one."""
    claim = (schema.get("status") or {}).get("activeOperation") or {}
    uid = claim.get("jobUID")
    return str(uid) if uid else None


def wait_for(
    admin: KubeApi,
    namespace: str,
    name: str,
    condition: Callable[[Object], bool],
    *,
    report: Callable[[str], None] = lambda _line: None,
    deadline: float | None = DEADLINE,
    stopping: threading.Event | None = None,
) -> Object:
    """Watch the schema until ``condition`` holds, reporting each new progress line."""
    end = None if deadline is None else time.monotonic() + deadline
    last = ""
    while True:
        try:
            schema = admin.get(PTAHSCHEMAS, namespace, name)
        except NotFound:
            schema = {"metadata": {"name": name}}
        line = progress_line(schema)
        if line != last:
            report(line)
            last = line
        if condition(schema):
            return schema
        if end is not None and time.monotonic() > end:
            raise TimeoutError(f"gave up waiting on PtahSchema {namespace}/{name}: {line}")
        # The resource changes when the controller decides; a status watch would say
        # so sooner but is one more stream to tear down on Ctrl-C. A short poll shows
        # the same progress.
        if stopping is not None and stopping.wait(0.2):
            raise KeyboardInterrupt
        if stopping is None:
            time.sleep(0.2)


# -- the command -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="make run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="exit 0 as soon as the Job is recorded (for CI) instead of running until Ctrl-C",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the control plane keeps its log and kubeconfigs (default: a temp dir)",
    )
    parser.add_argument("--namespace", default="shop")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the Job to be recorded before giving up",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stopping = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    # A shell starting us in the background leaves SIGINT ignored, and Python then
    # keeps it ignored; Ctrl-C must always tear down, so it is asked for explicitly.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _run(args, stopping)
    except KeyboardInterrupt:
        print("# stopped; everything started here has been torn down", flush=True)
        return 130


def _say(line: str) -> None:
    print(line, flush=True)


def _run(args: argparse.Namespace, stopping: threading.Event) -> int:
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="ptah-run-"))
    namespace: str = args.namespace
    name = "orders"
    workdir.mkdir(parents=True, exist_ok=True)
    # The manager's JSON log (every admission decision, every pass that failed) goes
    # to a file, so the terminal shows the resource's progress.
    log_file = workdir / "operator.log"
    with contextlib.ExitStack() as stack:
        _say(f"# starting kube-apiserver + etcd (workdir {workdir})")
        plane = stack.enter_context(LocalControlPlane(workdir / "controlplane"))
        _say(f"# API server: {plane.server_url}")
        _say(f"# kubeconfig: export KUBECONFIG={plane.kubeconfig('admin')}")
        _say(f"#   (the manager's identity: {plane.kubeconfig('manager')})")
        _say(f"# operator log: {log_file}; API server log: {plane.log_path}")
        admin = stack.enter_context(KubeApi.from_kubeconfig(plane.kubeconfig("admin")))
        manager = stack.enter_context(KubeApi.from_kubeconfig(plane.kubeconfig("manager")))
        installed = install_crds(plane, admin)
        _say(f"# installed {len(installed)} CRDs from {CRD_DIR.relative_to(REPO_ROOT)}")
        grant_manager(plane)
        prepare_namespace(admin, namespace)

        # The chart's own program with the chart's environment: the controller under
        # leader election and the webhook, in one process, as a Pod runs them.
        cert_dir = workdir / "webhook-certs"
        local_certificates(cert_dir)
        names = ("ptah-operator-controller-write", "ptah-operator-manager-state")
        grant_webhook_configurations(plane, names)
        process = ManagerProcess(
            local_environment(
                CHART_DEFAULTS,
                identity="ptah-operator-local",
                kubeconfig=plane.kubeconfig("manager"),
                cert_dir=cert_dir,
                configurations=names,
            ),
            log_file,
        )
        # Registered after the control plane, so it runs first: the manager gives its
        # Lease back while the API server is still there to take it.
        stack.callback(process.close)
        process.start()
        process.wait_serving()
        register_webhooks(
            plane,
            admin,
            webhook_configurations("ptah-operator", process.url, process.ca_bundle),
            MANAGER_NAMESPACE,
        )
        _say(f"# manager: python -m manager, webhook {process.url} (CA {cert_dir / certs.CA_CERT})")
        _say(f"#   metrics {process.metrics_url}; running as {MANAGER_USERNAME}")

        admin.create(PTAHSCHEMAS, namespace, example_schema(namespace, name))
        _say(f"# applied examples/ptahschema.yaml as {namespace}/{name}")
        report = _say
        wait_for(
            admin,
            namespace,
            name,
            lambda s: bool(((s.get("status") or {}).get("activeOperation") or {}).get("jobUID")),
            report=report,
            stopping=stopping,
        )
        plan = seed_plan(admin, manager, namespace, name, plane=plane)
        _say(stood_in_line(plan.name))
        approval = approve(admin, namespace, name)
        approved = approval["metadata"]["name"]
        _say(f"# applied examples/templates/ptahschemaapproval.yaml as {approved}")
        schema = wait_for(
            admin,
            namespace,
            name,
            lambda s: recorded_job(s) is not None,
            report=report,
            deadline=args.timeout,
            stopping=stopping,
        )
        claim = schema["status"]["activeOperation"]
        _say(f"# recorded: Job {namespace}/{claim['jobName']} uid {claim['jobUID']}")
        if args.once:
            return 0
        _say("# running; Ctrl-C stops the manager and the control plane")
        wait_for(
            admin,
            namespace,
            name,
            lambda _s: False,
            report=report,
            deadline=None,
            stopping=stopping,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
