"""ConfigMap, PtahSchemaPlan and PtahMigrationPlan CREATE: a projection only while its
Apply can still be dispatched, a plan only as its claim recomputes it."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from tests.support.claimworld import BINDING, NOW, OTHER_EPOCH
from tests.support.webhookscenes import (
    Obj,
    Scene,
    change_owner,
    migration_plan_create,
    plan_chunk_create,
    projection_create,
    schema_plan_create,
    with_claim,
    with_status,
    world_of,
)
from tests.webhook.tables import Row, expect, unchanged
from webhook import objects, plans, projections

FORGED_SQL = b"UPDATE accounts SET owner = 'mallory';\n"


def candidate(scene: Scene) -> Obj:
    assert scene.obj is not None
    return scene.obj


def claim(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_claim(owner, **changes))


def status(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_status(owner, **changes))


def stored(kind: str, change: Any) -> Any:
    def apply(scene: Scene) -> None:
        for obj in scene.objects:
            if obj["kind"] == kind:
                change(obj)

    return apply


def remove(kind: str) -> Any:
    def apply(scene: Scene) -> None:
        scene.objects = [o for o in scene.objects if o["kind"] != kind]

    return apply


def deleting(obj: Obj) -> None:
    obj["metadata"].update(deletionTimestamp=NOW, finalizers=["example.com/hold"])


def plan_record(**changes: Any) -> Any:
    def apply(scene: Scene) -> None:
        owner: Any = world_of(scene)
        change_owner(
            scene, lambda o: with_status(o, plan=owner.status.plan.model_copy(update=changes))
        )

    return apply


PROJECTION_ROWS = [
    Row("the projection of the Apply about to be dispatched", unchanged, None),
    Row("the same projection as a dry run", lambda s: setattr(s, "dry_run", True), None),
    Row(
        "a projection after the dispatch mark",
        claim(dispatch_started=True),
        projections.NOT_DISPATCHABLE,
    ),
    Row(
        "a projection for an Apply with a Job",
        claim(job_uid="job-uid"),
        projections.NOT_DISPATCHABLE,
    ),
    Row("a projection for a Plan claim", claim(type="Plan"), projections.NOT_DISPATCHABLE),
    Row("a projection with no claim", status(active_operation=None), projections.NOT_DISPATCHABLE),
    Row("a projection with no plan in status", status(plan=None), projections.NOT_DISPATCHABLE),
    Row(
        "status records another plan",
        plan_record(fingerprint="sha256:" + "0" * 64),
        projections.NOT_RECORDED,
        "fingerprint differs",
    ),
    Row(
        "a plan being deleted",
        stored("PtahSchemaPlan", deleting),
        objects.OWNER_DELETING,
        "plan projection",
    ),
    Row(
        "a plan owned by nobody",
        stored("PtahSchemaPlan", lambda o: o["metadata"].pop("ownerReferences")),
        objects.NO_OWNER,
        "the plan does not have one exact PtahSchema controller owner",
    ),
    Row(
        "a plan bound to another schema",
        stored("PtahSchemaPlan", lambda o: o["spec"]["schemaRef"].update(uid="other")),
        projections.PLAN_NOT_BOUND,
    ),
    Row("a schema being deleted", stored("PtahSchema", deleting), objects.OWNER_DELETING, "plan's"),
    Row("a plan that is gone", remove("PtahSchemaPlan"), objects.OWNER_MISSING),
    Row(
        "a projection owned by a replaced plan",
        lambda s: candidate(s)["metadata"]["ownerReferences"][0].update(uid="replaced"),
        objects.OWNER_REPLACED,
    ),
    Row(
        "a name the plan does not list",
        lambda s: candidate(s)["metadata"].update(name="ptah-plan-other-000"),
        projections.NOT_LISTED,
    ),
    Row(
        "a mutable projection",
        lambda s: candidate(s).update(immutable=False),
        projections.NOT_IMMUTABLE,
    ),
    Row(
        "other bytes",
        lambda s: candidate(s)["binaryData"].update(
            chunk=base64.b64encode(b"DROP TABLE a;").decode()
        ),
        projections.NOT_THE_CHUNK,
        "holds 13 bytes",
    ),
    Row(
        "bytes of the same size and another digest",
        lambda s: candidate(s)["binaryData"].update(
            chunk=base64.b64encode(
                b"X" + base64.b64decode(candidate(s)["binaryData"]["chunk"])[1:]
            ).decode()
        ),
        projections.NOT_THE_CHUNK,
        "does not have the digest the plan recorded",
    ),
    Row(
        "a chunk that is not base64",
        lambda s: candidate(s)["binaryData"].update(chunk="%%%"),
        projections.NOT_THE_CHUNK,
        "not base64",
    ),
    Row(
        "a string data key beside the chunk",
        lambda s: candidate(s).update(data={"init.sql": "DROP TABLE a;"}),
        projections.NOT_THE_CHUNK,
        "contents are not the plan's chunk bytes",
    ),
    Row(
        "an extra label",
        lambda s: candidate(s)["metadata"]["labels"].update(extra="1"),
        projections.NOT_THE_CHUNK,
        "metadata is not the one its plan builds",
    ),
    Row(
        "an unknown top-level field",
        lambda s: candidate(s).update(shadow={}),
        objects.UNDECODABLE,
        "unknown field shadow",
    ),
]


@pytest.mark.parametrize("row", PROJECTION_ROWS, ids=str)
def test_a_projection_is_admitted_only_before_the_dispatch_mark_and_exactly(row: Row) -> None:
    expect(row, projection_create())


def test_every_chunk_of_the_plan_has_its_projection_admitted() -> None:
    expect(Row("the second chunk", unchanged, None), projection_create(1))


def job(change: Any) -> Any:
    return stored("Job", change)


SCHEMA_PLAN_ROWS = [
    Row("the plan the harvested Plan Job publishes", unchanged, None),
    Row("no active Plan claim", status(active_operation=None), plans.NOT_PUBLISHING),
    Row("a Plan claim with no Job recorded", claim(job_uid=None), plans.NOT_PUBLISHING),
    Row("an Apply claim", claim(type="Apply"), plans.NOT_PUBLISHING),
    Row("no binding recorded", status(execution_binding=None), plans.NO_BINDING),
    Row("the Plan Job is gone", remove("Job"), plans.SOURCE_MISSING),
    Row(
        "a Plan Job the claim did not record",
        job(lambda j: j["metadata"].update(uid="other-uid")),
        plans.SOURCE_NOT_HARVESTED,
    ),
    Row(
        "a failed Plan Job",
        job(lambda j: j["status"]["conditions"][0].update(type="Failed")),
        plans.SOURCE_NOT_HARVESTED,
    ),
    Row("a Plan Job still running", job(lambda j: j.update(status={})), plans.SOURCE_NOT_HARVESTED),
    Row(
        "a Plan Job not yet harvested",
        job(lambda j: j["spec"].pop("ttlSecondsAfterFinished")),
        plans.SOURCE_NOT_HARVESTED,
    ),
    Row(
        "a Plan Job with a digest-less controller image",
        job(
            lambda j: j["metadata"]["annotations"].update(
                {"operator.ptah.run/controller-image": "ptah:latest"}
            )
        ),
        plans.SOURCE_RECORD,
    ),
    Row(
        "a Plan Job changed after its create",
        job(lambda j: j["spec"].update(activeDeadlineSeconds=86400)),
        plans.SOURCE_OUTSIDE,
        "spec is not the one its claim builds",
    ),
    Row(
        "a binding rotated after the claim",
        status(execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH})),
        plans.SOURCE_REBUILD,
    ),
    Row(
        "another executor image",
        lambda s: candidate(s)["spec"].update(executorImage="x.example.com/p@sha256:" + "0" * 64),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.executorImage",
    ),
    Row(
        "another manager recorded",
        lambda s: candidate(s)["spec"]["dispatchedBy"].update(controllerRevision="r9"),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.dispatchedBy",
    ),
    Row(
        "a fingerprint not recomputed",
        lambda s: candidate(s)["spec"].update(fingerprint="sha256:" + "0" * 64),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.fingerprint",
    ),
    Row(
        "more statements than the fingerprint covers",
        lambda s: candidate(s)["spec"].update(statementCount=99),
        plans.SCHEMA_PLAN_NOT_REBUILT,
    ),
    # Each value is compared with its JSON type: the candidate decodes leniently, so a
    # comparison of its decoded form would read "1" as 1, 3.0 as 3 and 0 as false.
    Row(
        "a statement count spelled as a string",
        lambda s: candidate(s)["spec"].update(
            statementCount=str(candidate(s)["spec"]["statementCount"])
        ),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.statementCount",
    ),
    Row(
        "a state version spelled as a float",
        lambda s: candidate(s)["spec"].update(controllerStateVersion=3.0),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.controllerStateVersion",
    ),
    Row(
        "destructive spelled as 0",
        lambda s: candidate(s)["spec"].update(destructive=0),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.destructive",
    ),
    Row(
        "a chunk size spelled as a float",
        lambda s: candidate(s)["spec"]["chunks"][0].update(
            size=float(candidate(s)["spec"]["chunks"][0]["size"])
        ),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.chunks",
    ),
    Row(
        "a chunk index skipped",
        lambda s: candidate(s)["spec"]["chunks"][1].update(index=2),
        plans.SCHEMA_PLAN_NOT_REBUILT,
    ),
    Row(
        "an extra label",
        lambda s: candidate(s)["metadata"]["labels"].update(extra="1"),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "metadata",
    ),
    Row(
        "no record of the Plan Pod's",
        remove("PtahResultRecord"),
        plans.SOURCE_UNRECORDED,
    ),
    Row(
        "a record of another Job under the name",
        stored("PtahResultRecord", lambda r: r["spec"]["job"].update(uid="another-job-uid")),
        plans.SOURCE_RECORD_REFUSED,
        "speaks for Job UID another-job-uid",
    ),
    Row(
        "a record whose plan text is not its digest's",
        stored(
            "PtahResultRecord",
            lambda r: r["spec"].update(result=r["spec"]["result"].replace("TABLE a", "TABLE b")),
        ),
        plans.SOURCE_RECORD_REFUSED,
        "does not cover its result",
    ),
    Row(
        "statements nobody computed: UPDATE accounts, as the plan's content",
        lambda s: candidate(s)["spec"].update(
            contentDigest="sha256:" + hashlib.sha256(FORGED_SQL).hexdigest()
        ),
        plans.SCHEMA_PLAN_NOT_REBUILT,
        "spec.contentDigest",
    ),
    Row("a schema being deleted", stored("PtahSchema", deleting), objects.OWNER_DELETING),
    Row(
        "an unknown spec field",
        lambda s: candidate(s)["spec"].update(shadow=1),
        objects.UNDECODABLE,
        "unknown field request.object.spec.shadow",
    ),
]


@pytest.mark.parametrize("row", SCHEMA_PLAN_ROWS, ids=str)
def test_a_schema_plan_is_only_the_harvested_plan_jobs_rebuild(row: Row) -> None:
    expect(row, schema_plan_create())


def history(**changes: Any) -> Any:
    def apply(scene: Scene) -> None:
        owner: Any = world_of(scene)
        changed = owner.status.history.model_copy(update=changes)
        change_owner(scene, lambda o: with_status(o, history=changed))

    return apply


MIGRATION_PLAN_ROWS = [
    Row("the plan the recorded History reading derives", unchanged, None),
    Row(
        "a sequence longer than the reading found",
        history(pending_count=1),
        plans.MIGRATION_PLAN_NOT_REBUILT,
        "holds 2 migrations, the history reading found 1 pending",
    ),
    Row(
        "another history fingerprint",
        lambda s: candidate(s)["spec"].update(historyFingerprint="sha256:" + "0" * 64),
        plans.MIGRATION_PLAN_NOT_REBUILT,
        "spec.historyFingerprint",
    ),
    Row(
        "no reading recorded", status(history=None), plans.MIGRATION_PLAN_NOT_REBUILT, "no history"
    ),
    Row(
        "no artifact recorded", status(artifact=None), plans.MIGRATION_PLAN_NOT_REBUILT, "artifact"
    ),
    Row(
        "a runner protocol spelled as a string",
        lambda s: candidate(s)["spec"].update(runnerProtocolVersion="5"),
        plans.MIGRATION_PLAN_NOT_REBUILT,
        "spec.runnerProtocolVersion",
    ),
    Row(
        "a state version spelled as a float",
        lambda s: candidate(s)["spec"].update(controllerStateVersion=3.0),
        plans.MIGRATION_PLAN_NOT_REBUILT,
        "spec.controllerStateVersion",
    ),
    Row(
        "a migration digest swapped",
        lambda s: candidate(s)["spec"]["migrations"][0].update(digest="sha256:" + "0" * 64),
        plans.MIGRATION_PLAN_NOT_REBUILT,
    ),
    Row("a migration being deleted", stored("PtahMigration", deleting), objects.OWNER_DELETING),
]


@pytest.mark.parametrize("row", MIGRATION_PLAN_ROWS, ids=str)
def test_a_migration_plan_is_only_the_recorded_readings_rebuild(row: Row) -> None:
    expect(row, migration_plan_create())


CHUNK_ROWS = [
    Row("a chunk of the plan being published", unchanged, None),
    Row("the same chunk as a dry run", lambda s: setattr(s, "dry_run", True), None),
    Row("no active Plan claim", status(active_operation=None), plans.CHUNK_NOT_PUBLISHING),
    Row("a Plan claim with no Job recorded", claim(job_uid=None), plans.CHUNK_NOT_PUBLISHING),
    Row("an Apply claim", claim(type="Apply"), plans.CHUNK_NOT_PUBLISHING),
    Row(
        "a binding rotated since the plan",
        status(execution_binding=BINDING.model_copy(update={"epoch": OTHER_EPOCH})),
        plans.CHUNK_NOT_PUBLISHING,
    ),
    Row("a plan being deleted", stored("PtahSchemaPlan", deleting), objects.OWNER_DELETING),
    Row("a plan that is gone", remove("PtahSchemaPlan"), objects.OWNER_MISSING, "plan chunk"),
    Row(
        "a plan bound to another schema",
        stored("PtahSchemaPlan", lambda o: o["spec"]["schemaRef"].update(uid="other")),
        plans.CHUNK_PLAN_NOT_BOUND,
    ),
    Row(
        "a name the plan does not list",
        lambda s: candidate(s)["metadata"].update(name="ptah-plan-x-000"),
        plans.CHUNK_NOT_LISTED,
    ),
    Row(
        "another index",
        lambda s: candidate(s)["spec"].update(index=1),
        plans.CHUNK_NOT_LISTED,
        "at index 1",
    ),
    Row(
        "other bytes",
        lambda s: candidate(s)["spec"].update(data=base64.b64encode(b"DROP TABLE a;").decode()),
        plans.CHUNK_NOT_BUILT,
        "holds 13 bytes",
    ),
    Row(
        "data that is not base64",
        lambda s: candidate(s)["spec"].update(data="%%%"),
        plans.CHUNK_NOT_BUILT,
        "not base64",
    ),
    Row(
        "another recorded digest",
        lambda s: candidate(s)["spec"].update(digest="sha256:" + "0" * 64),
        plans.CHUNK_NOT_BUILT,
        "spec.digest",
    ),
    Row(
        "a size spelled as a string",
        lambda s: candidate(s)["spec"].update(size=str(candidate(s)["spec"]["size"])),
        plans.CHUNK_NOT_BUILT,
        "spec.size",
    ),
    Row(
        "an index spelled as a float",
        lambda s: candidate(s)["spec"].update(index=0.0),
        plans.CHUNK_NOT_BUILT,
        "spec.index",
    ),
    Row(
        "a reference to another plan",
        lambda s: candidate(s)["spec"]["planRef"].update(uid="other"),
        plans.CHUNK_NOT_BUILT,
        "spec.planRef",
    ),
    Row(
        "an extra label",
        lambda s: candidate(s)["metadata"]["labels"].update(extra="1"),
        plans.CHUNK_NOT_BUILT,
        "metadata",
    ),
]


@pytest.mark.parametrize("row", CHUNK_ROWS, ids=str)
def test_a_plan_chunk_holds_only_the_bytes_its_publishing_plan_recorded(row: Row) -> None:
    expect(row, plan_chunk_create())


def test_every_chunk_of_a_publishing_plan_is_admitted() -> None:
    expect(Row("the second chunk", unchanged, None), plan_chunk_create(1))
