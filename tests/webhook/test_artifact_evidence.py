"""The artifact is the readings' word, not the manager's (issue 31).

A stolen manager identity can write status. Without these rules it could record any
digest of the spec's repository as resolved (an image nobody resolved), call it
verified, or claim a reading of another artifact than status records, and every later
Job would read that artifact by ``jobclaim.match``. Each row is such a write; the
control rows are the controller's own harvests and claims, each backed by the record
the reading's own Pod wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim import sha256_digest
from jobclaim.api import OCIArtifactAccessBinding
from runner import RUNNER_PROTOCOL_VERSION, RunnerResult
from tests.support.claimworld import JOB_UID, NOW, RESOLVED, RESOLVED_MIGRATIONS
from tests.support.webhookscenes import RUNNER_OPS, Obj, owner_world, pod_record, terminal
from tests.webhook.statuschanges import Change, both, claim_of, new, status_update
from tests.webhook.tables import Row, expect
from webhook import transitions as t

MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
PINNED = {
    "schema": OCIArtifactAccessBinding(
        reference="registry.example.com/shop/orders-schema@sha256:" + "7" * 64,
        digest="sha256:" + "7" * 64,
        media_type=MEDIA_TYPE,
        size=1234,
    ),
    "migration": OCIArtifactAccessBinding(
        reference="registry.example.com/shop/billing-migrations@sha256:" + "8" * 64,
        digest="sha256:" + "8" * 64,
        media_type=MEDIA_TYPE,
        size=1234,
    ),
}
ARTIFACT_FIELD = {"schema": "source", "migration": "artifact"}
POLICY = sha256_digest(b'{"requireSignature": true}')
OTHER = "sha256:" + "9" * 64


def _family(obj: Obj) -> str:
    return "schema" if obj["kind"] == "PtahSchema" else "migration"


def recorded(operation: str, section: Obj, *, job: bool = True, record: bool = True) -> Change:
    """The old claim's reading ran: its Job, Complete, and the record its Pod wrote of
    ``section`` (the result's operation section)."""

    def apply(scene: Any) -> None:
        assert scene.old is not None
        claim = claim_of(scene.old)
        built = terminal(owner_world(_family(scene.old), operation).stored)
        result = RunnerResult.from_wire(
            {
                "protocolVersion": RUNNER_PROTOCOL_VERSION,
                "operation": RUNNER_OPS[operation],
                "operationId": claim["id"],
                "childExitCode": 0,
                **section,
            }
        )
        if job:
            scene.objects.append(built)
        if record:
            scene.objects.append(pod_record(built, result))

    return apply


def resolved(pinned: OCIArtifactAccessBinding) -> Obj:
    return {
        "resolve": {
            "resolvedDigest": pinned.digest,
            "resolvedReference": pinned.reference,
            "resolvedMediaType": pinned.media_type,
            "resolvedSize": pinned.size,
        }
    }


def verified_under(policy: str) -> Obj:
    return {"verify": {"verificationPolicyDigest": policy}}


def reading_job_uid(status: Obj) -> None:
    status["activeOperation"]["jobUID"] = JOB_UID


# -- a resolved artifact ---------------------------------------------------------------


def harvest_resolution(pinned: OCIArtifactAccessBinding | None = None) -> Change:
    """The controller's Resolve harvest: the claim retired, the artifact recorded."""

    def apply(obj: Obj) -> None:
        family = _family(obj)
        obj["status"].pop("activeOperation")
        obj["status"][ARTIFACT_FIELD[family]] = (pinned or PINNED[family]).to_wire()
        obj["status"].pop("verification", None)

    return new(apply)


def artifact_rows(family: str) -> list[Row]:
    pinned = PINNED[family]
    other = pinned.model_copy(
        update={"digest": OTHER, "reference": pinned.reference.split("@")[0] + "@" + OTHER}
    )
    return [
        Row(
            "the Resolve Pod recorded the artifact written",
            both(harvest_resolution(), recorded("Resolve", resolved(pinned))),
            None,
        ),
        Row(
            "no record of the Resolve Pod's",
            both(harvest_resolution(), recorded("Resolve", resolved(pinned), record=False)),
            t.ARTIFACT_UNATTESTED,
            "has no result record its Pod wrote",
        ),
        Row(
            "the Resolve Job has not completed",
            both(harvest_resolution(), recorded("Resolve", resolved(pinned), job=False)),
            t.ARTIFACT_UNATTESTED,
            "does not exist",
        ),
        Row(
            "another digest of the spec's repository than the Pod resolved",
            both(harvest_resolution(other), recorded("Resolve", resolved(pinned))),
            t.ARTIFACT_UNATTESTED,
            f"the Resolve record pinned {pinned.reference}",
        ),
    ]


SCHEMA_ARTIFACT_ROWS = artifact_rows("schema")
MIGRATION_ARTIFACT_ROWS = artifact_rows("migration")


@pytest.mark.parametrize(
    ("family", "row"),
    [("schema", row) for row in SCHEMA_ARTIFACT_ROWS]
    + [("migration", row) for row in MIGRATION_ARTIFACT_ROWS],
    ids=str,
)
def test_a_resolved_artifact_is_recorded_only_from_its_resolve_record(
    family: str, row: Row
) -> None:
    expect(row, status_update(family, "Resolve", reading_job_uid), "manager-state")


# -- a verification --------------------------------------------------------------------


def harvest_verification(*, digest: str | None = None, policy: str | None = POLICY) -> Change:
    """The controller's Verify harvest: the claim retired, the verification recorded."""

    def apply(obj: Obj) -> None:
        family = _family(obj)
        read = RESOLVED if family == "schema" else RESOLVED_MIGRATIONS
        obj["status"].pop("activeOperation")
        verification: Obj = {"artifactDigest": digest or read.digest, "verifiedAt": NOW}
        if policy is not None:
            verification["policyDigest"] = policy
        obj["status"]["verification"] = verification

    return new(apply)


VERIFICATION_ROWS = [
    Row(
        "the Verify Pod recorded the policy written",
        both(harvest_verification(), recorded("Verify", verified_under(POLICY))),
        None,
    ),
    Row(
        "a verification naming no policy vouches for nothing, and needs no record",
        harvest_verification(policy=None),
        None,
    ),
    Row(
        # A Verify claim's completed Job proves nothing about which artifact to pin.
        "an artifact written when the Verify reading retires",
        both(harvest_resolution(), recorded("Verify", verified_under(POLICY))),
        t.ARTIFACT_UNATTESTED,
        "no Resolve reading of it was recorded",
    ),
    Row(
        "no record of the Verify Pod's",
        both(harvest_verification(), recorded("Verify", verified_under(POLICY), record=False)),
        t.VERIFICATION_UNATTESTED,
        "has no result record its Pod wrote",
    ),
    Row(
        "another policy than the Pod checked",
        both(harvest_verification(policy=OTHER), recorded("Verify", verified_under(POLICY))),
        t.VERIFICATION_UNATTESTED,
        f"the Verify record checked policy {POLICY}",
    ),
    Row(
        "another artifact than the Verify claim read",
        both(harvest_verification(digest=OTHER), recorded("Verify", verified_under(POLICY))),
        t.VERIFICATION_UNATTESTED,
        f"the Verify reading read {RESOLVED.digest}",
    ),
]


@pytest.mark.parametrize("row", VERIFICATION_ROWS, ids=str)
def test_a_verification_is_recorded_only_from_its_verify_record(row: Row) -> None:
    expect(row, status_update("schema", "Verify", reading_job_uid), "manager-state")


# -- a new claim -------------------------------------------------------------------------


def no_claim_verified(status: Obj) -> None:
    """Before: no claim; the artifact resolved and verified under the spec's policy."""
    status.pop("activeOperation")
    status["verification"] = {
        "artifactDigest": RESOLVED.digest,
        "policyDigest": POLICY,
        "verifiedAt": NOW,
    }


def claims(operation: str) -> Change:
    """The new status holds the controller's claim of ``operation``, as it forms it."""

    def apply(scene: Any) -> None:
        assert scene.obj is not None
        world = owner_world("schema", operation)
        claim = world.resource.status.active_operation
        scene.obj["status"]["activeOperation"] = claim.to_wire()

    return apply


def recorded_before(change: Any) -> Change:
    """What status recorded before this write, as the write keeps it."""

    def apply(scene: Any) -> None:
        assert scene.old is not None and scene.obj is not None
        change(scene.old["status"])
        change(scene.obj["status"])

    return apply


def claim_source(digest: str) -> Change:
    def apply(obj: Obj) -> None:
        source = obj["status"]["activeOperation"]["source"]
        source.update(digest=digest, reference=source["reference"].split("@")[0] + "@" + digest)

    return new(apply)


CLAIM_ROWS = [
    Row("a Plan claim of the verified artifact", claims("Plan"), None),
    Row("a Resolve claim needs no verification", claims("Resolve"), None),
    Row(
        "a Verify claim of the resolved artifact, unverified yet",
        both(claims("Verify"), recorded_before(lambda s: s.pop("verification"))),
        None,
    ),
    Row(
        "a Plan claim of another digest than status records",
        both(claims("Plan"), claim_source(OTHER)),
        t.CLAIM_OFF_ARTIFACT,
        f"@{OTHER}",
    ),
    Row(
        "a Resolve claim that snapshots an artifact",
        both(
            claims("Resolve"),
            new(lambda o: o["status"]["activeOperation"].update(source=RESOLVED.to_wire())),
        ),
        t.CLAIM_OFF_ARTIFACT,
        "(none)",
    ),
    Row(
        "a Plan claim before any verification",
        both(claims("Plan"), recorded_before(lambda s: s.pop("verification"))),
        t.CLAIM_UNVERIFIED,
        "orders-schema-policy/policy.json",
    ),
    Row(
        "a Plan claim under a verification of another artifact",
        both(
            claims("Plan"),
            recorded_before(lambda s: s["verification"].update(artifactDigest=OTHER)),
        ),
        t.CLAIM_UNVERIFIED,
        RESOLVED.digest,
    ),
    Row(
        "a Plan claim under a verification naming no policy",
        both(claims("Plan"), recorded_before(lambda s: s["verification"].pop("policyDigest"))),
        t.CLAIM_UNVERIFIED,
    ),
    Row(
        "an Apply claim before any verification",
        both(claims("Apply"), recorded_before(lambda s: s.pop("verification"))),
        t.CLAIM_UNVERIFIED,
        "the Apply claim",
    ),
]


@pytest.mark.parametrize("row", CLAIM_ROWS, ids=str)
def test_a_new_claim_reads_the_recorded_artifact_verified_where_the_spec_asks(row: Row) -> None:
    expect(row, status_update("schema", "Plan", no_claim_verified), "manager-state")


def test_a_claim_kept_as_it_was_is_not_judged_again() -> None:
    # The control for the rule's scope: an unchanged claim stays, whatever was
    # recorded before the rule existed (an upgrade must not strand a claim in flight).
    scene = status_update("schema", "Plan", lambda s: s.pop("verification", None))
    row = Row("an unverified Plan claim kept", lambda scene: None, None)
    expect(row, scene, "manager-state")
