"""Who may waive approval, on a real kube-apiserver (issue 31).

``policy.apply: Always`` runs an Apply no person approved (for a plan that destroys and
grants nothing). The chart's ValidatingAdmissionPolicy
``ptah-operator-apply-always-groups``, rendered by the real helm with
``approvals.applyAlwaysGroups`` and bound to a namespace of the test's own, lets only
members of those groups make a spec say Always. Each row is one request of a person
the admin impersonates (user and groups exactly as a client certificate or an OIDC
token would carry them), granted in that namespace what a namespace owner has.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest
import yaml

from jobclaim.apiserver import PTAHMIGRATIONS, PTAHSCHEMAS, Object, Resource
from lab import run as localrun
from tests.realapi.attackstage import (  # noqa: F401
    HARNESS_KUBE_VERSION,
    VAP,
    VAPB,
    admitted,
    helm_fixture,
    path_of,
    refused_with,
)
from tests.support.chartrender import VALUES, Helm
from tests.support.realapioperator import Operator, operator  # noqa: F401

pytestmark = pytest.mark.controlplane

POLICY: Final = "ptah-operator-apply-always-groups"
OWNER: Final = "jane@example.com"
RELEASE_GROUP: Final = "ptah-release"
OUTSIDE: Final = ("developers",)
INSIDE: Final = ("developers", RELEASE_GROUP)
MASTERS: Final = ("system:masters",)


@dataclass
class Guarded:
    """A namespace of the test's own under the policy rendered with ``groups``."""

    operator: Operator
    namespace: str


def _grant_owner(stage: Operator, namespace: str) -> None:
    """What a namespace owner may do with the two families: everything on their specs."""
    rules = [
        {
            "apiGroups": ["operator.ptah.run"],
            "resources": ["ptahschemas", "ptahmigrations"],
            "verbs": ["get", "list", "watch", "create", "update", "patch"],
        }
    ]
    stage.admin.create(localrun.ROLES, namespace, {"metadata": {"name": "owner"}, "rules": rules})
    stage.admin.create(
        localrun.ROLE_BINDINGS,
        namespace,
        {
            "metadata": {"name": "owner"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "owner"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OWNER}],
        },
    )


def _policy(helm: Helm, groups: tuple[str, ...], label: dict[str, str]) -> list[Object]:
    """The chart's policy and binding as helm renders them with ``groups``, renamed and
    narrowed to the test's namespace so no other test on this server meets them."""
    settings = {"approvals.applyAlwaysGroups": "{" + ",".join(groups) + "}"} if groups else {}
    objects = helm.render(
        [VALUES / "required.yaml"], settings, extra=["--kube-version", HARNESS_KUBE_VERSION]
    )
    chosen = [o for o in objects if o["metadata"]["name"] == POLICY]
    assert {o["kind"] for o in chosen} == {VAP.kind, VAPB.kind}, "the chart's policy moved"
    suffix = next(iter(label.values()))
    for obj in chosen:
        obj["metadata"]["name"] = f"{POLICY}-{suffix}"
        if obj["kind"] == VAPB.kind:
            obj["spec"]["policyName"] = f"{POLICY}-{suffix}"
            obj["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": label}}
    return chosen


def _guarded(
    operator: Operator,  # noqa: F811
    helm: Helm,
    groups: tuple[str, ...],
) -> Iterator[Guarded]:
    suffix = uuid.uuid4().hex[:10]
    label = {"ptah-apply-guard-test": suffix}
    namespace = f"g-{suffix}"
    localrun.prepare_namespace(operator.admin, namespace, label)
    _grant_owner(operator, namespace)
    objects = _policy(helm, groups, label)
    for obj in objects:
        resource = VAP if obj["kind"] == VAP.kind else VAPB
        localrun.apply(operator.plane, resource, obj, identity="admin")
    guarded = Guarded(operator, namespace)

    def in_force() -> bool:
        # Nothing announces that the API server compiled a new policy: a create it
        # must refuse is retried until it is refused.
        response = _write(guarded, "POST", PTAHSCHEMAS, _always(PTAHSCHEMAS, namespace), OUTSIDE)
        return response.status_code == 403 and "ValidatingAdmissionPolicy" in response.text

    localrun.until(in_force, "the apply guard to be in force")
    try:
        yield guarded
    finally:
        for obj in reversed(objects):
            resource = VAP if obj["kind"] == VAP.kind else VAPB
            operator.admin.delete(resource, None, obj["metadata"]["name"])


@pytest.fixture(scope="module")
def release_group(operator: Operator, helm: Helm) -> Iterator[Guarded]:  # noqa: F811
    """approvals.applyAlwaysGroups: [ptah-release]."""
    yield from _guarded(operator, helm, (RELEASE_GROUP,))


@pytest.fixture(scope="module")
def nobody(operator: Operator, helm: Helm) -> Iterator[Guarded]:  # noqa: F811
    """The chart's default: approvals.applyAlwaysGroups: []."""
    yield from _guarded(operator, helm, ())


def _object(resource: Resource, namespace: str, apply: str | None = None) -> Object:
    example = "ptahschema.yaml" if resource is PTAHSCHEMAS else "ptahmigration.yaml"
    raw = localrun.keyed(yaml.safe_load((localrun.EXAMPLES / example).read_text()), "guarded")
    raw["metadata"] = {"name": f"a-{uuid.uuid4().hex[:8]}", "namespace": namespace}
    raw["apiVersion"], raw["kind"] = resource.api_version, resource.kind
    if apply is not None:
        raw["spec"].setdefault("policy", {})["apply"] = apply
    return dict(raw)


def _always(resource: Resource, namespace: str) -> Object:
    return _object(resource, namespace, "Always")


def _write(
    guarded: Guarded,
    method: str,
    resource: Resource,
    body: Object,
    groups: tuple[str, ...],
    *,
    name: str = "",
    dry_run: bool = True,
    user: str = OWNER,
) -> httpx.Response:
    """One request as ``user`` in ``groups``: the admin impersonates them, so admission
    sees exactly that user and those groups (and system:authenticated)."""
    plane = guarded.operator.plane
    headers = [
        ("Authorization", f"Bearer {plane.token('admin')}"),
        ("Impersonate-User", user),
        (
            "Content-Type",
            "application/json" if method == "POST" else "application/merge-patch+json",
        ),
        *(("Impersonate-Group", group) for group in groups),
    ]
    with httpx.Client(verify=plane.ssl_context(), timeout=60.0) as http:
        return http.request(
            method,
            f"{plane.server_url}{path_of(resource, guarded.namespace, name)}",
            params={"dryRun": "All"} if dry_run else {},
            content=json.dumps(body).encode(),
            headers=headers,
        )


def _stored(guarded: Guarded, resource: Resource, apply: str | None) -> str:
    """A resource created (for real) by a member of the release group."""
    body = _object(resource, guarded.namespace, apply)
    response = _write(guarded, "POST", resource, body, INSIDE, dry_run=False)
    admitted(response)
    return str(response.json()["metadata"]["name"])


OUTSIDE_SAYS: Final = (
    f"{OWNER} may not set spec.policy.apply to Always (an Apply with no approval): "
    f"only members of {RELEASE_GROUP} may; the platform team names them in the chart "
    "value approvals.applyAlwaysGroups"
)
NOBODY_SAYS: Final = (
    "may not set spec.policy.apply to Always (an Apply with no approval): nobody may in "
    "this cluster, since the chart value approvals.applyAlwaysGroups names no group"
)
FAMILIES: Final = {"schema": PTAHSCHEMAS, "migration": PTAHMIGRATIONS}

# (row, who, what they write, the sentence or None for admitted). "create" is a new
# object; "update" a merge patch of a stored one, which says OnApproval unless the
# row says "Always:" first.
Row = tuple[str, tuple[str, ...], str, Any, str | None]
ROWS: Final[list[Row]] = [
    ("a release-group member creates Always", INSIDE, "create", "Always", None),
    ("a namespace owner creates Always", OUTSIDE, "create", "Always", OUTSIDE_SAYS),
    ("a namespace owner creates OnApproval", OUTSIDE, "create", "OnApproval", None),
    ("a namespace owner creates with no policy", OUTSIDE, "create", None, None),
    (
        "a namespace owner changes OnApproval to Always",
        OUTSIDE,
        "update",
        {"policy": {"apply": "Always"}},
        OUTSIDE_SAYS,
    ),
    (
        "a release-group member changes OnApproval to Always",
        INSIDE,
        "update",
        {"policy": {"apply": "Always"}},
        None,
    ),
    (
        "a namespace owner edits a resource that already says Always",
        OUTSIDE,
        "update Always:",
        {"interval": "5m"},
        None,
    ),
    (
        "a namespace owner takes Always away",
        OUTSIDE,
        "update Always:",
        {"policy": {"apply": "OnApproval"}},
        None,
    ),
    (
        "a cluster administrator outside the group creates Always",
        MASTERS,
        "create",
        "Always",
        "may not set spec.policy.apply to Always",
    ),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    ("who", "action", "what", "refusal"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_only_the_configured_groups_set_apply_always(
    release_group: Guarded,
    family: str,
    who: tuple[str, ...],
    action: str,
    what: Any,
    refusal: str | None,
) -> None:
    resource = FAMILIES[family]
    user = "admin" if who == MASTERS else OWNER
    if action == "create":
        body = _object(resource, release_group.namespace, what)
        response = _write(release_group, "POST", resource, body, who, user=user)
    else:
        name = _stored(release_group, resource, "Always" if "Always:" in action else None)
        spec_patch = {"spec": what}
        response = _write(release_group, "PATCH", resource, spec_patch, who, name=name, user=user)
    if refusal is None:
        admitted(response)
    else:
        refused_with(response, refusal)


def test_the_managers_writes_to_a_resource_that_says_always_are_not_judged(
    release_group: Guarded,
) -> None:
    """An upgrade must not stop the manager on a stored Always: its finalizer patch
    and status writes leave the spec's Always as it was."""
    name = _stored(release_group, PTAHSCHEMAS, "Always")
    manager = release_group.operator.manager
    patched = manager.patch_metadata(
        PTAHSCHEMAS,
        release_group.namespace,
        name,
        {"finalizers": ["operator.ptah.run/active-operation"]},
    )
    written = manager.patch_status(
        PTAHSCHEMAS,
        release_group.namespace,
        name,
        {"phase": "Pending"},
        resource_version=patched["metadata"]["resourceVersion"],
    )
    assert written["spec"]["policy"]["apply"] == "Always"
    assert written["status"]["phase"] == "Pending"


@pytest.mark.parametrize(
    ("who", "apply", "refusal"),
    [
        (OUTSIDE, "OnApproval", None),
        (OUTSIDE, "Always", f"{OWNER} {NOBODY_SAYS}"),
        (INSIDE, "Always", f"{OWNER} {NOBODY_SAYS}"),
        (MASTERS, "Always", f"admin {NOBODY_SAYS}"),
    ],
    ids=["OnApproval is anyone's", "an owner", "a would-be release member", "an administrator"],
)
def test_by_default_nobody_sets_apply_always(
    nobody: Guarded, who: tuple[str, ...], apply: str, refusal: str | None
) -> None:
    user = "admin" if who == MASTERS else OWNER
    for resource in FAMILIES.values():
        body = _object(resource, nobody.namespace, apply)
        response = _write(nobody, "POST", resource, body, who, user=user)
        if refusal is None:
            admitted(response)
        else:
            refused_with(response, refusal)
