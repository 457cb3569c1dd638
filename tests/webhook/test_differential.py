"""Differential: for generated claims and Jobs, the webhook admits a Job create exactly
when the controller's own ``jobclaim.match`` (submitted mode, binding in force)
recognizes the Job as its claim's, including after any single-field change.

The changes range over everything a client sends: metadata the manager writes
(name, namespace, labels, annotations, owner references, finalizers) and the whole
spec. Fields the API server overwrites before admission (uid, generation,
creationTimestamp, status) are outside the range: no client can choose them, and the
webhook's strict decoding of them is tested on its own.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobclaim import expected, match
from tests.support.examples import examples
from tests.support.webhookscenes import Obj, decide, job_create, owner_world

OPERATIONS = {
    "schema": ("Resolve", "Verify", "Observe", "Plan", "Apply"),
    "migration": ("Resolve", "Verify", "History", "Apply"),
}
SERVER_WRITTEN = {
    ("metadata", "uid"),
    ("metadata", "generation"),
    ("metadata", "creationTimestamp"),
}
Path = tuple[str | int, ...]

label_keys = st.sampled_from(["team", "tier", "example.com/owner", "app"])
label_values = st.text(alphabet="abcxyz019-", min_size=1, max_size=6)
executions = st.fixed_dictionaries(
    {},
    optional={
        "activeDeadlineSeconds": st.integers(30, 3600),
        "serviceAccountName": st.sampled_from(["default", "ptah-runner"]),
        "nodeSelector": st.dictionaries(label_keys, label_values, max_size=2),
        "priorityClassName": st.just("low"),
        "resources": st.fixed_dictionaries(
            {"requests": st.fixed_dictionaries({"cpu": st.sampled_from(["100m", "0.25", "1"])})}
        ),
        "podMetadata": st.fixed_dictionaries(
            {
                "labels": st.dictionaries(label_keys, label_values, max_size=2),
                "annotations": st.dictionaries(label_keys, label_values, max_size=2),
            }
        ),
    },
)
values = st.one_of(
    st.text(max_size=6),
    st.integers(-1, 3),
    st.booleans(),
    st.none(),
    st.just({}),
    st.just([]),
    st.just({"privileged": True}),
)
new_keys = st.sampled_from(
    ["x", "privileged", "hostNetwork", "finalizers", "selector", "manualSelector", "runAsUser"]
)


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    found: list[Path] = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def reachable(job: Obj) -> list[Path]:
    """Every path a client controls: not the kind, not what the API server writes."""
    return [
        p
        for p in paths(job)
        if p[0] in ("metadata", "spec") and len(p) > 1 and tuple(p[:2]) not in SERVER_WRITTEN
    ]


def parent(job: Obj, path: Path) -> Any:
    target: Any = job
    for part in path[:-1]:
        target = target[part]
    return target


@st.composite
def mutated_jobs(draw: st.DrawFn, job: Obj) -> Obj:
    out = copy.deepcopy(job)
    path = draw(st.sampled_from(reachable(out)))
    holder, last = parent(out, path), path[-1]
    target = holder[last]
    action = draw(st.sampled_from(["set", "delete", "add", "append"]))
    if action == "add" and isinstance(target, dict):
        target[draw(new_keys)] = draw(values)
    elif action == "append" and isinstance(target, list):
        target.append(copy.deepcopy(target[-1]) if target and draw(st.booleans()) else draw(values))
    elif action == "delete":
        del holder[last]
    else:
        holder[last] = draw(values)
    return out


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_webhook_admits_a_job_create_exactly_when_the_controller_would(data: Any) -> None:
    family = data.draw(st.sampled_from(sorted(OPERATIONS)), label="family")
    operation = data.draw(st.sampled_from(OPERATIONS[family]), label="operation")
    knobs = {
        "execution": data.draw(executions, label="execution"),
        # A mutating claim runs one attempt (controller.claims.retry_attempt refuses
        # another, and job-authority refuses its Job); read-only ones retry.
        "attempt": 1 if operation == "Apply" else data.draw(st.integers(1, 3), label="attempt"),
    }
    scene = job_create(family, operation, **knobs)
    claim = owner_world(family, operation, **knobs).claim("rebuild-submitted")
    assert scene.obj is not None
    # Three in four examples change one field; the rest are the exact Job.
    if data.draw(st.integers(0, 3), label="mutate"):
        scene.obj = data.draw(mutated_jobs(scene.obj), label="job")
    outcome = decide(scene)
    verdict = match(scene.obj, claim)
    assert outcome.http_status != 500, outcome.decision.message
    assert outcome.decision.allowed == verdict.matched, (
        f"webhook: {outcome.decision.message}; match: {verdict.reason or 'matched'}"
    )


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_one_dump_comparison_gives_the_ordered_checks_verdict(data: Any) -> None:
    """``match`` settles a submitted Job that is its rebuild to the byte with one
    canonical dump of its metadata and spec (``Expected.submitted_json``); every
    other Job takes the checks one by one. For the exact Job and for any single
    change, the verdict and its sentence are the ones the checks alone give."""
    family = data.draw(st.sampled_from(sorted(OPERATIONS)), label="family")
    operation = data.draw(st.sampled_from(OPERATIONS[family]), label="operation")
    knobs = {"execution": data.draw(executions, label="execution")}
    job = job_create(family, operation, **knobs).obj
    claim = owner_world(family, operation, **knobs).claim("rebuild-submitted")
    assert job is not None
    if data.draw(st.integers(0, 3), label="mutate"):
        job = data.draw(mutated_jobs(job), label="job")
    prepared = expected(claim)
    assert prepared.submitted_json is not None
    one_by_one = dataclasses.replace(prepared, submitted_json=None)
    assert match(job, claim, prepared) == match(job, claim, one_by_one)
