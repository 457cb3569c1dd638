"""Realms: which namespaces may name a realm, and the census of those that do.

The decisions are pure and tabled (a control row first, then one change per row and
the refusal it meets); the rig rows drive the reconciler over the in-memory API to
show that a refused resource never takes the Lease, says why in a condition and one
Event, and that a realm edited mid-flight retires an undispatched claim.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.stages.realmgate import REALM_CONDITION, REALM_RETRY
from jobclaim import (
    RealmClaimant,
    RealmRefusal,
    realm_admission,
    realm_census,
    realm_conditions,
    selector_matches,
)
from jobclaim.api import NamespaceSelector, PtahRealm
from jobclaim.apiserver import (
    NAMESPACES,
    PTAHMIGRATIONS,
    PTAHREALMS,
    PTAHSCHEMAS,
    Object,
    Resource,
)
from kube.fake.inmemory import InMemoryApi
from tests.support.claimworld import example
from tests.support.dispatchworld import NS, Rig, add_schema, conditions, make_rig

Key = Any


def realm(
    *,
    engine: str = "PostgreSQL",
    namespaces: tuple[str, ...] = (NS,),
    selector: dict[str, Any] | None = None,
    sharing: str = "Exclusive",
    name: str = "orders-db",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"engine": engine, "namespaces": list(namespaces), "sharing": sharing}
    if selector is not None:
        spec["namespaceSelector"] = selector
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahRealm",
        "metadata": {"name": name},
        "spec": spec,
    }


def parsed(raw: dict[str, Any]) -> PtahRealm:
    return PtahRealm.model_validate(raw)


# -- the pure decisions ------------------------------------------------------------------

TEAM = {"team": "shop"}
ADMISSION = [
    # control: the realm lists the namespace
    (realm(), NS, None, None),
    (None, NS, None, ("RealmNotFound", "PtahRealm orders-db does not exist")),
    (
        realm(engine="MySQL"),
        NS,
        None,
        ("RealmEngineMismatch", "PtahRealm orders-db is a MySQL realm, not PostgreSQL"),
    ),
    (
        realm(),
        "billing",
        None,
        ("NamespaceNotAdmitted", "PtahRealm orders-db does not admit namespace billing"),
    ),
    # by label: admitted, then a label that does not match, then labels never read
    (realm(namespaces=(), selector={"matchLabels": TEAM}), "billing", TEAM, None),
    (
        realm(namespaces=(), selector={"matchLabels": TEAM}),
        "billing",
        {"team": "billing"},
        ("NamespaceNotAdmitted", "PtahRealm orders-db does not admit namespace billing"),
    ),
    (
        realm(namespaces=(), selector={"matchLabels": TEAM}),
        "billing",
        None,
        ("NamespaceNotAdmitted", "PtahRealm orders-db does not admit namespace billing"),
    ),
    # an empty selector admits nothing, unlike Kubernetes' own
    (
        realm(namespaces=(), selector={}),
        "billing",
        TEAM,
        ("NamespaceNotAdmitted", "PtahRealm orders-db does not admit namespace billing"),
    ),
]


@pytest.mark.parametrize(("raw", "namespace", "labels", "refused"), ADMISSION)
def test_a_realm_admits_only_its_engine_and_its_namespaces(
    raw: dict[str, Any] | None,
    namespace: str,
    labels: dict[str, str] | None,
    refused: tuple[str, str] | None,
) -> None:
    found = realm_admission(
        parsed(raw) if raw else None,
        realm_name="orders-db",
        engine="PostgreSQL",
        namespace=namespace,
        namespace_labels=labels,
    )
    assert (None if found is None else (found.reason, found.message)) == refused


SELECTORS = [
    ({"matchLabels": {"team": "shop"}}, True),
    ({"matchLabels": {"team": "billing"}}, False),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["shop"]}]}, True),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["x"]}]}, False),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["shop"]}]}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}, True),
    ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, False),
    ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
    ({}, False),
]


@pytest.mark.parametrize(("selector", "matches"), SELECTORS)
def test_selector_semantics(selector: dict[str, Any], matches: bool) -> None:
    chosen = NamespaceSelector.model_validate(selector)
    assert selector_matches(chosen, {"team": "shop"}) is matches


A = RealmClaimant("PtahSchema", "shop", "a", shared_realm=True)
B = RealmClaimant("PtahMigration", "billing", "b", shared_realm=True)
B_OWNS = RealmClaimant("PtahMigration", "billing", "b", shared_realm=False)
CONFLICT = "RealmConflict"
CENSUS = [
    # control: two claimants that both share, on a Shared realm
    ("Shared", (A, B), None),
    ("Shared", (A,), None),
    ("Exclusive", (A,), None),
    (
        "Exclusive",
        (A, B),
        "2 resources name PtahRealm orders-db (PtahMigration billing/b, PtahSchema shop/a): "
        "PtahRealm orders-db is Exclusive",
    ),
    (
        "Shared",
        (A, B_OWNS),
        "2 resources name PtahRealm orders-db (PtahMigration billing/b, PtahSchema shop/a): "
        "not every one sets spec.target.sharedRealm",
    ),
]


@pytest.mark.parametrize(("sharing", "claimants", "refused"), CENSUS)
def test_more_than_one_claimant_shares_only_when_every_one_says_so(
    sharing: str, claimants: tuple[RealmClaimant, ...], refused: str | None
) -> None:
    found = realm_census(parsed(realm(sharing=sharing)), claimants)
    if refused is None:
        assert found is None
    else:
        assert found is not None and (found.reason, found.message) == (CONFLICT, refused)


CLASH = RealmRefusal(CONFLICT, "2 resources name PtahRealm orders-db")


def test_the_realm_carries_its_census_and_an_unchanged_census_writes_nothing() -> None:
    fresh = parsed(realm())
    first = realm_conditions(fresh, CLASH, now="2026-12-02T12:00:00Z")
    assert first is not None
    assert [(c.type, c.status, c.reason) for c in first] == [(CONFLICT, "True", CONFLICT)]
    stored = parsed({**realm(), "status": {"conditions": [c.to_wire() for c in first]}})
    assert realm_conditions(stored, CLASH, now="2026-12-02T12:05:00Z") is None
    cleared = realm_conditions(stored, None, now="2026-12-02T12:05:00Z")
    assert cleared is not None
    [condition] = cleared
    assert (condition.status, condition.reason) == ("False", "NoConflict")
    assert condition.last_transition_time == "2026-12-02T12:05:00Z"


# -- over the reconciler -----------------------------------------------------------------


def on_realm(rig: Rig, name: str = "orders", *, shared: bool = False) -> Key:
    """A schema with an approved plan, naming the realm instead of a coordination key."""
    return add_schema(rig, name, realm="orders-db", shared_realm=shared)


def add_realm(api: InMemoryApi, raw: dict[str, Any]) -> None:
    api.create(PTAHREALMS, None, raw)


def test_a_resource_its_realm_admits_dispatches_under_the_realm() -> None:
    rig = make_rig()
    add_realm(rig.api, realm())
    key = on_realm(rig)
    rig.settle(key)
    assert len(rig.leases()) == 1
    assert len(rig.jobs()) == 1


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "RealmNotFound"),
        (realm(namespaces=("billing",)), "NamespaceNotAdmitted"),
        (realm(engine="MySQL"), "RealmEngineMismatch"),
    ],
)
def test_a_refused_resource_never_takes_the_lease_and_says_why_once(
    raw: dict[str, Any] | None, reason: str
) -> None:
    rig = make_rig()
    if raw is not None:
        add_realm(rig.api, raw)
    key = on_realm(rig)
    stops = rig.settle(key)
    assert stops[-1].requeue_after == REALM_RETRY
    assert rig.leases() == [] and rig.jobs() == []
    assert conditions(rig.resource(key))[REALM_CONDITION] == "False"
    found = rig.resource(key)["status"]["conditions"]
    assert [c["reason"] for c in found if c["type"] == REALM_CONDITION] == [reason]
    # Looking again finds the same refusal: nothing is written and nothing said again.
    writes = len(rig.api.writes())
    rig.settle(key)
    assert len(rig.api.writes()) == writes
    assert rig.sink.reasons().count("RealmRefused") == 1


def test_a_claim_asked_for_by_name_meets_the_gate_too() -> None:
    rig = make_rig()
    key = on_realm(rig)
    rig.settle(key)
    stop = rig.reconciler.claim(key, "Observe")
    assert stop.requeue_after == REALM_RETRY
    assert rig.claim(key) == {} and rig.jobs() == []


def test_a_namespace_admitted_by_label_dispatches() -> None:
    rig = make_rig()
    rig.api.create(NAMESPACES, None, {"metadata": {"name": NS, "labels": {"team": "shop"}}})
    add_realm(rig.api, realm(namespaces=(), selector={"matchLabels": {"team": "shop"}}))
    key = on_realm(rig)
    rig.settle(key)
    assert len(rig.jobs()) == 1


def test_two_claimants_without_sharing_both_stop_and_nothing_runs() -> None:
    rig = make_rig()
    add_realm(rig.api, realm(sharing="Shared"))
    first = on_realm(rig, "orders-a", shared=True)
    second = on_realm(rig, "orders-b", shared=False)
    for key in (first, second):
        rig.settle(key)
        found = rig.resource(key)["status"]["conditions"]
        assert [c["reason"] for c in found if c["type"] == REALM_CONDITION] == [CONFLICT]
    assert rig.leases() == [] and rig.jobs() == []
    stored = rig.api.get(PTAHREALMS, None, "orders-db")
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [
        (CONFLICT, "True")
    ]


def test_a_resource_in_a_namespace_the_realm_does_not_admit_is_no_claimant() -> None:
    """The census of a realm that admits by name lists those namespaces only: a
    resource elsewhere can never take the Lease, so it cannot stop the admitted one
    with RealmConflict either (nor is a scoped manager asked for a cluster-wide list).
    The control is the conflict row above: the same two in admitted namespaces stop."""
    rig = make_rig()
    add_realm(rig.api, realm())
    outsider = example("ptahschema.yaml")
    outsider["metadata"].update(name="orders-elsewhere", namespace="billing")
    target = outsider["spec"]["target"]
    target["realmRef"] = {"name": "orders-db"}
    rig.api.create(PTAHSCHEMAS, "billing", outsider)
    listed: list[str | None] = []
    unspied = rig.api.list

    def spy(resource: Resource, namespace: str | None, **kwargs: Any) -> list[Object]:
        if resource in (PTAHSCHEMAS, PTAHMIGRATIONS):
            listed.append(namespace)
        return unspied(resource, namespace, **kwargs)

    rig.api.list = spy  # type: ignore[method-assign]
    key = on_realm(rig)
    rig.settle(key)
    assert len(rig.leases()) == 1 and len(rig.jobs()) == 1
    assert listed and set(listed) == {NS}  # the census asked in the admitted one only


def test_two_claimants_that_share_a_shared_realm_take_turns() -> None:
    rig = make_rig()
    add_realm(rig.api, realm(sharing="Shared"))
    first = on_realm(rig, "orders-a", shared=True)
    second = on_realm(rig, "orders-b", shared=True)
    rig.settle(first)
    assert rig.settle(second)[-1].reason == "another claim holds the database realm"
    assert len(rig.leases()) == 1 and len(rig.jobs()) == 1


def test_a_realm_edited_mid_flight_retires_the_undispatched_claim() -> None:
    rig = make_rig()
    add_realm(rig.api, realm(sharing="Shared"))
    holder = on_realm(rig, "orders-a", shared=True)
    waiter = on_realm(rig, "orders-b", shared=True)
    rig.settle(holder)
    rig.settle(waiter)  # claimed, waiting on the Lease the holder keeps
    assert rig.claim(waiter)["dispatchStarted"] is False
    stored = rig.api.get(PTAHREALMS, None, "orders-db")
    stored["spec"]["namespaces"] = ["billing"]
    rig.api.replace(PTAHREALMS, None, stored)
    rig.settle(waiter)
    assert rig.claim(waiter) == {}
    assert "ClaimRetired" in rig.sink.reasons()
    assert conditions(rig.resource(waiter))[REALM_CONDITION] == "False"
    # The dispatched holder keeps its claim: it finishes under the lifecycle's rules.
    assert rig.claim(holder)["dispatchStarted"] is True
    assert len(rig.jobs()) == 1
