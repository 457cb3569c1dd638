"""Job CREATE judged by what the manager cannot write (issue 21), in process.

Each row is one thing a stolen manager identity can do with its status and RBAC:
point the claim at another Secret, re-seal the binding over another image, run a
second attempt, drop a pending proof and run again, record a DROP TABLE plan as
harmless, hold no approval, hold one spent by another claim. The control row (the
manager's real Apply) comes first. tests/realapi/test_attacks.py runs the same
attacks through a real API server as the manager's own identity.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from jobclaim import sha256_digest
from jobclaim.api import DatabaseTargetSpec, ScratchImages
from jobclaim.api.migration import UnresolvedMigrationRunStatus
from jobclaim.api.schema import PendingObservationStatus
from tests.support.claimworld import NOW
from tests.support.webhookscenes import (
    Obj,
    Scene,
    change_owner,
    decide,
    job_create,
    with_claim,
    with_status,
)
from tests.webhook.tables import Row, expect, unchanged
from webhook import Engine, Settings, StateReader
from webhook import jobauthority as a


def claim(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_claim(owner, **changes))


def status(**changes: Any) -> Any:
    return lambda scene: change_owner(scene, lambda owner: with_status(owner, **changes))


def binding(**changes: Any) -> Any:
    def change(owner: Any) -> Any:
        forged = owner.status.execution_binding.model_copy(update=changes)
        return with_status(owner, execution_binding=forged)

    return lambda scene: change_owner(scene, change)


def another_secret(owner: Any) -> Any:
    target = owner.spec.target.to_wire()
    target["urlFrom"]["key"] = "admin-url"
    return with_claim(owner, target=DatabaseTargetSpec.model_validate(target))


def approval(change: Any) -> Any:
    def apply(scene: Scene) -> None:
        for obj in scene.objects:
            if obj["kind"].endswith("Approval"):
                change(obj)

    return apply


def destructive_bytes(scene: Scene) -> None:
    """The plan's first chunk holds DROP TABLE; the plan records it harmless."""
    data = b"DROP TABLE orders;\n"
    for obj in scene.objects:
        if obj["kind"] == "PtahSchemaPlan":
            chunk = obj["spec"]["chunks"][0]
            chunk.update(digest=sha256_digest(data), size=len(data))
            obj["spec"]["destructive"] = False
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-000"):
            obj["binaryData"]["chunk"] = base64.b64encode(data).decode()


def binary_bytes(scene: Scene) -> None:
    data = b"\xff\xfe not text"
    for obj in scene.objects:
        if obj["kind"] == "PtahSchemaPlan":
            obj["spec"]["chunks"][0].update(digest=sha256_digest(data), size=len(data))
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-000"):
            obj["binaryData"]["chunk"] = base64.b64encode(data).decode()


def granting_bytes(scene: Scene) -> None:
    data = b"GRANT ALL ON ALL TABLES IN SCHEMA public TO mallory;\n"
    for obj in scene.objects:
        if obj["kind"] == "PtahSchemaPlan":
            obj["spec"]["chunks"][0].update(digest=sha256_digest(data), size=len(data))
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"].endswith("-000"):
            obj["binaryData"]["chunk"] = base64.b64encode(data).decode()


def pending_proof(owner: Any) -> Any:
    pending = PendingObservationStatus(
        outcome="OutcomeUnknown",
        apply_operation_id="earlier-apply",
        apply_job_name="ptah-apply-orders-earlier",
        coordination_digest=sha256_digest(b"coordination"),
        lease_duration_seconds=60,
        lease_epoch="v1-" + "e" * 32,
    )
    return with_status(owner, pending_observation=pending)


def never(owner: Any) -> Any:
    """The owner's spec says nothing is applied; the claim still holds its approval."""
    policy = owner.spec.policy.model_copy(update={"apply": "Never"})
    return owner.model_copy(update={"spec": owner.spec.model_copy(update={"policy": policy})})


def no_approval_held(owner: Any) -> Any:
    return with_status(owner, plan=owner.status.plan.model_copy(update={"approval": None}))


SCHEMA_ROWS = [
    Row("the manager's own Apply, approved and spent by its claim", unchanged, None),
    Row(
        "the claim points at another key of the Secret",
        lambda s: change_owner(s, another_secret),
        a.TARGET_NOT_SPEC,
    ),
    Row(
        "the claim's coordination digest is another database's",
        claim(coordination_digest="sha256:" + "7" * 64),
        a.COORDINATION_NOT_SPEC,
    ),
    Row(
        "the binding re-sealed over an executor from another registry",
        binding(executor_image="evil.example.com/ptah@sha256:" + "6" * 64),
        a.EXECUTOR_NOT_PINNED,
        "evil.example.com",
    ),
    Row(
        "the binding names another ptah version",
        binding(ptah_version="0.0.1"),
        a.VERSION_NOT_PINNED,
    ),
    Row(
        "the binding re-sealed over a scratch image from another registry",
        binding(scratch_images=ScratchImages(mysql="evil.example.com/db@sha256:" + "6" * 64)),
        a.SCRATCH_NOT_PINNED,
        "mysql evil.example.com/db@sha256:",
    ),
    Row(
        "the binding re-sealed without the chart's scratch images",
        binding(scratch_images=None),
        a.SCRATCH_NOT_PINNED,
        "(none)",
    ),
    Row(
        "the Job records another manager image",
        lambda s: _annotate(
            s, "operator.ptah.run/controller-image", "evil.example.com/m@sha256:" + "5" * 64
        ),
        a.MANAGER_NOT_PINNED,
    ),
    Row("a second attempt of the mutating claim", claim(attempt=2), a.SECOND_ATTEMPT, "attempt 2"),
    Row(
        "an approved Apply under policy.apply Never",
        lambda s: change_owner(s, never),
        a.APPLY_NEVER,
        "PtahSchema",
    ),
    Row(
        "an Apply while an earlier Apply's proof is owed",
        lambda s: change_owner(s, pending_proof),
        a.EARLIER_APPLY,
        "ptah-apply-orders-earlier",
    ),
    Row(
        "a DROP TABLE plan recorded non-destructive",
        destructive_bytes,
        a.PLAN_UNDERSTATED,
        "DROP TABLE",
    ),
    Row(
        "a GRANT ALL plan recorded without privilege changes",
        granting_bytes,
        a.PLAN_UNDERSTATED,
        "GRANT ALL",
    ),
    Row("a plan whose bytes are not text", binary_bytes, a.PLAN_UNREADABLE, "UTF-8"),
    Row("an Apply holding no approval", lambda s: change_owner(s, no_approval_held), a.NO_APPROVAL),
    Row(
        "the approval it holds was deleted",
        lambda s: setattr(
            s, "objects", [o for o in s.objects if not o["kind"].endswith("Approval")]
        ),
        a.APPROVAL_MISSING,
    ),
    Row(
        "the approval names another plan fingerprint",
        approval(lambda o: o["spec"].update(planFingerprint="sha256:" + "4" * 64)),
        a.APPROVAL_NOT_FOR_PLAN,
        "another plan fingerprint",
    ),
    Row(
        "the approval carries no admission stamp",
        approval(lambda o: o["spec"].pop("approvedAt")),
        a.APPROVAL_NOT_FOR_PLAN,
        "no admission stamp",
    ),
    Row(
        "the approval was spent by another claim",
        approval(lambda o: o["status"].update(consumedBy="another-claim")),
        a.APPROVAL_NOT_SPENT,
        "another-claim",
    ),
    Row(
        "the approval was never spent",
        approval(lambda o: o.update(status={})),
        a.APPROVAL_NOT_SPENT,
        "not consumed",
    ),
    Row(
        "the approval already names the Job it ran (gone since, by its TTL)",
        approval(lambda o: o["status"].update(consumedJob={"name": "ptah-apply-x", "uid": "u-1"})),
        a.APPROVAL_RAN,
        "already authorized Job ptah-apply-x (u-1)",
    ),
]


def _annotate(scene: Scene, key: str, value: str) -> None:
    job: Obj | None = scene.obj
    assert job is not None
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        meta["annotations"][key] = value


@pytest.mark.parametrize("row", SCHEMA_ROWS, ids=str)
def test_a_schema_apply_is_judged_by_what_the_manager_cannot_write(row: Row) -> None:
    expect(row, job_create("schema", "Apply"))


def unresolved_run(owner: Any) -> Any:
    run = UnresolvedMigrationRunStatus(
        outcome="Unknown",
        operation_id="earlier-apply",
        job_name="ptah-apply-billing-earlier",
        recorded_at=NOW,
    )
    return with_status(owner, unresolved_run=run)


MIGRATION_ROWS = [
    Row("the manager's own migration Apply", unchanged, None),
    Row(
        "the migration claim points at another key of the Secret",
        lambda s: change_owner(s, another_secret),
        a.TARGET_NOT_SPEC,
        "PtahMigration",
    ),
    Row(
        "the migration binding re-sealed over an executor from another registry",
        binding(executor_image="evil.example.com/ptah@sha256:" + "6" * 64),
        a.EXECUTOR_NOT_PINNED,
        "evil.example.com",
    ),
    Row(
        "an approved migration Apply under policy.apply Never",
        lambda s: change_owner(s, never),
        a.APPLY_NEVER,
        "PtahMigration",
    ),
    Row(
        "a second attempt of the migration Apply",
        claim(attempt=2),
        a.SECOND_ATTEMPT,
        "attempt 2",
    ),
    Row(
        "a migration Apply while an earlier run is unresolved",
        lambda s: change_owner(s, unresolved_run),
        a.EARLIER_APPLY,
        "ptah-apply-billing-earlier",
    ),
    Row(
        "the migration approval names another plan fingerprint",
        approval(lambda o: o["spec"].update(planFingerprint="sha256:" + "4" * 64)),
        a.APPROVAL_NOT_FOR_PLAN,
        "another plan fingerprint",
    ),
    Row(
        "a migration Apply holding no approval",
        claim(approval_ref=None),
        a.NO_APPROVAL,
    ),
    Row(
        "the migration approval was spent by another claim",
        approval(lambda o: o["status"].update(consumedBy="another-claim")),
        a.APPROVAL_NOT_SPENT,
    ),
    Row(
        "the migration approval already names the Job it ran",
        approval(lambda o: o["status"].update(consumedJob={"name": "ptah-apply-x", "uid": "u-1"})),
        a.APPROVAL_RAN,
        "one approval runs one Job",
    ),
]


@pytest.mark.parametrize("row", MIGRATION_ROWS, ids=str)
def test_a_migration_apply_is_judged_by_what_the_manager_cannot_write(row: Row) -> None:
    expect(row, job_create("migration", "Apply"))


def test_a_webhook_configured_without_pins_admits_no_job() -> None:
    scene = job_create("schema", "Plan")
    engine = Engine(StateReader(scene.objects), Settings())
    try:
        decision = engine.decide("controller-write", scene.body()).decision
    finally:
        engine.close()
    assert not decision.allowed
    assert decision.message == a.NO_PINS.template
    assert decide(scene).decision.allowed  # the control: the same Job, pinned


def test_a_plan_recorded_destructive_still_runs_only_with_its_approval() -> None:
    """policy.apply Always waives the approval only for a harmless plan by the bytes."""
    scene = job_create("schema", "Apply")
    destructive_bytes(scene)
    for obj in scene.objects:
        if obj["kind"] == "PtahSchemaPlan":
            obj["spec"]["destructive"] = True
    assert decide(scene).decision.allowed
