"""The stage of the attack table (``test_attacks.py``): a namespace judged by the webhook
and the chart's policies, and requests made with the manager's own token.

A stolen manager identity holds exactly the manager's RBAC (the chart's ClusterRole,
which ``lab.run.grant_manager`` applies) and passes every check that asks only who is
writing; ``as_manager`` is such a request. The Applies it attacks are staged by
``tests.realapi.applystage``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
import pytest
import yaml

from jobclaim.apiserver import (
    JOBS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PTAHSCHEMAS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Object,
    Resource,
)
from lab import run as localrun
from tests.support.chartrender import VALUES, Helm, HelmUnavailable, build_helm
from tests.support.realapioperator import Operator, Webhooked, registered_webhook

HARNESS_KUBE_VERSION: Final = "1.37.2"
EVIL: Final = "registry.evil.example/ptah@sha256:" + "6" * 64
POLICIES: Final = (
    "ptah-operator-status-writer",
    "ptah-operator-unresolved-run-annotation",
    "ptah-operator-manager-metadata-only",
    "ptah-operator-apply-always-groups",
    "ptah-operator-result-records",
)
# The stage's person is the admin, who sets policy.apply: Always for the rows whose
# policy waives the approval; the platform lets its group do so.
APPLY_ALWAYS_GROUPS: Final = {"approvals.applyAlwaysGroups": "{system:masters}"}


@dataclass
class Stage:
    """One test namespace judged by the webhook and the chart's policies."""

    operator: Operator
    staged: Webhooked
    hook: localrun.LocalWebhook
    configurations: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return self.staged.namespace


@pytest.fixture(scope="module", name="helm")
def helm_fixture(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        binary = build_helm()
    except HelmUnavailable as error:
        pytest.fail(f"the attack table needs helm to render the chart's policies: {error}")
    return Helm(binary, tmp_path_factory.mktemp("helm-home"))


def _policies(helm: Helm, label: dict[str, str]) -> list[Object]:
    """The chart's admission policies and bindings, each binding narrowed to the test's
    namespace so the session's other tests on this server never meet them."""
    objects = helm.render(
        [VALUES / "required.yaml"],
        APPLY_ALWAYS_GROUPS,
        extra=["--kube-version", HARNESS_KUBE_VERSION],
    )
    chosen = [
        o
        for o in objects
        if o["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    ]
    assert {o["metadata"]["name"] for o in chosen} == set(POLICIES), "the chart's policies moved"
    suffix = next(iter(label.values()))
    for obj in chosen:
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{suffix}"
        if obj["kind"] == "ValidatingAdmissionPolicyBinding":
            obj["spec"]["policyName"] = f"{obj['spec']['policyName']}-{suffix}"
            obj["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": label}}
    return chosen


VAP: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    namespaced=False,
)
VAPB: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)


@pytest.fixture(scope="module", name="stage")
def stage_fixture(
    operator: Operator,
    helm: Helm,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stage]:
    certificates = tmp_path_factory.mktemp("attack-certs")
    with registered_webhook(operator, certificates) as (staged, hook):
        policies = _policies(helm, staged.label)
        for obj in policies:
            resource = VAP if obj["kind"] == "ValidatingAdmissionPolicy" else VAPB
            localrun.apply(operator.plane, resource, obj, identity="admin")
        found = Stage(operator, staged, hook)
        for prefix_kind in (VALIDATING_WEBHOOK_CONFIGURATIONS, MUTATING_WEBHOOK_CONFIGURATIONS):
            for item in operator.admin.list(prefix_kind, None):
                if item["metadata"]["name"].startswith(staged.prefix):
                    found.configurations.append(item["metadata"]["name"])
        _await_policies(found)
        try:
            yield found
        finally:
            for obj in reversed(policies):
                resource = VAP if obj["kind"] == "ValidatingAdmissionPolicy" else VAPB
                operator.admin.delete(resource, None, obj["metadata"]["name"])


def _await_policies(stage: Stage) -> None:
    """A new policy is in force once the API server has compiled it; nothing announces
    that, so a probe write it must refuse is retried under the harness's deadline."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    stage.operator.admin.create(PTAHSCHEMAS, stage.namespace, schema_object(stage, name))

    def refusing() -> bool:
        response = as_manager(
            stage,
            "PATCH",
            path_of(PTAHSCHEMAS, stage.namespace, name),
            {"spec": {"policy": {"apply": "Always"}}},
        )
        return response.status_code == 403 and "ValidatingAdmissionPolicy" in response.text

    localrun.until(refusing, "the chart's admission policies to be in force")


# -- talking to the API server as the manager -------------------------------------------


def suffix_of(stage: Stage) -> str:
    return next(iter(stage.staged.label.values()))


def path_of(resource: Resource, namespace: str | None, name: str = "", sub: str = "") -> str:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    where = f"/namespaces/{namespace}" if namespace else ""
    tail = f"/{name}" if name else ""
    return f"{prefix}{where}/{resource.plural}{tail}" + (f"/{sub}" if sub else "")


def as_manager(
    stage: Stage,
    method: str,
    path: str,
    body: Any,
    *,
    dry_run: bool = True,
    content_type: str = "application/merge-patch+json",
) -> httpx.Response:
    """One request with the manager's own bearer token; a dry run unless told."""
    plane = stage.operator.plane
    if method == "POST":
        content_type = "application/json"
    with httpx.Client(verify=plane.ssl_context(), timeout=60.0) as http:
        return http.request(
            method,
            f"{plane.server_url}{path}",
            params={"dryRun": "All"} if dry_run else {},
            content=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {plane.token('manager')}",
                "Content-Type": content_type,
            },
        )


def refused_with(response: httpx.Response, sentence: str) -> None:
    assert response.status_code in (403, 422), (response.status_code, response.text[:600])
    message = response.json().get("message", "")
    assert sentence in message, (sentence, message)


def admitted(response: httpx.Response) -> None:
    assert response.status_code < 300, (response.status_code, response.text[:800])


def template(refusal: Any, **parts: str) -> str:
    """The sentence up to its first placeholder: what a refusal must contain."""
    return str(refusal.template).split("{", 1)[0] if not parts else refusal.sentence(**parts)


def create_job(stage: Stage, job: Object, *, dry_run: bool = True) -> httpx.Response:
    body = {"apiVersion": "batch/v1", "kind": "Job", **job}
    return as_manager(stage, "POST", path_of(JOBS, stage.namespace), body, dry_run=dry_run)


# -- the manager's writes, as the controller makes them ---------------------------------


def schema_object(stage: Stage, name: str) -> Object:
    return localrun.example_schema(stage.namespace, name)


def migration_object(stage: Stage, name: str) -> Object:
    raw = yaml.safe_load((localrun.EXAMPLES / "ptahmigration.yaml").read_text())
    raw = localrun.keyed(raw, "billing-primary")
    raw["metadata"] = {"name": name, "namespace": stage.namespace}
    return dict(raw)
