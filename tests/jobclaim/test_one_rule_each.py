"""Rules the controller and the webhook (or the runner's harvest) once stated twice, and
that disagreed: each is now one predicate in jobclaim, a table here, and every former
call site asks that predicate.

"Is this the plan the claim records?": the controller's authorize and the webhook's Job
create each checked a different subset of a plan's fields, in both families.
"Has this Pod stopped?": the controller counted a restarted runner's current state, the
harvest did not, so the two disagreed on whether a Lease could be handed back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import controller.families.migration.dispatch
import controller.families.schema.dispatch
import controller.families.schema.records
import controller.families.schema.rotation
import controller.stages.retirement
import jobclaim
import runner.harvest
import webhook.jobs
import webhook.projections
from jobclaim import (
    build_migration_plan,
    build_schema_plan,
    migration_plan_problem,
    pod_stopped,
    schema_plan_problem,
)
from jobclaim.api import CurrentPlanStatus, PtahMigrationPlan, PtahSchemaPlan
from jobclaim.api.meta import ObjectMeta, ObjectReference
from runner.harvest import NoEvidence, select_pod
from tests.support.claimworld import (
    BINDING,
    MANAGER,
    PLAN_CONTENT,
    PLAN_SEQUENCE,
    plan_schema,
    planned_migration,
    schema_world,
)
from tests.support.harvestpods import pod_of, terminal

Wire = dict[str, Any]
DELETED = "2026-12-02T12:00:00Z"


# -- is this the plan the claim records? ----------------------------------------------


def schema_plan_wire() -> Wire:
    wire = build_schema_plan(
        plan_schema(), binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT
    )
    wire["metadata"]["uid"] = "plan-uid"
    return wire


def schema_record(plan: Wire) -> CurrentPlanStatus:
    spec = plan["spec"]
    return CurrentPlanStatus(
        name=plan["metadata"]["name"],
        uid=plan["metadata"]["uid"],
        fingerprint=spec["fingerprint"],
        content_digest=spec["contentDigest"],
        execution_binding_id=spec["executionBindingID"],
        controller_state_version=BINDING.controller_state_version,
        ptah_version=BINDING.ptah_version,
        chunk_count=len(spec["chunks"]),
    )


PlanChange = Callable[[Wire], None]


def on_meta(**fields: Any) -> PlanChange:
    return lambda plan: plan["metadata"].update(fields)


def on_spec(**fields: Any) -> PlanChange:
    return lambda plan: plan["spec"].update(fields)


def on_owner(key: str, **fields: Any) -> PlanChange:
    return lambda plan: plan["spec"][key].update(fields)


def unchanged(plan: Wire) -> None:
    del plan


def drop_last_chunk(plan: Wire) -> None:
    plan["spec"]["chunks"].pop()


def misname_chunk(plan: Wire) -> None:
    plan["spec"]["chunks"][1]["name"] = plan["metadata"]["name"] + "-007"


OTHER_EPOCH = "v1-" + "e" * 32

SCHEMA_ROWS: list[tuple[str, PlanChange, str | None]] = [
    ("the plan status.plan records", unchanged, None),
    ("another name", on_meta(name="ptah-plan-other"), "its name or UID differs"),
    ("a replacement", on_meta(uid="new-plan-uid"), "its name or UID differs (its UID differs)"),
    ("being deleted", on_meta(deletionTimestamp=DELETED), "it is being deleted"),
    ("another fingerprint", on_spec(fingerprint="sha256:" + "0" * 64), "fingerprint differs"),
    ("other content", on_spec(contentDigest="sha256:" + "0" * 64), "content digest differs"),
    ("another schema's", on_owner("schemaRef", uid="other"), "it belongs to another schema"),
    ("a namesake schema's", on_owner("schemaRef", name="other"), "belongs to another schema"),
    ("another epoch", on_spec(executionBindingID=OTHER_EPOCH), "made under another epoch"),
    ("fewer chunks", drop_last_chunk, "it lists 1 chunks, status.plan records 2"),
    ("a chunk not named by index", misname_chunk, "not named by index after the plan"),
]


@pytest.mark.parametrize(("name", "change", "reason"), SCHEMA_ROWS, ids=[r[0] for r in SCHEMA_ROWS])
def test_a_schema_plan_is_the_recorded_one_only_by_every_binding(
    name: str, change: PlanChange, reason: str | None
) -> None:
    wire = schema_plan_wire()
    record = schema_record(wire)
    changed = copy.deepcopy(wire)
    change(changed)
    problem = schema_plan_problem(
        PtahSchemaPlan.model_validate(changed), record, owner=plan_schema().metadata
    )
    assert (problem is None) == (reason is None), problem
    if reason is not None:
        assert problem is not None and reason in problem


def migration_plan_wire() -> Wire:
    wire = build_migration_plan(planned_migration(), migrations=PLAN_SEQUENCE)
    wire["metadata"]["uid"] = "mplan-uid"
    return wire


MIGRATION_ROWS: list[tuple[str, PlanChange, str | None]] = [
    ("the plan the claim references", unchanged, None),
    ("another name", on_meta(name="ptah-mplan-other"), "its name or UID differs"),
    ("a replacement", on_meta(uid="x"), "its UID differs"),
    ("being deleted", on_meta(deletionTimestamp=DELETED), "it is being deleted"),
    ("another migration's", on_owner("migrationRef", uid="other"), "another migration"),
    ("a namesake migration's", on_owner("migrationRef", name="other"), "another migration"),
    ("another epoch", on_spec(executionBindingID=OTHER_EPOCH), "made under another epoch"),
    (
        "another artifact's",
        on_spec(artifactDigest="sha256:" + "9" * 64),
        "it was made from the artifact sha256:9",
    ),
]


@pytest.mark.parametrize(
    ("name", "change", "reason"), MIGRATION_ROWS, ids=[r[0] for r in MIGRATION_ROWS]
)
def test_a_migration_plan_is_the_referenced_one_only_by_every_binding(
    name: str, change: PlanChange, reason: str | None
) -> None:
    wire = migration_plan_wire()
    ref = ObjectReference(name=wire["metadata"]["name"], uid=wire["metadata"]["uid"])
    owner: ObjectMeta = planned_migration().metadata
    changed = copy.deepcopy(wire)
    change(changed)
    problem = migration_plan_problem(
        PtahMigrationPlan.model_validate(changed),
        ref,
        owner=owner,
        epoch=wire["spec"]["executionBindingID"],
        artifact=wire["spec"]["artifactDigest"],
    )
    assert (problem is None) == (reason is None), problem
    if reason is not None:
        assert problem is not None and reason in problem


def test_the_controller_and_the_webhook_ask_the_one_recorded_plan_predicate() -> None:
    # The authorize step of each family and the webhook's Job and projection creates.
    for module in (controller.families.schema.dispatch, webhook.jobs, webhook.projections):
        assert module.schema_plan_problem is jobclaim.recordedplan.schema_plan_problem
    for module in (controller.families.migration.dispatch, webhook.jobs):
        assert module.migration_plan_problem is jobclaim.recordedplan.migration_plan_problem


# -- has this Pod stopped? -------------------------------------------------------------


def runner_status(**fields: Any) -> dict[str, Any]:
    return {"name": "ptah", "restartCount": 0, **fields}


TERMINATED = {"terminated": {"exitCode": 0}}
RUNNING = {"running": {"startedAt": DELETED}}

POD_ROWS: list[tuple[str, dict[str, Any], bool]] = [
    (
        "succeeded",
        {"phase": "Succeeded", "containerStatuses": [runner_status(state=TERMINATED)]},
        True,
    ),
    ("failed with no statuses", {"phase": "Failed"}, True),
    (
        "running, runner terminated once",
        {"phase": "Running", "containerStatuses": [runner_status(state=TERMINATED)]},
        True,
    ),
    (
        "running, runner running",
        {"phase": "Running", "containerStatuses": [runner_status(state=RUNNING)]},
        False,
    ),
    (
        "running, a restarted runner terminated again",
        {
            "phase": "Running",
            "containerStatuses": [runner_status(state=TERMINATED, restartCount=1)],
        },
        False,
    ),
    (
        "running, a runner whose last state terminated",
        {
            "phase": "Running",
            "containerStatuses": [runner_status(state=TERMINATED, lastState=TERMINATED)],
        },
        False,
    ),
    (
        "succeeded, a restarted runner",
        {
            "phase": "Succeeded",
            "containerStatuses": [runner_status(state=TERMINATED, restartCount=1)],
        },
        True,
    ),
    ("pending, no statuses", {"phase": "Pending"}, False),
    (
        "running, another container terminated",
        {"phase": "Running", "containerStatuses": [{"name": "other", "state": TERMINATED}]},
        False,
    ),
    (
        "running, two runner statuses",
        {"phase": "Running", "containerStatuses": [runner_status(state=TERMINATED)] * 2},
        False,
    ),
    ("no status at all", {}, False),
]


@pytest.mark.parametrize(("name", "status", "stopped"), POD_ROWS, ids=[r[0] for r in POD_ROWS])
def test_a_pod_has_stopped_only_when_nothing_in_it_can_run_again(
    name: str, status: dict[str, Any], stopped: bool
) -> None:
    assert pod_stopped({"status": status}) is stopped


@pytest.mark.parametrize(("name", "status", "stopped"), POD_ROWS, ids=[r[0] for r in POD_ROWS])
def test_the_harvest_says_a_pod_may_still_write_exactly_when_it_has_not_stopped(
    name: str, status: dict[str, Any], stopped: bool
) -> None:
    world = schema_world("Apply")
    job = terminal(world.stored)
    pod = pod_of(job)
    pod["status"] = copy.deepcopy(status)
    found = select_pod(job, [pod], world.claim("rebuild-stored"))
    may_still_write = found.may_still_write if isinstance(found, NoEvidence) else False
    assert may_still_write is not stopped


def test_every_reader_that_hands_a_database_back_asks_the_one_stopped_predicate() -> None:
    for module in (
        runner.harvest,
        controller.stages.retirement,
        controller.families.schema.rotation,
        controller.families.schema.records,
    ):
        assert module.pod_stopped is jobclaim.livejob.pod_stopped
