"""Result records on the real API server: only the operation Pod speaks for its Job.

An Apply is staged and dispatched the way the controller does it (its Job admitted,
its Pod created by the real Job controller, Pending: no kubelet runs here). The API
server issues a token bound to that Pod (``tests.realapi.podtoken``), and the runner's
own recorder creates records with it over HTTPS. The control row is the record the
runner writes; every other row changes one thing a thief could try (the manager's
token, another Pod's token, another attempt's result, another database, a digest that
does not cover its result, a change after the create, a Pod that has stopped) and is
refused with its sentence, by the chart's ValidatingAdmissionPolicy (which runs
first) or by the webhook's ``result-record`` rule. (Another realm's result is a row of
tests/webhook/test_records.py: this stage's claim fixes no realm.)
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobclaim.apiserver import JOBS, PODS, PTAHRESULTRECORDS, NotFound, Object
from lab import run as localrun
from runner import (
    RUNNER_PROTOCOL_VERSION,
    RecordUnwritten,
    RunnerResult,
    encode_result,
    record_for,
)
from tests.realapi.applystage import dispatch, stage_apply
from tests.realapi.attackstage import (  # noqa: F401
    Stage,
    as_manager,
    helm_fixture,
    path_of,
    refused_with,
    stage_fixture,
    template,
)
from tests.realapi.podtoken import identity_of, pod_token, recorder_for
from tests.support.realapioperator import operator  # noqa: F401
from webhook import records

pytestmark = pytest.mark.controlplane

BY_POLICY_TOKEN = "a result record is written only with the Pod-bound token of the Pod it names"
BY_POLICY_CHANGE = "a result record is never changed after its create"


def _pod_of(stage: Stage, job: Object) -> Object:
    """The Pod the real Job controller starts for ``job`` (a bounded poll: it acts on
    its own time)."""
    admin, ns = stage.operator.admin, stage.namespace
    uid = admin.get(JOBS, ns, job["metadata"]["name"])["metadata"]["uid"]

    def found() -> Object | None:
        for pod in admin.list(PODS, ns):
            if any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences") or []):
                return pod
        return None

    localrun.until(lambda: found() is not None, "the Job controller to start the Apply's Pod")
    pod = found()
    assert pod is not None
    return pod


@dataclass(frozen=True)
class Applying:
    """A dispatched Apply: its Job (admitted), its Pending Pod, what its claim fixes."""

    job: Object
    pod: Object
    claim_id: str


@pytest.fixture(scope="module", name="applying")
def applying_fixture(stage: Stage) -> Applying:
    staged = dispatch(stage, stage_apply(stage))
    job = stage.operator.admin.get(JOBS, stage.namespace, staged.job["metadata"]["name"])
    return Applying(job, _pod_of(stage, job), staged.claim_id)


def _result(applying: Applying, **changes: Any) -> RunnerResult:
    """What the Apply's runner reports of a successful run of the Job's plan."""
    planned = applying.job["metadata"]["annotations"]["operator.ptah.run/plan-content-digest"]
    wire: dict[str, Any] = {
        "protocolVersion": RUNNER_PROTOCOL_VERSION,
        "operation": "apply",
        "operationId": applying.claim_id,
        "childExitCode": 0,
        "mutationStarted": True,
        "uncertain": False,
        "targetIdentityDigest": "sha256:" + "a" * 64,
        "apply": {"planContentDigest": planned, "statementCount": 1},
    }
    wire.update(changes)
    return RunnerResult.from_wire(wire)


def _record(pod: Object, result: RunnerResult, **spec: Any) -> dict[str, Any]:
    wire = record_for(identity_of(pod), result, encode_result(result))
    wire["spec"].update(spec)
    return wire


def _refusal(call: Callable[[], None]) -> str:
    try:
        call()
    except RecordUnwritten as error:
        return str(error)
    raise AssertionError("the record was admitted")


def test_only_the_operation_pod_records_its_own_result(
    stage: Stage,
    applying: Applying,
    tmp_path: Path,
) -> None:
    plane, admin, ns = stage.operator.plane, stage.operator.admin, stage.namespace
    job, pod = applying.job, applying.pod
    own = recorder_for(plane, pod_token(plane, pod), tmp_path / "own")
    good = _record(pod, _result(applying))

    # Another Pod in the namespace, of no Job: its token is as real as the Apply Pod's.
    stranger = admin.create(
        PODS,
        ns,
        {
            "metadata": {"name": f"stranger-{uuid.uuid4().hex[:6]}"},
            "spec": {
                "serviceAccountName": "default",
                "containers": [{"name": "c", "image": pod["spec"]["containers"][0]["image"]}],
            },
        },
    )
    strangers = recorder_for(plane, pod_token(plane, stranger), tmp_path / "stranger")
    as_stranger = {
        **good,
        "spec": {
            **good["spec"],
            "pod": {"name": stranger["metadata"]["name"], "uid": stranger["metadata"]["uid"]},
        },
    }

    # The manager's own token: no Pod behind it.
    by_manager = as_manager(stage, "POST", path_of(PTAHRESULTRECORDS, ns), good, dry_run=False)
    refused_with(by_manager, BY_POLICY_TOKEN)
    # Another Pod's token, naming the Apply's Pod.
    assert BY_POLICY_TOKEN in _refusal(lambda: strangers.create(good))
    # Another Pod's token, naming itself: it is not the Job's.
    assert template(records.POD_NOT_JOBS) in _refusal(lambda: strangers.create(as_stranger))
    # The Apply Pod's own token, each with one thing of the claim's changed.
    rows: list[tuple[str, dict[str, Any], str]] = [
        (
            "another attempt",
            _record(pod, _result(applying, operationId="another-attempt")),
            "reports operation ID 'another-attempt'",
        ),
        (
            "another plan",
            _record(
                pod,
                _result(
                    applying, apply={"planContentDigest": "sha256:" + "8" * 64, "statementCount": 1}
                ),
            ),
            "reports applying another plan than its Job was built for",
        ),
        (
            "a digest that covers other bytes",
            _record(pod, _result(applying), resultDigest="sha256:" + "7" * 64),
            "the record's digest does not cover its result",
        ),
    ]
    for row, record, sentence in rows:
        refusal = _refusal(functools.partial(own.create, record))
        assert template(records.NOT_CLAIMS_RESULT) in refusal and sentence in refusal, (
            row,
            refusal,
        )

    # The control row: the runner's own record of its own result.
    own.create(good)
    stored = admin.get(PTAHRESULTRECORDS, ns, job["metadata"]["name"])
    assert stored["spec"]["resultDigest"] == good["spec"]["resultDigest"]
    # Records are immutable, to everyone.
    stored["spec"]["result"] = stored["spec"]["result"].replace(
        '"childExitCode":0', '"childExitCode":1'
    )
    with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
        changed = http.put(
            f"{plane.server_url}{path_of(PTAHRESULTRECORDS, ns, job['metadata']['name'])}",
            content=json.dumps(stored).encode(),
            headers={
                "Authorization": f"Bearer {plane.token('admin')}",
                "Content-Type": "application/json",
            },
        )
    refused_with(changed, BY_POLICY_CHANGE)
    # A second create for the same Job: there is one record per Job, and this is not it.
    second = _record(pod, _result(applying, targetIdentityDigest="sha256:" + "b" * 64))
    assert "a record of this Job already exists" in _refusal(lambda: own.create(second))


def test_a_stopped_pod_records_nothing(
    stage: Stage,
    applying: Applying,
    tmp_path: Path,
) -> None:
    plane, admin, ns = stage.operator.plane, stage.operator.admin, stage.namespace
    job, pod = applying.job, applying.pod
    token = pod_token(plane, pod)
    current = admin.get(PODS, ns, pod["metadata"]["name"])
    admin.patch_status(
        PODS,
        ns,
        pod["metadata"]["name"],
        {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "ptah",
                    "image": pod["spec"]["containers"][0]["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
                }
            ],
        },
        resource_version=current["metadata"]["resourceVersion"],
    )
    late = _record(pod, _result(applying))
    with contextlib.suppress(NotFound):  # the record the first test admitted
        admin.delete(PTAHRESULTRECORDS, ns, job["metadata"]["name"])
    refusal = _refusal(lambda: recorder_for(plane, token, tmp_path / "late").create(late))
    assert template(records.POD_STOPPED) in refusal, refusal
