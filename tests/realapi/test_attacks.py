"""The attack table of issue 21, on the real API server, as the manager's own identity,
for both families: PtahSchema and PtahMigration.

A stolen manager identity holds exactly the manager's RBAC (the chart's ClusterRole,
which ``lab.run.grant_manager`` applies) and passes every check that asks only who
is writing. Each row below is one thing it can try with that: forge a claim in
status and create a Job for it, publish a plan nobody computed, rewrite or drop what
status remembers, change a resource's spec, switch off a webhook. Every attack is
refused with its sentence, by the webhook (registered by url and caBundle, as
``make run`` registers it), by the chart's ValidatingAdmissionPolicies (rendered by
helm and bound to this test's namespace) or by RBAC; the control rows are the writes
the real manager makes, and are admitted. Attacks on a Job are dry runs
(``dryRun=All`` still calls validating webhooks), so no row leaves a Job behind for
another row to trip over.

An Apply is staged the way the controller stages it (``tests.realapi.applystage``),
each write itself admitted, so the control rows prove the whole path.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

import pytest

from jobclaim import build_migration_plan, lease_holder, lease_name
from jobclaim.api import OCIArtifactAccessBinding, PtahMigration, PtahMigrationStatus
from jobclaim.apiserver import (
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHMIGRATIONS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    Object,
    Refused,
)
from jobclaim.naming import LEASE_EPOCH_ANNOTATION
from jobclaim.times import timestamp, utc_now
from lab import run as localrun
from tests.realapi.applystage import (
    MIGRATIONS_DIGEST,
    MIGRATIONS_REPOSITORY,
    Forged,
    Staged,
    dispatch,
    migrations,
    new_binding,
    read_migration,
    stage_apply,
    stage_migration_apply,
    status_patch,
    write_status,
)
from tests.realapi.attackstage import (  # noqa: F401
    EVIL,
    POLICIES,
    VAPB,
    Stage,
    admitted,
    as_manager,
    create_job,
    helm_fixture,
    migration_object,
    path_of,
    refused_with,
    schema_object,
    stage_fixture,
    suffix_of,
    template,
)
from tests.support.realapioperator import operator  # noqa: F401
from webhook import jobauthority as authority
from webhook import jobs, plans, transitions

pytestmark = pytest.mark.controlplane

DROP: Final = (b"CREATE TABLE orders_v2 (id bigint);\n", b"DROP TABLE orders;\n")
GRANT: Final = (b"GRANT ALL ON ALL TABLES IN SCHEMA public TO mallory;\n",)
# Migrations nobody approved, under the same versions, in the same repository.
UNAPPROVED: Final = OCIArtifactAccessBinding(
    reference=f"{MIGRATIONS_REPOSITORY}@sha256:" + "9" * 64, digest="sha256:" + "9" * 64
)
# The approved migrations' digest, pulled from a registry nobody named.
EVIL_ARTIFACT: Final = OCIArtifactAccessBinding(
    reference=f"evil.example.net/shop/billing@{MIGRATIONS_DIGEST}", digest=MIGRATIONS_DIGEST
)
STAGERS: Final[dict[str, Callable[[Stage], Staged]]] = {
    "schema": stage_apply,
    "migration": stage_migration_apply,
}
FAMILIES: Final = tuple(STAGERS)

# -- the table: Job creates ---------------------------------------------------------------

JobRow = tuple[str, dict[str, Any], Any, str]

# The same forgery of either family's Apply; ``{kind}`` in the detail is the owner's.
BOTH_JOB_ROWS: Final[list[JobRow]] = [
    (
        "the claim pointed at another key of the database Secret",
        {"forged": Forged(target_key="admin-url")},
        authority.TARGET_NOT_SPEC,
        "the {kind}'s spec.target",
    ),
    (
        "the binding re-sealed over an executor from another registry",
        {"forged": Forged(executor=EVIL)},
        authority.EXECUTOR_NOT_PINNED,
        "registry.evil.example",
    ),
    (
        "the binding re-sealed over another Ptah version",
        {"forged": Forged(ptah_version="0.0.1")},
        authority.VERSION_NOT_PINNED,
        "0.0.1",
    ),
    (
        "the Job's manager record naming a manager image from another registry",
        {"forged": Forged(manager=EVIL)},
        authority.MANAGER_NOT_PINNED,
        "registry.evil.example",
    ),
    (
        "the claim's coordination digest another database's",
        {"forged": Forged(coordination="sha256:" + "7" * 64)},
        authority.COORDINATION_NOT_SPEC,
        "the {kind}'s spec.target derives",
    ),
    (
        "a runner image from another registry",
        {"forged": Forged(runner=EVIL)},
        authority.RUNNER_NOT_PINNED,
        "registry.evil.example",
    ),
    ("an Apply with no approval", {"approve": False}, authority.NO_APPROVAL, "the {kind}'s plan"),
    (
        "an approval of another plan",
        {"approve_another_plan": True},
        authority.APPROVAL_NOT_FOR_PLAN,
        "another plan",
    ),
    (
        "an approval spent by another claim",
        {"spend_by": "another-claim"},
        authority.APPROVAL_NOT_SPENT,
        "another-claim",
    ),
    (
        "an approved Apply under policy.apply Never",
        {"policy": "Never"},
        authority.APPLY_NEVER,
        "the {kind}'s spec.policy.apply is Never",
    ),
    (
        "a second attempt of the mutating claim",
        {"attempt": 2},
        authority.SECOND_ATTEMPT,
        "attempt 2",
    ),
]

# What a keyword classifier read as harmless, recorded so; the parser's tree says why not.
PARSED_ROWS: Final[list[JobRow]] = [
    (
        f"a plan that {finding.split(' (')[0]}, recorded harmless",
        {"statements": (sql.encode(),)},
        authority.PLAN_UNDERSTATED,
        finding,
    )
    for sql, finding in [
        ("DO $$ BEGIN EXECUTE 'DROP TABLE orders'; END $$;\n", "runs code (a DO block)"),
        (
            "ALTER TABLE orders ADD COLUMN note text DEFAULT '--', DROP COLUMN email;\n",
            "drops a column",
        ),
        ("EXPLAIN ANALYZE DELETE FROM orders;\n", "deletes rows"),
        ("WITH gone AS (DELETE FROM orders RETURNING *) INSERT INTO t SELECT 1;\n", "deletes"),
        (
            "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO mallory;\n",
            "changes default privileges",
        ),
        ("ALTER GROUP admins ADD USER mallory;\n", "changes a role or its members"),
        ("ALTER SCHEMA public RENAME TO old;\n", "renames a schema"),
        ("COPY orders TO PROGRAM 'sh -c true';\n", "runs a program on the database server"),
        ("UPDATE accounts SET owner = 'mallory';\n", "updates rows"),
    ]
]

JOB_ROWS: Final[list[JobRow]] = [
    (
        "an UPDATE of every row recorded destructive, under policy.apply Always, unapproved",
        {
            "statements": (b"UPDATE accounts SET owner = 'mallory';\n",),
            "destructive": True,
            "policy": "Always",
            "approve": False,
        },
        authority.NO_APPROVAL,
        "the {kind}'s plan needs an approval",
    ),
    *PARSED_ROWS,
    (
        "a DROP TABLE plan recorded non-destructive",
        {"statements": DROP},
        authority.PLAN_UNDERSTATED,
        "DROP TABLE orders",
    ),
    (
        "a GRANT ALL plan recorded without privilege changes",
        {"statements": GRANT},
        authority.PLAN_UNDERSTATED,
        "GRANT ALL",
    ),
    (
        "an Apply while an earlier Apply is unaccounted for",
        {"pending": True},
        authority.EARLIER_APPLY,
        "ptah-apply-orders-earlier",
    ),
    *BOTH_JOB_ROWS,
]

# A migration plan records no statements to understate: its Apply pulls its files from
# the claim's artifact, which the plan binds, and an unresolved run is its earlier Apply.
MIGRATION_JOB_ROWS: Final[list[JobRow]] = [
    (
        "an Apply while an earlier run is unresolved",
        {"unresolved": True},
        authority.EARLIER_APPLY,
        "ptah-apply-billing-earlier",
    ),
    *BOTH_JOB_ROWS,
]


# A claim reads the artifact a Resolve Pod recorded in status: one re-pointed elsewhere
# is refused at its write, before any Job (the Job rules refuse it too: the builder
# takes no other repository, and the plan binds the artifact it was read from).
CLAIM_ARTIFACT_ROWS: Final[list[tuple[str, dict[str, Any], str]]] = [
    (
        "the claim's artifact re-pointed at another registry, under policy.apply Always",
        {"artifact": EVIL_ARTIFACT, "policy": "Always", "approve": False},
        f"not {EVIL_ARTIFACT.reference}",
    ),
    (
        "the claim re-pointed at migrations nobody approved",
        {"artifact": UNAPPROVED},
        f"not {UNAPPROVED.reference}",
    ),
]


@pytest.mark.parametrize(
    ("name", "forged", "detail"), CLAIM_ARTIFACT_ROWS, ids=[r[0] for r in CLAIM_ARTIFACT_ROWS]
)
def test_a_migration_claim_off_its_recorded_artifact_is_refused(
    stage: Stage, name: str, forged: dict[str, Any], detail: str
) -> None:
    with pytest.raises(Refused) as refused:
        stage_migration_apply(stage, **forged)
    message = str(refused.value)
    assert template(transitions.CLAIM_OFF_ARTIFACT) in message, message
    assert detail in message, message


@pytest.mark.parametrize("family", FAMILIES)
def test_the_managers_own_apply_is_admitted(stage: Stage, family: str) -> None:
    staged = STAGERS[family](stage)
    admitted(create_job(stage, staged.job, dry_run=False))
    # ... and exactly once: the claim holds no UID yet, but its Job exists now.
    assert create_job(stage, staged.job).status_code == 409


def test_a_migration_policy_of_always_needs_no_approval(stage: Stage) -> None:
    """The control for the approval rows: the spec's policy (a person's word) waives it."""
    admitted(create_job(stage, stage_migration_apply(stage, policy="Always", approve=False).job))


def _forged(stage: Stage, staged: Staged, refusal: Any, detail: str) -> None:
    response = create_job(stage, staged.job)
    refused_with(response, template(refusal))
    message = response.json()["message"]
    assert detail.format(kind=staged.owner.kind) in message, message


@pytest.mark.parametrize(
    ("name", "forged", "refusal", "detail"), JOB_ROWS, ids=[r[0] for r in JOB_ROWS]
)
def test_a_forged_apply_is_refused(
    stage: Stage, name: str, forged: dict[str, Any], refusal: Any, detail: str
) -> None:
    _forged(stage, stage_apply(stage, **forged), refusal, detail)


@pytest.mark.parametrize(
    ("name", "forged", "refusal", "detail"),
    MIGRATION_JOB_ROWS,
    ids=[r[0] for r in MIGRATION_JOB_ROWS],
)
def test_a_forged_migration_apply_is_refused(
    stage: Stage, name: str, forged: dict[str, Any], refusal: Any, detail: str
) -> None:
    _forged(stage, stage_migration_apply(stage, **forged), refusal, detail)


def _host_root(job: Object) -> None:
    pod = job["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    pod["containers"][0]["volumeMounts"].append({"name": "host", "mountPath": "/host"})


JOB_EDITS: Final[list[tuple[str, Callable[[Object], None]]]] = [
    (
        "another service account",
        lambda job: job["spec"]["template"]["spec"].update(serviceAccountName="admin"),
    ),
    ("the node's root file system mounted", _host_root),
    (
        "another node",
        lambda job: job["spec"]["template"]["spec"].update(nodeName="a-node-with-secrets"),
    ),
]


@pytest.mark.parametrize(
    ("family", "edit"),
    [
        pytest.param(family, edit, id=f"{family}: {name}")
        for name, edit in JOB_EDITS
        for family in FAMILIES
    ],
)
def test_a_job_other_than_its_claim_builds_is_refused(
    stage: Stage, family: str, edit: Callable[[Object], None]
) -> None:
    """The claim is the controller's own; the Job submitted for it is not the one it
    builds (``jobclaim.match`` against the rebuild from spec)."""
    staged = STAGERS[family](stage)
    edit(staged.job)
    refused_with(create_job(stage, staged.job), template(jobs.OUTSIDE_INTENT))


def _foreign_ca(job: Object) -> None:
    """The fetch step told to trust a CA bundle the spec never named (so its claim
    pinned none): whoever wrote it could then answer for the registry."""
    pod = job["spec"]["template"]["spec"]
    items = [{"key": "ca.pem", "path": "ca.pem"}]
    config_map = {"name": "attacker-ca", "items": items, "defaultMode": 0o440}
    pod["volumes"].append({"name": "registry-ca", "configMap": config_map})
    fetch = pod["initContainers"][1]
    fetch["volumeMounts"].append(
        {"name": "registry-ca", "mountPath": "/registry-ca", "readOnly": True}
    )
    fetch.setdefault("env", []).append({"name": "PTAH_OCI_CA_FILE", "value": "/registry-ca/ca.pem"})


def test_a_job_trusting_a_ca_bundle_its_claim_never_pinned_is_refused(stage: Stage) -> None:
    staged = stage_migration_apply(stage)
    assert staged.job["spec"]["template"]["spec"]["initContainers"][1]["name"] == (
        "fetch-migrations"
    )
    _foreign_ca(staged.job)
    response = create_job(stage, staged.job)
    refused_with(response, template(jobs.OUTSIDE_INTENT))
    assert "the Job's spec is not the one its claim builds" in response.json()["message"]


# -- the table: plans ----------------------------------------------------------------------


def test_the_manager_cannot_publish_a_schema_plan_nobody_computed(stage: Stage) -> None:
    """A schema plan comes only from a harvested Plan Job; none stands here."""
    staged = stage_apply(stage)
    plan = stage.operator.admin.get(PTAHSCHEMAPLANS, stage.namespace, staged.owner.status.plan.name)
    forged = {k: plan[k] for k in ("apiVersion", "kind", "spec")}
    forged["metadata"] = {
        "name": plan["metadata"]["name"] + "-forged",
        "ownerReferences": plan["metadata"]["ownerReferences"],
    }
    response = as_manager(stage, "POST", path_of(PTAHSCHEMAPLANS, stage.namespace), forged)
    refused_with(response, template(plans.NOT_PUBLISHING))


def test_the_manager_publishes_only_the_migration_plan_its_reading_derives(stage: Stage) -> None:
    name = f"billing-{uuid.uuid4().hex[:8]}"
    created = PtahMigration.model_validate(
        stage.operator.admin.create(PTAHMIGRATIONS, stage.namespace, migration_object(stage, name))
    )
    bound = write_status(stage, created, PtahMigrationStatus(execution_binding=new_binding()))
    migration = read_migration(stage, bound)
    path = path_of(PTAHMIGRATIONPLANS, stage.namespace)
    # The control: the plan its recorded reading derives.
    admitted(
        as_manager(stage, "POST", path, build_migration_plan(migration, migrations=migrations()))
    )
    # The attack: the same reading over an artifact nobody verified or approved.
    assert migration.status is not None
    elsewhere = migration.model_copy(
        update={"status": migration.status.model_copy(update={"artifact": UNAPPROVED})}
    )
    forged = build_migration_plan(elsewhere, migrations=migrations())
    refused_with(
        as_manager(stage, "POST", path, forged), template(plans.MIGRATION_PLAN_NOT_REBUILT)
    )


# -- the table: what status remembers ----------------------------------------------------


@pytest.fixture(scope="module")
def dispatched(stage: Stage) -> dict[str, Staged]:
    """An Apply of each family whose Job the manager created and recorded."""
    return {family: dispatch(stage, stager(stage)) for family, stager in STAGERS.items()}


def _drop(key: str) -> Any:
    return lambda status: status.pop(key)


def _replaced(status: dict[str, Any]) -> None:
    """Another claim in the marked claim's place, with no record of the first."""
    claim = status["activeOperation"]
    claim.update(
        id="sha256:" + "f" * 64,
        jobName=claim["jobName"][:-4] + "ffff",
        jobUID=None,
        dispatchStarted=False,
    )


def _repinned(status: dict[str, Any]) -> None:
    """The resolved artifact moved to another digest of the spec's repository: an image
    no Resolve Pod recorded (one the thief pushed, or an old one)."""
    field = "source" if "source" in status else "artifact"
    pinned, digest = status[field], "sha256:" + "e" * 64
    status[field] = {
        **pinned,
        "digest": digest,
        "reference": f"{pinned['reference']}"[:-64] + "e" * 64,
    }


def _reverified(status: dict[str, Any]) -> None:
    """The verification rewritten as if checked under another policy."""
    status["verification"] = {**status["verification"], "policyDigest": "sha256:" + "d" * 64}


StatusRow = tuple[str, Any, Any, tuple[str, ...]]

STATUS_ROWS: Final[list[StatusRow]] = [
    (
        "the resolved artifact re-pinned to a digest no Resolve Pod recorded",
        _repinned,
        transitions.ARTIFACT_UNATTESTED,
        FAMILIES,
    ),
    (
        "the verification rewritten under a policy no Verify Pod checked",
        _reverified,
        transitions.VERIFICATION_UNATTESTED,
        FAMILIES,
    ),
    (
        "dispatchStarted and jobUID cleared",
        lambda s: s["activeOperation"].update(dispatchStarted=False, jobUID=None),
        transitions.JOB_UID_CHANGED,
        FAMILIES,
    ),
    (
        "the marked claim dropped without its record",
        _drop("activeOperation"),
        transitions.RETIRED_WITHOUT_RECORD,
        FAMILIES,
    ),
    (
        "the marked claim replaced by another claim without its record",
        _replaced,
        transitions.RETIRED_WITHOUT_RECORD,
        FAMILIES,
    ),
    (
        "the marked claim moved to a second attempt beside the first attempt's Job",
        lambda s: s["activeOperation"].update(
            attempt=2, jobName=s["activeOperation"]["jobName"][:-2] + "-2", jobUID=None
        ),
        transitions.CLAIM_REWRITTEN,
        FAMILIES,
    ),
    (
        "the marked claim moved to another Secret key",
        lambda s: s["activeOperation"]["target"]["urlFrom"].update(key="admin-url"),
        transitions.CLAIM_REWRITTEN,
        FAMILIES,
    ),
    (
        "the marked claim moved to another plan",
        lambda s: s["activeOperation"].update(planRef={"name": "another-plan", "uid": "x"}),
        transitions.CLAIM_REWRITTEN,
        ("migration",),
    ),
    (
        "the marked claim's approval swapped",
        lambda s: s["activeOperation"].update(approvalRef={"name": "another", "uid": "x"}),
        transitions.CLAIM_REWRITTEN,
        ("migration",),
    ),
    (
        "the marked claim re-pointed at migrations nobody approved",
        lambda s: s["activeOperation"].update(source=UNAPPROVED.to_wire()),
        transitions.CLAIM_REWRITTEN,
        ("migration",),
    ),
    (
        "the marked claim's plan record rewritten",
        lambda s: s["plan"].update(fingerprint="sha256:" + "4" * 64),
        transitions.CLAIM_REWRITTEN,
        ("schema",),
    ),
]


def _per_family(rows: list[StatusRow]) -> list[Any]:
    return [
        pytest.param(family, change, refusal, id=f"{family}: {name}")
        for name, change, refusal, families in rows
        for family in families
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_managers_own_status_write_is_admitted(
    stage: Stage, dispatched: dict[str, Staged], family: str
) -> None:
    admitted(status_patch(stage, dispatched[family], lambda s: s.update(phase="Applying")))


def _retired(family: str, staged: Staged) -> Any:
    """The retirement the lifecycle writes for a dispatched Apply of ``family``."""
    claim = staged.owner.status.active_operation
    now = timestamp(utc_now())
    if family == "schema":
        record = {
            "pendingObservation": {
                "outcome": "OutcomeUnknown",
                "applyOperationID": claim.id,
                "applyJobName": claim.job_name,
                "coordinationDigest": "sha256:" + "a" * 64,
                "leaseDurationSeconds": 60,
                "leaseEpoch": "v1-" + "e" * 32,
            }
        }
    else:
        record = {"lastRun": {"outcome": "Applied", "jobName": claim.job_name, "finishedAt": now}}

    def retire(status: dict[str, Any]) -> None:
        status.pop("activeOperation")
        status.update(record)

    return retire


@pytest.mark.parametrize("family", FAMILIES)
def test_a_dispatched_claim_retires_with_its_record(
    stage: Stage, dispatched: dict[str, Staged], family: str
) -> None:
    """The control for the rows that drop or replace a marked claim."""
    staged = dispatched[family]
    admitted(status_patch(stage, staged, _retired(family, staged)))


@pytest.mark.parametrize(("family", "change", "refusal"), _per_family(STATUS_ROWS))
def test_a_status_rewrite_is_refused(
    stage: Stage, dispatched: dict[str, Staged], family: str, change: Any, refusal: Any
) -> None:
    refused_with(status_patch(stage, dispatched[family], change), template(refusal))


def test_a_pending_observation_is_not_dropped_without_its_proof(stage: Stage) -> None:
    staged = stage_apply(stage, pending=True)
    response = status_patch(stage, staged, _drop("pendingObservation"))
    refused_with(response, template(transitions.RECORD_DROPPED))
    assert "pendingObservation" in response.json()["message"]


def _acknowledgment(staged: Staged, operation: str) -> Object:
    """A person's acknowledgment of the unresolved run, as ``kubectl ptah`` writes it."""
    meta = staged.owner.metadata
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahMigrationRunAcknowledgment",
        "metadata": {"name": f"{meta.name}-ack"},
        "spec": {
            "migrationRef": {"name": meta.name, "uid": meta.uid},
            "operationID": operation,
            "acknowledgedBy": {"username": "admin"},
            "acknowledgedAt": timestamp(utc_now()),
            "mutationRequestUID": str(uuid.uuid4()),
        },
    }


def test_an_unresolved_run_is_not_dropped_without_its_evidence(stage: Stage) -> None:
    staged = stage_migration_apply(stage, unresolved=True)
    run = staged.owner.status.unresolved_run
    now = timestamp(utc_now())

    def resolved(how: str, ack: Object | None = None) -> Any:
        def change(status: dict[str, Any]) -> None:
            status.pop("unresolvedRun")
            status["resolvedRun"] = {
                "operationID": run.operation_id,
                "outcome": run.outcome,
                "resolution": how,
                "resolvedAt": now,
                **(
                    {
                        "acknowledgmentRef": {
                            "name": ack["metadata"]["name"],
                            "uid": ack["metadata"]["uid"],
                        }
                    }
                    if ack
                    else {}
                ),
            }

        return change

    refused_with(
        status_patch(stage, staged, _drop("unresolvedRun")),
        transitions.RECORD_DROPPED.sentence(
            record="unresolvedRun",
            what=f"the run {run.operation_id}",
            why="no resolvedRun names it",
        ),
    )
    # A History reading claimed to have settled it, when none was recorded.
    response = status_patch(stage, staged, resolved("HistoryRead"))
    refused_with(response, template(transitions.RECORD_DROPPED))
    assert "no History reading of it was recorded" in response.json()["message"]
    # The control: a person's stamped acknowledgment of exactly this run settles it.
    ack = stage.operator.admin.create(
        PTAHMIGRATIONRUNACKNOWLEDGMENTS, stage.namespace, _acknowledgment(staged, run.operation_id)
    )
    admitted(status_patch(stage, staged, resolved("Acknowledged", ack)))
    # ... and one for another run does not.
    other = stage.operator.admin.create(
        PTAHMIGRATIONRUNACKNOWLEDGMENTS,
        stage.namespace,
        {**_acknowledgment(staged, "another-run"), "metadata": {"name": f"{staged.name}-other"}},
    )
    response = status_patch(stage, staged, resolved("Acknowledged", other))
    refused_with(response, template(transitions.RECORD_DROPPED))
    assert "settles another run" in response.json()["message"]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_release_is_not_dropped_while_the_lease_is_held(stage: Stage, family: str) -> None:
    staged = STAGERS[family](stage)
    uid = staged.owner.metadata.uid or ""
    digest, epoch = "sha256:" + uuid.uuid4().hex * 2, "v1-" + "d" * 32
    lease = {
        "metadata": {
            "name": lease_name(digest),
            "namespace": localrun.MANAGER_NAMESPACE,
            "annotations": {LEASE_EPOCH_ANNOTATION: epoch},
        },
        "spec": {"holderIdentity": lease_holder(uid, "an-old-claim"), "leaseDurationSeconds": 60},
    }
    stage.operator.admin.create(LEASES, localrun.MANAGER_NAMESPACE, lease)
    release = {
        "coordinationDigest": digest,
        "operationID": "an-old-claim",
        "leaseDurationSeconds": 60,
        "leaseEpoch": epoch,
    }
    admitted(
        status_patch(stage, staged, lambda s: s.update(pendingLockRelease=release), dry_run=False)
    )
    refused_with(
        status_patch(stage, staged, _drop("pendingLockRelease")),
        template(transitions.RELEASE_DROPPED),
    )
    # The control: once the Lease is handed back, the record goes.
    stage.operator.admin.patch_spec(
        LEASES, localrun.MANAGER_NAMESPACE, lease_name(digest), {"holderIdentity": ""}
    )
    admitted(status_patch(stage, staged, _drop("pendingLockRelease")))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_spent_approval_cannot_be_unspent(
    stage: Stage, dispatched: dict[str, Staged], family: str
) -> None:
    staged = dispatched[family]
    assert staged.approval is not None
    path = path_of(staged.approvals, stage.namespace, staged.approval, "status")
    refused_with(
        as_manager(stage, "PATCH", path, {"status": {"conditions": [], "consumedBy": None}}),
        template(transitions.CONSUMED_CHANGED),
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_a_release_is_not_dropped_while_a_pod_of_the_claim_may_run(
    stage: Stage, family: str
) -> None:
    """The manager may give up the realm Lease itself; the Pod the kubelet has not
    reported stopped is what the release waits for. Here the Job controller made the
    claim's Pod, which stays Pending (no node): it may still start and write."""
    staged = dispatch(stage, STAGERS[family](stage))
    job_uid = staged.owner.status.active_operation.job_uid

    def pod_made() -> bool:
        pods = stage.operator.admin.list(PODS, stage.namespace)
        return any(
            ref.get("uid") == job_uid
            for pod in pods
            for ref in pod["metadata"].get("ownerReferences") or []
        )

    # The Job controller creates the Pod on its own time and announces it nowhere.
    localrun.until(pod_made, "the Job controller to create the claim's Pod")
    release = {
        "coordinationDigest": "sha256:" + uuid.uuid4().hex * 2,
        "operationID": staged.claim_id,
        "leaseDurationSeconds": 60,
        "leaseEpoch": "v1-" + "d" * 32,
    }
    admitted(
        status_patch(stage, staged, lambda s: s.update(pendingLockRelease=release), dry_run=False)
    )
    # No Lease stands at all (given up, or never taken): the Pod alone refuses.
    response = status_patch(stage, staged, _drop("pendingLockRelease"))
    refused_with(response, template(transitions.RELEASE_RUNNING))
    assert "has not stopped (phase Pending)" in response.json()["message"]


@pytest.mark.parametrize("family", FAMILIES)
def test_one_approval_runs_one_job_even_after_its_job_is_gone(stage: Stage, family: str) -> None:
    """The state a stolen identity reaches after the first Apply's TTL removed its Job:
    the same claim written again, marked, with no Job UID, under the spent approval.
    The approval names the Job it ran (the manager's own write before any TTL, the
    control row), so the second create is refused, and the name stays."""
    staged = STAGERS[family](stage)
    assert staged.approval is not None
    path = path_of(staged.approvals, stage.namespace, staged.approval, "status")
    ran = {"name": staged.job["metadata"]["name"], "uid": str(uuid.uuid4())}
    admitted(as_manager(stage, "PATCH", path, {"status": {"consumedJob": ran}}, dry_run=False))
    response = create_job(stage, staged.job)
    refused_with(response, template(authority.APPROVAL_RAN))
    assert f"already authorized Job {ran['name']} ({ran['uid']})" in response.json()["message"]
    for changed in (None, {**ran, "uid": str(uuid.uuid4())}):
        refused_with(
            as_manager(stage, "PATCH", path, {"status": {"consumedJob": changed}}),
            template(transitions.WITNESS_CHANGED),
        )


# -- the table: spec, and the webhooks themselves ------------------------------------------

SpecRow = tuple[str, Object, tuple[str, ...]]

SPEC_ROWS: Final[list[SpecRow]] = [
    ("policy.apply set to Always", {"spec": {"policy": {"apply": "Always"}}}, FAMILIES),
    (
        "the database Secret re-pointed",
        {"spec": {"target": {"urlFrom": {"name": "admin-db"}}}},
        FAMILIES,
    ),
    (
        "the service account changed",
        {"spec": {"execution": {"serviceAccountName": "admin"}}},
        FAMILIES,
    ),
    ("a label changed", {"metadata": {"labels": {"team": "mallory"}}}, FAMILIES),
    (
        "the migrations' artifact re-pointed",
        {"spec": {"artifact": {"ociRef": "registry.evil.example/billing:1"}}},
        ("migration",),
    ),
    (
        "the desired schema's artifact re-pointed",
        {"spec": {"desired": {"ociRef": "registry.evil.example/orders:1"}}},
        ("schema",),
    ),
]


def _resource_object(stage: Stage, family: str, prefix: str) -> tuple[Any, Object]:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    if family == "schema":
        return PTAHSCHEMAS, stage.operator.admin.create(
            PTAHSCHEMAS, stage.namespace, schema_object(stage, name)
        )
    return PTAHMIGRATIONS, stage.operator.admin.create(
        PTAHMIGRATIONS, stage.namespace, migration_object(stage, name)
    )


@pytest.mark.parametrize(
    ("family", "patch"),
    [
        pytest.param(family, patch, id=f"{family}: {name}")
        for name, patch, families in SPEC_ROWS
        for family in families
    ],
)
def test_the_manager_cannot_change_a_resources_spec(
    stage: Stage, family: str, patch: Object
) -> None:
    resource, obj = _resource_object(stage, family, "spec")
    path = path_of(resource, stage.namespace, obj["metadata"]["name"])
    response = as_manager(stage, "PATCH", path, patch)
    metadata_only = "may change only the finalizers and the operator.ptah.run/unresolved-run"
    if patch != SPEC_ROWS[0][1]:
        refused_with(response, metadata_only)
        return
    # Always is refused twice over: the manager is in no group of
    # approvals.applyAlwaysGroups either. The API server names one refusing policy, in
    # no promised order, so either sentence is the refusal.
    always_guard = "may not set spec.policy.apply to Always"
    refused_with(response, "denied request: ")
    message = response.json()["message"]
    assert metadata_only in message or always_guard in message, message


@pytest.mark.parametrize("family", FAMILIES)
def test_the_managers_metadata_writes_are_admitted(stage: Stage, family: str) -> None:
    resource, obj = _resource_object(stage, family, "meta")
    path = path_of(resource, stage.namespace, obj["metadata"]["name"])
    admitted(
        as_manager(
            stage,
            "PATCH",
            path,
            {"metadata": {"finalizers": ["operator.ptah.run/active-operation"]}},
        )
    )
    admitted(
        as_manager(
            stage,
            "PATCH",
            path,
            {"metadata": {"annotations": {"operator.ptah.run/unresolved-run": "{}"}}},
        )
    )


def test_the_manager_cannot_switch_off_or_repoint_its_webhooks(stage: Stage) -> None:
    assert stage.configurations, "the test registered no webhook configurations"
    for name in stage.configurations:
        kind = (
            MUTATING_WEBHOOK_CONFIGURATIONS
            if "stamp" in name
            else VALIDATING_WEBHOOK_CONFIGURATIONS
        )
        patch = {"webhooks": [{"name": "x", "clientConfig": {"caBundle": ""}}]}
        for method, body in (("PATCH", patch), ("DELETE", {})):
            response = as_manager(stage, method, path_of(kind, None, name), body)
            assert response.status_code == 403, (name, method, response.text[:300])
            assert "forbidden" in response.text


def test_the_manager_cannot_unbind_the_policies(stage: Stage) -> None:
    for obj_name in POLICIES:
        response = as_manager(
            stage, "DELETE", path_of(VAPB, None, f"{obj_name}-{suffix_of(stage)}"), {}
        )
        assert response.status_code == 403, response.text[:300]
