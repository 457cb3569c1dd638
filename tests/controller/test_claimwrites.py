"""Claims: the epoch rule as a table, the orphan finalizer, and every operation type of
both families claimed through the table and taken through the same sequence."""

from __future__ import annotations

from typing import Any

import pytest

from controller.pieces.targetlock import LeaseState
from controller.stages.claimwrites import epoch_update, placeholder_epoch
from jobclaim import MIGRATION_OPERATIONS, SCHEMA_OPERATIONS, lease_holder, sha256_digest
from jobclaim.api import ActiveOperationStatus
from jobclaim.apiserver import CONFIGMAPS, LEASES, PTAHMIGRATIONS, PTAHSCHEMAPLANS, PTAHSCHEMAS
from kube.fake.inmemory import matching
from tests.support.claimworld import EPOCH
from tests.support.dispatchworld import NS, add_migration, add_schema, make_rig

OLD = "v1-" + "1" * 32
NEW = "v1-" + "2" * 32


def operation(epoch: str = OLD, *, lost: bool = False) -> ActiveOperationStatus:
    return ActiveOperationStatus(
        type="Apply",
        id="sha256:" + "e" * 64,
        input_fingerprint="sha256:" + "f" * 64,
        job_name="ptah-apply-orders-0000000000000000",
        execution_binding_id=EPOCH,
        lease_epoch=epoch,
        lease_continuity_lost=lost,
    )


def held(epoch: str, *, lost: bool = False) -> LeaseState:
    return LeaseState(held=True, epoch=epoch, continuity_lost=lost, retry_after=None)


BUSY = LeaseState(held=False, epoch=None, continuity_lost=True, retry_after=30.0)

# (id, claim, what the Lease call found, dispatched, what the claim must write)
EPOCH_ROWS: list[tuple[str, ActiveOperationStatus, LeaseState, bool, dict[str, object] | None]] = [
    ("control-same-tenure", operation(), held(OLD), False, None),
    ("same-tenure-after-dispatch", operation(), held(OLD), True, None),
    ("new-tenure-before-dispatch", operation(), held(NEW, lost=True), False, {"lease_epoch": NEW}),
    ("placeholder-adopted", operation(placeholder_epoch("sha256:" + "e" * 64)),
     held(NEW, lost=True), False, {"lease_epoch": NEW}),
    ("new-tenure-after-dispatch", operation(), held(NEW, lost=True), True,
     {"lease_epoch": NEW, "lease_continuity_lost": True}),
    ("busy-before-dispatch", operation(), BUSY, False, None),
    ("busy-after-dispatch", operation(), BUSY, True, {"lease_continuity_lost": True}),
    ("busy-already-latched", operation(lost=True), BUSY, True, None),
    ("retaken-already-latched", operation(NEW, lost=True), held(NEW), True, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("claim", "state", "dispatched", "expected"),
    [row[1:] for row in EPOCH_ROWS],
    ids=[row[0] for row in EPOCH_ROWS],
)
def test_what_a_lease_answer_writes(
    claim: ActiveOperationStatus,
    state: LeaseState,
    dispatched: bool,
    expected: dict[str, object] | None,
) -> None:
    assert epoch_update(claim, state, dispatched=dispatched) == expected


def test_the_placeholder_is_a_valid_epoch_nobody_else_holds() -> None:
    epoch = placeholder_epoch("sha256:" + "ab" * 32)
    assert epoch == "v1-" + "ab" * 16


def test_a_finalizer_with_no_claim_is_removed_first() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    stored = rig.resource(key)
    rig.api.patch_metadata(
        PTAHSCHEMAS, NS, key.name, {"finalizers": ["operator.ptah.run/active-operation"]},
        resource_version=stored["metadata"]["resourceVersion"],
    )  # fmt: skip
    rig.api.clear_calls()
    stop = rig.reconcile(key)
    assert stop.reason == "a finalizer with no claim was removed"
    assert [c.verb for c in rig.api.writes()] == ["patch_metadata"]
    assert "finalizers" not in rig.resource(key)["metadata"]
    assert rig.reconcile(key).reason == "the plan awaits an approval"


def test_a_finalizer_beside_a_claim_stays() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.reconcile(key)
    rig.api.clear_calls()
    rig.reconcile(key)
    assert not [c for c in rig.api.writes() if c.verb == "patch_metadata"]


SCHEMA_READS = [op for op, info in SCHEMA_OPERATIONS.items() if info.read_only]
MIGRATION_READS = [op for op, info in MIGRATION_OPERATIONS.items() if info.read_only]
READ_ROWS = [("schema", op) for op in SCHEMA_READS] + [("migration", op) for op in MIGRATION_READS]


@pytest.mark.parametrize(("family", "op"), READ_ROWS, ids=[f"{f}-{o}" for f, o in READ_ROWS])
def test_read_only_work_is_claimed_and_dispatched_through_the_same_sequence(
    family: str, op: str
) -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False) if family == "schema" else add_migration(rig)
    assert rig.reconciler.claim(key, op).reason.startswith("the claim is persisted")
    rig.settle(key)
    claim = rig.claim(key)
    (job,) = rig.jobs()
    assert claim["type"] == op and claim["jobUID"] == job["metadata"]["uid"]
    table = SCHEMA_OPERATIONS if family == "schema" else MIGRATION_OPERATIONS
    locks = table[op].holds_lock(False)
    # Only a lock-holding claim takes the Lease and marks; none spends an approval.
    assert claim["dispatchStarted"] is locks
    assert bool(rig.leases()) is locks
    assert job["metadata"]["labels"]["operator.ptah.run/operation"] == op.lower()


CLAIM_ROWS = [*READ_ROWS, ("schema", "Apply"), ("migration", "Apply")]


@pytest.mark.parametrize(("family", "op"), CLAIM_ROWS, ids=[f"{f}-{o}" for f, o in CLAIM_ROWS])
def test_a_claim_records_the_artifact_resolve_pinned_and_its_job_reads_only_that(
    family: str, op: str
) -> None:
    rig = make_rig()
    key = add_schema(rig) if family == "schema" else add_migration(rig)
    assert rig.reconciler.claim(key, op).reason.startswith("the claim is persisted")
    status = rig.resource(key)["status"]
    resolved = status["source" if family == "schema" else "artifact"]
    claim = status["activeOperation"]
    if op == "Resolve":
        # Resolve reads the reference as written: it is what pins it.
        assert "source" not in claim
        return
    assert claim["source"] == resolved
    rig.settle(key)
    (job,) = rig.jobs()
    pod = job["spec"]["template"]["spec"]
    (main,) = pod["containers"]
    references = [e["value"] for e in main["env"] if e["name"] == "PTAH_RESOLVED_REFERENCE"]
    # (A provided dev's scratch database runs its image's own entrypoint: no command.)
    pulls = [c["command"] for c in pod["initContainers"] if "pull" in c.get("command", ())]
    references += [command[3] for command in pulls]
    # What the Job reads of the artifact is the digest the claim recorded, or nothing.
    assert all(ref.endswith("@" + resolved["digest"]) for ref in references), references
    assert bool(references) is (family == "migration" or op != "Apply")


def test_an_operation_the_table_does_not_define_is_refused() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    stop = rig.reconciler.claim(key, "Vacuum")
    assert "not a schema operation" in str(stop.error)
    assert "activeOperation" not in rig.resource(key)["status"]


def test_asking_for_an_apply_is_no_way_around_the_approval() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    stop = rig.reconciler.claim(key, "Apply")
    assert stop.reason == "the plan awaits an approval"
    assert "activeOperation" not in rig.resource(key)["status"]
    assert rig.job_creates() == 0


def test_a_claim_whose_binding_moved_is_retired_and_releases_its_realm() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.reconcile(key)  # claimed
    rig.reconcile(key)  # lease taken, staged, snapshot resolved
    rig.api.delete(PTAHSCHEMAPLANS, NS, rig.resource(key)["status"]["plan"]["name"])
    stop = rig.reconcile(key)
    assert stop.reason.startswith("the claim was retired: plan")
    status = rig.resource(key)["status"]
    assert "activeOperation" not in status and "plan" not in status
    assert "pendingLockRelease" not in status
    (lease,) = rig.leases()
    assert lease["spec"]["holderIdentity"] == ""
    assert rig.job_creates() == 0


def test_a_failed_release_stays_staged_for_the_next_pass() -> None:
    rig = make_rig()
    key = add_schema(rig)
    rig.reconcile(key)
    rig.reconcile(key)
    uid = rig.resource(key)["metadata"]["uid"]
    claim = rig.claim(key)
    rig.api.patch_spec(PTAHSCHEMAS, NS, key.name, {"suspend": True})
    rig.api.fail_before_write(matching("replace", LEASES))
    stop = rig.reconcile(key)
    assert stop.reason == "the claim was retired: the schema is suspended"
    assert rig.resource(key)["status"]["pendingLockRelease"]["leaseEpoch"] == claim["leaseEpoch"]
    assert rig.leases()[0]["spec"]["holderIdentity"] == lease_holder(uid, claim["id"])
    assert rig.reconcile(key).reason == "the owed release is done"
    assert "pendingLockRelease" not in rig.resource(key)["status"]
    assert rig.leases()[0]["spec"]["holderIdentity"] == ""


# What persisting a claim writes, per type: a claim that holds the realm takes the
# finalizer first and writes its snapshot later, after its Lease; a reading without a
# Lease owes no outcome and no release, so it takes no finalizer, and its snapshot
# (its dispatch's first durable write) rides in the claim's own status patch.
CLAIM_WRITE_ROWS = [
    ("schema", "Plan", ["patch_metadata", "patch_status"], False),
    ("schema", "Observe", ["patch_status"], True),
    ("schema", "Resolve", ["patch_status"], True),
    ("schema", "Verify", ["patch_status"], True),
    ("migration", "Resolve", ["patch_status"], True),
    ("migration", "Verify", ["patch_status"], True),
    ("migration", "History", ["patch_status"], True),
]


@pytest.mark.parametrize(
    ("family", "op", "writes", "snapshot"),
    CLAIM_WRITE_ROWS,
    ids=[f"{f}-{o}" for f, o, _, _ in CLAIM_WRITE_ROWS],
)
def test_what_persisting_a_claim_writes(
    family: str, op: str, writes: list[str], snapshot: bool
) -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False) if family == "schema" else add_migration(rig)
    rig.api.clear_calls()
    assert rig.reconciler.claim(key, op).reason.startswith("the claim is persisted")
    assert [c.verb for c in rig.api.writes()] == writes
    stored = rig.resource(key)
    assert bool(stored["metadata"].get("finalizers")) is (writes[0] == "patch_metadata")
    assert ("admissionSnapshot" in rig.claim(key)) is snapshot
    rig.api.clear_calls()
    rig.settle(key)
    # Dispatched either way; a claim carrying its snapshot writes no second one.
    (job,) = rig.jobs()
    assert rig.claim(key)["jobUID"] == job["metadata"]["uid"]
    assert "AdmissionResolved" in rig.sink.reasons(key.name)
    if snapshot:
        assert rig.sink.reasons(key.name).count("AdmissionResolved") == 1


def test_a_reading_without_a_lease_leaves_nothing_holding_deletion() -> None:
    rig = make_rig()
    key = add_schema(rig, approve=False)
    rig.reconciler.claim(key, "Observe")
    rig.settle(key)
    assert rig.claim(key)["jobUID"]
    rig.api.delete(PTAHSCHEMAS, NS, key.name)
    # No finalizer: the resource goes at once, and its Job is the owner's to collect.
    assert rig.api.peek(PTAHSCHEMAS, NS, key.name) is None


# -- the registry CA bundle a claim pins (transport.caFrom) ------------------------------

CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def with_ca(rig: Any, key: Any, *, config_map: dict[str, str] | None) -> None:
    """The migration's source names a CA bundle; ``config_map`` is its data, or None for
    no ConfigMap at all."""
    stored = rig.resource(key)
    artifact = {
        **stored["spec"]["artifact"],
        "transport": {"caFrom": {"name": "ca", "key": "ca.pem"}},
    }
    rig.api.patch_spec(PTAHMIGRATIONS, NS, key.name, {"artifact": artifact})
    if config_map is not None:
        rig.api.create(
            CONFIGMAPS, NS, {"metadata": {"name": "ca", "namespace": NS}, "data": config_map}
        )


CA_ROWS: list[tuple[str, dict[str, str] | None, str | None]] = [
    ("the bundle is there", {"ca.pem": CA_PEM}, None),
    ("no ConfigMap", None, "the registry CA ConfigMap ca does not exist"),
    ("no such key", {"other.pem": CA_PEM}, "the registry CA ConfigMap ca holds no ca.pem"),
    ("an empty key", {"ca.pem": "  \n"}, "the registry CA ConfigMap ca holds no ca.pem"),
]


@pytest.mark.parametrize(
    ("config_map", "refusal"), [r[1:] for r in CA_ROWS], ids=[r[0] for r in CA_ROWS]
)
def test_a_claim_that_reaches_the_registry_pins_its_ca_bundle(
    config_map: dict[str, str] | None, refusal: str | None
) -> None:
    rig = make_rig()
    key = add_migration(rig)
    with_ca(rig, key, config_map=config_map)
    stop = rig.reconciler.claim(key, "Resolve")
    if refusal is not None:
        # No claim without the pin: nothing runs trusting a bundle nobody pinned.
        assert stop.reason == "the claim could not be made"
        assert str(stop.error) == refusal
        assert rig.claim(key) == {}
        return
    assert stop.reason.startswith("the claim is persisted")
    assert rig.claim(key)["registryCADigest"] == sha256_digest(CA_PEM.encode())
    rig.settle(key)
    (job,) = rig.jobs()
    (runner,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in runner["env"]}
    assert env["PTAH_EXPECTED_OCI_CA_DIGEST"] == sha256_digest(CA_PEM.encode())


def test_a_pass_that_would_claim_without_the_bundle_stops_and_says_why() -> None:
    rig = make_rig()
    key = add_migration(rig)
    with_ca(rig, key, config_map=None)
    # The changed spec asks for a new Resolve; without the bundle no claim is made.
    stop = rig.reconcile(key)
    assert (stop.reason, str(stop.error)) == (
        "the pass could not finish",
        "the registry CA ConfigMap ca does not exist",
    )
    assert rig.claim(key) == {} and rig.jobs() == []
