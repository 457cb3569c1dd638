"""The chart's CRD upgrade hook on the real API server, holding exactly its grants.

``python -m manager.crdapply`` (the pre-upgrade hook's program) runs as an identity
bound to the ClusterRole the chart renders for the hook: it applies every CRD the
models generate by server-side apply. Then a field is added to the live PtahSchema
CRD (a cluster that ran a newer version, about to roll back): while no PtahSchema
holds a value in it, the older CRD is applied and the field goes, said so; while one
does, it refuses, names the field and the object, and changes nothing; with that
value gone it applies once more.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobclaim.apiserver import PTAHSCHEMAS
from lab import run as localrun
from manager import crdapply
from tests.support.chartrender import VALUES, Helm
from tests.support.realapioperator import Operator, operator  # noqa: F401

pytestmark = pytest.mark.controlplane

SCHEMAS = "ptahschemas.operator.ptah.run"
PERSON = "jane@example.com"


@contextlib.contextmanager
def hook_grants(operator: Operator, helm: Helm) -> Iterator[None]:  # noqa: F811
    """The hook's ClusterRole as the chart renders it, bound to the harness's person."""
    objects = helm.render([VALUES / "required.yaml"], extra=["--kube-version", "1.37.2"])
    (role,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "ptah-operator-crd-upgrade"
    ]
    name = f"ptah-crd-upgrade-{uuid.uuid4().hex[:8]}"
    plane = operator.plane
    localrun.apply(
        plane,
        localrun.CLUSTER_ROLES,
        {"metadata": {"name": name}, "rules": role["rules"]},
        identity="admin",
    )
    localrun.apply(
        plane,
        localrun.CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": PERSON}],
        },
        identity="admin",
    )
    localrun.until_granted(plane, "person", role["rules"])
    try:
        yield
    finally:
        operator.admin.delete(localrun.CLUSTER_ROLE_BINDINGS, None, name)
        operator.admin.delete(localrun.CLUSTER_ROLES, None, name)


def set_future_field(operator: Operator, present: bool) -> None:  # noqa: F811
    """Add (or remove) spec.fromTheFuture in the live PtahSchema CRD, as admin."""
    live = operator.admin.get(crdapply.CUSTOM_RESOURCE_DEFINITIONS, None, SCHEMAS)
    (version,) = live["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    if present:
        spec["fromTheFuture"] = {"type": "string"}
    else:
        spec.pop("fromTheFuture", None)
    operator.admin.replace(crdapply.CUSTOM_RESOURCE_DEFINITIONS, None, live)


def has_future_field(operator: Operator) -> bool:  # noqa: F811
    live = operator.admin.get(crdapply.CUSTOM_RESOURCE_DEFINITIONS, None, SCHEMAS)
    (version,) = live["spec"]["versions"]
    return (
        "fromTheFuture" in version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    )


def holds_future_field(operator: Operator, namespace: str) -> bool:  # noqa: F811
    """Whether the holder stores the field; if it was pruned, it is written again."""
    current = operator.admin.get(PTAHSCHEMAS, namespace, "holder")
    if current["spec"].get("fromTheFuture") == "kept":
        return True
    current["spec"]["fromTheFuture"] = "kept"
    operator.admin.replace(PTAHSCHEMAS, namespace, current)
    return False


def run(operator: Operator, said: list[str]) -> int:  # noqa: F811
    kubeconfig: Path = operator.plane.kubeconfig("person")
    return crdapply.main([f"--kubeconfig={kubeconfig}"], out=said.append)


def test_the_hook_applies_the_crds_and_refuses_to_drop_a_stored_field(
    operator: Operator,  # noqa: F811
    helm: Helm,
) -> None:
    namespace = f"crd-upgrade-{uuid.uuid4().hex[:8]}"
    localrun.prepare_namespace(operator.admin, namespace)
    with hook_grants(operator, helm):
        said: list[str] = []
        # The control: the same CRDs apply, every one, with the hook's grants alone.
        assert run(operator, said) == 0, said
        assert f"applied {SCHEMAS}" in said
        assert len(said) == len(operator.crds)

        # A field no object holds goes with the older CRD.
        set_future_field(operator, present=True)
        said = []
        assert run(operator, said) == 0, said
        assert said[0] == f"{SCHEMAS}: v1alpha1 field spec.fromTheFuture goes: no object holds it"
        assert not has_future_field(operator)

        # One that a PtahSchema holds is refused, and nothing changes.
        set_future_field(operator, present=True)
        schema = localrun.example_schema(namespace, "holder")
        schema["spec"]["fromTheFuture"] = "kept"
        operator.admin.create(PTAHSCHEMAS, namespace, schema)
        try:
            # The API server serves the changed CRD on its own time; until it does, a
            # write prunes the unknown field (CI once stored the holder without it).
            localrun.until(
                lambda: holds_future_field(operator, namespace), "a PtahSchema to hold the field"
            )
            said = []
            assert run(operator, said) == crdapply.EXIT_REFUSED, said
            assert said[0] == (
                f"refused: {SCHEMAS}: v1alpha1 field spec.fromTheFuture is stored in 1 "
                f"object(s) ({namespace}/holder) and the new CRD drops it"
            )
            assert not any(line.startswith("applied") for line in said)
            assert has_future_field(operator), "the refusal changed the CRD"
        finally:
            operator.admin.delete(PTAHSCHEMAS, namespace, "holder")
            set_future_field(operator, present=False)

        said = []
        assert run(operator, said) == 0, said
