"""An empty value in ``spec.execution`` still gets its Job (issue 15, defect 2).

The CRD and the models accept empty collections and empty strings in a PtahSchema's
``spec.execution``, as a Helm values file writes them. The API server stores a Job
without them (Go's ``omitempty``), so a builder that copied them into the Job would
build something other than what is stored: the controller-write webhook would refuse
the create as not the claim's Job, and the claim would never get one.

Each row is a PtahSchema on the real API server with one empty value, taken by the
real controller (and its webhook, registered over TLS) from approval to a recorded
Job; the Job is then read back and held to its claim by ``jobclaim.match`` in all
three modes. The control row has none. All rows run at once, each on a database of its
own, under one deadline: the controller acts on its own threads, and nothing but the
resources says when it is done (a bounded poll, as ``localrun.wait_for`` does).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from pydantic import ValidationError

from controller.pieces.events import RecordingSink
from jobclaim import build_job, manager_record_of, match, schema_claim, schema_job_inputs
from jobclaim.api import PtahSchema
from jobclaim.apiserver import JOBS, PTAHSCHEMAS, Invalid, NotFound, Object
from lab import run as localrun
from tests.support.realapioperator import Operator, operator, registered_webhook  # noqa: F401

pytestmark = pytest.mark.controlplane

# (id, the execution fields the row sets over the example's)
ROWS: Final[list[tuple[str, dict[str, Any]]]] = [
    ("control: no empty value", {}),
    ("nodeSelector: {}", {"nodeSelector": {}}),
    ("tolerations: []", {"tolerations": []}),
    ("imagePullSecrets: []", {"imagePullSecrets": []}),
    ("resources.limits: {}", {"resources": {"limits": {}, "requests": {"cpu": "100m"}}}),
    ('priorityClassName: ""', {"priorityClassName": ""}),
    ('a toleration with key: ""', {"tolerations": [{"key": "", "operator": "Exists"}]}),
    (
        "an affinity term with values: []",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "disk", "operator": "Exists", "values": []}
                                ]
                            }
                        ]
                    }
                }
            }
        },
    ),
]
# Long enough for every row's passes on a loaded 2-core machine; a row that has no
# Job by then never gets one (a refused create is retried every 5 s, forever).
DEADLINE: Final = 90.0
MODES: Final = ("rebuild-stored", "rebuild-submitted", "envelope")


@dataclass(frozen=True)
class Outcome:
    schema: Object
    job: Object | None


def _name(index: int) -> str:
    return f"empty-{index}"


def _schema_for(namespace: str, index: int, fields: dict[str, Any]) -> Object:
    raw = localrun.example_schema(namespace, _name(index))
    raw["spec"]["target"]["coordinationKey"] = f"empty-values-{index}"
    raw["spec"]["execution"] = {**raw["spec"]["execution"], **fields}
    return raw


@pytest.fixture(scope="module")
def outcomes(
    operator: Operator,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Outcome]]:
    admin = operator.admin
    with registered_webhook(operator, tmp_path_factory.mktemp("webhook-certs")) as (staged, _):
        namespace = staged.namespace
        controller = localrun.LocalController(operator.manager, namespace, events=RecordingSink())
        controller.start()
        try:
            for index, (_, fields) in enumerate(ROWS):
                admin.create(PTAHSCHEMAS, namespace, _schema_for(namespace, index, fields))
            for index in range(len(ROWS)):
                localrun.wait_for(
                    admin,
                    namespace,
                    _name(index),
                    lambda s: bool((s.get("status") or {}).get("executionBinding")),
                )
                localrun.seed_plan(
                    admin, operator.manager, namespace, _name(index), plane=operator.plane
                )
                localrun.approve(admin, namespace, _name(index))
            yield _collect(admin, namespace)
        finally:
            # Not waited for, as in test_controller_dispatch: its threads are daemons.
            controller.stop(wait=0)


def _collect(admin: Any, namespace: str) -> dict[str, Outcome]:
    """Each row's schema and recorded Job, polled until all have one or the deadline."""
    end = time.monotonic() + DEADLINE
    found: dict[str, Outcome] = {}
    while True:
        for index, (row, _) in enumerate(ROWS):
            if row in found:
                continue
            schema = admin.get(PTAHSCHEMAS, namespace, _name(index))
            uid = localrun.recorded_job(schema)
            if uid is not None:
                claim = schema["status"]["activeOperation"]
                try:
                    job = admin.get(JOBS, namespace, claim["jobName"])
                except NotFound:
                    job = None
                found[row] = Outcome(schema, job)
        if len(found) == len(ROWS) or time.monotonic() > end:
            break
        time.sleep(0.5)  # the controller's passes take their own time; see the docstring
    for index, (row, _) in enumerate(ROWS):
        found.setdefault(row, Outcome(admin.get(PTAHSCHEMAS, namespace, _name(index)), None))
    return found


@pytest.mark.parametrize("row", [r[0] for r in ROWS])
def test_an_empty_execution_value_still_gets_its_job(
    outcomes: dict[str, Outcome], row: str
) -> None:
    outcome = outcomes[row]
    assert outcome.job is not None, (
        f"{row}: no Job was recorded: {localrun.progress_line(outcome.schema)}"
    )
    schema = PtahSchema.model_validate(outcome.schema)
    assert schema.status is not None and schema.status.active_operation is not None
    binding = schema.status.execution_binding
    snapshot = schema.status.active_operation.admission_snapshot
    assert binding is not None and snapshot is not None
    job = outcome.job
    assert job["metadata"]["uid"] == schema.status.active_operation.job_uid
    built = build_job(
        schema_job_inputs(
            schema,
            binding=binding,
            manager=manager_record_of(job),
            snapshot_digest=snapshot.digest,
        )
    )
    for mode in MODES:
        claim = schema_claim(
            schema,
            built=None if mode == "envelope" else built,
            stored=mode != "rebuild-submitted",
            binding=binding,
        )
        assert claim is not None
        verdict = match(job, claim)
        assert verdict.matched, f"{row}, {mode}: {verdict.reason}"


def test_an_empty_runtime_class_is_refused_at_admission_of_the_schema(
    operator: Operator,  # noqa: F811
    namespace: str,
) -> None:
    """The one empty value that means something else: the API server keeps an empty
    runtimeClassName on a Job (a pointer) and refuses the Job as invalid. So the CRD
    refuses the PtahSchema, saying which field, and so does the model the controller
    and the webhook decode it with."""
    control = _schema_for(namespace, 100, {"runtimeClassName": "runc"})
    operator.admin.create(PTAHSCHEMAS, namespace, control)
    refused = _schema_for(namespace, 101, {"runtimeClassName": ""})
    with pytest.raises(Invalid) as raised:
        operator.admin.create(PTAHSCHEMAS, namespace, refused)
    assert "spec.execution.runtimeClassName" in str(raised.value)
    with pytest.raises(ValidationError, match=r"runtimeClassName"):
        PtahSchema.model_validate(refused)
