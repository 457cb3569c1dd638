"""A manager scoped to one namespace, on the real API server (issue 35).

- The RBAC the chart renders for ``watch.namespaces: [<shop>]`` is applied as it is,
  and the API server's own authorizer (a SubjectAccessReview, what
  ``kubectl auth can-i --as`` sends) answers for the manager's ServiceAccount: the
  namespaced kinds in the listed namespace, nothing of them anywhere else, and only
  the fixed cluster-wide reads. A table: the control row is allowed, every other row
  is one change that must be refused.
- ``python -m manager`` started as the chart starts it with ``PTAH_WATCH_NAMESPACES``
  naming one namespace serves a PtahSchema there and never touches one created first
  in another namespace.

The chart's cluster-scoped objects have fixed names that ``make run``'s grants share
on this session's control plane; the test's copies are renamed (and their references
with them), which changes no rule.
"""

from __future__ import annotations

import json
import uuid
from contextlib import ExitStack, closing
from pathlib import Path

import pytest
import yaml

from jobclaim.apiserver import EVENTS, PTAHSCHEMAS, Object
from lab import run as localrun
from lab.localplane import LocalControlPlane
from tests.realapi.managerrig import chart_env, create_and_bind, rig  # noqa: F401  (the fixture)
from tests.support import access
from tests.support.chartrender import VALUES, Helm
from tests.support.realapioperator import Operator, operator, webhooked_namespace  # noqa: F401

pytestmark = pytest.mark.controlplane

HARNESS_KUBE_VERSION = "1.37.2"
OPS = "operator.ptah.run"
RBAC_KINDS = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# The manager's own bindings; the result-writer's binds every ServiceAccount and is
# not the manager's grant.
MANAGER_OBJECTS = ("ptah-operator-manager", "ptah-operator-readiness", "ptah-operator-leases")
RESOURCES = {
    "ClusterRole": localrun.CLUSTER_ROLES,
    "ClusterRoleBinding": localrun.CLUSTER_ROLE_BINDINGS,
    "Role": localrun.ROLES,
    "RoleBinding": localrun.ROLE_BINDINGS,
}

# Where each row asks: the listed namespace, another one, the release namespace, or
# across the cluster (None).
SHOP, OTHER, RELEASE, CLUSTER = "shop", "other", "release", None
# (id, verb, group, resource, where, allowed)
ROWS: list[tuple[str, str, str, str, str | None, bool]] = [
    ("control: watch Jobs in shop", "watch", "batch", "jobs", SHOP, True),
    ("create Jobs in shop", "create", "batch", "jobs", SHOP, True),
    ("patch schema status in shop", "patch", "operator.ptah.run", "ptahschemas/status", SHOP, True),
    ("watch Jobs in another namespace", "watch", "batch", "jobs", OTHER, False),
    ("watch Jobs across the cluster", "watch", "batch", "jobs", CLUSTER, False),
    ("list Pods in another namespace", "list", "", "pods", OTHER, False),
    ("watch Pods across the cluster", "watch", "", "pods", CLUSTER, False),
    ("get ConfigMaps in another namespace", "get", "", "configmaps", OTHER, False),
    ("create ConfigMaps in another namespace", "create", "", "configmaps", OTHER, False),
    ("list schemas across the cluster", "list", "operator.ptah.run", "ptahschemas", CLUSTER, False),
    (
        "patch schema status elsewhere",
        "patch",
        "operator.ptah.run",
        "ptahschemas/status",
        OTHER,
        False,
    ),
    ("create Events in another namespace", "create", "events.k8s.io", "events", OTHER, False),
    ("get Secrets in shop", "get", "", "secrets", SHOP, False),
    ("get realms (cluster-scoped)", "get", "operator.ptah.run", "ptahrealms", CLUSTER, True),
    ("get namespaces (cluster-scoped)", "get", "", "namespaces", CLUSTER, True),
    ("list namespaces", "list", "", "namespaces", CLUSTER, False),
    ("readiness: get a schema in release", "get", OPS, "ptahschemas", RELEASE, True),
    ("list schemas in release", "list", "operator.ptah.run", "ptahschemas", RELEASE, False),
]


def _renamed(obj: Object, suffix: str) -> Object:
    """``obj`` under a name of its own on the shared plane, its role reference too."""
    out = json.loads(json.dumps(obj))
    out["metadata"]["name"] += suffix
    if "roleRef" in out:
        out["roleRef"]["name"] += suffix
    return out


def _install_scoped_rbac(
    operator: Operator,  # noqa: F811
    helm: Helm,
    tmp_path: Path,
    shop: str,
    release: str,
) -> None:
    layer = tmp_path / "scope.yaml"
    layer.write_text(yaml.safe_dump({"watch": {"namespaces": [shop]}}))
    objects = helm.render(
        [VALUES / "required.yaml", layer],
        namespace=release,
        extra=["--kube-version", HARNESS_KUBE_VERSION],
    )
    suffix = f"-{uuid.uuid4().hex[:8]}"
    for obj in objects:
        if obj["kind"] not in RBAC_KINDS or obj["metadata"]["name"] not in MANAGER_OBJECTS:
            continue
        resource = RESOURCES[obj["kind"]]
        body = {k: v for k, v in _renamed(obj, suffix).items() if k not in ("apiVersion", "kind")}
        if resource.namespaced:
            body["metadata"].setdefault("namespace", release)
        localrun.apply(operator.plane, resource, body, identity="admin")


def _allowed(plane: LocalControlPlane, user: str, groups: list[str], question: Object) -> bool:
    return access.allowed(access.on_plane(plane), user, groups, question)


def test_the_rendered_rbac_of_a_scoped_manager_gives_nothing_outside_its_namespace(
    operator: Operator,  # noqa: F811
    helm: Helm,
    tmp_path: Path,
) -> None:
    where = {
        SHOP: webhooked_namespace(operator).namespace,
        OTHER: webhooked_namespace(operator).namespace,
        RELEASE: webhooked_namespace(operator).namespace,
    }
    _install_scoped_rbac(operator, helm, tmp_path, where[SHOP], where[RELEASE])
    user, groups = access.service_account(where[RELEASE], "ptah-operator")
    questions = {
        row[0]: (
            access.question(row[1], row[2], row[3], where.get(row[4]) if row[4] else None),
            row[5],
        )
        for row in ROWS
    }
    granted = [q for q, allowed in questions.values() if allowed]
    # RBAC is read from an informer cache: a grant is in force a moment after its
    # write. Bounded poll until every row that should be allowed is; a grant the
    # refused rows could ride on was written in the same breath, so it is in force too.
    localrun.until(
        lambda: all(_allowed(operator.plane, user, groups, q) for q in granted),
        "the scoped manager's grants to be in force",
    )
    answers = {
        row_id: _allowed(operator.plane, user, groups, question)
        for row_id, (question, _) in questions.items()
    }
    assert answers == {row_id: allowed for row_id, (_, allowed) in questions.items()}


def test_a_manager_scoped_to_one_namespace_ignores_a_schema_in_another(
    operator: Operator,  # noqa: F811
    tmp_path: Path,
    chart_env: dict[str, str],  # noqa: F811
) -> None:
    with rig(operator, tmp_path, chart_env) as made, ExitStack() as stack:
        other = webhooked_namespace(operator).namespace
        process = stack.enter_context(closing(made.manager("manager-scoped").start()))
        process.wait_serving()
        made.register(process)
        assert process.env["PTAH_WATCH_NAMESPACES"] == made.namespace
        # Created first: a manager that watched it would take its key before the one
        # in its own namespace (one queue, first come first served).
        operator.admin.create(PTAHSCHEMAS, other, localrun.example_schema(other))
        create_and_bind(made)
        outsider = operator.admin.get(PTAHSCHEMAS, other, "orders")
        assert not outsider.get("status"), outsider.get("status")
        assert not outsider["metadata"].get("finalizers")
        assert operator.admin.list(EVENTS, other) == []
        assert f"PtahSchema {other}/" not in process.log.read_text()
        assert process.terminate() == 0
