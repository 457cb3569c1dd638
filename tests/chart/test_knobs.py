"""The installer's knobs, each rendered: ci/knobs-values.yaml sets them all at once.

Each test checks the knob reaches the object it is for and nothing it must not touch:
fullnameOverride renames the namespaced objects but never a cluster-scoped one (there
is one ptah-operator per cluster), a named ServiceAccount is the identity every
admission rule trusts, extraEnv cannot override a variable the chart sets, and the
NetworkPolicy never shuts the webhook port the API server calls.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chartrender import CHART, NAMESPACE, VALUES, Helm, Object, of_kind, only

pytestmark = pytest.mark.helm

KNOBS = CHART / "ci" / "knobs-values.yaml"
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.fixture(scope="module")
def knobs(helm: Helm) -> list[Object]:
    return helm.render([KNOBS])


def names(objects: list[Object], scoped: bool) -> set[tuple[str, str]]:
    return {
        (o["kind"], o["metadata"]["name"])
        for o in objects
        if (o["kind"] in CLUSTER_SCOPED) is scoped
    }


def rotator_pod(objects: list[Object]) -> dict[str, Any]:
    (cron,) = of_kind(objects, "CronJob")
    spec: dict[str, Any] = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def layered(helm: Helm, tmp_path: Path, overrides: dict[str, Any]) -> list[Object]:
    layer = tmp_path / "layer.yaml"
    layer.write_text(yaml.safe_dump(overrides))
    return helm.render([VALUES / "required.yaml", layer])


def failure(helm: Helm, tmp_path: Path, overrides: dict[str, Any]) -> str:
    layer = tmp_path / "layer.yaml"
    layer.write_text(yaml.safe_dump(overrides))
    result = helm.template([VALUES / "required.yaml", layer])
    assert result.returncode != 0, "rendered although it should have been refused"
    return result.stderr


def test_fullname_override_renames_the_namespaced_objects_only(
    default_render: list[Object], knobs: list[Object]
) -> None:
    assert names(knobs, scoped=True) == names(default_render, scoped=True)
    namespaced = {name for kind, name in names(knobs, scoped=False)}
    assert {
        "db-ops",
        "db-ops-webhook",
        "db-ops-metrics",
        "db-ops-cert-rotator",
        "ptah-manager",
    } <= namespaced
    # The lease Role and its binding keep their fixed name, in the coordination
    # namespace, beside the leader Lease whose name is leaderElection.leaseName.
    unchanged = {name for name in namespaced if name.startswith("ptah-operator")}
    assert unchanged == {"ptah-operator-leases"}
    # Everything that points at a renamed object follows it.
    deployment = only(knobs, "Deployment", "db-ops")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["webhook-certs"]["secret"]["secretName"] == "db-ops-webhook-tls"
    services = {
        hook["clientConfig"]["service"]["name"]
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        for config in of_kind(knobs, kind)
        for hook in config["webhooks"]
    }
    assert services == {"db-ops-webhook"}
    args = rotator_pod(knobs)["containers"][0]["args"]
    assert "--service=db-ops-webhook" in args and "--secret=db-ops-webhook-tls" in args
    (job,) = [j for j in of_kind(knobs, "Job") if "-cert-init-" in j["metadata"]["name"]]
    assert job["metadata"]["name"].startswith("db-ops-cert-init-")


def test_name_override_sets_the_name_label(knobs: list[Object]) -> None:
    deployment = only(knobs, "Deployment", "db-ops")
    assert deployment["metadata"]["labels"]["app.kubernetes.io/name"] == "ptah"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/name"] == "ptah"
    service = only(knobs, "Service", "db-ops-webhook")
    assert service["spec"]["selector"] == selector


def test_a_named_service_account_is_the_identity_admission_trusts(knobs: list[Object]) -> None:
    account = only(knobs, "ServiceAccount", "ptah-manager")
    assert account["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/ptah-operator"
    }
    deployment = only(knobs, "Deployment", "db-ops")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "ptah-manager"
    manager = f"system:serviceaccount:{NAMESPACE}:ptah-manager"
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PTAH_MANAGER_USERNAME"] == manager
    policy = only(knobs, "ValidatingAdmissionPolicy", "ptah-operator-status-writer")
    assert manager in yaml.safe_dump(policy)
    bound = [
        s
        for b in of_kind(knobs, "ClusterRoleBinding")
        if b["roleRef"]["name"] == "ptah-operator-manager"
        for s in b["subjects"]
    ]
    assert bound == [{"kind": "ServiceAccount", "name": "ptah-manager", "namespace": NAMESPACE}]


def test_an_existing_service_account_is_used_and_not_created(helm: Helm, tmp_path: Path) -> None:
    objects = layered(helm, tmp_path, {"serviceAccount": {"create": False, "name": "mine"}})
    assert sorted(o["metadata"]["name"] for o in of_kind(objects, "ServiceAccount")) == [
        "ptah-operator-cert-rotator",
        "ptah-operator-crd-upgrade",
    ]
    deployment = only(objects, "Deployment", "ptah-operator")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    # Refused without a name: the admission rules must name the manager.
    message = failure(helm, tmp_path, {"serviceAccount": {"create": False}})
    assert "serviceAccount.create=false needs serviceAccount.name" in message


def test_the_rotators_placement_reaches_both_of_its_pods(knobs: list[Object]) -> None:
    expected = yaml.safe_load(KNOBS.read_text())["webhook"]["rotation"]
    (job,) = [j for j in of_kind(knobs, "Job") if "-cert-init-" in j["metadata"]["name"]]
    (cron,) = of_kind(knobs, "CronJob")
    assert cron["spec"]["startingDeadlineSeconds"] == 300
    for pod in (rotator_pod(knobs), job["spec"]["template"]["spec"]):
        assert pod["priorityClassName"] == "platform-critical"
        assert pod["nodeSelector"] == expected["nodeSelector"]
        assert pod["tolerations"] == expected["tolerations"]
        assert pod["affinity"] == expected["affinity"]


def test_the_rotators_defaults_place_nothing_and_skip_a_late_run(
    default_render: list[Object],
) -> None:
    (cron,) = of_kind(default_render, "CronJob")
    assert cron["spec"]["startingDeadlineSeconds"] == 600
    pod = rotator_pod(default_render)
    assert not {"priorityClassName", "nodeSelector", "tolerations", "affinity"} & set(pod)


def test_extra_env_follows_the_charts_own_variables(knobs: list[Object]) -> None:
    env = only(knobs, "Deployment", "db-ops")["spec"]["template"]["spec"]["containers"][0]["env"]
    extra = yaml.safe_load(KNOBS.read_text())["extraEnv"]
    assert env[-len(extra) :] == extra
    assert len({e["name"] for e in env}) == len(env)


@pytest.mark.parametrize("name", ["PTAH_MANAGER_IMAGE", "POD_NAMESPACE", "PTAH_ANYTHING"])
def test_extra_env_cannot_set_what_the_chart_sets(helm: Helm, tmp_path: Path, name: str) -> None:
    # The control: an ordinary name renders.
    layered(helm, tmp_path, {"extraEnv": [{"name": "HTTPS_PROXY", "value": "x"}]})
    message = failure(helm, tmp_path, {"extraEnv": [{"name": name, "value": "x"}]})
    assert f"extraEnv may not set {name}" in message


def test_the_network_policy_is_opt_in(default_render: list[Object]) -> None:
    assert of_kind(default_render, "NetworkPolicy") == []


def test_the_network_policy_keeps_the_webhook_port_open(knobs: list[Object]) -> None:
    policy = only(knobs, "NetworkPolicy", "db-ops")["spec"]
    deployment = only(knobs, "Deployment", "db-ops")
    assert policy["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    webhook, metrics = policy["ingress"]
    # No `from`: any source, as the API server is not a Pod a policy can select.
    assert webhook == {"ports": [{"port": "webhook", "protocol": "TCP"}]}
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert metrics["from"] == yaml.safe_load(KNOBS.read_text())["networkPolicy"]["metricsFrom"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert len(policy["egress"]) == 2


def test_without_metrics_peers_or_egress_rules_the_policy_says_no_more(
    helm: Helm, tmp_path: Path
) -> None:
    objects = layered(helm, tmp_path, {"networkPolicy": {"enabled": True}})
    policy = only(objects, "NetworkPolicy", "ptah-operator")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{"ports": [{"port": "webhook", "protocol": "TCP"}]}]
    jobs = only(objects, "NetworkPolicy", "ptah-operator-jobs")
    assert jobs["spec"]["policyTypes"] == ["Ingress"]
    assert "egress" not in jobs["spec"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a LabelSelector of matchLabels and `In` expressions selects these labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _pod_labels(obj: Object) -> dict[str, str]:
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    template = spec["template"]
    labels: dict[str, str] = template["metadata"]["labels"]
    return labels


# The chart's Job Pods the `-jobs` policy must select, by values: the rotator's only
# when the chart issues the certificate, the hook's only when it is on.
@pytest.mark.parametrize(
    ("overrides", "selected"),
    [
        ({}, {"CronJob db-ops-cert-rotator", "Job db-ops-crd-upgrade", "Job db-ops-cert-init"}),
        (
            {"crdUpgrade": {"enabled": False}},
            {"CronJob db-ops-cert-rotator", "Job db-ops-cert-init"},
        ),
        (
            {"webhook": {"certManager": {"enabled": True}}},
            {"Job db-ops-crd-upgrade"},
        ),
        ({"webhook": {"certManager": {"enabled": True}}, "crdUpgrade": {"enabled": False}}, set()),
    ],
)
def test_the_jobs_policy_admits_no_ingress_to_the_chart_s_job_pods(
    helm: Helm, tmp_path: Path, overrides: dict[str, Any], selected: set[str]
) -> None:
    layer = tmp_path / "layer.yaml"
    layer.write_text(yaml.safe_dump(overrides))
    objects = helm.render([KNOBS, layer])
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(objects, "NetworkPolicy")}
    if not selected:
        # No Job Pod to hold: no policy that selects nothing.
        assert set(policies) == {"db-ops"}
        return
    jobs = policies["db-ops-jobs"]
    pods = [o for o in objects if o["kind"] in {"Deployment", "Job", "CronJob"}]
    # The install Job's name ends in a hash of its Pod template.
    found = {
        re.sub(r"-[0-9a-f]{10}$", "", f"{o['kind']} {o['metadata']['name']}")
        for o in pods
        if _selects(jobs["podSelector"], _pod_labels(o))
    }
    assert found == selected
    # The manager policy's selector picks none of them, so each Pod has one policy.
    assert all(
        not _selects(policies["db-ops"]["podSelector"], _pod_labels(o))
        for o in pods
        if o["kind"] != "Deployment"
    )
    assert jobs["ingress"] == []
    assert jobs["policyTypes"] == ["Ingress", "Egress"]
    assert jobs["egress"] == policies["db-ops"]["egress"]
