"""Approvals a reviewer can trust, on a real kube-apiserver (issue 20).

The webhooks are the product's, registered as the chart registers them (mutating
stamp and validating decisions among them) for a namespace of the test's own; a
person is ``jane@example.com`` (the harness's "person" identity), granted in that
namespace what the chart's approver role grants. She approves through the real
``kubectl`` running the installed ``kubectl-ptah`` plugin.

Waiting is a bounded poll of the resource (``localrun.wait_for``): the controller acts
on its own threads and the resource is the only thing that says it is done.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from controller.pieces.events import RecordingSink
from controller.runtime.reconciler import Key
from jobclaim.api import SPEC_WRITER_ANNOTATION
from jobclaim.apiserver import PTAHSCHEMAAPPROVALS, PTAHSCHEMAS, Object, Refused
from jobclaim.crds import IMMUTABLE
from kube.client import KubeApi
from lab import run as localrun
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    Webhooked,
    operator,
    registered_webhook,
)
from webhook import Settings

pytestmark = pytest.mark.controlplane

PERSON: Final = "jane@example.com"
ADMIN: Final = "admin"
PLUGIN: Final = Path(sys.executable).parent / "kubectl-ptah"
DESTRUCTIVE: Final = (
    b"CREATE TABLE orders_v2 (id bigint PRIMARY KEY, placed_at timestamptz NOT NULL);\n",
    b"INSERT INTO orders_v2 SELECT id, now() FROM orders;\nDROP TABLE orders;\n",
)
UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass
class Stage:
    operator: Operator
    staged: Webhooked
    person: KubeApi

    @property
    def namespace(self) -> str:
        return self.staged.namespace

    @property
    def admin(self) -> KubeApi:
        return self.operator.admin


def grant_approver(operator: Operator, namespace: str) -> None:  # noqa: F811
    """What the chart's approver role grants, in ``namespace``, to the person, once it
    is in force (RBAC's cache takes it a moment after the write: until_granted)."""
    admin = operator.admin
    rules = [
        {
            "apiGroups": ["operator.ptah.run"],
            "resources": [
                "ptahschemas",
                "ptahmigrations",
                "ptahschemaplans",
                "ptahschemaplanchunks",
                "ptahmigrationplans",
            ],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["operator.ptah.run"],
            "resources": [
                "ptahschemaapprovals",
                "ptahmigrationapprovals",
                "ptahmigrationrunacknowledgments",
                "ptahschemaproofsettlements",
            ],
            "verbs": ["get", "list", "watch", "create"],
        },
    ]
    admin.create(localrun.ROLES, namespace, {"metadata": {"name": "approver"}, "rules": rules})
    admin.create(
        localrun.ROLE_BINDINGS,
        namespace,
        {
            "metadata": {"name": "approver"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "approver",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": PERSON}],
        },
    )
    localrun.until_granted(operator.plane, "person", rules, namespace)


def stage(
    operator: Operator,  # noqa: F811
    certificates: Path,
    *,
    stamp: bool = True,
    settings: Settings = localrun.LOCAL_SETTINGS,
) -> Iterator[Stage]:
    with (
        registered_webhook(operator, certificates, stamp=stamp, settings=settings) as (staged, _),
        KubeApi.from_kubeconfig(operator.plane.kubeconfig("person")) as person,
    ):
        grant_approver(operator, staged.namespace)
        yield Stage(operator, staged, person)


@pytest.fixture
def stamped(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stage]:
    yield from stage(operator, tmp_path_factory.mktemp("webhook-certs"))


@pytest.fixture
def four_eyes(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stage]:
    """The webhook as the chart configures it with approvals.requireDistinctApprover."""
    settings = dataclasses.replace(localrun.LOCAL_SETTINGS, require_distinct_approver=True)
    yield from stage(operator, tmp_path_factory.mktemp("webhook-certs"), settings=settings)


@pytest.fixture
def bypassed(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stage]:
    yield from stage(operator, tmp_path_factory.mktemp("webhook-certs"), stamp=False)


def planned_schema(stage: Stage, name: str = "orders") -> Object:
    """A PtahSchema created by the admin, with a plan published for it.

    Without a running controller the manager installs the execution binding itself
    (the one status write the controller would make first); ``seed_plan`` then stands
    in for the Plan Job, as ``make run`` does.
    """
    raw = localrun.example_schema(stage.namespace, name)
    # Written by the admin, who says so: what the stamp webhook records, and what the
    # decisions webhook requires even while the stamp webhook is left out.
    raw["metadata"]["annotations"] = {SPEC_WRITER_ANNOTATION: ADMIN}
    created = stage.admin.create(PTAHSCHEMAS, stage.namespace, raw)
    binding = localrun.manager_config().binding.install("v1-" + "b" * 32)
    stage.operator.manager.patch_status(
        PTAHSCHEMAS,
        stage.namespace,
        name,
        {"executionBinding": binding.to_wire(), "phase": "Pending"},
        resource_version=created["metadata"]["resourceVersion"],
    )
    localrun.seed_plan(
        stage.admin,
        stage.operator.manager,
        stage.namespace,
        name,
        plane=stage.operator.plane,
        statements=DESTRUCTIVE,
        destructive=True,
        await_reading=False,
    )
    return stage.admin.get(PTAHSCHEMAS, stage.namespace, name)


def kubectl_ptah(stage: Stage, identity: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl ptah ARGS`` as ``identity``: the real kubectl finds the installed plugin."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is not installed"
    assert PLUGIN.exists(), f"{PLUGIN} is not installed (pip install -e .)"
    env = {
        **os.environ,
        "PATH": f"{PLUGIN.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(stage.operator.plane.kubeconfig(identity)),
    }
    return subprocess.run(
        [kubectl, "ptah", *args, "-n", stage.namespace],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def approval_by(stage: Stage, schema: Object, **spec: Any) -> Object:
    """An approval of the schema's plan as a person would write one by hand."""
    plan = schema["status"]["plan"]
    body: Object = {
        "schemaRef": {"name": schema["metadata"]["name"], "uid": schema["metadata"]["uid"]},
        "planRef": {"name": plan["name"], "uid": plan["uid"]},
        "planFingerprint": plan["fingerprint"],
        **spec,
    }
    return {"metadata": {"generateName": "by-hand-"}, "spec": body}


FORGED: Final = {
    "approver": {"username": "cto@example.com", "uid": "cto-uid", "groups": ["system:masters"]},
    "approvedAt": "2026-01-01T00:00:00Z",
    "mutationRequestUID": "00000000-0000-4000-8000-000000000000",
}


def test_a_person_approves_through_kubectl_ptah_and_the_stamp_is_theirs(stamped: Stage) -> None:
    schema = planned_schema(stamped)
    shown = kubectl_ptah(stamped, "person", "plan", "schema", "orders")
    assert shown.returncode == 0, shown.stderr
    assert "DESTRUCTIVE DROP TABLE orders;" in shown.stdout
    print(shown.stdout)  # the README's example (pytest -s shows it)
    before = time.time()
    made = kubectl_ptah(stamped, "person", "approve", "schema", "orders", "--yes", "-o", "json")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["stampedBy"] == PERSON
    stored = stamped.admin.get(PTAHSCHEMAAPPROVALS, stamped.namespace, created["name"])
    spec = stored["spec"]
    assert spec["approver"]["username"] == PERSON
    # The API server's own view of jane: the groups it authenticated her with.
    assert "system:authenticated" in spec["approver"]["groups"]
    assert UUID.match(spec["mutationRequestUID"])
    stamped_at = time.mktime(time.strptime(spec["approvedAt"], "%Y-%m-%dT%H:%M:%SZ"))
    assert abs(stamped_at - time.mktime(time.gmtime(before))) < 120
    plan = schema["status"]["plan"]
    assert spec["planRef"] == {"name": plan["name"], "uid": plan["uid"]}
    assert spec["planFingerprint"] == plan["fingerprint"]


def test_a_forged_approver_is_overwritten(stamped: Stage) -> None:
    schema = planned_schema(stamped)
    stored = stamped.person.create(
        PTAHSCHEMAAPPROVALS, stamped.namespace, approval_by(stamped, schema, **FORGED)
    )
    spec = stored["spec"]
    assert spec["approver"]["username"] == PERSON
    assert "system:masters" not in spec["approver"]["groups"]
    assert spec["approvedAt"] != FORGED["approvedAt"]
    assert spec["mutationRequestUID"] != FORGED["mutationRequestUID"]


def test_an_approval_cannot_be_changed_once_created(stamped: Stage) -> None:
    schema = planned_schema(stamped)
    stored = stamped.person.create(
        PTAHSCHEMAAPPROVALS, stamped.namespace, approval_by(stamped, schema)
    )
    name = stored["metadata"]["name"]
    with pytest.raises(Refused) as refused:
        stamped.admin.patch_spec(
            PTAHSCHEMAAPPROVALS, stamped.namespace, name, {"approver": FORGED["approver"]}
        )
    # The CRD's own rule (self == oldSelf) refuses it before any webhook is asked; the
    # decisions webhook's twin (decision-immutable) is tests/webhook/test_decisions.py's.
    assert f"spec: Invalid value: {IMMUTABLE.message}" in str(refused.value)
    # Metadata is not the decision: a label may still be set.
    stamped.admin.patch_metadata(
        PTAHSCHEMAAPPROVALS, stamped.namespace, name, {"labels": {"a": "b"}}
    )


def test_with_the_stamp_bypassed_the_validating_side_refuses(bypassed: Stage) -> None:
    schema = planned_schema(bypassed)
    with pytest.raises(Refused) as forged:
        bypassed.person.create(
            PTAHSCHEMAAPPROVALS, bypassed.namespace, approval_by(bypassed, schema, **FORGED)
        )
    assert (
        'the PtahSchemaApproval\'s approver.username is "cto@example.com", '
        f'but the request was made with "{PERSON}": the stamp is not this request\'s'
    ) in str(forged.value)
    with pytest.raises(Refused) as bare:
        bypassed.person.create(
            PTAHSCHEMAAPPROVALS, bypassed.namespace, approval_by(bypassed, schema)
        )
    assert "the PtahSchemaApproval carries no approver: it was not stamped by admission" in str(
        bare.value
    )
    made = kubectl_ptah(bypassed, "person", "approve", "schema", "orders", "--yes")
    assert made.returncode == 1
    assert "it was not stamped by admission" in made.stderr
    assert bypassed.admin.list(PTAHSCHEMAAPPROVALS, bypassed.namespace) == []


def test_with_four_eyes_the_specs_last_writer_cannot_approve(four_eyes: Stage) -> None:
    stamped = four_eyes
    schema = planned_schema(stamped)
    # The admin created the spec: admission recorded it as its last writer.
    assert schema["metadata"]["annotations"][SPEC_WRITER_ANNOTATION] == ADMIN
    refused = kubectl_ptah(stamped, "admin", "approve", "schema", "orders", "--yes")
    assert refused.returncode == 1
    assert (
        f"{ADMIN} may not approve PtahSchema {stamped.namespace}/orders: the chart's "
        f"approvals.requireDistinctApprover requires a distinct approver, and {ADMIN} "
        "last changed its spec"
    ) in refused.stderr
    # A forged record is not how to get around it: a write that leaves the spec alone
    # gets the record it had back from the stamp webhook.
    rewritten = stamped.admin.patch_metadata(
        PTAHSCHEMAS,
        stamped.namespace,
        "orders",
        {"annotations": {SPEC_WRITER_ANNOTATION: "someone-else"}},
    )
    assert rewritten["metadata"]["annotations"][SPEC_WRITER_ANNOTATION] == ADMIN
    approved = kubectl_ptah(stamped, "person", "approve", "schema", "orders", "--yes")
    assert approved.returncode == 0, approved.stderr


# The attack of issue 31: one spec edit switches four-eyes off beside a new artifact,
# then its author approves. The edit is refused (the switch is the chart's now), and
# the approval is refused by the chart's four-eyes whatever the spec says.
SWITCH_ROWS: Final[list[tuple[str, Object, str | None]]] = [
    ("a new artifact alone", {"desired": {"ociRef": "registry.example.com/shop/orders:9"}}, None),
    (
        "a new artifact with the spec's four-eyes switch off",
        {
            "desired": {"ociRef": "registry.example.com/shop/orders:10"},
            "policy": {"approval": {"requireDistinctApprover": False}},
        },
        "spec.policy.approval.requireDistinctApprover is no longer a PtahSchema setting: "
        "four-eyes is the chart's approvals.requireDistinctApprover",
    ),
]


def test_the_specs_author_cannot_switch_four_eyes_off(four_eyes: Stage) -> None:
    planned_schema(four_eyes)
    for name, spec, refusal in SWITCH_ROWS:
        if refusal is None:
            four_eyes.admin.patch_spec(PTAHSCHEMAS, four_eyes.namespace, "orders", spec)
            continue
        with pytest.raises(Refused) as refused:
            four_eyes.admin.patch_spec(PTAHSCHEMAS, four_eyes.namespace, "orders", spec)
        assert refusal in str(refused.value), (name, str(refused.value))
    stored = four_eyes.admin.get(PTAHSCHEMAS, four_eyes.namespace, "orders")
    assert "approval" not in stored["spec"]["policy"]
    assert stored["metadata"]["annotations"][SPEC_WRITER_ANNOTATION] == ADMIN
    # The plan seeded before the edit is still the one shown: its author approves it.
    refused_approval = kubectl_ptah(four_eyes, "admin", "approve", "schema", "orders", "--yes")
    assert refused_approval.returncode == 1
    assert f"{ADMIN} may not approve PtahSchema {four_eyes.namespace}/orders" in (
        refused_approval.stderr
    )


def test_the_controller_dispatches_only_after_the_stamped_approval(
    operator: Operator,  # noqa: F811
    stamped: Stage,
) -> None:
    events = RecordingSink()
    controller = localrun.LocalController(operator.manager, stamped.namespace, events=events)
    key = Key("PtahSchema", stamped.namespace, "orders")
    raw = localrun.example_schema(stamped.namespace, "orders")
    stamped.admin.create(PTAHSCHEMAS, stamped.namespace, raw)
    # Passes run here, one at a time, until the controller says what it waits for:
    # the binding first, then (once the plan is seeded) an approval.
    controller.reconciler.reconcile(key)
    localrun.seed_plan(
        stamped.admin,
        operator.manager,
        stamped.namespace,
        "orders",
        plane=operator.plane,
        statements=DESTRUCTIVE,
        destructive=True,
        await_reading=False,
    )
    for _ in range(5):
        stop = controller.reconciler.reconcile(key)
        if stop.reason == "the plan awaits an approval":
            break
    assert stop.reason == "the plan awaits an approval"
    waiting = stamped.admin.get(PTAHSCHEMAS, stamped.namespace, "orders")
    assert not (waiting.get("status") or {}).get("activeOperation")
    made = kubectl_ptah(stamped, "person", "approve", "schema", "orders", "--yes", "-o", "json")
    assert made.returncode == 0, made.stderr
    name = json.loads(made.stdout)["name"]
    controller.start()
    try:
        controller.nudge(stamped.namespace, "orders")
        stored = localrun.wait_for(
            stamped.admin,
            stamped.namespace,
            "orders",
            lambda s: localrun.recorded_job(s) is not None,
        )
    finally:
        controller.stop(wait=0)
    claim = stored["status"]["activeOperation"]
    assert claim["type"] == "Apply" and claim["dispatchStarted"] is True
    spent = stamped.admin.get(PTAHSCHEMAAPPROVALS, stamped.namespace, name)
    assert spent["spec"]["approver"]["username"] == PERSON
    assert [c["type"] for c in spent["status"]["conditions"]] == ["Consumed"]
    assert "ApprovalUnstamped" not in events.reasons()
