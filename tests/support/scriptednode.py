"""A scripted node for the API double: every operation Job becomes a Pod that ran, with
the result record its runner would have written, from a tiny model of the database.

The double runs no Pods, so this plays the Job controller, the kubelet and the
executor together. ``run_jobs`` finds each Job that has no Pod yet, reads what it
is asked to do the way the runner does (``PTAH_OPERATION`` in its container's
environment, its operation ID from the claim that names it), and answers from
``Database``: a schema's drift, a migration's pending versions. An Apply changes the
model as a real one changes the database, so the readings after it see the change.
Records are encoded by the runner's own protocol module (``podworld.write_record``),
so they follow whatever the runner writes.

``fail`` makes the next Job of an operation report the executor's error instead,
which is how a reading fails on a real node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.runtime.reconciler import Key
from jobclaim import sha256_digest
from jobclaim.apiserver import CONFIGMAPS, PODS, Object
from runner import RUNNER_PROTOCOL_VERSION
from runner.result import RunnerResult
from tests.support.dispatchworld import NS, Rig
from tests.support.podworld import TARGET, finish_job, start_pod

ARTIFACT = "sha256:" + "7" * 64
POLICY = '{"requireSignature": true}'
PLAN_TEXT = "CREATE TABLE orders (id bigint primary key);\n"


@dataclass
class Database:
    """What the executor would find: drift for a schema, pending versions for a migration."""

    drift: bool = True
    # The worst finding a drift reading reports, in ptah's words.
    severity: str = "warning"
    plan_text: str = PLAN_TEXT
    pending: list[str] = field(default_factory=lambda: ["20260101000000"])
    applied: list[str] = field(default_factory=list)
    # The next migration Apply loses its connection after applying: its run is Unknown.
    uncertain: bool = False


@dataclass
class ScriptedNode:
    rig: Rig
    db: Database = field(default_factory=Database)
    # runner operation -> the (code, message) its next Job reports
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)

    def fail(self, runner_op: str, code: str, message: str) -> None:
        self.failures[runner_op] = (code, message)

    def run_jobs(self) -> int:
        """Run every Job that has no Pod yet to its end; how many ran."""
        pods = self.rig.api.list(PODS, NS)
        owners = {
            ref.get("uid") for pod in pods for ref in pod["metadata"].get("ownerReferences", [])
        }
        count = 0
        for job in self.rig.jobs():
            if job["metadata"]["uid"] in owners or job.get("status", {}).get("conditions"):
                continue
            result = self._result(job)
            start_pod(self.rig, job, result=result)
            finish_job(self.rig, job["metadata"]["name"])
            self.ran.append(result.operation)
            count += 1
        return count

    # -- what the executor answers -------------------------------------------------

    def _claim(self, job: Object) -> dict[str, Any]:
        owner = job["metadata"]["ownerReferences"][0]
        return self.rig.claim(Key(owner["kind"], NS, owner["name"]))

    def _result(self, job: Object) -> RunnerResult:
        policy = self.rig.api.peek(CONFIGMAPS, NS, "orders-schema-policy")
        text = (policy or {}).get("data", {}).get("policy.json", POLICY)
        runner_op = runner_operation_of(job)
        return result_for_job(
            job, self._claim(job), self.db, policy=text, failure=self.failures.pop(runner_op, None)
        )


def _env(job: Object) -> dict[str, Any]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def runner_operation_of(job: Object) -> str:
    """What the Job's runner is told to do, read as the runner reads it."""
    return str(_env(job)["PTAH_OPERATION"])


def result_for_job(
    job: Object,
    claim: dict[str, Any],
    db: Database,
    *,
    policy: str = POLICY,
    failure: tuple[str, str] | None = None,
) -> RunnerResult:
    """The result the runner of ``job`` reports, answered from ``db``."""
    runner_op = runner_operation_of(job)
    wire: dict[str, Any] = {
        "protocolVersion": RUNNER_PROTOCOL_VERSION,
        "operation": runner_op,
        "operationId": claim["id"],
        "childExitCode": 0,
    }
    if runner_op not in ("resolve", "verify"):
        wire["coordinationDigest"] = claim["coordinationDigest"]
        wire["targetIdentityDigest"] = TARGET
    if failure is not None:
        wire.pop("targetIdentityDigest", None)
        wire.update(childExitCode=1, error={"code": failure[0], "message": failure[1]})
        if runner_op in ("apply", "migration-apply"):
            wire.update(mutationStarted=False, uncertain=False)
        return RunnerResult.from_wire(wire)
    wire.update(answer(runner_op, db, policy, requested=_env(job).get("PTAH_REQUESTED_REFERENCE")))
    return RunnerResult.from_wire(wire)


def answer(
    runner_op: str, db: Database, policy: str = POLICY, *, requested: str | None = None
) -> dict[str, Any]:
    """The section an executor reading ``db`` reports for ``runner_op``; an Apply
    changes ``db`` as it would change the database. Resolve pins the requested
    reference's repository by digest, as a registry client does."""
    if runner_op == "resolve":
        repository = (requested or "registry.example.com/shop/orders-schema").rsplit(":", 1)[0]
        return {
            "resolve": {
                "resolvedDigest": ARTIFACT,
                "resolvedReference": f"{repository}@{ARTIFACT}",
                "resolvedMediaType": "application/vnd.oci.image.manifest.v1+json",
                "resolvedSize": 1234,
            }
        }
    if runner_op == "verify":
        return {"verify": {"verificationPolicyDigest": sha256_digest(policy.encode())}}
    if runner_op == "observe":
        findings = 1 if db.drift else 0
        observe: dict[str, Any] = {
            "observedDialect": "postgresql-16",
            "observedDrift": db.drift,
            "driftFindingCount": findings,
            "driftReportDigest": "sha256:" + "c" * 64,
        }
        if db.drift:
            observe["highestDriftSeverity"] = db.severity
            observe["driftFindings"] = [
                {"category": "table_changed", "count": 1, "severity": db.severity}
            ]
        return {"observe": observe}
    if runner_op == "plan":
        if not db.drift:
            return {
                "plan": {
                    "planOutcome": "NoChanges",
                    "planContentDigest": sha256_digest(b""),
                    "statementCount": 0,
                }
            }
        return {
            "plan": {
                "planOutcome": "Changes",
                "planContentDigest": sha256_digest(db.plan_text.encode()),
                "statementCount": 1,
                "stdout": db.plan_text,
            }
        }
    if runner_op == "apply":
        db.drift = False
        return {
            "mutationStarted": True,
            "uncertain": False,
            "apply": {
                "planContentDigest": sha256_digest(db.plan_text.encode()),
                "statementCount": 1,
            },
        }
    if runner_op == "migration-history":
        return {
            "migrationHistory": {
                "contractVersion": 1,
                "appliedCount": len(db.applied),
                "pendingCount": len(db.pending),
                "pending": [
                    {"version": v, "digest": sha256_digest(v.encode())} for v in db.pending
                ],
                "fingerprint": sha256_digest(",".join(db.applied).encode()),
            }
        }
    if runner_op == "migration-apply":
        applied, db.pending = list(db.pending), []
        db.applied += applied
        if db.uncertain:
            db.uncertain = False
            return {
                "childExitCode": 1,
                "error": {"code": "connection_lost", "message": "the connection dropped"},
                "mutationStarted": True,
                "uncertain": True,
                "migrationRun": {"outcome": "Unknown"},
            }
        return {
            "mutationStarted": True,
            "uncertain": False,
            "migrationRun": {"outcome": "Applied", "appliedVersions": applied},
        }
    raise AssertionError(f"the scripted node has no answer for {runner_op}")
