"""Create: identity assigned by the server, one object per name, and a Job's own identity.

The operator names Jobs deterministically, so AlreadyExists is how it learns that a
create it lost the answer to may have happened; and it recognizes its Job by what the
server wrote into it (``jobclaim.match`` strips exactly that), so the double must write
the same thing.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobclaim import match
from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    AlreadyExists,
    ApiClient,
    Invalid,
    Object,
    Resource,
    Unavailable,
)
from tests.support import claimworld as world
from tests.support.kinds import WIDGETS, config_map, job, widget


def test_the_server_assigns_identity(api: ApiClient, namespace: str) -> None:
    first = api.create(WIDGETS, namespace, widget("a"))
    second = api.create(WIDGETS, namespace, widget("b"))
    for obj in (first, second):
        meta = obj["metadata"]
        assert meta["namespace"] == namespace
        assert meta["uid"]
        assert meta["resourceVersion"]
        assert meta["creationTimestamp"]
        assert meta["generation"] == 1
        assert (obj["apiVersion"], obj["kind"]) == (WIDGETS.api_version, WIDGETS.kind)
    assert first["metadata"]["uid"] != second["metadata"]["uid"]


def test_a_generated_name_is_the_prefix_and_a_unique_suffix(api: ApiClient, namespace: str) -> None:
    made = [api.create(CONFIGMAPS, namespace, {"metadata": {"generateName": "p-"}}) for _ in "ab"]
    names = [m["metadata"]["name"] for m in made]
    assert all(name.startswith("p-") and len(name) == len("p-") + 5 for name in names)
    assert len(set(names)) == 2


def test_a_second_create_under_a_name_is_already_exists(api: ApiClient, namespace: str) -> None:
    first = api.create(CONFIGMAPS, namespace, config_map("c"))
    with pytest.raises(AlreadyExists):
        api.create(CONFIGMAPS, namespace, config_map("c", data={"k": "other"}))
    assert api.get(CONFIGMAPS, namespace, "c") == first


def test_an_object_read_back_cannot_be_created_again(api: ApiClient, namespace: str) -> None:
    # A 500 that stores nothing: the object still carries the version it was read at.
    created = api.create(CONFIGMAPS, namespace, config_map("c"))
    stale = copy.deepcopy(created)
    stale["metadata"]["name"] = "d"
    with pytest.raises(Unavailable):
        api.create(CONFIGMAPS, namespace, stale)
    assert [c["metadata"]["name"] for c in api.list(CONFIGMAPS, namespace)] == ["c"]


@pytest.mark.parametrize(
    ("resource", "name", "accepted"),
    [
        # Control row: the longest valid Job name.
        (JOBS, "j" * 63, True),
        (CONFIGMAPS, "Upper", False),
        (CONFIGMAPS, "under_score", False),
        (CONFIGMAPS, "-leading-dash", False),
        (CONFIGMAPS, "c" * 254, False),
        # A Job's name is also a label value in its Pods, so 63 at most.
        (JOBS, "j" * 64, False),
    ],
    ids=["job-63", "upper-case", "underscore", "leading-dash", "254-characters", "job-64"],
)
def test_a_name_must_be_a_dns_name(
    api: ApiClient, namespace: str, resource: Resource, name: str, accepted: bool
) -> None:
    obj = job(name) if resource == JOBS else config_map(name)
    if accepted:
        assert api.create(resource, namespace, obj)["metadata"]["name"] == name
    else:
        with pytest.raises(Invalid):
            api.create(resource, namespace, obj)
        assert api.list(resource, namespace) == []


def test_a_job_is_bound_to_its_uid_before_it_is_stored(api: ApiClient, namespace: str) -> None:
    created = api.create(JOBS, namespace, job("j", serviceAccountName="runner"))
    uid = created["metadata"]["uid"]
    spec = created["spec"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "j",
        "controller-uid": uid,
        "job-name": "j",
    }
    assert spec["template"]["spec"]["serviceAccount"] == "runner"
    assert spec["manualSelector"] is False
    assert created["status"] == {}
    assert created["metadata"]["generation"] == 1


def test_the_deprecated_service_account_fills_the_name(api: ApiClient, namespace: str) -> None:
    created = api.create(JOBS, namespace, job("j", serviceAccount="legacy"))
    pod = created["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["serviceAccount"]) == ("legacy", "legacy")


# The builder writes every default itself, so what the server adds on create must be
# exactly what jobclaim strips before comparing, or the controller would take its own
# Job, read back, for someone else's.
@pytest.mark.parametrize(
    ("family", "mode"),
    [
        ("schema", "envelope"),
        ("migration", "envelope"),
        ("schema", "rebuild-stored"),
        ("migration", "rebuild-stored"),
    ],
)
def test_the_controller_recognizes_its_job_as_stored(
    api: ApiClient, namespace: str, family: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = world.example

    def moved_here(name: str) -> dict[str, Any]:
        # The claim reserves the Job's namespace, so the resource moves, not the Job.
        raw = example(name)
        raw["metadata"]["namespace"] = namespace
        return raw

    monkeypatch.setattr(world, "example", moved_here)
    made = world.schema_world() if family == "schema" else world.migration_world()
    built: Object = copy.deepcopy(made.built)
    api.create(JOBS, namespace, built)
    stored = api.get(JOBS, namespace, built["metadata"]["name"])
    verdict = match(stored, made.claim(mode))
    assert verdict.matched, verdict.reason
