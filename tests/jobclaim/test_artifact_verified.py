"""One rule for "the artifact is verified as the spec asks", read by the controller's
facts and by admission's claim rule alike (issue 31).

Were they to differ, a policy named after the artifact was verified without one would
leave the controller claiming an Observe that admission refuses, pass after pass,
instead of verifying again.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.stages.planning import migration_facts, schema_facts
from jobclaim import sha256_digest, verified_as_asked
from jobclaim.api import (
    ArtifactVerificationStatus,
    ConfigMapKeySelector,
    OCIArtifactAccessBinding,
    PtahMigration,
    PtahMigrationStatus,
    PtahSchema,
    PtahSchemaStatus,
)
from tests.support.claimworld import NOW, RESOLVED, RESOLVED_MIGRATIONS, example

POLICY = ConfigMapKeySelector(name="orders-schema-policy", key="policy.json")
DIGEST = sha256_digest(b"policy")
VERIFIED = ArtifactVerificationStatus(
    artifact_digest=RESOLVED.digest, policy_digest=DIGEST, verified_at=NOW
)

# (name, policy the spec names, artifact status records, verification, verified?)
ROWS: list[tuple[str, Any, Any, Any, bool]] = [
    ("control: verified under the spec's policy", POLICY, RESOLVED, VERIFIED, True),
    (
        "no policy named, verified without one",
        None,
        RESOLVED,
        VERIFIED.model_copy(update={"policy_digest": None}),
        True,
    ),
    ("no verification", POLICY, RESOLVED, None, False),
    ("no artifact resolved", POLICY, None, VERIFIED, False),
    (
        "a verification of another artifact",
        POLICY,
        RESOLVED,
        VERIFIED.model_copy(update={"artifact_digest": "sha256:" + "9" * 64}),
        False,
    ),
    (
        "a policy named, the verification made under none",
        POLICY,
        RESOLVED,
        VERIFIED.model_copy(update={"policy_digest": None}),
        False,
    ),
]


@pytest.mark.parametrize(
    ("policy", "artifact", "verification", "verified"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_verified_as_the_spec_asks(
    policy: ConfigMapKeySelector | None,
    artifact: OCIArtifactAccessBinding | None,
    verification: ArtifactVerificationStatus | None,
    verified: bool,
) -> None:
    assert verified_as_asked(policy, artifact, verification) is verified


@pytest.mark.parametrize("policy_digest", [DIGEST, None])
def test_the_controller_reads_verified_by_the_same_rule(policy_digest: str | None) -> None:
    # The example schema names a policy: verified without one, it is read again.
    schema = PtahSchema.model_validate(example("ptahschema.yaml"))
    verification = VERIFIED.model_copy(update={"policy_digest": policy_digest})
    recorded = PtahSchemaStatus(source=RESOLVED, verification=verification)
    assert schema_facts(schema, recorded, None).verified is (policy_digest is not None)


def test_a_migration_naming_no_policy_is_verified_without_one() -> None:
    migration = PtahMigration.model_validate(example("ptahmigration.yaml"))
    assert migration.spec.artifact.verification_policy_from is None
    recorded = PtahMigrationStatus(
        artifact=RESOLVED_MIGRATIONS,
        verification=ArtifactVerificationStatus(
            artifact_digest=RESOLVED_MIGRATIONS.digest, verified_at=NOW
        ),
    )
    assert migration_facts(migration, recorded).verified
