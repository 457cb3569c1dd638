"""The chart installs into a real API server (issue 8, test 3).

- The CRDs under charts/ptah-operator/crds install by server-side apply (the way
  ``make run`` and ``kubectl apply --server-side`` install them) and become
  Established.
- The examples a user copies validate against those CRDs; an invalid one is refused
  (the control row: validation is really there).
- Every object ``helm template`` renders with the required values passes a
  server-side dry run: the API server's own decoding, defaulting, validation and
  admission (RBAC escalation checks, CEL compilation of the admission policies).

The harness reports a development version (v0.0.0-master) that the chart's
kubeVersion constraint refuses, so the chart is rendered with ``--kube-version``
naming the Kubernetes minor the harness is built from.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobclaim.apiserver import ApiError, Object, Resource
from lab import run as localrun
from tests.support.chartrender import VALUES, Helm, HelmUnavailable, build_helm
from tests.support.realapioperator import Operator, operator, webhooked_namespace  # noqa: F401

pytestmark = pytest.mark.controlplane

EXAMPLES = Path(localrun.EXAMPLES)
HARNESS_KUBE_VERSION = "1.37.2"

# Where each kind the chart renders is served. A kind missing here fails the test
# with its name, so a new template cannot slip past the dry run.
SERVED: dict[tuple[str, str], tuple[str, bool]] = {
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("batch/v1", "CronJob"): ("cronjobs", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): (
        "validatingwebhookconfigurations",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): (
        "mutatingwebhookconfigurations",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (
        "validatingadmissionpolicies",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
        "validatingadmissionpolicybindings",
        False,
    ),
    ("operator.ptah.run/v1alpha1", "PtahSchema"): ("ptahschemas", True),
    ("operator.ptah.run/v1alpha1", "PtahMigration"): ("ptahmigrations", True),
    ("operator.ptah.run/v1alpha1", "PtahSchemaApproval"): ("ptahschemaapprovals", True),
}


def resource_of(obj: Object) -> Resource:
    key = (obj["apiVersion"], obj["kind"])
    assert key in SERVED, f"no dry-run route for {key}: add it to SERVED"
    plural, namespaced = SERVED[key]
    group, _, version = obj["apiVersion"].rpartition("/")
    return Resource(group, version, plural, obj["kind"], namespaced=namespaced)


def dry_run(operator: Operator, obj: Object, namespace: str) -> Object:  # noqa: F811
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    resource = resource_of(obj)
    if resource.namespaced:
        # helm leaves the release namespace out of some templates; install puts it in.
        body["metadata"] = {**body["metadata"], "namespace": namespace}
    return localrun.apply(operator.plane, resource, body, identity="admin", dry_run=True)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = build_helm()
    except HelmUnavailable as error:
        pytest.fail(f"the chart dry run needs helm, which cannot be built: {error}")
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


def test_every_crd_the_chart_ships_is_applied_and_established(operator: Operator) -> None:  # noqa: F811
    shipped = {
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in localrun.CRD_DIR.glob("*.yaml")
    }
    assert set(operator.crds) == shipped
    for name in operator.crds:
        crd = operator.admin.get(localrun.CRDS, None, name)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", name
        assert conditions.get("NamesAccepted") == "True", name
        # Installed by server-side apply: the run's field manager owns the spec.
        appliers = {
            m["manager"] for m in crd["metadata"]["managedFields"] if m["operation"] == "Apply"
        }
        assert localrun.FIELD_MANAGER in appliers, name


def _example(name: str) -> Object:
    loaded: Object = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def test_the_examples_validate(operator: Operator) -> None:  # noqa: F811
    staged = webhooked_namespace(operator)
    for name in ("ptahschema.yaml", "ptahmigration.yaml"):
        obj = _example(name)
        obj["metadata"]["namespace"] = staged.namespace
        stored = dry_run(operator, obj, staged.namespace)
        assert stored["metadata"]["name"] == obj["metadata"]["name"], name
    # The approval template is filled in the way make run fills it, from a schema with
    # a plan: its placeholders are not values a person could submit.
    schema = _example("ptahschema.yaml")
    schema["metadata"].update(
        namespace=staged.namespace, uid="5c1f6b2e-0000-4000-8000-000000000001"
    )
    schema["status"] = {
        "plan": {
            "name": "ptah-plan-0123456789abcdef01234567",
            "uid": "5c1f6b2e-0000-4000-8000-000000000002",
            "fingerprint": "sha256:" + "a" * 64,
            "executionBindingID": "v1-" + "b" * 32,
        }
    }
    approval = localrun.approval_for(schema)
    assert (
        dry_run(operator, approval, staged.namespace)["spec"]["planRef"]["name"]
        == schema["status"]["plan"]["name"]
    )


@pytest.mark.parametrize(
    ("example", "path", "value"),
    [
        ("ptahschema.yaml", ("spec", "policy", "apply"), "Sometimes"),
        ("ptahschema.yaml", ("spec", "target", "engine"), "Oracle"),
        ("ptahmigration.yaml", ("spec", "target", "coordinationKey"), ""),
        ("ptahschema.yaml", ("spec", "dev"), {"urlFrom": {"name": "orders-db", "key": "url"}}),
    ],
    ids=["unknown-apply-policy", "unknown-engine", "empty-coordination-key", "dev-is-target"],
)
def test_an_invalid_example_is_refused(
    operator: Operator,  # noqa: F811
    example: str,
    path: tuple[str, ...],
    value: Any,
) -> None:
    staged = webhooked_namespace(operator)
    obj = copy.deepcopy(_example(example))
    obj["metadata"]["namespace"] = staged.namespace
    if path[-1] == "coordinationKey":
        # The examples name a realm; the key row is about a key, so the key is the
        # target's one name (beside the realm it would be refused as a second).
        del obj["spec"]["target"]["realmRef"]
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ApiError) as refused:
        dry_run(operator, obj, staged.namespace)
    assert refused.value.status == 422
    assert path[-1] in str(refused.value)


def test_the_rendered_chart_passes_a_server_side_dry_run(
    operator: Operator,  # noqa: F811
    helm: Helm,
) -> None:
    staged = webhooked_namespace(operator)
    objects = helm.render(
        [VALUES / "required.yaml"],
        namespace=staged.namespace,
        extra=["--kube-version", HARNESS_KUBE_VERSION],
    )
    assert objects, "helm rendered nothing"
    refused: list[str] = []
    for obj in objects:
        try:
            dry_run(operator, obj, staged.namespace)
        except ApiError as error:
            refused.append(f"{obj['kind']} {obj['metadata']['name']}: {error}")
    assert refused == []


def test_make_run_grants_the_manager_what_the_chart_grants(
    operator: Operator,  # noqa: F811
    helm: Helm,
) -> None:
    """``lab.run`` writes the manager's RBAC out instead of rendering the
    chart (make run should not need helm); this keeps the two from drifting apart.

    The manager's rules are the chart's, every one: it holds no verb on the webhook
    configurations (only the certificate rotator does).
    """
    objects = helm.render(
        [VALUES / "required.yaml"], extra=["--kube-version", HARNESS_KUBE_VERSION]
    )
    rendered = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    manager_rules = rendered[("ClusterRole", "ptah-operator-manager")]["rules"]
    assert manager_rules == localrun.MANAGER_RULES
    assert rendered[("Role", "ptah-operator-leases")]["rules"] == localrun.LEASE_RULES
    stored = operator.admin.get(localrun.CLUSTER_ROLES, None, "ptah-operator-manager")
    assert stored["rules"] == localrun.MANAGER_RULES
