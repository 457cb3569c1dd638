"""Realms on a real API server: a database is changed only from namespaces its realm
admits, by exactly the resources that say they share it.

Everything is the product: the generated PtahRealm CRD, the manager's RBAC (it reads
realms and namespaces, never writes them), the webhook registered for the test's
namespace, and the controller's reconciler acting as the manager. Passes are run by
hand (``Reconciler.reconcile``), so each row decides when a realm changes relative
to the passes; a pass asks for its successor itself, so the pass count bounds a bug,
never a wait.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from controller.mutationlifecycle import Stop
from controller.pieces.events import RecordingSink
from controller.runtime.reconciler import Key
from controller.stages.realmgate import REALM_CONDITION, REALM_RETRY
from jobclaim import coordination_digest, lease_name
from jobclaim.apiserver import JOBS, LEASES, PTAHREALMS, PTAHSCHEMAS, ApiError, NotFound, Object
from lab import run as localrun
from tests.support.realapioperator import (  # noqa: F401
    Operator,
    Webhooked,
    operator,
    registered_webhook,
)

pytestmark = pytest.mark.controlplane


@dataclass
class Realms:
    operator: Operator
    staged: Webhooked
    controller: localrun.LocalController
    events: RecordingSink
    realm: str

    @property
    def namespace(self) -> str:
        return self.staged.namespace

    def reconcile(self, name: str) -> Stop:
        return self.controller.reconciler.reconcile(Key("PtahSchema", self.namespace, name))

    def schema(self, name: str, *, shared: bool = False) -> Key:
        raw = localrun.example_schema(self.namespace, name)
        target = raw["spec"]["target"]
        target.pop("coordinationKey", None)
        target.update(realmRef={"name": self.realm}, sharedRealm=shared)
        self.operator.admin.create(PTAHSCHEMAS, self.namespace, raw)
        return Key("PtahSchema", self.namespace, name)

    def put_realm(self, *, namespaces: list[str], sharing: str = "Exclusive") -> None:
        admin = self.operator.admin
        spec = {"engine": "PostgreSQL", "namespaces": namespaces, "sharing": sharing}
        try:
            stored = admin.get(PTAHREALMS, None, self.realm)
        except NotFound:
            admin.create(PTAHREALMS, None, {"metadata": {"name": self.realm}, "spec": spec})
            return
        stored["spec"] = spec
        admin.replace(PTAHREALMS, None, stored)

    def stored(self, name: str) -> Object:
        return self.operator.admin.get(PTAHSCHEMAS, self.namespace, name)

    def realm_condition(self, name: str) -> dict[str, Any] | None:
        found = (self.stored(name).get("status") or {}).get("conditions") or []
        return next((c for c in found if c["type"] == REALM_CONDITION), None)

    def claim(self, name: str) -> dict[str, Any]:
        return dict((self.stored(name).get("status") or {}).get("activeOperation") or {})

    def lease_exists(self) -> bool:
        digest = coordination_digest(
            engine="PostgreSQL", namespace=self.namespace, coordination_key=None, realm=self.realm
        )
        namespace = self.controller.config.lease_namespace
        try:
            self.operator.admin.get(LEASES, namespace, lease_name(digest))
        except NotFound:
            return False
        return True

    def jobs(self) -> list[Object]:
        return self.operator.admin.list(JOBS, self.namespace)


@pytest.fixture
def realms(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Realms]:
    with registered_webhook(operator, tmp_path_factory.mktemp("webhook-certs")) as (staged, _):
        events = RecordingSink()
        controller = localrun.LocalController(operator.manager, staged.namespace, events=events)
        realm = f"realm-{uuid.uuid4().hex[:10]}"
        try:
            yield Realms(operator, staged, controller, events, realm)
        finally:
            with contextlib.suppress(NotFound):
                operator.admin.delete(PTAHREALMS, None, realm)


def _pass_until(pass_: Callable[[], Stop], done: Callable[[Stop], bool], limit: int = 12) -> Stop:
    stops: list[Stop] = []
    for _ in range(limit):
        stop = pass_()
        stops.append(stop)
        if done(stop):
            return stop
    raise AssertionError(f"no pass reached the expected point: {stops}")


def _refused(stop: Stop) -> bool:
    return stop.requeue_after == REALM_RETRY


def test_a_namespace_the_realm_does_not_admit_never_takes_the_lease(realms: Realms) -> None:
    # Written before the realm exists (admission leaves a missing realm to the
    # controller); the realm then admits another namespace only.
    realms.schema("orders")
    realms.put_realm(namespaces=["elsewhere"])
    stop = _pass_until(lambda: realms.reconcile("orders"), _refused)
    assert realms.namespace in stop.reason
    condition = realms.realm_condition("orders")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "NamespaceNotAdmitted")
    assert f"does not admit namespace {realms.namespace}" in condition["message"]
    assert not realms.lease_exists()
    assert realms.jobs() == [] and realms.claim("orders") == {}
    # Looking again says nothing new: one Event for the refusal.
    realms.reconcile("orders")
    assert realms.events.reasons().count("RealmRefused") == 1
    # And a new write naming the realm is refused at the API server, by the webhook.
    with pytest.raises(ApiError, match="does not admit namespace"):
        realms.schema("orders-2")


def test_two_resources_without_shared_realm_both_stop_with_realm_conflict(
    realms: Realms,
) -> None:
    realms.put_realm(namespaces=[realms.namespace], sharing="Shared")
    realms.schema("orders-a", shared=True)
    realms.schema("orders-b", shared=False)
    for name in ("orders-a", "orders-b"):
        _pass_until(lambda name=name: realms.reconcile(name), _refused)
        condition = realms.realm_condition(name)
        assert condition is not None and condition["reason"] == "RealmConflict"
        assert "not every one sets spec.target.sharedRealm" in condition["message"]
    assert not realms.lease_exists()
    # The realm's own account, for the platform team (kubectl get ptahrealm prints it).
    stored = realms.operator.admin.get(PTAHREALMS, None, realms.realm)
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [
        ("RealmConflict", "True")
    ]
    assert realms.jobs() == []


def test_two_resources_that_share_a_shared_realm_are_both_admitted(realms: Realms) -> None:
    realms.put_realm(namespaces=[realms.namespace], sharing="Shared")
    realms.schema("orders-a", shared=True)
    realms.schema("orders-b", shared=True)
    for name in ("orders-a", "orders-b"):
        # Past the gate: each claims its first reading.
        _pass_until(
            lambda name=name: realms.reconcile(name),
            lambda _s, name=name: bool(realms.claim(name)),
        )
        assert realms.realm_condition(name) is None


def _seeded(realms: Realms, name: str) -> None:
    """Bring a schema to an approved plan, the readings stood in for (``seed_plan``)."""
    realms.reconcile(name)  # installs the execution binding
    op = realms.operator
    localrun.seed_plan(
        op.admin, op.manager, realms.namespace, name, plane=op.plane, await_reading=False
    )
    localrun.approve(op.admin, realms.namespace, name)


BUSY = "another claim holds the database realm"


def test_two_resources_that_share_a_shared_realm_take_turns_on_its_lease(
    realms: Realms,
) -> None:
    realms.put_realm(namespaces=[realms.namespace], sharing="Shared")
    realms.schema("orders-a", shared=True)
    realms.schema("orders-b", shared=True)
    _seeded(realms, "orders-a")
    _seeded(realms, "orders-b")
    _pass_until(
        lambda: realms.reconcile("orders-a"),
        lambda _s: bool(realms.claim("orders-a").get("jobUID")),
    )
    _pass_until(lambda: realms.reconcile("orders-b"), lambda s: s.reason == BUSY)
    assert realms.lease_exists()
    assert [j["metadata"]["name"] for j in realms.jobs()] == [realms.claim("orders-a")["jobName"]]
    assert realms.claim("orders-b")["dispatchStarted"] is False


def test_a_realm_edited_to_drop_the_namespace_retires_its_undispatched_claim(
    realms: Realms,
) -> None:
    realms.put_realm(namespaces=[realms.namespace])
    realms.schema("orders")
    _seeded(realms, "orders")
    _pass_until(
        lambda: realms.reconcile("orders"),
        lambda _s: realms.claim("orders").get("type") == "Apply",
    )
    assert not realms.claim("orders").get("dispatchStarted")
    realms.put_realm(namespaces=["elsewhere"])
    _pass_until(lambda: realms.reconcile("orders"), _refused)
    assert realms.claim("orders") == {}
    assert "ClaimRetired" in realms.events.reasons()
    condition = realms.realm_condition("orders")
    assert condition is not None and condition["reason"] == "NamespaceNotAdmitted"
    assert realms.jobs() == []
