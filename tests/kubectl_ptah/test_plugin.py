"""``kubectl ptah`` over the API double: what a reviewer is shown, and what is created.

Admission's stamp is not here (the double runs no webhook): the real API server test
(tests/realapi/test_approvals.py) shows the stamp a person's approval gets.
"""

from __future__ import annotations

import io
import json

import pytest

from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPROOFSETTLEMENTS,
    PTAHSCHEMAS,
    ApiClient,
    Object,
)
from kubectl_ptah import main
from tests.kubectl_ptah.plans import DESTRUCTIVE_PLAN
from tests.support.claimworld import EPOCH
from tests.support.dispatchworld import NS, Rig, add_migration, add_schema, make_rig


def run(api: ApiClient, *argv: str, stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    code = main(
        ["-n", NS, *argv], connector=lambda _args: api, stdin=io.StringIO(stdin), stdout=out
    )
    return code, out.getvalue()


@pytest.fixture
def rig() -> Rig:
    world = make_rig()
    add_schema(world, approve=False, chunks=DESTRUCTIVE_PLAN)
    return world


def test_the_plan_is_shown_statement_by_statement_with_its_flags(rig: Rig) -> None:
    code, text = run(rig.api, "plan", "schema", "orders")
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == f"PtahSchema {NS}/orders"
    assert "  statements:   3 (1 destructive, 1 privilege; severity by kubectl-ptah)" in lines
    assert any(line.startswith("  fingerprint:  sha256:") for line in lines)
    assert "PostgreSQL, coordinationKey orders-primary" in text
    assert "  1  safe        CREATE TABLE orders_v2 (id bigint PRIMARY KEY, note text " in text
    assert "  2  DESTRUCTIVE DROP TABLE orders_legacy;" in lines
    assert "  3  PRIVILEGE   GRANT SELECT ON orders_v2 TO reporting;" in lines
    # Each flag says what PostgreSQL's parse tree shows, beneath its statement.
    assert lines[lines.index("  2  DESTRUCTIVE DROP TABLE orders_legacy;") + 1] == (
        "                 -- parser: drops a table"
    )
    assert "                 -- parser: grants privileges" in lines


def test_json_for_tools(rig: Rig) -> None:
    code, text = run(rig.api, "-o", "json", "plan", "schema", "orders")
    assert code == 0
    view = json.loads(text)
    assert view["destructive"] is True
    assert [(s["severity"], s["destructive"], s["privilege"]) for s in view["statements"]] == [
        ("safe", False, False),
        ("destructive", True, False),
        ("privilege", False, True),
    ]
    schema = rig.api.get(PTAHSCHEMAS, NS, "orders")
    assert view["fingerprint"] == schema["status"]["plan"]["fingerprint"]
    assert view["plan"]["uid"] == schema["status"]["plan"]["uid"]


def created(obj: Object) -> Object:
    """What the client sent: the server adds a name, a UID, times and versions."""
    meta = obj["metadata"]
    sent = {k: meta[k] for k in ("generateName", "namespace")}
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": sent,
        **{k: obj[k] for k in obj if k not in ("apiVersion", "kind", "metadata")},
    }


def test_approve_creates_the_approval_of_exactly_the_plan_shown(rig: Rig) -> None:
    code, text = run(rig.api, "approve", "schema", "orders", stdin="y\n")
    assert code == 0, text
    assert "approve plan ptah-plan-" in text
    (approval,) = rig.api.list(PTAHSCHEMAAPPROVALS, NS)
    schema = rig.api.get(PTAHSCHEMAS, NS, "orders")
    plan = schema["status"]["plan"]
    # Exactly this, and nobody's name: admission writes the approver and the time.
    assert created(approval) == {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahSchemaApproval",
        "metadata": {"generateName": "orders-approval-", "namespace": NS},
        "spec": {
            "schemaRef": {"name": "orders", "uid": schema["metadata"]["uid"]},
            "planRef": {"name": plan["name"], "uid": plan["uid"]},
            "planFingerprint": plan["fingerprint"],
            "executionBindingID": plan["executionBindingID"],
        },
    }


def test_approve_creates_the_migration_approval_with_its_history(rig: Rig) -> None:
    add_migration(rig)
    code, text = run(rig.api, "approve", "migration", "billing", "--yes")
    assert code == 0, text
    (approval,) = [
        a
        for a in rig.api.list(PTAHMIGRATIONAPPROVALS, NS)
        if a["metadata"]["name"] != "billing-approval"  # the one add_migration seeds
    ]
    migration = rig.api.get(PTAHMIGRATIONS, NS, "billing")
    ref = migration["status"]["plan"]
    plan = rig.api.get(PTAHMIGRATIONPLANS, NS, ref["name"])["spec"]
    assert created(approval) == {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahMigrationApproval",
        "metadata": {"generateName": "billing-approval-", "namespace": NS},
        "spec": {
            "migrationRef": {"name": "billing", "uid": migration["metadata"]["uid"]},
            "planRef": ref,
            "planFingerprint": plan["fingerprint"],
            "historyFingerprint": plan["historyFingerprint"],
            "executionBindingID": plan["executionBindingID"],
        },
    }


def test_acknowledge_creates_exactly_the_acknowledgment_of_the_run(rig: Rig) -> None:
    add_migration(rig)
    stored = rig.api.get(PTAHMIGRATIONS, NS, "billing")
    unresolved = {
        "outcome": "Unknown",
        "operationID": "op-7",
        "jobName": "ptah-apply-billing-7",
        "recordedAt": "2026-12-02T12:00:00Z",
    }
    rig.api.patch_status(
        PTAHMIGRATIONS,
        NS,
        "billing",
        {**stored["status"], "unresolvedRun": unresolved},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    code, text = run(rig.api, "acknowledge", "migration", "billing", "--yes")
    assert code == 0, text
    (made,) = rig.api.list(PTAHMIGRATIONRUNACKNOWLEDGMENTS, NS)
    assert created(made) == {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahMigrationRunAcknowledgment",
        "metadata": {"generateName": "billing-", "namespace": NS},
        "spec": {
            "migrationRef": {"name": "billing", "uid": stored["metadata"]["uid"]},
            "operationID": "op-7",
        },
    }


def test_settle_creates_exactly_the_settlement_of_the_proof(rig: Rig) -> None:
    stored = rig.api.get(PTAHSCHEMAS, NS, "orders")
    pending = {
        "outcome": "OutcomeUnknown",
        "applyOperationID": "op-9",
        "applyJobName": "ptah-apply-orders-9",
        "coordinationDigest": "sha256:" + "c" * 64,
        "leaseDurationSeconds": 60,
        "leaseEpoch": EPOCH,
    }
    rig.api.patch_status(
        PTAHSCHEMAS,
        NS,
        "orders",
        {**stored["status"], "pendingObservation": pending},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    argv = ("settle", "schema", "orders", "--reason", "restored elsewhere", "--yes")
    code, text = run(rig.api, *argv)
    assert code == 0, text
    (made,) = rig.api.list(PTAHSCHEMAPROOFSETTLEMENTS, NS)
    assert created(made) == {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahSchemaProofSettlement",
        "metadata": {"generateName": "orders-", "namespace": NS},
        "spec": {
            "schemaRef": {"name": "orders", "uid": stored["metadata"]["uid"]},
            "applyOperationID": "op-9",
            "reason": "restored elsewhere",
        },
    }


def test_not_confirming_creates_nothing(rig: Rig) -> None:
    code, _ = run(rig.api, "approve", "schema", "orders", stdin="n\n")
    assert code == 1
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


def test_a_plan_that_moved_since_it_was_shown_is_not_approved(rig: Rig) -> None:
    code, _ = run(
        rig.api, "approve", "schema", "orders", "--yes", "--fingerprint", "sha256:" + "0" * 64
    )
    assert code == 1
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


def test_a_plan_replaced_while_the_person_read_it_is_not_approved(rig: Rig) -> None:
    class Replacing(io.StringIO):
        """Answers "y", and meanwhile a new plan is published."""

        def readline(self, size: int | None = -1) -> str:
            stored = rig.api.get(PTAHSCHEMAS, NS, "orders")
            status = stored["status"]
            status["plan"] = {**status["plan"], "fingerprint": "sha256:" + "9" * 64}
            rig.api.patch_status(
                PTAHSCHEMAS,
                NS,
                "orders",
                status,
                resource_version=stored["metadata"]["resourceVersion"],
            )
            return "y\n"

    out = io.StringIO()
    code = main(
        ["-n", NS, "approve", "schema", "orders"],
        connector=lambda _args: rig.api,
        stdin=Replacing(),
        stdout=out,
    )
    assert code == 1
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


def test_a_chunk_that_is_not_the_plans_is_never_shown(rig: Rig) -> None:
    (chunk, *_) = rig.api.list(PTAHSCHEMAPLANCHUNKS, NS)
    rig.api.delete(PTAHSCHEMAPLANCHUNKS, NS, chunk["metadata"]["name"])
    code, text = run(rig.api, "plan", "schema", "orders")
    assert code == 1 and text == ""


# (row, a status field written beside the claim, what status then shows): each alert's
# runbook (docs/runbooks.md) confirms its state with `kubectl ptah status`, so every
# record an alert counts is shown there. The control shows the claim and nothing owed.
RELEASE = {
    "coordinationDigest": "sha256:" + "c" * 64,
    "leaseEpoch": EPOCH,
    "operationID": "op-3",
}
FAILURE = {
    "operation": "Observe",
    "message": "connection refused",
    "failures": 3,
    "failedAt": "2026-12-02T12:00:00Z",
    "retryNotBefore": "2026-12-02T12:08:00Z",
}
STATUS_ROWS: list[tuple[str, dict[str, object], str | None]] = [
    ("control: a claim, nothing owed", {}, None),
    ("a release owed (PtahLockReleaseOwed)", {"pendingLockRelease": RELEASE}, "pendingLockRelease"),
    ("a reading failing (PtahProofCannotFinish)", {"readingFailure": FAILURE}, "readingFailure"),
    (
        "the next interval's time (PtahResourcesOverdue)",
        {"nextReconciliationTime": "2026-12-02T13:00:00Z"},
        "nextReconciliationTime",
    ),
]


@pytest.mark.parametrize(("row", "written", "shown"), STATUS_ROWS, ids=[r[0] for r in STATUS_ROWS])
def test_status_shows_what_each_runbook_confirms(
    row: str, written: dict[str, object], shown: str | None
) -> None:
    world = make_rig()
    key = add_migration(world)
    world.reconciler.process(key)  # the Apply is claimed
    stored = world.api.get(PTAHMIGRATIONS, NS, key.name)
    world.api.patch_status(
        PTAHMIGRATIONS,
        NS,
        key.name,
        {**stored["status"], **written},
        resource_version=stored["metadata"]["resourceVersion"],
    )
    code, text = run(world.api, "-o", "json", "status", "migration", key.name)
    assert code == 0, text
    found = json.loads(text)
    claim = stored["status"]["activeOperation"]
    # The claim with its deadlines: a claim past them is what PtahClaimStuck pages for.
    assert found["claim"]["type"] == "Apply"
    assert found["claim"]["dispatchNotAfter"] == claim["dispatchNotAfter"]
    assert found["claim"]["startedAt"] == claim["startedAt"]
    owed = {"pendingLockRelease", "readingFailure", "nextReconciliationTime"} & set(found)
    assert owed == ({shown} if shown else set())
    if shown:
        assert found[shown] == written[shown]
