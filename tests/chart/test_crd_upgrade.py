"""The chart's pre-upgrade hook applies its own crds/ (Helm applies them on install
only), under a ServiceAccount that may touch the operator's CRDs by name, and list the
operator's objects, nothing else."""

from __future__ import annotations

import pytest
import yaml

from tests.support.chartrender import CRDS, VALUES, Helm, Object, load_yaml, of_kind, only

pytestmark = pytest.mark.helm

HOOK = "pre-upgrade,pre-rollback"


def hook_objects(objects: list[Object]) -> list[Object]:
    return [
        o for o in objects if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == HOOK
    ]


def test_the_hook_runs_the_crd_applier_before_an_upgrade_and_a_rollback(
    default_render: list[Object],
) -> None:
    hooks = {(o["kind"], o["metadata"]["name"]) for o in hook_objects(default_render)}
    assert hooks == {
        ("ServiceAccount", "ptah-operator-crd-upgrade"),
        ("ClusterRole", "ptah-operator-crd-upgrade"),
        ("ClusterRoleBinding", "ptah-operator-crd-upgrade"),
        ("ConfigMap", "ptah-operator-crd-upgrade"),
        ("Job", "ptah-operator-crd-upgrade"),
    }
    job = only(default_render, "Job", "ptah-operator-crd-upgrade")
    weights = {
        o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"])
        for o in hook_objects(default_render)
    }
    # Its grants exist before the Job that uses them.
    assert weights["Job"] > max(w for kind, w in weights.items() if kind != "Job")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python3", "-m", "manager.crdapply", "--from", "/crds"]
    assert container["volumeMounts"] == [{"name": "crds", "mountPath": "/crds", "readOnly": True}]
    assert pod["volumes"] == [{"name": "crds", "configMap": {"name": "ptah-operator-crd-upgrade"}}]
    assert pod["serviceAccountName"] == "ptah-operator-crd-upgrade"
    assert (
        container["image"]
        == only(default_render, "Deployment", "ptah-operator")["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
    )
    assert job["spec"]["backoffLimit"] == 0


def test_the_hook_applies_this_chart_versions_crds(default_render: list[Object]) -> None:
    """The ConfigMap the Job mounts holds crds/, file by file, the same documents."""
    data = only(default_render, "ConfigMap", "ptah-operator-crd-upgrade")["data"]
    files = {path.name: path for path in CRDS.glob("*.yaml")}
    # The control: crds/ holds the operator's kinds.
    assert "operator.ptah.run_ptahschemas.yaml" in files
    assert set(data) == set(files)
    for name, path in files.items():
        assert yaml.safe_load(data[name]) == load_yaml(path), name


def test_the_hook_may_touch_the_operators_crds_by_name_and_nothing_else(
    default_render: list[Object],
) -> None:
    names = sorted(load_yaml(path)["metadata"]["name"] for path in CRDS.glob("*.yaml"))
    # The control: crds/ holds the operator's kinds.
    assert "ptahschemas.operator.ptah.run" in names
    role = only(default_render, "ClusterRole", "ptah-operator-crd-upgrade")
    assert role["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": names,
            "verbs": ["get", "patch"],
        },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["create"],
        },
        # Whether an object holds a field an older CRD would drop.
        {
            "apiGroups": ["operator.ptah.run"],
            "resources": sorted(name.split(".")[0] for name in names),
            "verbs": ["list"],
        },
    ]
    binding = only(default_render, "ClusterRoleBinding", "ptah-operator-crd-upgrade")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ptah-operator-crd-upgrade", "namespace": "ptah-system"}
    ]


def test_the_hook_can_be_turned_off(helm: Helm) -> None:
    objects = helm.render([VALUES / "required.yaml"], {"crdUpgrade.enabled": "false"})
    assert hook_objects(objects) == []
    assert [o["metadata"]["name"] for o in of_kind(objects, "ClusterRole")].count(
        "ptah-operator-crd-upgrade"
    ) == 0
