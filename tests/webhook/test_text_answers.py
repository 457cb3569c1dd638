"""An answer that is not one JSON object fails the read on the text path too.

``KubeApi.get`` refuses such an answer itself; ``get_text`` hands it over unparsed,
because checking it would cost the parse the text path exists to spare. These rows
prove such an answer still fails the read (HTTP 500, the key named), one step later,
in the webhook: at a read decoded as a model, at a read a rule walks as a tree, and
end to end through the production adapter over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobclaim.apiserver import CONFIGMAPS, JOBS, PTAHSCHEMAS, Resource
from kube.client import KubeApi

# The adapter suite's HTTP stub and its fixture, imported so there is one way to fake
# an API server.
from tests.support.kubestub import (
    Stub,
    kubeconfig,
)
from tests.support.webhookscenes import Scene, decide, job_create, schema_plan_create
from tests.webhook.tables import pattern
from webhook import StateReader, objects
from webhook.engine import Outcome

# Each an answer a conforming API server never gives to a GET of one object.
NOT_OBJECTS = {
    "array": b"[]",
    "null": b"null",
    "string": b'"PtahSchema"',
    "number": b"7",
    "empty": b"",
    "not JSON": b"<html>502 Bad Gateway</html>",
    "cut short": b'{"apiVersion": "operator.ptah.run/v1alpha1", "kind": ',
}


class Answering(StateReader):
    """Answers ``body`` for every read of ``resource``, the scene's objects otherwise."""

    def __init__(self, objects: Any, resource: Resource, body: bytes) -> None:
        super().__init__(objects)
        self.resource, self.body = resource, body

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        if resource == self.resource:
            return self.body
        return super().get_text(resource, namespace, name)


def _closed(outcome: Outcome) -> None:
    decision = outcome.decision
    assert (decision.allowed, decision.code, decision.rule) == (False, 500, "reads"), decision
    assert pattern(objects.READ_FAILED).fullmatch(decision.message), decision.message


# (scene, the resource whose answer is replaced): an owner decoded as a model, the
# projections of an Apply and the source Job of a plan, both walked as trees.
READS: dict[str, tuple[Callable[[], Scene], Resource]] = {
    "owner model": (lambda: job_create("schema", "Plan"), PTAHSCHEMAS),
    "projection tree": (lambda: job_create("schema", "Apply"), CONFIGMAPS),
    "source Job tree": (schema_plan_create, JOBS),
}


@pytest.mark.parametrize("body", NOT_OBJECTS.values(), ids=NOT_OBJECTS.keys())
@pytest.mark.parametrize("read", READS, ids=READS.keys())
def test_an_answer_that_is_not_an_object_never_allows(read: str, body: bytes) -> None:
    make, resource = READS[read]
    scene = make()
    assert decide(scene).decision.allowed, "the control: the scene allows as stored"
    _closed(decide(scene, reader=Answering(scene.objects, resource, body)))


@pytest.mark.parametrize("body", NOT_OBJECTS.values(), ids=NOT_OBJECTS.keys())
def test_the_production_adapter_hands_it_over_and_the_webhook_fails_closed(
    stub: Stub,
    tmp_path: Path,
    body: bytes,
) -> None:
    scene = job_create("schema", "Plan")
    for _ in range(8):  # every read the rule might make gets the same answer
        stub.answer(body=body)
    with KubeApi.from_kubeconfig(kubeconfig(tmp_path, stub.url), timeout=5.0) as api:
        assert api.get_text(PTAHSCHEMAS, "shop", "orders") == body
        outcome = decide(scene, reader=api)
    _closed(outcome)
    # The first request is the get_text above; the second, the webhook's owner read.
    assert stub.seen[1].path == stub.seen[0].path
