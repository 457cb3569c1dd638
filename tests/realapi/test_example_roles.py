"""The example roles under examples/rbac/, asked of the real API server's authorizer.

Each ClusterRole is applied as the file says and bound the way its comment says (a
RoleBinding in one namespace, or a ClusterRoleBinding for the realm roles) to a
person of its own; a SubjectAccessReview (what ``kubectl auth can-i --as`` sends)
then answers each row. Per role, the first row is its control (a thing it exists to
do, allowed); every other row is one change that must be refused: another verb,
another kind, or another namespace.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobclaim.apiserver import Object
from lab import run as localrun
from lab.localplane import LocalControlPlane
from tests.support import access
from tests.support.realapioperator import Operator, operator, webhooked_namespace  # noqa: F401

pytestmark = pytest.mark.controlplane

EXAMPLES = Path(localrun.EXAMPLES) / "rbac"
OPS = "operator.ptah.run"
HOME, ELSEWHERE, CLUSTER = "home", "elsewhere", None

# role -> (file, bound cluster-wide?)
ROLES: dict[str, tuple[str, bool]] = {
    "ptah-example-desired-state-author": ("desired-state-author.yaml", False),
    "ptah-example-plan-reader": ("plan-reader.yaml", False),
    "ptah-example-approver": ("approver.yaml", False),
    "ptah-example-realm-administrator": ("realm-administrator.yaml", True),
    "ptah-example-diagnostic-reader": ("diagnostic-reader.yaml", False),
    "ptah-example-realm-reader": ("diagnostic-reader.yaml", True),
}

# (role, verb, group, resource, where, allowed)
ROWS: list[tuple[str, str, str, str, str | None, bool]] = [
    # The desired-state author.
    ("ptah-example-desired-state-author", "create", OPS, "ptahschemas", HOME, True),
    ("ptah-example-desired-state-author", "update", OPS, "ptahmigrations", HOME, True),
    ("ptah-example-desired-state-author", "create", OPS, "ptahschemas", ELSEWHERE, False),
    ("ptah-example-desired-state-author", "patch", OPS, "ptahschemas/status", HOME, False),
    ("ptah-example-desired-state-author", "create", OPS, "ptahschemaapprovals", HOME, False),
    ("ptah-example-desired-state-author", "get", OPS, "ptahschemaplanchunks", HOME, False),
    ("ptah-example-desired-state-author", "get", "", "secrets", HOME, False),
    ("ptah-example-desired-state-author", "create", OPS, "ptahrealms", CLUSTER, False),
    # The plan reader.
    ("ptah-example-plan-reader", "get", OPS, "ptahschemaplanchunks", HOME, True),
    ("ptah-example-plan-reader", "list", OPS, "ptahmigrationplans", HOME, True),
    ("ptah-example-plan-reader", "get", OPS, "ptahschemaplanchunks", ELSEWHERE, False),
    ("ptah-example-plan-reader", "create", OPS, "ptahschemaapprovals", HOME, False),
    ("ptah-example-plan-reader", "update", OPS, "ptahschemas", HOME, False),
    ("ptah-example-plan-reader", "get", OPS, "ptahresultrecords", HOME, False),
    # The approver.
    ("ptah-example-approver", "create", OPS, "ptahschemaapprovals", HOME, True),
    ("ptah-example-approver", "create", OPS, "ptahmigrationrunacknowledgments", HOME, True),
    ("ptah-example-approver", "get", OPS, "ptahschemaplans", HOME, True),
    ("ptah-example-approver", "create", OPS, "ptahschemaapprovals", ELSEWHERE, False),
    ("ptah-example-approver", "update", OPS, "ptahschemaapprovals", HOME, False),
    ("ptah-example-approver", "delete", OPS, "ptahmigrationapprovals", HOME, False),
    ("ptah-example-approver", "patch", OPS, "ptahschemas", HOME, False),
    ("ptah-example-approver", "patch", OPS, "ptahschemaapprovals/status", HOME, False),
    # The realm administrator.
    ("ptah-example-realm-administrator", "create", OPS, "ptahrealms", CLUSTER, True),
    ("ptah-example-realm-administrator", "list", "", "namespaces", CLUSTER, True),
    ("ptah-example-realm-administrator", "patch", OPS, "ptahrealms/status", CLUSTER, False),
    ("ptah-example-realm-administrator", "create", OPS, "ptahschemas", HOME, False),
    ("ptah-example-realm-administrator", "update", "", "namespaces", CLUSTER, False),
    # The diagnostic reader (and its realm reader).
    ("ptah-example-diagnostic-reader", "list", "batch", "jobs", HOME, True),
    ("ptah-example-diagnostic-reader", "watch", "events.k8s.io", "events", HOME, True),
    ("ptah-example-diagnostic-reader", "get", "", "pods", HOME, True),
    ("ptah-example-diagnostic-reader", "list", "batch", "jobs", ELSEWHERE, False),
    ("ptah-example-diagnostic-reader", "get", "", "pods/log", HOME, False),
    ("ptah-example-diagnostic-reader", "get", OPS, "ptahschemaplanchunks", HOME, False),
    ("ptah-example-diagnostic-reader", "get", OPS, "ptahresultrecords", HOME, False),
    ("ptah-example-diagnostic-reader", "patch", OPS, "ptahschemas", HOME, False),
    ("ptah-example-diagnostic-reader", "get", "", "secrets", HOME, False),
    ("ptah-example-realm-reader", "get", OPS, "ptahrealms", CLUSTER, True),
    ("ptah-example-realm-reader", "update", OPS, "ptahrealms", CLUSTER, False),
]


def _documents(name: str) -> list[Object]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def _bind(operator: Operator, role: str, user: str, namespace: str, cluster: bool) -> None:  # noqa: F811
    subject = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    if cluster:
        body = {"metadata": {"name": user}, "roleRef": ref, "subjects": [subject]}
        localrun.apply(operator.plane, localrun.CLUSTER_ROLE_BINDINGS, body, identity="admin")
    else:
        body = {
            "metadata": {"name": user, "namespace": namespace},
            "roleRef": ref,
            "subjects": [subject],
        }
        localrun.apply(operator.plane, localrun.ROLE_BINDINGS, body, identity="admin")


def _allowed(plane: LocalControlPlane, user: str, asked: dict[str, Any]) -> bool:
    return access.allowed(access.on_plane(plane), user, ["system:authenticated"], asked)


def test_every_example_role_file_is_a_role_the_table_asks_about() -> None:
    shipped = {
        doc["metadata"]["name"] for path in EXAMPLES.glob("*.yaml") for doc in _documents(path.name)
    }
    assert shipped == set(ROLES)
    assert {row[0] for row in ROWS} == set(ROLES)


def test_each_example_role_can_do_what_it_is_for_and_nothing_else(
    operator: Operator,  # noqa: F811
) -> None:
    where = {
        HOME: webhooked_namespace(operator).namespace,
        ELSEWHERE: webhooked_namespace(operator).namespace,
    }
    suffix = uuid.uuid4().hex[:8]
    users = {role: f"{role}-{suffix}" for role in ROLES}
    for role, (name, cluster) in ROLES.items():
        (document,) = [d for d in _documents(name) if d["metadata"]["name"] == role]
        body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind")}
        localrun.apply(operator.plane, localrun.CLUSTER_ROLES, body, identity="admin")
        _bind(operator, role, users[role], where[HOME], cluster)

    def question(row: tuple[str, str, str, str, str | None, bool]) -> dict[str, Any]:
        _, verb, group, resource, place, _ = row
        return access.question(verb, group, resource, where[place] if place else None)

    # RBAC is read from an informer cache: bounded poll until every allowed row is in
    # force; the bindings the refused rows could ride on were written with them.
    allowed_rows = [row for row in ROWS if row[5]]
    localrun.until(
        lambda: all(_allowed(operator.plane, users[r[0]], question(r)) for r in allowed_rows),
        "the example roles' bindings to be in force",
    )
    answers = {
        " ".join(map(str, row[:5])): _allowed(operator.plane, users[row[0]], question(row))
        for row in ROWS
    }
    assert answers == {" ".join(map(str, row[:5])): row[5] for row in ROWS}
