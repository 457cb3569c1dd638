"""A manager's watch scope: which namespaces it serves, and which objects its watches
are sent. Tables with a control row that passes and one change per row that must be
refused with its message; then the reconciler on the double, which must run no pass
outside its scope and must retry, not serve, a namespace whose labels it cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from controller.pieces.watchscope import (
    CLUSTER,
    OutOfScope,
    WatchScope,
    scope_refusal,
    watch_labels,
    watch_targets,
)
from controller.runtime.reconciler import Key, Reconciler
from jobclaim.api import NamespaceSelector
from jobclaim.apiserver import JOBS, NAMESPACES, PODS, PTAHSCHEMAS
from jobclaim.envelope import LABEL_MANAGED_BY, MANAGED_BY
from kube.fake.inmemory import InMemoryApi
from tests.support.dispatchworld import NS, make_rig

SHOP = NamespaceSelector.model_validate({"matchLabels": {"team": "shop"}})
SHOP_LABELS = {"team": "shop"}

# (id, scope, namespace, its labels (None: unreadable), the refusal's words or None)
SCOPES: list[tuple[str, WatchScope, str, Mapping[str, str] | None, str | None]] = [
    ("control: listed and labelled", WatchScope(("shop",), SHOP), "shop", SHOP_LABELS, None),
    ("the whole cluster", CLUSTER, "anything", None, None),
    ("listed, no selector", WatchScope(("shop", "billing")), "billing", None, None),
    ("not listed", WatchScope(("shop",), SHOP), "other", SHOP_LABELS, "is not one this"),
    ("listed, labels differ", WatchScope(("shop",), SHOP), "shop", {"team": "x"}, "not match"),
    ("listed, labels unread", WatchScope(("shop",), SHOP), "shop", None, "cannot be read"),
    ("selector alone, no labels", WatchScope((), SHOP), "shop", {}, "does not match"),
]


@pytest.mark.parametrize(
    ("scope", "namespace", "labels", "words"),
    [row[1:] for row in SCOPES],
    ids=[row[0] for row in SCOPES],
)
def test_a_namespace_is_served_only_inside_the_scope(
    scope: WatchScope, namespace: str, labels: Mapping[str, str] | None, words: str | None
) -> None:
    refusal = scope_refusal(scope, namespace, labels)
    if words is None:
        assert refusal is None
    else:
        assert refusal is not None and words in refusal.reason, refusal
        # Only an unread namespace is worth another try; a known outsider is dropped.
        assert refusal.retry == (words == "cannot be read")


def test_watches_open_per_listed_namespace_and_ask_for_the_operators_jobs_only() -> None:
    assert watch_targets(CLUSTER) == (None,)
    assert watch_targets(WatchScope((), SHOP)) == (None,)
    assert watch_targets(WatchScope(("shop", "billing"))) == ("shop", "billing")
    assert watch_labels(JOBS) == {LABEL_MANAGED_BY: MANAGED_BY}
    assert watch_labels(PTAHSCHEMAS) is None  # the operator's own kind: every one is its
    assert watch_labels(PODS) is None  # never watched


def test_the_doubles_watch_sends_only_the_labelled() -> None:
    api = InMemoryApi()
    mine = {"metadata": {"name": "mine", "labels": {LABEL_MANAGED_BY: MANAGED_BY}}}
    api.create(JOBS, NS, mine)
    api.create(JOBS, NS, {"metadata": {"name": "theirs"}})
    sent = api.watch(JOBS, NS, label_selector=watch_labels(JOBS))
    assert [event.object["metadata"]["name"] for event in sent] == ["mine"]


def test_a_key_outside_the_list_runs_no_pass() -> None:
    rig = make_rig()
    reconciler = Reconciler(rig.env, rig.sink, scope=WatchScope((NS,)))
    stop = reconciler.process(Key("PtahSchema", "other", "app"))
    assert "is not one this manager watches" in stop.reason
    assert reconciler.passes == 0


def test_a_namespace_whose_labels_cannot_be_read_is_retried_not_served() -> None:
    rig = make_rig()
    reconciler = Reconciler(rig.env, rig.sink, scope=WatchScope((), SHOP))
    key = Key("PtahSchema", NS, "app")
    # No Namespace object on the double: its labels cannot be read.
    stop = reconciler.process(key)
    assert "cannot be read" in stop.reason and reconciler.passes == 0
    assert reconciler.queue.get(0) is None  # held for its backoff, not run at once
    rig.api.create(NAMESPACES, None, {"metadata": {"name": NS, "labels": SHOP_LABELS}})
    stop = reconciler.process(key)
    assert reconciler.passes == 1, stop.reason  # labelled now: served


def test_a_namespace_that_does_not_match_is_dropped() -> None:
    rig = make_rig()
    rig.api.create(NAMESPACES, None, {"metadata": {"name": NS, "labels": {"team": "x"}}})
    reconciler = Reconciler(rig.env, rig.sink, scope=WatchScope((), SHOP))
    stop = reconciler.process(Key("PtahSchema", NS, "app"))
    assert "does not match" in stop.reason and reconciler.passes == 0
    assert isinstance(scope_refusal(reconciler.scope, NS, {"team": "x"}), OutOfScope)
