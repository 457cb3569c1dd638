"""Fuzz: random and malformed reviews never produce ``allowed: true``, and never a 500
unless a read failed.

Malformed reviews start from real ones (every scene the tables admit) and break them
in one way a parser or a forger might: an unknown field anywhere, a key written twice,
a value of another JSON type, a required field removed. Random reviews are JSON of
any shape, or review-shaped JSON with random contents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobclaim.apiserver import Unavailable
from tests.support.examples import examples
from tests.support.webhookscenes import (
    MANAGER_USERNAME,
    SETTINGS,
    Obj,
    Scene,
    annotation_write,
    job_cleanup,
    job_create,
    migration_plan_create,
    pending_apply_cleanup,
    plan_chunk_create,
    projection_create,
    schema_plan_create,
    status_write,
)
from tests.webhook.failingreader import Failing
from webhook import Engine, Outcome, StateReader

SCENES: dict[str, tuple[Callable[[], Scene], str]] = {
    "schema apply create": (lambda: job_create("schema", "Apply"), "controller-write"),
    "migration apply create": (lambda: job_create("migration", "Apply"), "controller-write"),
    "cleanup": (lambda: job_cleanup("schema", "Plan"), "controller-write"),
    "pending cleanup": (pending_apply_cleanup, "controller-write"),
    "projection": (projection_create, "controller-write"),
    "schema plan": (schema_plan_create, "controller-write"),
    "plan chunk": (plan_chunk_create, "controller-write"),
    "migration plan": (migration_plan_create, "controller-write"),
    "status": (status_write, "manager-state"),
    "annotation": (lambda: annotation_write("run-2"), "manager-state"),
}
# Built once: a scene takes milliseconds to build, and examples only read it.
BUILT = {name: (make(), endpoint) for name, (make, endpoint) in SCENES.items()}
REQUIRED = (
    ("apiVersion",),
    ("kind",),
    ("request",),
    ("request", "uid"),
    ("request", "kind"),
    ("request", "resource"),
    ("request", "operation"),
    ("request", "userInfo"),
)
FUZZ = settings(
    max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def judge(body: bytes, reader: Any, endpoint: str) -> Outcome:
    engine = Engine(reader, SETTINGS)
    try:
        return engine.decide(endpoint, body)  # type: ignore[arg-type]
    finally:
        engine.close()


def refused(outcome: Outcome, *, reads_fail: bool = False) -> None:
    """Never allowed; 500 only when a read failed; the answer always a refusal."""
    response = outcome.body()["response"]
    assert response["allowed"] is False and not outcome.decision.allowed
    allowed_statuses = {200, 400, 500} if reads_fail else {200, 400}
    assert outcome.http_status in allowed_statuses, outcome.decision.message
    if outcome.http_status == 200:
        assert response["status"]["code"] == 403


def dict_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every object in the review, except audit-only managedFields.fieldsV1 (free-form by
    definition: it is the field manager's own record)."""
    found = [prefix] if isinstance(value, dict) and "fieldsV1" not in prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += dict_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += dict_paths(item, (*prefix, index))
    return found


def leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict) and value:
        return [p for k, v in value.items() for p in leaf_paths(v, (*prefix, k))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in leaf_paths(v, (*prefix, i))]
    return [prefix] if "fieldsV1" not in prefix else []


def at(review: Obj, path: tuple[Any, ...]) -> Any:
    target: Any = review
    for part in path:
        target = target[part]
    return target


def other_type(value: Any) -> Any:
    """A value of another JSON type than ``value`` that no field of that type accepts."""
    if isinstance(value, str):
        return {"unexpected": True}
    return "~not-a-value~"


scenes = st.sampled_from(sorted(BUILT))


@FUZZ
@given(name=scenes, data=st.data())
def test_an_unknown_field_anywhere_is_never_admitted(name: str, data: Any) -> None:
    scene, endpoint = BUILT[name]
    review = scene.review()
    path = data.draw(st.sampled_from(dict_paths(review)))
    key = data.draw(st.sampled_from(["shadow", "x-extra", "privileged", "ttlSecondsAfterFinished"]))
    target = at(review, path)
    if key in target:
        key = "shadow-" + key
    target[key] = {"unexpected": True}
    refused(judge(json.dumps(review).encode(), scene.reader(), endpoint))


@FUZZ
@given(name=scenes, data=st.data())
def test_a_value_of_another_type_anywhere_is_never_admitted(name: str, data: Any) -> None:
    scene, endpoint = BUILT[name]
    review = scene.review()
    path = data.draw(st.sampled_from(leaf_paths(review)))
    if path:
        holder = at(review, path[:-1])
        holder[path[-1]] = other_type(holder[path[-1]])
    refused(judge(json.dumps(review).encode(), scene.reader(), endpoint))


@FUZZ
@given(name=scenes, data=st.data())
def test_a_key_written_twice_anywhere_is_a_400(name: str, data: Any) -> None:
    scene, endpoint = BUILT[name]
    text = json.dumps(scene.review())
    keys = [m.start() for m in re.finditer(r'"[^"\\]*": ', text)]
    start = data.draw(st.sampled_from(keys))
    key = text[start : text.index('": ', start) + 3]
    duplicated = (
        text[:start] + key + json.dumps(data.draw(st.text(max_size=4))) + ", " + text[start:]
    )
    outcome = judge(duplicated.encode(), scene.reader(), endpoint)
    refused(outcome)
    assert outcome.http_status == 400
    assert outcome.decision.message.startswith("duplicate field")


@FUZZ
@given(name=scenes, path=st.sampled_from(REQUIRED))
def test_a_required_field_removed_is_a_400(name: str, path: tuple[str, ...]) -> None:
    scene, endpoint = BUILT[name]
    review = scene.review()
    del at(review, path[:-1])[path[-1]]
    outcome = judge(json.dumps(review).encode(), scene.reader(), endpoint)
    refused(outcome)
    assert outcome.http_status == 400


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@FUZZ
@given(value=json_values, endpoint=st.sampled_from(["controller-write", "manager-state"]))
def test_random_json_is_never_admitted(value: Any, endpoint: str) -> None:
    refused(judge(json.dumps(value).encode(), StateReader(), endpoint))


@FUZZ
@given(
    body=st.binary(max_size=256), endpoint=st.sampled_from(["controller-write", "manager-state"])
)
def test_random_bytes_are_never_admitted(body: bytes, endpoint: str) -> None:
    refused(judge(body, StateReader(), endpoint))


gvrs = st.sampled_from(
    [
        ("batch", "v1", "jobs", "Job"),
        ("", "v1", "configmaps", "ConfigMap"),
        ("", "v1", "secrets", "Secret"),
        ("operator.ptah.run", "v1alpha1", "ptahschemaplans", "PtahSchemaPlan"),
        ("operator.ptah.run", "v1alpha1", "ptahmigrationplans", "PtahMigrationPlan"),
        ("operator.ptah.run", "v1alpha1", "ptahschemas", "PtahSchema"),
    ]
)


@st.composite
def shaped_reviews(draw: st.DrawFn) -> Obj:
    group, version, plural, kind = draw(gvrs)
    operation = draw(st.sampled_from(["CREATE", "UPDATE"]))
    obj = draw(
        st.one_of(
            json_values,
            st.fixed_dictionaries(
                {
                    "apiVersion": st.just(f"{group}/{version}".lstrip("/")),
                    "kind": st.just(kind),
                    "metadata": st.fixed_dictionaries(
                        {"name": st.just("n"), "namespace": st.just("shop")},
                        optional={"ownerReferences": st.lists(json_values, max_size=2)},
                    ),
                },
                optional={"spec": json_values, "status": json_values, "data": json_values},
            ),
        )
    )
    request: Obj = {
        "uid": draw(st.text(min_size=1, max_size=8)),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "name": "n",
        "namespace": "shop",
        "operation": operation,
        "userInfo": {
            "username": draw(st.sampled_from([MANAGER_USERNAME, "jane", "admin"])),
            "groups": draw(st.lists(st.sampled_from(["system:masters", "g"]), max_size=2)),
        },
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,
        "dryRun": draw(st.booleans()),
    }
    subresource = draw(st.sampled_from(["", "", "status"]))
    if subresource:
        request["subResource"] = subresource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@FUZZ
@given(review=shaped_reviews(), endpoint=st.sampled_from(["controller-write", "manager-state"]))
def test_review_shaped_random_content_is_never_admitted(review: Obj, endpoint: str) -> None:
    outcome = judge(json.dumps(review).encode(), StateReader(), endpoint)
    refused(outcome)


@FUZZ
@given(name=scenes, data=st.data())
def test_when_reads_fail_the_answer_is_a_refusal_or_a_500_never_allowed(
    name: str, data: Any
) -> None:
    scene, endpoint = BUILT[name]
    kind = data.draw(
        st.sampled_from(["PtahSchema", "PtahMigration", "PtahSchemaPlan", "ConfigMap", "Job"])
    )
    reader = Failing(scene.objects, kind, Unavailable("the API server is down"))
    outcome = judge(scene.body(), reader, endpoint)
    if endpoint == "manager-state":
        return  # reads nothing: its verdicts are the tables'
    if outcome.decision.allowed:
        # Only a scene that never reads ``kind`` may still be admitted.
        assert kind not in {o["kind"] for o in scene.objects}
        return
    refused(outcome, reads_fail=True)
