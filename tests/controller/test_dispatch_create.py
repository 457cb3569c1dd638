"""The one create: what each API answer means, and that a marked claim never creates
again.

Each row is an answer the API server can give a Job create, built by the adapter's
own ``classify`` from the status and body a real server sends. Refused before
storing: the mark is withdrawn and the next pass creates under the approval already
spent (no second consume). Anything else: the outcome is unknown and no second
create is ever attempted; a Job that was stored after all is adopted.
"""

from __future__ import annotations

import json

import pytest

from controller.mutationlifecycle import CreateOutcome, classify_create
from jobclaim.apiserver import JOBS, PTAHSCHEMAAPPROVALS, ApiError
from kube.client import classify
from kube.fake.inmemory import matching
from tests.support.dispatchworld import NS, add_migration, add_schema, conditions, make_rig


def answer(status: int | None, reason: str, message: str) -> ApiError:
    body = json.dumps({"kind": "Status", "status": "Failure", "reason": reason, "message": message})
    return classify(status, reason, body)


# (id, the answer, stored by the server before answering, what it means)
ANSWERS: list[tuple[str, ApiError | None, bool, CreateOutcome | None]] = [
    ("control-created", None, True, None),
    ("401-unauthorized", answer(401, "Unauthorized", "Unauthorized"), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("403-rbac", answer(403, "Forbidden", 'jobs.batch is forbidden: User "ptah"'), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("403-admission", answer(403, "Forbidden", 'admission webhook "jobs.ptah" denied'), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("400-bad-request", answer(400, "BadRequest", "the body is not a Job"), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("422-invalid", answer(422, "Invalid", "spec.template: Invalid value"), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("429-priority-and-fairness", answer(429, "TooManyRequests", "too many requests"), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("500-webhook-fail-closed",
     answer(500, "InternalError", 'Internal error occurred: failed calling webhook "x"'), False,
     CreateOutcome.REFUSED_BEFORE_STORING),
    ("no-answer", answer(None, "", "connection reset"), False, CreateOutcome.UNKNOWN),
    ("504-timeout-unstored", answer(504, "Timeout", "the request timed out"), False,
     CreateOutcome.UNKNOWN),
    ("500-other", answer(500, "InternalError", "etcdserver: leader changed"), False,
     CreateOutcome.UNKNOWN),
    ("409-already-exists", answer(409, "AlreadyExists", 'jobs "x" already exists'), False,
     CreateOutcome.UNKNOWN),
    ("504-timeout-stored", answer(504, "Timeout", "the request timed out"), True,
     CreateOutcome.UNKNOWN),
]  # fmt: skip


@pytest.mark.parametrize(
    ("error", "stored", "outcome"),
    [row[1:] for row in ANSWERS],
    ids=[row[0] for row in ANSWERS],
)
def test_each_create_answer(
    error: ApiError | None, stored: bool, outcome: CreateOutcome | None
) -> None:
    rig = make_rig()
    key = add_schema(rig)
    if error is not None:
        assert classify_create(error) is outcome
        arm = rig.api.fail_after_write if stored else rig.api.fail_before_write
        arm(matching("create", JOBS), error)
    first = rig.settle(key)
    creates_then = rig.job_creates()
    assert creates_then == 1
    if outcome is CreateOutcome.REFUSED_BEFORE_STORING:
        assert first[-1].reason == "the create was refused before storing"
        claim = rig.claim(key)
        assert claim["dispatchStarted"] is False  # the mark is withdrawn
        approval = rig.api.get(PTAHSCHEMAAPPROVALS, NS, f"{key.name}-approval")
        assert conditions(approval) == {"Consumed": "True"}  # spent, and stays spent
        rig.api.clear_calls()
        rig.settle(key)
        # Retried under the approval already spent: one create, no second consume.
        assert rig.job_creates() == 1
        assert not [c for c in rig.api.writes() if c.resource == PTAHSCHEMAAPPROVALS]
        (job,) = rig.jobs()
        assert rig.claim(key)["jobUID"] == job["metadata"]["uid"]
        assert rig.claim(key)["id"] == claim["id"]
        return
    if outcome is CreateOutcome.UNKNOWN:
        rig.api.clear_calls()
        for _ in range(3):
            rig.settle(key)
        assert rig.job_creates() == 0  # never a second create
        if stored:
            claim = rig.claim(key)
            assert claim["dispatchStarted"] is True
            (job,) = rig.jobs()
            assert claim["jobUID"] == job["metadata"]["uid"]
            assert "JobAdopted" in rig.sink.reasons(key.name)
        else:
            assert rig.jobs() == []
            # The claim was swapped for its record in one patch: the Apply owes proof.
            status = rig.resource(key)["status"]
            assert "activeOperation" not in status
            assert status["pendingObservation"]["outcome"] == "OutcomeUnknown"
            assert "OutcomeUnknown" in rig.sink.reasons(key.name)
        return
    (job,) = rig.jobs()
    assert rig.claim(key)["jobUID"] == job["metadata"]["uid"]


@pytest.mark.parametrize("tamper", ["control", "deleted", "replaced", "foreign-spec"])
def test_a_marked_claim_never_creates_a_second_job(tamper: str) -> None:
    for add in (add_schema, add_migration):
        rig = make_rig()
        key = add(rig)
        rig.settle(key)
        (job,) = rig.jobs()
        name = job["metadata"]["name"]
        if tamper in ("deleted", "replaced"):
            rig.api.delete(JOBS, NS, name)
        if tamper == "replaced":
            rig.api.create(JOBS, NS, {k: v for k, v in job.items() if k != "status"} | {
                "metadata": {k: v for k, v in job["metadata"].items()
                             if k not in ("uid", "resourceVersion", "creationTimestamp",
                                          "generation")}
            })  # fmt: skip
        if tamper == "foreign-spec":
            rig.api.patch_spec(JOBS, NS, name, {"activeDeadlineSeconds": 86400})
        rig.api.clear_calls()
        for _ in range(3):
            rig.settle(key)
        assert rig.job_creates() == 0
        unknown = "OutcomeUnknown" in rig.sink.reasons(key.name)
        assert unknown is (tamper != "control")
        status = rig.resource(key)["status"]
        if tamper == "control":
            assert status["activeOperation"]["dispatchStarted"] is True
        else:
            # An unknown outcome leaves the family's record in place of the claim.
            assert "activeOperation" not in status
            assert "pendingObservation" in status or "unresolvedRun" in status
