"""The chart's scope values: what the manager is told to serve, the RBAC that holds it
there, and the release namespaces the chart refuses.

With ``watch.namespaces`` the namespaced kinds are granted by a Role in each listed
namespace and in no ClusterRole; what stays cluster-wide is a short, fixed list. Each
table has a control row that renders and one change per row that must fail with its
message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.chartrender import NAMESPACE, VALUES, Helm, Object, grants, only, rules_of

SCOPED = {"watch": {"namespaces": ["shop", "billing"]}}
# The only grants a manager scoped to a list keeps cluster-wide, each justified in
# rbac.yaml: realms and namespaces are cluster-scoped, and so are the two classes the
# Pod admission snapshot reads.
CLUSTER_GRANTS = {
    ("operator.ptah.run", "ptahrealms", "get"),
    ("operator.ptah.run", "ptahrealms", "list"),
    ("operator.ptah.run", "ptahrealms", "watch"),
    ("operator.ptah.run", "ptahrealms/status", "patch"),
    ("", "namespaces", "get"),
    ("node.k8s.io", "runtimeclasses", "get"),
    ("scheduling.k8s.io", "priorityclasses", "get"),
    ("scheduling.k8s.io", "priorityclasses", "list"),
}


def render(helm: Helm, tmp_path: Path, overrides: dict[str, Any]) -> list[Object]:
    layer = tmp_path / "overrides.yaml"
    layer.write_text(yaml.safe_dump(overrides))
    return helm.render([VALUES / "required.yaml", layer])


def env_of(objects: list[Object]) -> dict[str, str]:
    deployment = only(objects, "Deployment", "ptah-operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_by_default_the_manager_serves_the_cluster(default_render: list[Object]) -> None:
    env = env_of(default_render)
    assert env["PTAH_WATCH_NAMESPACES"] == "" and env["PTAH_WATCH_NAMESPACE_SELECTOR"] == ""
    role = only(default_render, "ClusterRole", "ptah-operator-manager")
    assert ("batch", "jobs", "watch") in grants(role["rules"])
    assert not [
        o
        for o in default_render
        if o["metadata"]["name"] == "ptah-operator-manager" and o["kind"] in {"Role", "RoleBinding"}
    ]


def test_a_list_grants_the_namespaced_kinds_in_each_listed_namespace_only(
    helm: Helm, tmp_path: Path, default_render: list[Object]
) -> None:
    objects = render(helm, tmp_path, SCOPED)
    assert env_of(objects)["PTAH_WATCH_NAMESPACES"] == "shop,billing"
    cluster = only(objects, "ClusterRole", "ptah-operator-manager")
    assert grants(cluster["rules"]) == CLUSTER_GRANTS
    roles = {
        o["metadata"]["namespace"]: o
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["name"] == "ptah-operator-manager"
    }
    bindings = {
        o["metadata"]["namespace"]: o
        for o in objects
        if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "ptah-operator-manager"
    }
    assert set(roles) == set(bindings) == {"shop", "billing"}
    everything = grants(rules_of(default_render))
    # The Lease Role is the coordination namespace's, unchanged by the scope.
    leases = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
    for namespace, role in roles.items():
        # Each Role holds every namespaced grant the cluster-wide install has.
        assert grants(role["rules"]) == everything - CLUSTER_GRANTS - leases, namespace
        assert bindings[namespace]["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "ptah-operator-manager",
        }
        assert bindings[namespace]["subjects"] == [
            {"kind": "ServiceAccount", "name": "ptah-operator", "namespace": NAMESPACE}
        ]
    # Readiness's one read in the release namespace, and nothing more there.
    readiness = only(objects, "Role", "ptah-operator-readiness")
    assert readiness["metadata"]["namespace"] == NAMESPACE
    assert grants(readiness["rules"]) == {("operator.ptah.run", "ptahschemas", "get")}
    # The union is exactly the README's table: scoping moves grants, adds none.
    assert grants(rules_of(objects)) == everything


def test_a_selector_reaches_the_manager_as_json_and_keeps_the_cluster_grants(
    helm: Helm, tmp_path: Path
) -> None:
    selector = {"matchLabels": {"team": "shop"}}
    objects = render(helm, tmp_path, {"watch": {"namespaceSelector": selector}})
    assert json.loads(env_of(objects)["PTAH_WATCH_NAMESPACE_SELECTOR"]) == selector
    role = only(objects, "ClusterRole", "ptah-operator-manager")
    assert ("batch", "jobs", "watch") in grants(role["rules"])


# (id, release namespace, values laid over the required ones, message or None)
NAMESPACES: list[tuple[str, str, dict[str, Any], str | None]] = [
    ("control: a namespace of its own", "ptah-system", {}, None),
    ("default", "default", {}, "the release namespace may not be default"),
    ("kube-system", "kube-system", {}, "the release namespace may not be kube-system"),
    ("kube-public", "kube-public", {}, "may not be kube-public"),
    ("default, allowed", "default", {"allowSystemReleaseNamespace": True}, None),
    ("kubeflow is not kube-*", "kubeflow", {}, None),
    (
        "a watched namespace that is not one",
        "ptah-system",
        {"watch": {"namespaces": ["Shop"]}},
        "at '/watch/namespaces/0'",
    ),
    (
        "a selector with an unknown operator",
        "ptah-system",
        {"watch": {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}},
        "at '/watch/namespaceSelector/matchExpressions/0/operator'",
    ),
    (
        "a namespace listed twice",
        "ptah-system",
        {"watch": {"namespaces": ["shop", "shop"]}},
        "at '/watch/namespaces'",
    ),
]


@pytest.mark.parametrize(
    ("namespace", "overrides", "message"),
    [row[1:] for row in NAMESPACES],
    ids=[row[0] for row in NAMESPACES],
)
def test_the_release_namespace_and_the_scope_values_are_checked(
    helm: Helm, tmp_path: Path, namespace: str, overrides: dict[str, Any], message: str | None
) -> None:
    layer = tmp_path / "overrides.yaml"
    layer.write_text(yaml.safe_dump(overrides))
    result = helm.template([VALUES / "required.yaml", layer], namespace=namespace)
    if message is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0, f"rendered although {message!r} was expected"
        assert message in result.stderr, result.stderr
