"""Watches: every change after a version, in order, and the current state first.

Watches only trigger work (decisions read uncached), but a trigger that is missed is
a resource nobody reconciles until the next resync; so a watch resumed from a version
must replay every later change, and a fresh one must start with what exists.

The real watch stays open until its time-out, so these tests take exactly the events
they expect and close it; they never wait for the end.
"""

from __future__ import annotations

from itertools import islice

from jobclaim.apiserver import CONFIGMAPS, ApiClient
from tests.support.kinds import config_map


def test_a_watch_from_a_version_replays_later_changes_in_order(
    api: ApiClient, namespace: str
) -> None:
    created = api.create(CONFIGMAPS, namespace, config_map("a"))
    api.patch_metadata(CONFIGMAPS, namespace, "a", {"labels": {"x": "1"}})
    api.create(CONFIGMAPS, namespace, config_map("b"))
    api.delete(CONFIGMAPS, namespace, "a")
    stream = api.watch(
        CONFIGMAPS,
        namespace,
        resource_version=created["metadata"]["resourceVersion"],
        timeout_seconds=30,
    )
    events = list(islice(stream, 3))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert events[0].object["metadata"]["labels"] == {"x": "1"}


def test_a_fresh_watch_starts_with_what_exists(api: ApiClient, namespace: str) -> None:
    api.create(CONFIGMAPS, namespace, config_map("a"))
    api.create(CONFIGMAPS, namespace, config_map("b"))
    stream = api.watch(CONFIGMAPS, namespace, timeout_seconds=30)
    first = list(islice(stream, 2))
    assert sorted((e.type, e.object["metadata"]["name"]) for e in first) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
