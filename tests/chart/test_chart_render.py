"""What the chart renders, checked object by object with the real helm.

Two renders: the defaults plus the five required values (`default_render`), and
tests/chart/values/custom.yaml in another namespace (`custom_render`). Each test
names the property it protects; most are about what must never be rendered.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest

from jobclaim.api import SPEC_WRITER_ANNOTATION, UNRESOLVED_RUN_ANNOTATION
from jobclaim.crds import crds
from lab.run import SPEC_OR_WRITER_CHANGED
from tests.support.chartrender import (
    CHART,
    MANAGER,
    NAMESPACE,
    VALUES,
    Helm,
    Object,
    grants,
    load_documents,
    load_yaml,
    of_kind,
    only,
    rules_of,
)

# Every test here renders the chart with helm, some through a render looked up by name
# (request.getfixturevalue), which the fixture-derived mark (tests/conftest.py)
# cannot see.
pytestmark = pytest.mark.helm

CUSTOM_MANAGER = "system:serviceaccount:db-ops:ptah-operator"
WEBHOOK_CONFIGS = (
    "ptah-operator-controller-write",
    "ptah-operator-manager-state",
    "ptah-operator-decisions",
)
STAMP_CONFIG = "ptah-operator-stamp"
DECISION_PLURALS = [
    "ptahschemaapprovals",
    "ptahmigrationapprovals",
    "ptahmigrationrunacknowledgments",
    "ptahschemaproofsettlements",
]
POLICIES = (
    "ptah-operator-status-writer",
    "ptah-operator-unresolved-run-annotation",
    "ptah-operator-manager-metadata-only",
    "ptah-operator-apply-always-groups",
)


# The rotator's install Job is named by a hash of its Pod template (rotator.yaml).
CERT_INIT_JOB = re.compile(r"^ptah-operator-cert-init-[0-9a-f]{10}$")


def kinds_and_names(objects: list[Object]) -> set[tuple[str, str]]:
    """Each object's kind and name; the install Job's hash reads as ``<hash>``."""
    return {
        (o["kind"], CERT_INIT_JOB.sub("ptah-operator-cert-init-<hash>", o["metadata"]["name"]))
        for o in objects
    }


def manager_pod(objects: list[Object]) -> dict[str, Any]:
    spec: dict[str, Any] = only(objects, "Deployment", "ptah-operator")["spec"]["template"]
    return spec


def container(objects: list[Object]) -> dict[str, Any]:
    (manager,) = manager_pod(objects)["spec"]["containers"]
    result: dict[str, Any] = manager
    return result


def env(objects: list[Object]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from field>") for e in container(objects)["env"]}


def webhooks(objects: list[Object]) -> list[dict[str, Any]]:
    return [
        hook
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for config in of_kind(objects, kind)
        for hook in config["webhooks"]
    ]


# --- the whole set -----------------------------------------------------------------


def test_the_default_install_renders_exactly_these_objects(default_render: list[Object]) -> None:
    assert kinds_and_names(default_render) == {
        ("ServiceAccount", "ptah-operator"),
        ("ClusterRole", "ptah-operator-manager"),
        ("ClusterRole", "ptah-operator-approver"),
        ("ClusterRoleBinding", "ptah-operator-manager"),
        ("Role", "ptah-operator-leases"),
        ("RoleBinding", "ptah-operator-leases"),
        ("Service", "ptah-operator-webhook"),
        ("Service", "ptah-operator-metrics"),
        ("Deployment", "ptah-operator"),
        ("PodDisruptionBudget", "ptah-operator"),
        ("ValidatingWebhookConfiguration", "ptah-operator-controller-write"),
        ("ValidatingWebhookConfiguration", "ptah-operator-manager-state"),
        ("ValidatingWebhookConfiguration", "ptah-operator-decisions"),
        ("MutatingWebhookConfiguration", "ptah-operator-stamp"),
        ("ValidatingAdmissionPolicy", "ptah-operator-status-writer"),
        ("ValidatingAdmissionPolicyBinding", "ptah-operator-status-writer"),
        ("ValidatingAdmissionPolicy", "ptah-operator-unresolved-run-annotation"),
        ("ValidatingAdmissionPolicyBinding", "ptah-operator-unresolved-run-annotation"),
        ("ValidatingAdmissionPolicy", "ptah-operator-manager-metadata-only"),
        ("ValidatingAdmissionPolicyBinding", "ptah-operator-manager-metadata-only"),
        ("ValidatingAdmissionPolicy", "ptah-operator-apply-always-groups"),
        ("ValidatingAdmissionPolicyBinding", "ptah-operator-apply-always-groups"),
        ("ValidatingAdmissionPolicy", "ptah-operator-result-records"),
        ("ValidatingAdmissionPolicyBinding", "ptah-operator-result-records"),
        ("ClusterRole", "ptah-operator-result-writer"),
        ("ClusterRoleBinding", "ptah-operator-result-writer"),
        *ROTATOR_OBJECTS,
        *CRD_UPGRADE_OBJECTS,
    }


def test_the_custom_install_drops_what_it_turned_off(
    default_render: list[Object], custom_render: list[Object]
) -> None:
    # Its own certificate (nothing of ours to issue or rotate it), no PDB, no approver
    # role.
    assert kinds_and_names(default_render) - kinds_and_names(custom_render) == {
        ("PodDisruptionBudget", "ptah-operator"),
        ("ClusterRole", "ptah-operator-approver"),
        *ROTATOR_OBJECTS,
    }
    assert kinds_and_names(custom_render) <= kinds_and_names(default_render)


@pytest.mark.parametrize("render", ["default_render", "custom_render"])
def test_every_namespaced_object_lands_in_its_namespace(
    render: str, request: pytest.FixtureRequest
) -> None:
    objects: list[Object] = request.getfixturevalue(render)
    release = NAMESPACE if render == "default_render" else "db-ops"
    leases = NAMESPACE if render == "default_render" else "ptah-leases"
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in cluster_scoped:
            assert namespace is None, obj["kind"]
        elif obj["kind"] in {"Role", "RoleBinding"} and obj["metadata"]["name"] == LEASE_ROLE:
            assert namespace == leases
        else:
            assert namespace == release, obj["kind"]


def test_the_crds_helm_installs_are_the_generated_ones(helm: Helm) -> None:
    rendered = helm.render([VALUES / "required.yaml"], extra=["--include-crds"])
    installed = {o["metadata"]["name"]: o for o in of_kind(rendered, "CustomResourceDefinition")}
    generated = {d["metadata"]["name"]: d for text in crds().values() for d in load_documents(text)}
    assert installed == generated


CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))


@pytest.mark.parametrize(
    "values",
    [VALUES / "required.yaml", VALUES / "custom.yaml", *CI_VALUES],
    ids=lambda path: path.name,
)
def test_helm_lint_passes_strictly(helm: Helm, values: Path) -> None:
    # The control for ci/: the glob found the files, so every one of them is linted.
    assert len(CI_VALUES) >= 3
    result = helm.run("lint", str(CHART), "--strict", "--values", str(values), "-n", "ptah-system")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_helm_lint_without_the_required_values_names_them(helm: Helm) -> None:
    result = helm.run("lint", str(CHART), "--strict")
    assert result.returncode != 0
    assert "missing properties 'repository', 'digest'" in result.stdout
    assert "missing properties 'executorImage', 'runnerImage', 'ptahVersion'" in result.stdout


# --- the manager Pod ------------------------------------------------------------------


@pytest.mark.parametrize("render", ["default_render", "custom_render"])
def test_the_manager_runs_hardened(render: str, request: pytest.FixtureRequest) -> None:
    objects: list[Object] = request.getfixturevalue(render)
    pod = manager_pod(objects)["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    for each in pod["containers"] + pod.get("initContainers", []):
        context = each["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["privileged"] is False
        assert context["runAsNonRoot"] is True
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert "add" not in context["capabilities"]


def test_only_the_manager_pod_gets_an_api_token(default_render: list[Object]) -> None:
    account = only(default_render, "ServiceAccount", "ptah-operator")
    assert account["automountServiceAccountToken"] is False
    pod = manager_pod(default_render)["spec"]
    assert pod["serviceAccountName"] == "ptah-operator"
    assert pod["automountServiceAccountToken"] is True


def test_the_manager_image_is_pinned_by_digest(default_render: list[Object]) -> None:
    required = load_yaml(VALUES / "required.yaml")
    pinned = f"{required['image']['repository']}@{required['image']['digest']}"
    assert container(default_render)["image"] == pinned
    assert env(default_render)["PTAH_MANAGER_IMAGE"] == pinned
    assert re.fullmatch(r"[^\s@]+@sha256:[0-9a-f]{64}", env(default_render)["PTAH_EXECUTOR_IMAGE"])
    assert re.fullmatch(r"[^\s@]+@sha256:[0-9a-f]{64}", env(default_render)["PTAH_RUNNER_IMAGE"])


def test_two_replicas_behind_leader_election_and_a_budget(default_render: list[Object]) -> None:
    deployment = only(default_render, "Deployment", "ptah-operator")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert env(default_render)["PTAH_LEADER_ELECTION"] == "true"
    budget = only(default_render, "PodDisruptionBudget", "ptah-operator")
    assert budget["spec"]["minAvailable"] == 1
    assert (
        budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    )


@pytest.mark.parametrize(("render", "port"), [("default_render", 9443), ("custom_render", 10443)])
def test_probes_ask_the_admission_port_over_tls(
    render: str, port: int, request: pytest.FixtureRequest
) -> None:
    objects: list[Object] = request.getfixturevalue(render)
    manager = container(objects)
    ports = {p["name"]: p["containerPort"] for p in manager["ports"]}
    assert ports["webhook"] == port
    for probe, path in [
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ]:
        assert manager[probe]["httpGet"] == {"path": path, "port": "webhook", "scheme": "HTTPS"}


def test_the_certificate_is_mounted_whole_without_its_ca_key(default_render: list[Object]) -> None:
    pod = manager_pod(default_render)["spec"]
    (mount,) = [
        m for m in container(default_render)["volumeMounts"] if m["name"] == "webhook-certs"
    ]
    # subPath mounts are never updated by the kubelet: a rotation would not reach them.
    assert all("subPath" not in m for m in container(default_render)["volumeMounts"])
    assert mount["readOnly"] is True
    assert env(default_render)["PTAH_WEBHOOK_CERT_DIR"] == mount["mountPath"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "webhook-certs"]
    assert volume["secret"]["secretName"] == "ptah-operator-webhook-tls"
    assert [i["key"] for i in volume["secret"]["items"]] == ["tls.crt", "tls.key"]


def test_the_manager_is_told_who_it_is(
    default_render: list[Object], custom_render: list[Object]
) -> None:
    assert env(default_render)["PTAH_MANAGER_USERNAME"] == MANAGER
    assert env(custom_render)["PTAH_MANAGER_USERNAME"] == CUSTOM_MANAGER
    assert env(default_render)["PTAH_COORDINATION_NAMESPACE"] == NAMESPACE
    assert env(custom_render)["PTAH_COORDINATION_NAMESPACE"] == "ptah-leases"
    # The manager reads no webhook configuration (it has no verb on them).
    assert "PTAH_WEBHOOK_CONFIGURATIONS" not in env(default_render)


def test_custom_values_reach_the_pod(custom_render: list[Object]) -> None:
    template = manager_pod(custom_render)
    spec = template["spec"]
    assert only(custom_render, "Deployment")["spec"]["replicas"] == 3
    assert template["metadata"]["labels"]["team"] == "platform"
    assert template["metadata"]["annotations"] == {"example.com/owner": "platform"}
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["tolerations"][0]["key"] == "dedicated"
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["imagePullSecrets"] == [{"name": "registry-internal"}]
    assert container(custom_render)["imagePullPolicy"] == "Always"
    assert container(custom_render)["resources"]["limits"] == {"memory": "512Mi"}
    assert env(custom_render)["PTAH_LOG_LEVEL"] == "debug"
    assert env(custom_render)["PTAH_LEADER_ELECTION_LEASE_NAME"] == "ptah-leader"
    (volume,) = [v for v in spec["volumes"] if v["name"] == "webhook-certs"]
    assert volume["secret"]["secretName"] == "ptah-webhook-serving"


# --- Services ---------------------------------------------------------------------------


def test_the_services_reach_the_manager_and_never_an_operation_pod(
    default_render: list[Object],
) -> None:
    labels = manager_pod(default_render)["metadata"]["labels"]
    operation_pod = {
        "app.kubernetes.io/managed-by": "ptah-operator",
        "app.kubernetes.io/component": "schema-operation",
        "app.kubernetes.io/name": "ptah-operator",
        "app.kubernetes.io/instance": "ptah-operator",
    }
    named_ports = {p["name"]: p["containerPort"] for p in container(default_render)["ports"]}
    expected = {
        "ptah-operator-webhook": (443, "webhook"),
        "ptah-operator-metrics": (8080, "metrics"),
    }
    for name, (port, target) in expected.items():
        service = only(default_render, "Service", name)
        selector = service["spec"]["selector"]
        assert selector.items() <= labels.items()
        assert not selector.items() <= operation_pod.items()
        (service_port,) = service["spec"]["ports"]
        assert (service_port["port"], service_port["targetPort"]) == (port, target)
        assert target in named_ports
    assert named_ports["webhook"] == 9443


# --- RBAC -------------------------------------------------------------------------------


def test_the_manager_never_touches_secrets(default_render: list[Object]) -> None:
    for rule in rules_of(default_render):
        assert "secrets" not in rule["resources"]
        assert "*" not in rule["resources"] and "*" not in rule["verbs"]
        assert "*" not in rule["apiGroups"]


def test_the_manager_deletes_nothing_and_cannot_escalate(default_render: list[Object]) -> None:
    verbs = {verb for _, _, verb in grants(rules_of(default_render))}
    assert verbs.isdisjoint({"delete", "deletecollection", "escalate", "bind", "impersonate"})


def test_the_manager_never_updates_the_spec_of_what_people_write(
    default_render: list[Object],
) -> None:
    people_write = {
        "ptahschemas",
        "ptahmigrations",
        "ptahschemaapprovals",
        "ptahmigrationapprovals",
        "ptahmigrationrunacknowledgments",
        "ptahschemaproofsettlements",
    }
    for group, resource, verb in grants(rules_of(default_render)):
        if group == "operator.ptah.run" and resource in people_write:
            assert verb not in {"update", "create"}, (resource, verb)


@pytest.mark.parametrize("render", ["default_render", "custom_render"])
def test_the_manager_has_no_verb_on_any_webhook_configuration(
    render: str, request: pytest.FixtureRequest
) -> None:
    """The webhooks constrain the manager, and RBAC cannot limit a patch to caBundle:
    a manager that could patch them could switch them off (issue 21)."""
    rules = rules_of(request.getfixturevalue(render))
    for rule in rules:
        assert "admissionregistration.k8s.io" not in rule["apiGroups"], rule
        assert not any("webhookconfigurations" in r for r in rule["resources"]), rule


def test_only_the_rotator_may_patch_the_webhook_configurations_by_name(
    default_render: list[Object],
) -> None:
    patchers = [
        (role["metadata"]["name"], rule)
        for role in default_render
        if role["kind"] in {"ClusterRole", "Role"}
        for rule in role["rules"]
        if any("webhookconfigurations" in r for r in rule["resources"])
    ]
    assert {name for name, _ in patchers} == {"ptah-operator-cert-rotator"}
    by_resource = {tuple(rule["resources"]): rule for _, rule in patchers}
    validating = by_resource[("validatingwebhookconfigurations",)]
    mutating = by_resource[("mutatingwebhookconfigurations",)]
    assert sorted(validating["resourceNames"]) == sorted(WEBHOOK_CONFIGS)
    assert mutating["resourceNames"] == ["ptah-operator-stamp"]
    assert sorted(validating["verbs"]) == sorted(mutating["verbs"]) == ["get", "patch"]
    (binding,) = [
        b
        for b in default_render
        if b["kind"] == "ClusterRoleBinding"
        and b["roleRef"]["name"] == "ptah-operator-cert-rotator"
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ptah-operator-cert-rotator", "namespace": NAMESPACE}
    ]


def test_the_rotator_runs_the_rotation_on_the_charts_secret_and_configurations(
    default_render: list[Object],
) -> None:
    cron = only(default_render, "CronJob", "ptah-operator-cert-rotator")["spec"]
    pod = cron["jobTemplate"]["spec"]["template"]["spec"]
    assert cron["concurrencyPolicy"] == "Forbid"
    assert pod["serviceAccountName"] == "ptah-operator-cert-rotator"
    (container,) = pod["containers"]
    assert container["command"] == ["python3", "-m", "manager.rotator"]
    args = container["args"]
    assert "--secret=ptah-operator-webhook-tls" in args
    assert sorted(a.split("=", 1)[1] for a in args if a.startswith("--validating=")) == sorted(
        WEBHOOK_CONFIGS
    )
    assert "--mutating=ptah-operator-stamp" in args
    role = only(default_render, "Role", "ptah-operator-cert-rotator")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["ptah-operator-webhook-tls"],
            "verbs": ["get", "patch"],
        },
        # The rotator creates the Secret (the chart renders none); RBAC cannot name
        # what a create makes.
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]


def test_leases_are_granted_only_in_the_coordination_namespace(
    custom_render: list[Object],
) -> None:
    cluster_rules = only(custom_render, "ClusterRole", "ptah-operator-manager")["rules"]
    assert all("leases" not in r["resources"] for r in cluster_rules)
    role = only(custom_render, "Role", "ptah-operator-leases")
    assert role["metadata"]["namespace"] == "ptah-leases"
    assert grants(role["rules"]) == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")
    }
    binding = only(custom_render, "RoleBinding", "ptah-operator-leases")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ptah-operator", "namespace": "db-ops"}
    ]


ROTATOR_OBJECTS = {
    ("ServiceAccount", "ptah-operator-cert-rotator"),
    ("ClusterRole", "ptah-operator-cert-rotator"),
    ("ClusterRoleBinding", "ptah-operator-cert-rotator"),
    ("Role", "ptah-operator-cert-rotator"),
    ("RoleBinding", "ptah-operator-cert-rotator"),
    ("CronJob", "ptah-operator-cert-rotator"),
    ("Job", "ptah-operator-cert-init-<hash>"),
}
LEASE_ROLE = "ptah-operator-leases"
# The pre-upgrade hook (crd-upgrade.yaml); tests/chart/test_crd_upgrade.py checks it.
CRD_UPGRADE_OBJECTS = {
    ("ServiceAccount", "ptah-operator-crd-upgrade"),
    ("ClusterRole", "ptah-operator-crd-upgrade"),
    ("ClusterRoleBinding", "ptah-operator-crd-upgrade"),
    ("ConfigMap", "ptah-operator-crd-upgrade"),
    ("Job", "ptah-operator-crd-upgrade"),
}


def readme_rbac_table() -> set[tuple[str, str, str]]:
    """The (API group, resource, verb) triples the chart README justifies."""
    text = (CHART / "README.md").read_text()
    section = text.split("## RBAC", 1)[1].split("\n## ", 1)[0]
    table: set[tuple[str, str, str]] = set()
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in {"API group", ""} or set(cells[0]) <= {"-", " "}:
            continue
        group = "" if cells[0] == "core" else cells[0]
        resources = [r.strip().strip("`") for r in cells[1].split(",")]
        verbs = [v.strip().strip("`") for v in cells[2].split(",")]
        table |= {(group, r, v) for r in resources for v in verbs}
    return table


def test_every_grant_is_justified_in_the_readme_and_every_justification_granted(
    default_render: list[Object],
) -> None:
    justified = readme_rbac_table()
    assert justified, "the README's RBAC table did not parse, so nothing below proves anything"
    assert grants(rules_of(default_render)) == justified


# --- admission --------------------------------------------------------------------------


@pytest.mark.parametrize("render", ["default_render", "custom_render"])
def test_every_webhook_fails_closed_with_an_explicit_timeout(
    render: str, request: pytest.FixtureRequest
) -> None:
    objects: list[Object] = request.getfixturevalue(render)
    hooks = webhooks(objects)
    assert len(hooks) == 8
    for hook in hooks:
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert isinstance(hook["timeoutSeconds"], int)
        # A label on the object is the writer's to set: it must never decide
        # whether the object is reviewed.
        assert hook.get("objectSelector", {}) == {}
        # No namespace is excluded (the README says why none needs to be).
        assert hook.get("namespaceSelector", {}) == {}
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["port"]) == ("ptah-operator-webhook", 443)
        assert "url" not in hook["clientConfig"]


def test_controller_write_sees_only_the_managers_writes(default_render: list[Object]) -> None:
    (hook,) = only(default_render, "ValidatingWebhookConfiguration", WEBHOOK_CONFIGS[0])["webhooks"]
    assert hook["matchPolicy"] == "Exact"
    assert hook["timeoutSeconds"] == 30
    assert hook["clientConfig"]["service"]["path"] == "/validate-controller-write"
    assert hook["matchConditions"] == [
        {"name": "manager-only", "expression": f"request.userInfo.username == '{MANAGER}'"}
    ]
    rules = {
        (group, version, resource, operation)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for version in rule["apiVersions"]
        for resource in rule["resources"]
        for operation in rule["operations"]
    }
    assert rules == {
        ("batch", "v1", "jobs", "CREATE"),
        ("batch", "v1", "jobs", "UPDATE"),
        ("", "v1", "configmaps", "CREATE"),
        ("operator.ptah.run", "v1alpha1", "ptahschemaplans", "CREATE"),
        ("operator.ptah.run", "v1alpha1", "ptahschemaplanchunks", "CREATE"),
        ("operator.ptah.run", "v1alpha1", "ptahmigrationplans", "CREATE"),
    }


def test_manager_state_sees_every_status_write_and_the_annotation(
    default_render: list[Object], custom_render: list[Object]
) -> None:
    config = only(default_render, "ValidatingWebhookConfiguration", WEBHOOK_CONFIGS[1])
    status, annotation = config["webhooks"]
    for hook in (status, annotation):
        assert hook["clientConfig"]["service"]["path"] == "/validate-manager-state"
        assert 5 <= hook["timeoutSeconds"] <= 10
    assert status["rules"] == [
        {
            "apiGroups": ["operator.ptah.run"],
            "apiVersions": ["*"],
            "resources": ["*/status"],
            "operations": ["UPDATE"],
            "scope": "Namespaced",
        }
    ]
    # Every writer's status write is reviewed, not only the manager's.
    assert "matchConditions" not in status
    assert annotation["rules"][0]["resources"] == ["ptahmigrations"]
    assert annotation["rules"][0]["operations"] == ["UPDATE"]
    (condition,) = annotation["matchConditions"]
    assert UNRESOLVED_RUN_ANNOTATION in condition["expression"]
    custom = webhooks(custom_render)
    assert sorted(h["timeoutSeconds"] for h in custom) == [5, 5, 5, 5, 5, 5, 5, 20]


def rule_set(hook: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, operation)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for operation in rule["operations"]
    }


def test_the_stamp_webhook_sees_every_decision_create_and_every_spec_change(
    default_render: list[Object],
) -> None:
    decisions, writer = only(default_render, "MutatingWebhookConfiguration", STAMP_CONFIG)[
        "webhooks"
    ]
    for hook in (decisions, writer):
        assert hook["clientConfig"]["service"]["path"] == "/mutate-stamp"
        assert hook["reinvocationPolicy"] == "IfNeeded"
    # Every creator's decision is stamped, not only some: no match condition.
    assert "matchConditions" not in decisions
    group = "operator.ptah.run"
    assert rule_set(decisions) == {(group, p, "CREATE") for p in DECISION_PLURALS}
    assert rule_set(writer) == {
        (group, p, op) for p in ("ptahschemas", "ptahmigrations") for op in ("CREATE", "UPDATE")
    }
    (condition,) = writer["matchConditions"]
    assert condition["expression"].startswith("request.operation == 'CREATE' || ")
    assert SPEC_WRITER_ANNOTATION in condition["expression"]
    # make run and the real-API tests register the very same expression.
    assert condition["expression"] == SPEC_OR_WRITER_CHANGED


def test_the_decisions_webhook_checks_what_the_stamp_webhook_writes(
    default_render: list[Object],
) -> None:
    stamp = only(default_render, "MutatingWebhookConfiguration", STAMP_CONFIG)["webhooks"]
    decisions, writer, records = only(
        default_render, "ValidatingWebhookConfiguration", WEBHOOK_CONFIGS[2]
    )["webhooks"]
    group = "operator.ptah.run"
    assert rule_set(decisions) == {
        (group, p, op) for p in DECISION_PLURALS for op in ("CREATE", "UPDATE")
    }
    assert "matchConditions" not in decisions
    # One expression decides which spec writes both webhooks see.
    assert writer["matchConditions"] == stamp[1]["matchConditions"]
    assert rule_set(writer) == rule_set(stamp[1])
    for hook in (decisions, writer):
        assert hook["clientConfig"]["service"]["path"] == "/validate-decisions"
    # Result records: anyone's create or change is judged (the writer is an operation
    # Pod, never the manager), on their own path.
    assert rule_set(records) == {(group, "ptahresultrecords", op) for op in ("CREATE", "UPDATE")}
    assert "matchConditions" not in records
    assert records["clientConfig"]["service"]["path"] == "/validate-records"


def test_the_annotation_rule_is_one_expression_in_both_places(default_render: list[Object]) -> None:
    config = only(default_render, "ValidatingWebhookConfiguration", WEBHOOK_CONFIGS[1])
    changed = config["webhooks"][1]["matchConditions"][0]["expression"]
    policy = only(default_render, "ValidatingAdmissionPolicy", POLICIES[1])
    assert policy["spec"]["validations"][0]["expression"] == f"!({changed})"


def test_a_given_certificate_is_trusted_as_given(custom_render: list[Object]) -> None:
    given = load_yaml(VALUES / "custom.yaml")["webhook"]["caBundle"]
    for hook in webhooks(custom_render):
        assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode() == given


def test_the_status_writer_policy_admits_only_the_manager(
    default_render: list[Object], custom_render: list[Object]
) -> None:
    for objects, manager in [(default_render, MANAGER), (custom_render, CUSTOM_MANAGER)]:
        policy = only(objects, "ValidatingAdmissionPolicy", POLICIES[0])["spec"]
        assert policy["failurePolicy"] == "Fail"
        assert policy["matchConstraints"]["resourceRules"] == [
            {
                "apiGroups": ["operator.ptah.run"],
                "apiVersions": ["*"],
                "resources": ["*/status"],
                "operations": ["UPDATE"],
                "scope": "Namespaced",
            }
        ]
        (validation,) = policy["validations"]
        assert validation["expression"] == f"request.userInfo.username == '{manager}'"
        assert "PtahMigrationRunAcknowledgment" in validation["message"]
        assert manager in validation["messageExpression"]


def test_the_annotation_policy_spares_a_restore_and_the_manager(
    default_render: list[Object],
) -> None:
    policy = only(default_render, "ValidatingAdmissionPolicy", POLICIES[1])["spec"]
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert (rule["resources"], rule["operations"]) == (["ptahmigrations"], ["UPDATE"])
    assert policy["matchConditions"] == [
        {"name": "not-the-manager", "expression": f"!(request.userInfo.username == '{MANAGER}')"}
    ]
    assert UNRESOLVED_RUN_ANNOTATION in policy["validations"][0]["message"]


def test_four_eyes_reaches_the_webhook_from_the_charts_value_only(
    default_render: list[Object], custom_render: list[Object]
) -> None:
    # The webhook reads four-eyes from its own environment, which only the chart writes.
    assert env(default_render)["PTAH_REQUIRE_DISTINCT_APPROVER"] == "false"
    assert env(custom_render)["PTAH_REQUIRE_DISTINCT_APPROVER"] == "true"


MAKES_ALWAYS = (
    "has(object.spec.policy) && has(object.spec.policy.apply) && "
    "object.spec.policy.apply == 'Always' && (request.operation == 'CREATE' || "
    "!has(oldObject.spec.policy) || !has(oldObject.spec.policy.apply) || "
    "oldObject.spec.policy.apply != 'Always')"
)


@pytest.mark.parametrize(
    ("render", "groups", "says"),
    [
        ("default_render", "[]", "may be set by nobody in this cluster"),
        (
            "custom_render",
            '["platform-release","db-owners"]',
            "may be set only by members of platform-release, db-owners",
        ),
    ],
)
def test_the_apply_always_policy_admits_only_the_configured_groups(
    render: str, groups: str, says: str, request: pytest.FixtureRequest
) -> None:
    objects: list[Object] = request.getfixturevalue(render)
    policy = only(objects, "ValidatingAdmissionPolicy", POLICIES[3])["spec"]
    assert policy["failurePolicy"] == "Fail"
    # Both families, the resource itself only: status writes never meet it.
    assert policy["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["operator.ptah.run"],
            "apiVersions": ["*"],
            "resources": ["ptahschemas", "ptahmigrations"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
    ]
    # Only a write that makes apply Always: an Always left as it was is not judged.
    assert policy["matchConditions"] == [{"name": "makes-apply-always", "expression": MAKES_ALWAYS}]
    (validation,) = policy["validations"]
    # Groups only: a username list would let a namespace's service accounts in by name.
    assert validation["expression"] == f"request.userInfo.groups.exists(g, g in {groups})"
    assert validation["reason"] == "Forbidden"
    assert says in validation["message"]
    assert "approvals.applyAlwaysGroups" in validation["message"]
    assert validation["messageExpression"].startswith("request.userInfo.username + ")
    assert "approvals.applyAlwaysGroups" in validation["messageExpression"]


@pytest.mark.parametrize("policy", POLICIES)
def test_each_policy_is_bound_to_deny_everywhere(default_render: list[Object], policy: str) -> None:
    binding = only(default_render, "ValidatingAdmissionPolicyBinding", policy)["spec"]
    assert binding == {"policyName": policy, "validationActions": ["Deny"]}


def test_notes_say_who_the_manager_is_and_how_crds_are_upgraded(helm: Helm) -> None:
    # helm template never renders NOTES.txt; an install dry run does, without a cluster.
    result = helm.run(
        "install",
        "ptah-operator",
        str(CHART),
        "--dry-run=client",
        "--namespace",
        NAMESPACE,
        "--values",
        str(VALUES / "required.yaml"),
    )
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert MANAGER in notes
    assert "hook Job ptah-operator-crd-upgrade applies the new version's CRDs" in notes
    assert "PtahMigrationRunAcknowledgment" in notes


def test_the_chart_admits_the_kubernetes_versions_it_is_tested_on(helm: Helm) -> None:
    # Every test runs 1.37.2 (HARNESS_KUBE_VERSION): nothing older is proven.
    result = helm.template([VALUES / "required.yaml"], extra=["--kube-version", "1.36.9"])
    assert result.returncode != 0
    assert "chart requires kubeVersion: >=1.37.0-0" in result.stderr
    for tested in ("1.37.0", "1.37.2"):
        admitted = helm.template([VALUES / "required.yaml"], extra=["--kube-version", tested])
        assert admitted.returncode == 0, admitted.stderr


def test_with_cert_manager_the_chart_issues_nothing_and_installs_no_rotator(helm: Helm) -> None:
    objects = helm.render([VALUES / "required.yaml"], {"webhook.certManager.enabled": "true"})
    names = kinds_and_names(objects)
    assert ("Secret", "ptah-operator-webhook-tls") not in names
    assert not names & ROTATOR_OBJECTS
    assert {
        ("Certificate", "ptah-operator-webhook-ca"),
        ("Certificate", "ptah-operator-webhook"),
    } <= names
    serving = only(objects, "Certificate", "ptah-operator-webhook")["spec"]
    assert serving["secretName"] == "ptah-operator-webhook-tls"
    configurations = [
        o
        for o in objects
        if o["kind"] in {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
    ]
    assert len(configurations) == 4
    for configuration in configurations:
        annotations = configuration["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/ptah-operator-webhook"
    # The manager's grants are the same as without it: still no verb on the webhooks.
    assert grants(rules_of(objects)) == grants(rules_of(helm.render([VALUES / "required.yaml"])))


def test_cert_manager_and_an_existing_secret_are_refused_together(helm: Helm) -> None:
    # custom.yaml brings its own Secret and the CA bundle that verifies it.
    result = helm.template([VALUES / "custom.yaml"], {"webhook.certManager.enabled": "true"})
    assert result.returncode != 0
    assert "give one" in result.stderr
