"""The admission snapshot: resolved from credential-free objects, each bound exactly,
ambiguity refused, and the verdict on a persisted snapshot."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.pieces.podintent import (
    AdmissionSettings,
    AdmissionUnresolvable,
    limit_range_bindings,
    resolve_snapshot,
    snapshot_verdict,
)
from jobclaim import seal, snapshot_problem, template_digest
from jobclaim.apiserver import (
    LIMITRANGES,
    PRIORITYCLASSES,
    RUNTIMECLASSES,
    SERVICEACCOUNTS,
    Object,
    Unavailable,
)
from kube.fake.inmemory import InMemoryApi, matching

NS = "shop"
SETTINGS = AdmissionSettings()


def template(**spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "serviceAccountName": "runner",
        "restartPolicy": "Never",
        "containers": [{"name": "runner", "image": "r@sha256:" + "1" * 64}],
    }
    pod.update(spec)
    return {"metadata": {"labels": {"app": "ptah"}}, "spec": pod}


def limit_range(name: str, *items: dict[str, Any]) -> Object:
    return {"metadata": {"name": name}, "spec": {"limits": list(items)}}


def container(**fields: Any) -> dict[str, Any]:
    return {"type": "Container", **fields}


def world() -> InMemoryApi:
    """The control world: every snapshot input present and unambiguous."""
    api = InMemoryApi()
    api.create(
        SERVICEACCOUNTS,
        NS,
        {
            "metadata": {"name": "runner"},
            "imagePullSecrets": [{"name": "pull-b"}, {"name": "pull-a"}],
        },
    )
    # Created out of name order: the snapshot sorts, the store's order decides nothing.
    api.create(LIMITRANGES, NS, limit_range("zz-bounds", {"type": "Pod", "max": {"cpu": "4"}}))
    api.create(
        LIMITRANGES,
        NS,
        limit_range(
            "aa-defaults",
            container(defaultRequest={"cpu": "100m"}, default={"memory": "256Mi"}),
        ),
    )
    api.create(PRIORITYCLASSES, None, {"metadata": {"name": "batch"}, "value": 100})
    return api


def test_the_control_world_resolves_to_a_sealed_snapshot_binding_every_object() -> None:
    api = world()
    snapshot = resolve_snapshot(api, NS, template(), SETTINGS)
    assert snapshot_problem(snapshot) is None
    assert snapshot.template_digest == template_digest(template())
    sa = api.get(SERVICEACCOUNTS, NS, "runner")["metadata"]
    assert (snapshot.service_account.object.name, snapshot.service_account.object.uid) == (
        "runner",
        sa["uid"],
    )
    assert snapshot.service_account.object.resource_version == sa["resourceVersion"]
    # Order kept: the ServiceAccount plugin appends pull secrets in the order listed.
    assert snapshot.service_account.image_pull_secrets == ["pull-b", "pull-a"]
    assert [b.object.name for b in snapshot.limit_ranges] == ["aa-defaults", "zz-bounds"]
    assert snapshot.limit_ranges[0].default_requests == {"cpu": "100m"}
    assert snapshot.limit_ranges[0].default_limits == {"memory": "256Mi"}
    assert snapshot.limit_ranges[1].default_requests == {}
    assert snapshot.runtime_class is None
    # No class named and no global default: no class, value 0.
    assert snapshot.priority_class.object is None
    assert (snapshot.priority_class.name, snapshot.priority_class.value) == ("", 0)


def test_only_credential_free_objects_are_read() -> None:
    api = world()
    api.create(RUNTIMECLASSES, None, {"metadata": {"name": "gvisor"}, "handler": "runsc"})
    api.clear_calls()
    resolve_snapshot(
        api, NS, template(runtimeClassName="gvisor", priorityClassName="batch"), SETTINGS
    )
    read = {c.resource.plural for c in api.calls}
    # No Secret: the pull secrets are recorded by name, their contents never read.
    assert read == {"serviceaccounts", "limitranges", "runtimeclasses", "priorityclasses"}
    assert api.writes() == []


def test_the_plugin_switches_are_recorded_from_the_settings() -> None:
    settings = AdmissionSettings(
        default_tolerations_enabled=False,
        default_not_ready_toleration_seconds=60,
        default_unreachable_toleration_seconds=90,
        extended_resource_toleration_enabled=True,
        always_pull_images_enabled=True,
    )
    snapshot = resolve_snapshot(world(), NS, template(), settings)
    assert snapshot.default_tolerations_enabled is False
    assert snapshot.default_not_ready_toleration_seconds == 60
    assert snapshot.default_unreachable_toleration_seconds == 90
    assert snapshot.extended_resource_toleration_enabled is True
    assert snapshot.always_pull_images_enabled is True
    assert snapshot.digest != resolve_snapshot(world(), NS, template(), SETTINGS).digest


Change = Callable[[InMemoryApi], object]


def _ignore(api: InMemoryApi) -> None:
    pass


def _many_limit_ranges(api: InMemoryApi) -> None:
    for index in range(31):
        api.create(LIMITRANGES, NS, limit_range(f"lr-{index:02d}"))


def _many_defaults(api: InMemoryApi) -> None:
    requests = {f"example.com/r{i}": "1" for i in range(40)}
    limits = {f"example.com/r{i}": "2" for i in range(40)}
    api.create(LIMITRANGES, NS, limit_range("many", container(defaultRequest=requests)))
    api.create(LIMITRANGES, NS, limit_range("more", container(default=limits)))


def _runtime_class(**fields: Any) -> Change:
    return lambda api: api.create(RUNTIMECLASSES, None, {"metadata": {"name": "rc"}, **fields})


def _global_default(name: str, value: int) -> Change:
    return lambda api: api.create(
        PRIORITYCLASSES, None, {"metadata": {"name": name}, "value": value, "globalDefault": True}
    )


# (id, a change to the control world, the template's pod spec changes, sentence or None)
REFUSALS: list[tuple[str, Change, dict[str, Any], str | None]] = [
    # Control row: the world as built resolves, so every row below fails for its change.
    ("control", _ignore, {}, None),
    (
        "service-account-missing",
        _ignore,
        {"serviceAccountName": "missing"},
        "service account missing does not exist in namespace shop",
    ),
    (
        "default-service-account-missing",
        _ignore,
        {"serviceAccountName": None},
        "service account default does not exist",
    ),
    (
        "two-global-defaults",
        lambda api: [_global_default(n, 1)(api) for n in ("high", "low")],
        {},
        "priority classes high, low are all marked global default",
    ),
    ("priority-class-missing", _ignore, {"priorityClassName": "urgent"}, "priority class urgent"),
    ("runtime-class-missing", _ignore, {"runtimeClassName": "kata"}, "runtime class kata"),
    ("too-many-limit-ranges", _many_limit_ranges, {}, "33 limit ranges, more than the 32"),
    ("too-many-defaults", _many_defaults, {}, "82 container defaults, more than the 64"),
    (
        "conflicting-defaults",
        lambda api: api.create(
            LIMITRANGES, NS, limit_range("mm-other", container(defaultRequest={"cpu": "200m"}))
        ),
        {},
        "limit ranges aa-defaults and mm-other give the container default request for cpu",
    ),
    (
        "conflicting-within-one",
        lambda api: api.create(
            LIMITRANGES,
            NS,
            limit_range("twice", container(default={"cpu": "1"}), container(default={"cpu": "2"})),
        ),
        {},
        "limit range twice give the container default limit for cpu",
    ),
    (
        "not-a-quantity",
        lambda api: api.create(
            LIMITRANGES, NS, limit_range("bad", container(default={"cpu": "lots"}))
        ),
        {},
        "limit range bad: cpu is not a quantity",
    ),
    (
        "runtime-class-without-handler",
        _runtime_class(),
        {"runtimeClassName": "rc"},
        "runtime class rc names no handler",
    ),
    (
        "runtime-class-scheduling-unbounded",
        _runtime_class(
            handler="runc",
            scheduling={"nodeSelector": {f"k{i}": "v" for i in range(65)}},
        ),
        {"runtimeClassName": "rc"},
        "more than 64 scheduling items",
    ),
    (
        "pull-secret-without-name",
        lambda api: api.create(
            SERVICEACCOUNTS, NS, {"metadata": {"name": "odd"}, "imagePullSecrets": [{}]}
        ),
        {"serviceAccountName": "odd"},
        "lists an image pull secret without a name",
    ),
]


@pytest.mark.parametrize(
    ("change", "spec", "sentence"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_what_cannot_be_pinned_exactly_is_refused(
    change: Change, spec: dict[str, Any], sentence: str | None
) -> None:
    api = world()
    change(api)
    pod = template(**spec)
    pod["spec"] = {k: v for k, v in pod["spec"].items() if v is not None}
    if sentence is None:
        assert snapshot_problem(resolve_snapshot(api, NS, pod, SETTINGS)) is None
        return
    with pytest.raises(AdmissionUnresolvable, match=sentence):
        resolve_snapshot(api, NS, pod, SETTINGS)


# (id, change, template's priorityClassName, bound name, value, preemption policy)
PRIORITIES: list[tuple[str, Change, str | None, str, int, str]] = [
    ("none", _ignore, None, "", 0, "PreemptLowerPriority"),
    ("named", _ignore, "batch", "batch", 100, "PreemptLowerPriority"),
    ("single-global-default", _global_default("std", 7), None, "std", 7, "PreemptLowerPriority"),
    (
        "named-wins-over-ambiguous-defaults",
        lambda api: [_global_default(n, 1)(api) for n in ("x", "y")],
        "batch",
        "batch",
        100,
        "PreemptLowerPriority",
    ),
    (
        "never-preempts",
        lambda api: api.create(
            PRIORITYCLASSES,
            None,
            {"metadata": {"name": "polite"}, "value": 5, "preemptionPolicy": "Never"},
        ),
        "polite",
        "polite",
        5,
        "Never",
    ),
]


@pytest.mark.parametrize(
    ("change", "named", "name", "value", "policy"),
    [r[1:] for r in PRIORITIES],
    ids=[r[0] for r in PRIORITIES],
)
def test_the_priority_class_is_the_named_one_or_the_single_global_default(
    change: Change, named: str | None, name: str, value: int, policy: str
) -> None:
    api = world()
    change(api)
    spec = {"priorityClassName": named} if named else {}
    priority = resolve_snapshot(api, NS, template(**spec), SETTINGS).priority_class
    assert (priority.name, priority.value, priority.preemption_policy) == (name, value, policy)
    if name:
        assert priority.object is not None
        assert priority.object.uid == api.get(PRIORITYCLASSES, None, name)["metadata"]["uid"]


def test_a_runtime_class_binds_its_handler_overhead_and_scheduling() -> None:
    api = world()
    api.create(
        RUNTIMECLASSES,
        None,
        {
            "metadata": {"name": "gvisor"},
            "handler": "runsc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
            "scheduling": {
                "nodeSelector": {"sandbox": "gvisor"},
                "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    )
    runtime = resolve_snapshot(api, NS, template(runtimeClassName="gvisor"), SETTINGS).runtime_class
    assert runtime is not None
    assert (runtime.handler, runtime.overhead_defined) == ("runsc", True)
    assert runtime.overhead == {"cpu": "250m", "memory": "64Mi"}
    assert runtime.node_selector == {"sandbox": "gvisor"}
    assert [t.key for t in runtime.tolerations] == ["sandbox"]


def test_equal_defaults_spelled_differently_do_not_conflict() -> None:
    api = world()
    api.create(LIMITRANGES, NS, limit_range("mm-same", container(defaultRequest={"cpu": "0.1"})))
    snapshot = resolve_snapshot(api, NS, template(), SETTINGS)
    assert [b.default_requests for b in snapshot.limit_ranges[:2]] == [
        {"cpu": "100m"},
        {"cpu": "0.1"},
    ]


def test_a_changed_binding_is_a_changed_snapshot() -> None:
    api = world()
    before = resolve_snapshot(api, NS, template(), SETTINGS)
    account = api.get(SERVICEACCOUNTS, NS, "runner")
    account["metadata"]["labels"] = {"touched": "yes"}
    api.replace(SERVICEACCOUNTS, NS, account)
    after = resolve_snapshot(api, NS, template(), SETTINGS)
    assert after.service_account.object.resource_version != (
        before.service_account.object.resource_version
    )
    assert after.digest != before.digest


def test_a_read_that_fails_propagates_for_the_next_pass() -> None:
    api = world()
    api.fail_read(matching("list", LIMITRANGES), Unavailable("timeout"))
    with pytest.raises(Unavailable):
        resolve_snapshot(api, NS, template(), SETTINGS)


@given(order=st.permutations(["a", "b", "c", "d", "e"]))
def test_the_limit_range_bindings_do_not_depend_on_the_order_read(order: list[str]) -> None:
    objects = [
        {
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"limits": [container(default={f"example.com/{name}": "1"})]},
        }
        for name in order
    ]
    bindings = limit_range_bindings(objects)
    assert [b.object.name for b in bindings] == ["a", "b", "c", "d", "e"]


def _tampered(snapshot: Any) -> Any:
    return snapshot.model_copy(update={"always_pull_images_enabled": True})


# (id, the snapshot from the control template or a transformation, the template the
#  pass is about to create, refreshed already, verdict)
VERDICTS: list[tuple[str, str, dict[str, Any], bool, str]] = [
    # Control row: the snapshot pins this very template.
    ("valid", "sealed", template(), False, "valid"),
    ("valid-after-a-refresh", "sealed", template(), True, "valid"),
    ("none", "none", template(), False, "resolve"),
    ("tampered", "tampered", template(), False, "refuse"),
    ("template-moved", "sealed", template(restartPolicy="OnFailure"), False, "refresh"),
    ("template-moved-again", "sealed", template(restartPolicy="OnFailure"), True, "refuse"),
]


@pytest.mark.parametrize(
    ("which", "pod", "refreshed", "verdict"),
    [r[1:] for r in VERDICTS],
    ids=[r[0] for r in VERDICTS],
)
def test_the_verdict_on_a_persisted_snapshot(
    which: str, pod: dict[str, Any], refreshed: bool, verdict: str
) -> None:
    sealed = resolve_snapshot(world(), NS, template(), SETTINGS)
    snapshot = {"sealed": sealed, "none": None, "tampered": _tampered(sealed)}[which]
    assert snapshot_verdict(snapshot, pod, refreshed=refreshed) == verdict


def test_the_verdict_ignores_what_the_api_server_adds_to_the_template() -> None:
    sealed = resolve_snapshot(world(), NS, template(), SETTINGS)
    admitted = copy.deepcopy(template())
    admitted["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = "job-uid"
    admitted["spec"]["serviceAccount"] = "runner"
    assert snapshot_verdict(sealed, admitted, refreshed=False) == "valid"
    assert snapshot_verdict(seal(sealed), admitted, refreshed=True) == "valid"
