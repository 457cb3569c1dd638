"""Reads go to the API server on every request; a failed read answers 500 and a defect
answers 500, so the API server fails closed; nothing allows after an exception."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from jobclaim.apiserver import CONFIGMAPS, PTAHSCHEMAS, Object, Resource, Unavailable
from kube.fake.faults import matching
from kube.fake.inmemory import InMemoryApi
from tests.support.webhookscenes import (
    SETTINGS,
    Scene,
    change_owner,
    decide,
    job_cleanup,
    job_create,
    migration_plan_create,
    plan_chunk_create,
    projection_create,
    schema_plan_create,
    status_write,
    with_claim,
)
from tests.webhook.failingreader import Failing
from tests.webhook.tables import Row, expect, pattern, unchanged
from webhook import Decision, Engine, StateReader, jobs, objects
from webhook.engine import ReadFailed, run
from webhook.rules import Judgement
from webhook.rules import ReadKey as Key


def test_a_failed_owner_read_answers_500_through_the_controllers_api_double() -> None:
    api = InMemoryApi()
    api.fail_read(matching("get", PTAHSCHEMAS), Unavailable("etcd leader changed"), times=None)
    outcome = decide(job_create("schema", "Apply"), reader=api)
    assert (outcome.http_status, outcome.decision.allowed) == (500, False)
    assert pattern(objects.READ_FAILED).fullmatch(outcome.decision.message)
    assert outcome.decision.message == ("directly read PtahSchema shop/orders: etcd leader changed")
    assert outcome.body()["response"] == {
        "uid": job_create().uid,
        "allowed": False,
        "status": {"code": 500, "message": outcome.decision.message},
    }


def test_an_owner_the_api_server_does_not_have_is_refused_not_failed() -> None:
    outcome = decide(job_create("schema", "Apply"), reader=InMemoryApi())
    assert (outcome.http_status, outcome.decision.code) == (200, 403)
    assert pattern(objects.OWNER_MISSING).fullmatch(outcome.decision.message)


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("PtahSchema", Unavailable("timeout")),
        ("PtahSchemaPlan", Unavailable("connection reset")),
        ("ConfigMap", Unavailable("503")),
        ("ConfigMap", RuntimeError("a client bug")),
    ],
)
def test_any_failed_read_at_any_step_answers_500(kind: str, error: Exception) -> None:
    scene = job_create("schema", "Apply")
    outcome = decide(scene, reader=Failing(scene.objects, kind, error))
    assert (outcome.http_status, outcome.decision.allowed, outcome.decision.rule) == (
        500,
        False,
        "reads",
    )
    assert f"directly read {kind} shop/" in outcome.decision.message


def test_a_stored_owner_this_code_cannot_read_is_refused() -> None:
    scene = job_create("schema", "Plan")
    scene.objects[0]["spec"]["fromTheFuture"] = True
    expect(Row("undecodable owner", unchanged, objects.STORED_UNDECODABLE, "fromTheFuture"), scene)


class Barrier(StateReader):
    """Reads of ConfigMaps wait until ``parties`` of them are in flight at once, so a
    shell that read them one after another would break the barrier and fail."""

    def __init__(self, objects: Any, parties: int) -> None:
        super().__init__(objects)
        self.barrier = threading.Barrier(parties, timeout=30)

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        if resource.kind == CONFIGMAPS.kind:
            self.barrier.wait()
        return super().get_text(resource, namespace, name)


def test_the_projections_of_an_apply_are_read_concurrently() -> None:
    scene = job_create("schema", "Apply")
    outcome = decide(scene, reader=Barrier(scene.objects, parties=2))
    assert outcome.decision.allowed, outcome.decision.message


def test_nothing_is_cached_between_requests() -> None:
    """The same engine, the same review: once the claim records the Job's UID, the
    second create is refused, because the owner is read again."""
    scene = job_create("schema", "Plan")
    reader = StateReader(scene.objects)
    engine = Engine(reader, SETTINGS)
    assert engine.decide("controller-write", scene.body()).decision.allowed
    change_owner(scene, lambda owner: with_claim(owner, job_uid="0f6d2a52"))
    reader.put(scene.objects[0])
    second = engine.decide("controller-write", scene.body())
    assert pattern(jobs.NOT_RESERVED).fullmatch(second.decision.message)
    engine.close()


def test_a_defect_inside_a_rule_answers_500(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise KeyError("spec")

    monkeypatch.setattr(jobs, "match", broken)
    outcome = decide(job_create("schema", "Plan"))
    assert (outcome.http_status, outcome.decision.allowed) == (500, False)
    assert pattern(objects.DEFECT).fullmatch(outcome.decision.message)


def test_a_matcher_that_answers_something_odd_does_not_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(jobs, "match", lambda *_: None)
    outcome = decide(job_create("schema", "Plan"))
    assert not outcome.decision.allowed


def _ends_with(decision: Any) -> Judgement:
    yield from ()
    return decision  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "ending",
    [None, "allowed", Decision(True, 403, "x", "?"), Decision(True, 500, "x", "?")],
)
def test_only_an_allowing_decision_returned_by_a_rule_allows(ending: Any) -> None:
    with pytest.raises(TypeError):
        run(_ends_with(ending), lambda keys: {})


def _reads_then_allows() -> Judgement:
    fetched: Mapping[Key, Any] = yield (Key(PTAHSCHEMAS, "ns", "n"),)
    assert fetched
    return Decision(True, 200, "x", "ok")


def test_a_read_failure_closes_the_rule_before_it_can_decide() -> None:
    def failing(keys: Any) -> Any:
        raise ReadFailed(next(iter(keys)), Unavailable("down"))

    decision = run(_reads_then_allows(), failing)
    assert (decision.allowed, decision.code) == (False, 500)


class TreesOnly:
    """A reader with ``get`` alone (any ``ApiReader`` without ``get_text``): the engine
    then decodes the trees it answers instead of the text a StateReader hands over."""

    def __init__(self, objects: Any) -> None:
        self.state = StateReader(objects)

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        return self.state.get(resource, namespace, name)


def _undecodable_owner(change: Any) -> Scene:
    scene = job_create("schema", "Plan")
    change(scene.objects[0])
    return scene


SCENES = {
    "schema plan": lambda: job_create("schema", "Plan"),
    "schema apply": lambda: job_create("schema", "Apply"),
    "migration apply": lambda: job_create("migration", "Apply"),
    "cleanup": job_cleanup,
    "projection": projection_create,
    "schema plan object": schema_plan_create,
    "plan chunk": plan_chunk_create,
    "migration plan": migration_plan_create,
    "unknown owner field": lambda: _undecodable_owner(
        lambda owner: owner["spec"].update(fromTheFuture=True)
    ),
    # JSON-mode validation words these differently ("an object", "a valid dictionary")
    "owner field of the wrong type": lambda: _undecodable_owner(
        lambda owner: owner["spec"].update(target=[], interval=7)
    ),
    "owner status of the wrong type": lambda: _undecodable_owner(
        lambda owner: owner["status"]["activeOperation"].update(attempt="x", type=None)
    ),
}


@pytest.mark.parametrize("name", SCENES)
def test_a_text_and_its_tree_are_judged_alike_in_the_same_words(name: str) -> None:
    scene = SCENES[name]()
    from_text = decide(scene)
    from_tree = decide(scene, reader=TreesOnly(scene.objects))
    assert from_text.decision == from_tree.decision
    assert from_text.http_status == from_tree.http_status


def test_a_status_write_is_judged_alike_from_text_and_tree() -> None:
    scene = status_write()
    from_text = decide(scene, "manager-state")
    from_tree = decide(scene, "manager-state", reader=TreesOnly(scene.objects))
    assert from_text.decision == from_tree.decision


class NotJson(StateReader):
    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        return b'{"apiVersion": "operator.ptah.run/v1alpha1", "kind": '


def test_an_answer_that_is_not_json_fails_the_read() -> None:
    scene = job_create("schema", "Plan")
    outcome = decide(scene, reader=NotJson(scene.objects))
    assert (outcome.http_status, outcome.decision.allowed, outcome.decision.rule) == (
        500,
        False,
        "reads",
    )
    assert pattern(objects.READ_FAILED).fullmatch(outcome.decision.message)
    assert outcome.decision.message.startswith("directly read PtahSchema shop/orders: ")


def test_a_state_reader_that_overrides_get_alone_cannot_be_defined() -> None:
    """The engine reads through ``get_text``: a failure injected into ``get`` alone
    would never be seen, and the request it was meant to fail would be judged."""
    with pytest.raises(TypeError, match="get_text"):

        class _Bypassed(StateReader):
            def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
                raise Unavailable("never called")
