"""The chart's CRD upgrade hook on the real API server, holding exactly its grants.

``python -m manager.crdapply`` (the pre-upgrade hook's program) runs as an identity
bound to the ClusterRole the chart renders for the hook: it applies every CRD the
models generate by server-side apply; then, with a field added to the live PtahSchema
CRD (a cluster that ran a newer version), it refuses, names the field, and changes
nothing; with the field gone again it applies once more.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import run as localrun
from manager import crdapply
from tests.chart.conftest import helm  # noqa: F401  (the chart suite's one helm)
from tests.chart.support import VALUES, Helm
from tests.realapi.operator import Operator, operator  # noqa: F401

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


def run(operator: Operator, said: list[str]) -> int:  # noqa: F811
    kubeconfig: Path = operator.plane.kubeconfig("person")
    return crdapply.main([f"--kubeconfig={kubeconfig}"], out=said.append)


def test_the_hook_applies_the_crds_and_refuses_to_drop_a_stored_field(
    operator: Operator,  # noqa: F811
    helm: Helm,  # noqa: F811
) -> None:
    with hook_grants(operator, helm):
        said: list[str] = []
        # The control: the same CRDs apply, every one, with the hook's grants alone.
        assert run(operator, said) == 0, said
        assert f"applied {SCHEMAS}" in said
        assert len(said) == len(operator.crds)

        set_future_field(operator, present=True)
        try:
            said = []
            assert run(operator, said) == crdapply.EXIT_REFUSED, said
            assert said[0] == (
                f"refused: {SCHEMAS}: v1alpha1 field spec.fromTheFuture is stored and the "
                "new CRD drops it"
            )
            assert not any(line.startswith("applied") for line in said)
            live = operator.admin.get(crdapply.CUSTOM_RESOURCE_DEFINITIONS, None, SCHEMAS)
            (version,) = live["spec"]["versions"]
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            assert "fromTheFuture" in spec, "the refusal changed the CRD"
        finally:
            set_future_field(operator, present=False)

        said = []
        assert run(operator, said) == 0, said
