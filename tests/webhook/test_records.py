"""PtahResultRecord CREATE and UPDATE: a record only from the live Pod of the claim's Job,
under that Pod's own bound token, holding the claim's result; never changed.

The control row is the record a Plan Job's runner creates while its Pod runs; each
other row changes one thing a stolen token (the manager's, another Pod's) or a forged
result would, and is refused with its sentence.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobclaim.apiserver import PTAHRESULTRECORDS, PTAHSCHEMAPLANS
from tests.support.harvestpods import pod_of
from tests.support.webhookscenes import (
    JOB_UID,
    MANAGER_USERNAME,
    Obj,
    Scene,
    owner_world,
    pod_record,
    reading_result,
    stored_object,
    with_claim,
)
from tests.webhook.tables import Row, expect, unchanged
from webhook import records

NAMESPACE = "shop"
POD_UID = "7c0ffee0-0000-4000-8000-00000000d00d"


def _running_pod(job: Obj) -> Obj:
    """The Job's Pod as the Job controller made it (tests.runner.test_harvest.pod_of),
    its runner still running: the moment a runner writes its record."""
    pod: Obj = pod_of(job, uid=POD_UID)
    pod.update(apiVersion="v1", kind="Pod")
    pod["metadata"].update(name=job["metadata"]["name"] + "-x7k2q")
    pod["metadata"]["namespace"] = job["metadata"]["namespace"]
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "ptah", "restartCount": 0, "state": {"running": {}}}],
    }
    return pod


def record_create() -> Scene:
    """The record a running Plan Job's runner creates of its successful reading."""
    world = owner_world("schema", "Plan")
    schema = with_claim(world.resource, job_uid=JOB_UID)
    owner = stored_object(schema, schema.metadata.uid)
    job: Obj = copy.deepcopy(world.stored)
    pod = _running_pod(job)
    claim = owner["status"]["activeOperation"]
    record = pod_record(job, reading_result(claim, "plan"))
    record["spec"]["pod"] = {"name": pod["metadata"]["name"], "uid": POD_UID}
    for server_field in ("uid", "resourceVersion", "creationTimestamp"):
        record["metadata"].pop(server_field)
    account = pod["spec"].get("serviceAccountName") or "default"
    return Scene(
        PTAHRESULTRECORDS,
        "CREATE",
        record,
        [owner, job, pod],
        username=f"system:serviceaccount:{job['metadata']['namespace']}:{account}",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{job['metadata']['namespace']}"),
        user_extra={
            "authentication.kubernetes.io/credential-id": ["JTI=pod-token-1"],
            "authentication.kubernetes.io/node-name": ["lab-node"],
            "authentication.kubernetes.io/node-uid": ["node-uid-1"],
            "authentication.kubernetes.io/pod-name": [pod["metadata"]["name"]],
            "authentication.kubernetes.io/pod-uid": [POD_UID],
        },
    )


def _record(scene: Scene) -> Obj:
    assert scene.obj is not None
    return scene.obj


def _find(scene: Scene, kind: str) -> Obj:
    return scene.find(kind)


def _extra(**values: list[str]) -> Any:
    def apply(scene: Scene) -> None:
        assert scene.user_extra is not None
        for key, value in values.items():
            name = f"authentication.kubernetes.io/{key.replace('_', '-')}"
            if value:
                scene.user_extra[name] = value
            else:
                scene.user_extra.pop(name)

    return apply


def _result(**changes: Any) -> Any:
    """The record holding another result (its digest recomputed: only the result lies)."""

    def apply(scene: Scene) -> None:
        claim = dict(_find(scene, "PtahSchema")["status"]["activeOperation"])
        claim.update(changes.pop("claim", {}))
        job = _find(scene, "Job")
        result = reading_result(claim, changes.pop("op", "plan"))
        made = pod_record(job, result.model_copy(update=changes))
        _record(scene)["spec"].update(
            result=made["spec"]["result"],
            resultDigest=made["spec"]["resultDigest"],
            operation=made["spec"]["operation"],
        )

    return apply


def _as_manager(scene: Scene) -> None:
    scene.username = MANAGER_USERNAME
    scene.user_extra = {
        "authentication.kubernetes.io/credential-id": ["JTI=manager-token"],
        "authentication.kubernetes.io/pod-name": ["ptah-operator-7d9f-abcde"],
        "authentication.kubernetes.io/pod-uid": ["manager-pod-uid"],
    }


def _changed(scene: Scene) -> None:
    old = copy.deepcopy(_record(scene))
    old["metadata"].update(uid="record-uid", resourceVersion="78")
    scene.old = old
    scene.operation = "UPDATE"
    _record(scene)["metadata"].update(uid="record-uid", resourceVersion="78")
    _record(scene)["metadata"]["labels"] = {"edited": "1"}


def _pod(change: Any) -> Any:
    return lambda scene: change(_find(scene, "Pod"))


def _stopped(pod: Obj) -> None:
    pod["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "ptah", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
        ],
    }


def _claim(**changes: Any) -> Any:
    def apply(scene: Scene) -> None:
        _find(scene, "PtahSchema")["status"]["activeOperation"].update(changes)

    return apply


ROWS = [
    Row("control: the Plan Pod records its own result", unchanged, None),
    Row("no pod-uid in the token", _extra(pod_uid=[]), records.NO_POD_TOKEN, "pod-uid"),
    Row("two pod names in the token", _extra(pod_name=["a", "b"]), records.NO_POD_TOKEN),
    Row(
        "the manager's own Pod-bound token",
        _as_manager,
        records.NOT_THE_POD,
        "ptah-operator-7d9f-abcde",
    ),
    Row(
        "another Pod's token",
        _extra(pod_name=["other-pod"], pod_uid=["other-uid"]),
        records.NOT_THE_POD,
    ),
    Row(
        "a ServiceAccount of another namespace",
        lambda s: setattr(s, "username", "system:serviceaccount:elsewhere:default"),
        records.NOT_A_SERVICE_ACCOUNT,
    ),
    Row(
        "a person, not a ServiceAccount",
        lambda s: setattr(s, "username", "jane@example.com"),
        records.NOT_A_SERVICE_ACCOUNT,
    ),
    Row(
        "named after another Job",
        lambda s: _record(s)["metadata"].update(name="ptah-other-job"),
        records.NAME_NOT_JOB,
    ),
    Row(
        "owned by nothing",
        lambda s: _record(s)["metadata"].pop("ownerReferences"),
        records.NAME_NOT_JOB,
    ),
    Row("the Pod is gone", lambda s: s.objects.remove(_find(s, "Pod")), records.POD_GONE),
    Row("the Pod has stopped", _pod(_stopped), records.POD_STOPPED),
    Row(
        "the Pod runs as another ServiceAccount",
        _pod(lambda p: p["spec"].update(serviceAccountName="builder")),
        records.POD_ACCOUNT,
    ),
    Row(
        "the Pod is not the Job's",
        _pod(lambda p: p["metadata"]["ownerReferences"][0].update(uid="another-job-uid")),
        records.POD_NOT_JOBS,
    ),
    Row("the Job is gone", lambda s: s.objects.remove(_find(s, "Job")), records.JOB_GONE),
    Row("no claim reserves the Job", _claim(jobName="ptah-another-job"), records.NO_CLAIM),
    Row(
        "a Job whose Pod template is not its claim's",
        lambda s: _find(s, "Job")["spec"]["template"]["metadata"]["labels"].update(x="1"),
        records.NOT_CLAIMS_JOB,
    ),
    Row(
        "another attempt's result",
        _result(claim={"id": "another-attempt"}),
        records.NOT_CLAIMS_RESULT,
        "reports operation ID 'another-attempt'",
    ),
    Row(
        "another operation's result",
        _result(op="observe"),
        records.NOT_CLAIMS_RESULT,
        "reports operation 'observe'",
    ),
    Row(
        "another realm's result, the claim fixing its realm",
        lambda s: (
            _claim(coordinationDigest="sha256:" + "1" * 64)(s),
            _result(coordination_digest="sha256:" + "9" * 64)(s),
        ),
        records.NOT_CLAIMS_RESULT,
        "coordination digest",
    ),
    Row(
        "a digest that does not cover the result",
        lambda s: _record(s)["spec"].update(resultDigest="sha256:" + "0" * 64),
        records.NOT_CLAIMS_RESULT,
        "does not cover its result",
    ),
    Row("any change after the create", _changed, records.IMMUTABLE),
    Row(
        "a resource this endpoint does not judge",
        lambda s: setattr(s, "resource", PTAHSCHEMAPLANS),
        records.NOT_A_RECORD,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_a_record_is_only_the_live_pods_own_result(row: Row) -> None:
    expect(row, record_create(), "records")
