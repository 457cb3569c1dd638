"""The CRDs alone, on a real API server: what it refuses, what it defaults, what it explains.

No admission webhook judges the namespaces these tests write to (the operator
fixture installs the CRDs and no webhook configuration; other tests register theirs
for their own labelled namespaces only, which ``_unjudged_namespace`` checks), so
every refusal here is the API server's own: the CRD's OpenAPI schema and its CEL
rules, generated from the models by ``jobclaim.crds``.

- A table of invalid specs, each refused with HTTP 422 naming the field and saying
  the rule's one sentence, after a control row that is admitted.
- An approval, once created, cannot be edited (``self == oldSelf``), while its
  metadata still can (the control).
- ``kubectl get -o yaml`` of a minimal PtahSchema and PtahMigration shows every
  default, and they are the models' defaults.
- ``kubectl explain``'s source, the API server's OpenAPI v3 document for the group,
  describes every field of every kind, spec and status.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from jobclaim.api import KINDS
from jobclaim.api.common import CA_WITHOUT_TLS, CONNECT_OUTLASTS_DEADLINE, CREDENTIAL_IN_CLEAR
from jobclaim.api.schema import DEV_ONE_SOURCE
from jobclaim.apiserver import (
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAS,
    Invalid,
    Object,
    Resource,
)
from jobclaim.crds import IMMUTABLE
from lab import run as localrun
from tests.support.realapioperator import Operator, operator  # noqa: F401

pytestmark = pytest.mark.controlplane

DIGEST = "sha256:" + "ab" * 32
WEBHOOK_CONFIGURATIONS = (
    Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "X", False),
    Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "X", False),
)


def _unjudged_namespace(operator: Operator) -> str:  # noqa: F811
    """A fresh namespace no webhook configuration selects: the webhook is off for it."""
    namespace = f"crd-{uuid.uuid4().hex[:10]}"
    localrun.prepare_namespace(operator.admin, namespace)
    for resource in WEBHOOK_CONFIGURATIONS:
        for configuration in operator.admin.list(resource, None):
            for hook in configuration.get("webhooks") or []:
                selector = hook.get("namespaceSelector") or {}
                # Every configuration the tests register selects its own label; one
                # without a selector would judge this namespace too.
                assert selector.get("matchLabels"), configuration["metadata"]["name"]
    return namespace


def _example(kind: str) -> Object:
    name = {"PtahSchema": "ptahschema.yaml", "PtahMigration": "ptahmigration.yaml"}[kind]
    loaded: Object = yaml.safe_load((localrun.EXAMPLES / name).read_text())
    loaded.pop("status", None)
    if kind == "PtahSchema":
        # A dev of its own Secret key, so the rows below change one thing of it.
        loaded["spec"]["dev"] = {"urlFrom": {"name": "orders-dev-db", "key": "url"}}
    return loaded


def _set(path: str, value: Any) -> Callable[[Object], None]:
    *parents, last = path.split(".")

    def apply(document: Object) -> None:
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return apply


def _both(*changes: Callable[[Object], None]) -> Callable[[Object], None]:
    def apply(document: Object) -> None:
        for change in changes:
            change(document)

    return apply


DURATION = "must be a duration such as"
OCI = "must be an OCI reference"
# (kind, change, the field the refusal names, a piece of its sentence); the first row
# is the control: without it admitted, every refusal below could be a broken fixture.
INVALID = [
    ("PtahSchema", lambda d: None, None, None),
    ("PtahMigration", lambda d: None, None, None),
    ("PtahSchema", _set("spec.interval", "ten minutes"), "spec.interval", DURATION),
    ("PtahSchema", _set("spec.interval", "5s"), "spec.interval", "from 10s to 24h"),
    ("PtahSchema", _set("spec.interval", "25h"), "spec.interval", "from 10s to 24h"),
    ("PtahMigration", _set("spec.interval", "10"), "spec.interval", DURATION),
    ("PtahSchema", _set("spec.policy.lockTimeout", "2h"), "spec.policy.lockTimeout", "1s to 1h"),
    ("PtahMigration", _set("spec.policy.lockTimeout", "0s"), "spec.policy.lockTimeout", DURATION),
    (
        "PtahSchema",
        _set("spec.execution.connectTimeout", "11m"),
        "spec.execution.connectTimeout",
        "from 1s to 10m",
    ),
    (
        "PtahSchema",
        _set("spec.execution.failureRetryInterval", "2h"),
        "spec.execution.failureRetryInterval",
        "from 1s to 1h",
    ),
    (
        "PtahSchema",
        _both(
            _set("spec.execution.activeDeadlineSeconds", 60),
            _set("spec.execution.connectTimeout", "2m"),
        ),
        "spec.execution",
        CONNECT_OUTLASTS_DEADLINE,
    ),
    (
        "PtahSchema",
        _set("spec.execution.activeDeadlineSeconds", 10),
        "spec.execution.activeDeadlineSeconds",
        "should be greater than or equal to 30",
    ),
    (
        "PtahMigration",
        _set("spec.execution.activeDeadlineSeconds", 90000),
        "spec.execution.activeDeadlineSeconds",
        "should be less than or equal to 86400",
    ),
    ("PtahSchema", _set("spec.desired.ociRef", "not a reference"), "spec.desired.ociRef", OCI),
    (
        "PtahMigration",
        _set("spec.artifact.ociRef", "registry.example.com/Shop/x:1"),
        "spec.artifact.ociRef",
        OCI,
    ),
    (
        "PtahSchema",
        _set("spec.policy.exclude", [f"t{i}" for i in range(65)]),
        "spec.policy.exclude",
        "must have at most 64 items",
    ),
    (
        "PtahSchema",
        _both(
            _set("spec.desired.transport.plainHTTP", True),
            _set("spec.desired.registryAuthFrom", {"name": "registry-credentials"}),
        ),
        "spec.desired",
        CREDENTIAL_IN_CLEAR,
    ),
    (
        "PtahMigration",
        _both(
            _set("spec.artifact.transport.plainHTTP", True),
            _set(
                "spec.artifact.registryAuthFrom",
                {"name": "registry-credentials", "mode": "DockerConfigJSON"},
            ),
        ),
        "spec.artifact",
        CREDENTIAL_IN_CLEAR,
    ),
    (
        "PtahSchema",
        _set("spec.desired.transport", {"plainHTTP": True, "caFrom": {"name": "ca", "key": "ca"}}),
        "spec.desired.transport",
        CA_WITHOUT_TLS,
    ),
    (
        "PtahSchema",
        _set("spec.desired.registryAuthFrom", {"name": "pull", "mode": "Netrc"}),
        "spec.desired.registryAuthFrom.mode",
        "Unsupported value",
    ),
    (
        "PtahMigration",
        _set("spec.artifact.transport.caFrom", {"name": "ca"}),
        "spec.artifact.transport.caFrom.key",
        "Required value",
    ),
    # The operator's scratch database instead of one the schema names: admitted; both,
    # or a dev block naming neither, refused with the model's sentence.
    ("PtahSchema", _set("spec.dev", {"provided": {}}), None, None),
    (
        "PtahSchema",
        _set("spec.dev.provided", {}),
        "spec.dev",
        DEV_ONE_SOURCE,
    ),
    ("PtahSchema", _set("spec.dev", {}), "spec.dev", DEV_ONE_SOURCE),
    (
        "PtahSchema",
        _set("spec.policy.transactionMode", "some"),
        "spec.policy.transactionMode",
        "Unsupported value",
    ),
]


@pytest.mark.parametrize(
    ("kind", "change", "field", "sentence"),
    INVALID,
    ids=[f"{row[0]}:{row[2] or 'control'}:{row[3] or 'admitted'}" for row in INVALID],
)
def test_the_api_server_refuses_an_invalid_spec_naming_the_field(
    operator: Operator,  # noqa: F811
    kind: str,
    change: Callable[[Object], None],
    field: str | None,
    sentence: str | None,
) -> None:
    namespace = _unjudged_namespace(operator)
    resource = PTAHSCHEMAS if kind == "PtahSchema" else PTAHMIGRATIONS
    document = copy.deepcopy(_example(kind))
    document["metadata"] = {"name": "subject", "namespace": namespace}
    change(document)
    if field is None:
        stored = operator.admin.create(resource, namespace, document)
        assert stored["metadata"]["uid"]
        return
    with pytest.raises(Invalid) as refused:
        operator.admin.create(resource, namespace, document)
    said = str(refused.value)
    assert refused.value.status == 422, said
    assert f"{field}:" in said, said
    assert sentence is not None and sentence in said, said


def _approval(namespace: str) -> Object:
    return {
        "metadata": {"name": "approve-orders", "namespace": namespace},
        "spec": {
            "schemaRef": {"name": "orders", "uid": "5c1f6b2e-0000-4000-8000-000000000001"},
            "planRef": {"name": "ptah-plan-0", "uid": "5c1f6b2e-0000-4000-8000-000000000002"},
            "planFingerprint": DIGEST,
        },
    }


def test_an_approval_is_never_edited_but_its_labels_are(operator: Operator) -> None:  # noqa: F811
    namespace = _unjudged_namespace(operator)
    admin = operator.admin
    created = admin.create(PTAHSCHEMAAPPROVALS, namespace, _approval(namespace))
    # The control: a metadata change leaves the spec as it was, and is admitted.
    labelled = admin.patch_metadata(
        PTAHSCHEMAAPPROVALS, namespace, "approve-orders", {"labels": {"team": "shop"}}
    )
    assert labelled["spec"] == created["spec"]
    with pytest.raises(Invalid) as refused:
        admin.patch_spec(
            PTAHSCHEMAAPPROVALS,
            namespace,
            "approve-orders",
            {"planFingerprint": "sha256:" + "cd" * 32},
        )
    said = str(refused.value)
    assert "spec:" in said and IMMUTABLE.message in said, said
    assert admin.get(PTAHSCHEMAAPPROVALS, namespace, "approve-orders")["spec"] == created["spec"]


def _kubectl(operator: Operator, *args: str) -> str:  # noqa: F811
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is not installed"
    done = subprocess.run(
        [kubectl, "--kubeconfig", str(operator.plane.kubeconfig("admin")), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


MINIMAL = {
    "PtahSchema": {
        "target": {
            "engine": "PostgreSQL",
            "coordinationKey": "orders",
            "urlFrom": {"name": "db", "key": "url"},
        },
        "desired": {"ociRef": "registry.example.com/shop/orders:1"},
    },
    "PtahMigration": {
        "target": {
            "engine": "MySQL",
            "coordinationKey": "billing",
            "urlFrom": {"name": "db", "key": "url"},
        },
        "artifact": {"ociRef": "registry.example.com/shop/billing:1"},
    },
}


@pytest.mark.parametrize("kind", sorted(MINIMAL))
def test_get_o_yaml_of_a_minimal_resource_shows_every_default(
    operator: Operator,  # noqa: F811
    kind: str,
) -> None:
    namespace = _unjudged_namespace(operator)
    resource = PTAHSCHEMAS if kind == "PtahSchema" else PTAHMIGRATIONS
    written = {"metadata": {"name": "minimal"}, "spec": copy.deepcopy(MINIMAL[kind])}
    operator.admin.create(resource, namespace, written)
    shown = yaml.safe_load(
        _kubectl(operator, "get", resource.plural, "minimal", "-n", namespace, "-o", "yaml")
    )
    # Exactly what the controller reads from the written spec: the models' defaults,
    # every one, applied by the API server.
    read = KINDS[kind].model_validate({"kind": kind, **written}).to_wire()["spec"]
    assert shown["spec"] == read
    # The control: the API server really added them (the written spec had none).
    assert "interval" not in written["spec"] and shown["spec"]["interval"] == "10m"
    assert shown["spec"]["policy"]["lockTimeout"] in ("30s", "5m")
    assert shown["spec"]["execution"]["connectTimeout"] == "10s"


def _fields(node: dict[str, Any], schemas: dict[str, Any], path: str) -> list[tuple[str, bool]]:
    """Every field under ``node`` of the OpenAPI v3 document, references followed."""
    if "$ref" in node:
        node = schemas[node["$ref"].rsplit("/", 1)[-1]]
    for wrapper in ("allOf", "anyOf"):
        if node.get(wrapper):
            node = {**node, **node[wrapper][0]}
    found: list[tuple[str, bool]] = []
    for name, child in (node.get("properties") or {}).items():
        found.append((f"{path}.{name}", bool(child.get("description"))))
        found += _fields(child, schemas, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _fields(node["items"], schemas, f"{path}[]")
    return found


def test_a_registry_credential_named_without_a_mode_is_stored_in_todays_mode(
    operator: Operator,  # noqa: F811
) -> None:
    namespace = _unjudged_namespace(operator)
    spec = copy.deepcopy(MINIMAL["PtahMigration"])
    spec["artifact"]["registryAuthFrom"] = {"name": "registry-credentials"}
    spec["artifact"]["transport"] = {"caFrom": {"name": "registry-ca", "key": "ca.pem"}}
    operator.admin.create(PTAHMIGRATIONS, namespace, {"metadata": {"name": "m"}, "spec": spec})
    stored = operator.admin.get(PTAHMIGRATIONS, namespace, "m")["spec"]["artifact"]
    assert stored["registryAuthFrom"] == {"name": "registry-credentials", "mode": "Environment"}
    assert stored["transport"] == {
        "plainHTTP": False,
        "caFrom": {"name": "registry-ca", "key": "ca.pem"},
    }


def test_kubectl_explain_describes_every_field_of_every_kind(
    operator: Operator,  # noqa: F811
) -> None:
    document = json.loads(
        _kubectl(operator, "get", "--raw", "/openapi/v3/apis/operator.ptah.run/v1alpha1")
    )
    schemas: dict[str, Any] = document["components"]["schemas"]
    counted: list[tuple[str, bool]] = []
    for kind in KINDS:
        schema = schemas[f"run.ptah.operator.v1alpha1.{kind}"]
        for top in ("spec", "status"):
            if top in schema["properties"]:
                counted.append(
                    (f"{kind}.{top}", bool(schema["properties"][top].get("description")))
                )
                counted += _fields(schema["properties"][top], schemas, f"{kind}.{top}")
    missing = [path for path, described in counted if not described]
    assert len(counted) > 700, "the walk did not reach every kind's fields"
    assert missing == [], (
        f"{len(counted) - len(missing)} of {len(counted)} described: {missing[:10]}"
    )
    # And kubectl explain prints one of them, from the same document.
    explained = _kubectl(operator, "explain", "ptahschemas.status.plan.fingerprint")
    assert "what an approval names" in explained


def test_kubectl_get_by_short_name_and_category_prints_the_kinds_columns(
    operator: Operator,  # noqa: F811
) -> None:
    namespace = _unjudged_namespace(operator)
    approval = _approval(namespace)
    approval["spec"]["approver"] = {"username": "alice@example.com"}
    operator.admin.create(PTAHSCHEMAAPPROVALS, namespace, approval)
    operator.admin.create(
        PTAHSCHEMAS, namespace, {"metadata": {"name": "orders"}, "spec": MINIMAL["PtahSchema"]}
    )
    header, row = _kubectl(operator, "get", "ptsapproval", "-n", namespace).splitlines()
    assert header.split() == ["NAME", "SCHEMA", "PLAN", "APPROVER", "CONSUMED", "STALE", "AGE"]
    assert row.split()[:4] == ["approve-orders", "orders", "ptah-plan-0", "alice@example.com"]
    # The category lists every kind of the group at once: the schema and its approval.
    listed = _kubectl(operator, "get", "ptah", "-n", namespace, "-o", "name").split()
    assert sorted(listed) == [
        "ptahschema.operator.ptah.run/orders",
        "ptahschemaapproval.operator.ptah.run/approve-orders",
    ]
