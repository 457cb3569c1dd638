"""The runner's contract with the real ptah CLI, as table rows.

1. For every operation, the exact command lines and child environment the runner
   builds (``ptahcli.steps``).
2. For every document ptah can print (every outcome, every refusal, each exit code,
   truncation, a second document, garbage), the account the runner gives. The
   documents are hand-written literals (``tests/runner/ptah_documents.py``).

Every account row is also put in a record and read back the way the controller
reads it, so no row can describe an account the controller would refuse.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from runner import ptahcli, result_of_record
from runner.config import RunConfig, prepare, target_identity_digest
from runner.decide import (
    NO_DEV_DATABASE,
    ChildOutcome,
    ChildStop,
    PlanRun,
    apply_account,
    history_account,
    interrupted,
    migration_account,
    noting_no_dev_database,
    observe_account,
    plan_account,
    resolve_account,
    verify_account,
)
from runner.documents import APPLY_OUTCOMES, PLAN_OUTCOMES, RUN_OUTCOMES
from runner.result import RunnerResult
from tests.runner import ptah_documents as docs
from tests.runner.runnerenv import (
    NOW,
    PLAN_DIGEST,
    REGISTRY,
    REQUESTED,
    environment,
)
from tests.support.runnerrig import (
    JOB_UID,
    OP_ID,
    SECRET_URL,
    record_of,
)

CHILD_DATABASE = sorted(
    ["PTAH_CONNECT_TIMEOUT", "PTAH_DB_URL", "PTAH_DEV_URL", "PTAH_LOCK_TIMEOUT"]
)
CHILD_DATABASE = sorted([*CHILD_DATABASE, "PTAH_TX_MODE"])
ALWAYS = ["HOME", "PATH"]
# ptah reads the credential and the registry it is for; the runner checked the grant.
CHILD_REGISTRY = sorted(REGISTRY)


def config_for(operation: str) -> RunConfig:
    prepared = prepare(environment(operation), operation, OP_ID, now=NOW)
    assert isinstance(prepared, RunConfig), prepared
    return prepared


PTAH = "/usr/local/bin/ptah"
COMMAND_ROWS: list[tuple[str, list[tuple[list[str], list[str]]]]] = [
    (
        "resolve",
        [([PTAH, "oci", "resolve", REQUESTED, "--format", "json"], [*ALWAYS, *CHILD_REGISTRY])],
    ),
    (
        "verify",
        [
            (
                [
                    PTAH,
                    "oci",
                    "verify",
                    docs.PINNED,
                    "--policy",
                    "/policy/policy.json",
                    "--format",
                    "json",
                ],
                [*ALWAYS, *CHILD_REGISTRY],
            ),
            (
                [PTAH, "oci", "inspect", docs.PINNED, "--format", "json", "--no-referrers"],
                [*ALWAYS, *CHILD_REGISTRY],
            ),
        ],
    ),
    (
        "observe",
        # PTAH_EXCLUDE is the runner's: drift compares everything.
        [
            (
                [PTAH, "schema", "drift", "--format", "json"],
                [*ALWAYS, *CHILD_DATABASE, "PTAH_SCHEMA_FILE"],
            )
        ],
    ),
    (
        "plan",
        [
            (
                [
                    PTAH,
                    "schema",
                    "plan",
                    "--output",
                    "/work/first.plan.json",
                    "--json",
                    "--exclude=audit_*",
                    "--exclude=tmp_*",
                    "--protected-table=payments",
                ],
                [*ALWAYS, *CHILD_DATABASE, "PTAH_SCHEMA_FILE"],
            ),
            (
                [
                    PTAH,
                    "schema",
                    "plan",
                    "--output",
                    "/work/second.plan.json",
                    "--json",
                    "--exclude=audit_*",
                    "--exclude=tmp_*",
                    "--protected-table=payments",
                ],
                [*ALWAYS, *CHILD_DATABASE, "PTAH_SCHEMA_FILE"],
            ),
            (
                [
                    PTAH,
                    "schema",
                    "apply",
                    "--plan",
                    "/work/first.plan.json",
                    "--auto-approve",
                    "--json",
                    "--dry-run",
                ],
                # The validation reads the plan alone: no schema, no dev database.
                [*ALWAYS, *(k for k in CHILD_DATABASE if k != "PTAH_DEV_URL")],
            ),
        ],
    ),
    (
        "apply",
        [
            (
                [
                    PTAH,
                    "schema",
                    "apply",
                    "--plan",
                    "/work/apply.plan.json",
                    "--auto-approve",
                    "--json",
                ],
                [*ALWAYS, *CHILD_DATABASE],
            )
        ],
    ),
    (
        "migration-history",
        [
            (
                [PTAH, "migrations", "status", "--migrations-dir", "/source/migrations", "--json"],
                [*ALWAYS, *CHILD_DATABASE],
            )
        ],
    ),
    (
        "migration-apply",
        [
            (
                [
                    PTAH,
                    "migrations",
                    "up",
                    "--migrations-dir",
                    "/source/migrations",
                    "--json",
                    "--tx-mode",
                    "file",
                    "--expect-sequence",
                    "/work/expected-sequence.json",
                ],
                [*ALWAYS, *CHILD_DATABASE],
            )
        ],
    ),
]


@pytest.mark.parametrize(("operation", "expected"), COMMAND_ROWS, ids=[r[0] for r in COMMAND_ROWS])
def test_each_operation_runs_exactly_these_commands(
    operation: str, expected: list[tuple[list[str], list[str]]]
) -> None:
    env = environment(operation)
    steps = ptahcli.steps(config_for(operation), env)
    assert [list(step.argv) for step in steps] == [argv for argv, _ in expected]
    assert [[name for name, _ in step.env] for step in steps] == [sorted(e) for _, e in expected]
    for step in steps:
        # Values pass through unchanged; the credential is never on a command line.
        assert all(env[name] == value for name, value in step.env)
        assert SECRET_URL not in " ".join(step.argv)
    # stderr may quote SQL with row values for schema plan and schema apply only.
    assert [s.relay_stderr for s in steps] == [operation not in ("plan", "apply")] * len(steps)


@pytest.mark.parametrize(
    ("mode", "flag"),
    [("all", []), ("file", ["--tx-mode", "file"]), ("none", ["--tx-mode", "none"])],
)
def test_a_schema_apply_takes_the_policys_transaction_mode_to_tx_mode(
    mode: str, flag: list[str]
) -> None:
    # ptah-cli.md: `schema apply --plan P` accepts --tx-mode; the policy's
    # transactionMode arrives as the runner input PTAH_TRANSACTION_MODE.
    env = {**environment("apply"), "PTAH_TRANSACTION_MODE": mode}
    config = prepare(env, "apply", OP_ID, now=NOW)
    assert isinstance(config, RunConfig), config
    (step,) = ptahcli.steps(config, env)
    assert list(step.argv[-len(flag) :] if flag else []) == flag
    assert step.argv.count("--tx-mode") == len(flag) // 2
    # The runner input is the runner's: ptah sees the flag, never the variable.
    assert "PTAH_TRANSACTION_MODE" not in dict(step.env)


def test_a_migration_run_in_one_transaction_has_no_tx_mode_flag() -> None:
    config = replace(config_for("migration-apply"), transaction_mode="all")
    (step,) = ptahcli.steps(config, environment("migration-apply"))
    assert "--tx-mode" not in step.argv


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (("ptah", "oci", "resolve", "registry.example/a:v1"), None),
        (("ptah", "--db-url", SECRET_URL), "the database credential"),
        (("ptah", "--x=" + "s3cret-Pa55word"), "the database credential"),
        (("ptah", "oci", "resolve", "oci://u:p4ss@registry.example/a"), "a URL with a password"),
    ],
)
def test_no_command_line_carries_a_credential(argv: tuple[str, ...], problem: str | None) -> None:
    found = ptahcli.argv_problem(argv, config_for("observe").redactor)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_the_target_identity_is_derived_without_the_credential() -> None:
    rotated = SECRET_URL.replace("s3cret-Pa55word", "another-pass")
    other_db = SECRET_URL.replace("/orders", "/billing")
    same = target_identity_digest("PostgreSQL", SECRET_URL)
    assert same == target_identity_digest("PostgreSQL", rotated)
    assert same != target_identity_digest("PostgreSQL", other_db)
    assert config_for("apply").target_identity_digest == same


# -- what each document means -------------------------------------------------------


def child(
    stdout: str | bytes = "",
    code: int = 0,
    *,
    stderr: bytes = b"",
    problem: str | None = None,
    stop: ChildStop = ChildStop.EXITED,
) -> ChildOutcome:
    data = stdout.encode() if isinstance(stdout, str) else stdout
    return ChildOutcome(
        started=True,
        returncode=code,
        stop=stop,
        stdout=data,
        stderr=stderr,
        output_problem=problem,
    )


USAGE = b"Error: unknown flag: --plan-dir\nUsage:\n  ptah schema apply [flags]\n"
PANIC = b"panic: runtime error: invalid memory address\n\ngoroutine 1 [running]:\n"
CHANGES = docs.PLAN_CHANGES % PLAN_DIGEST
DRY_RUN = docs.APPLY_DRY_RUN % PLAN_DIGEST
APPLIED = docs.APPLY_APPLIED % PLAN_DIGEST
MYSQL_PLAN = docs.PLAN_FILE.replace(b'"postgres"', b'"mysql"')
MYSQL_CHANGES = docs.PLAN_CHANGES % ("sha256:" + hashlib.sha256(MYSQL_PLAN).hexdigest())
TRUNCATED = "the executor's report is longer than 8388608 bytes"


@dataclass(frozen=True)
class Row:
    """One run's children and the account expected: (error code, started, uncertain)."""

    name: str
    operation: str
    children: tuple[Any, ...]
    expected: tuple[str | None, bool | None, bool | None]
    section: dict[str, Any] = field(default_factory=dict)
    # Text from ptah that must not reach the frame (it may quote rows).
    withheld: tuple[str, ...] = ()


def plan_runs(
    first: ChildOutcome, second: ChildOutcome | None = None, saved: bytes = docs.PLAN_FILE
) -> tuple[PlanRun, PlanRun | None]:
    again = PlanRun(second, saved) if second is not None else None
    return PlanRun(first, saved), again


def account_of(row: Row) -> RunnerResult:
    config = config_for(row.operation)
    children = row.children
    if row.operation == "resolve":
        return resolve_account(config, children[0])
    if row.operation == "verify":
        return verify_account(config, children[0], children[1], "sha256:" + "7" * 64)
    if row.operation == "observe":
        return interrupted(config, children[0]) or observe_account(config, children[0])
    if row.operation == "plan":
        first, second, validation = children
        return plan_account(config, first, second, validation)
    if row.operation == "apply":
        return apply_account(config, children[0], 2)
    if row.operation == "migration-history":
        return interrupted(config, children[0]) or history_account(config, children[0])
    return migration_account(config, children[0])


OK = (None, None, None)
DONE = (None, True, False)
NOT_STARTED = (False, False)


def failed(code: str) -> tuple[str, None, None]:
    return (code, None, None)


def refused_before(code: str) -> tuple[str, bool, bool]:
    return (code, False, False)


def uncertain(code: str) -> tuple[str, bool, bool]:
    return (code, True, True)


good_plan = plan_runs(child(CHANGES), child(CHANGES))
ROWS = [
    # resolve
    Row("resolved", "resolve", (child(docs.RESOLVE),), OK, {"resolve": {"resolved_size": 741}}),
    Row("resolve usage error", "resolve", (child("", 2, stderr=USAGE),), failed("resolve_failed")),
    Row("resolve garbage", "resolve", (child(docs.GARBAGE),), failed("executor_report_invalid")),
    Row(
        "resolve second document",
        "resolve",
        (child(docs.RESOLVE + docs.RESOLVE),),
        failed("executor_report_invalid"),
    ),
    Row(
        "resolve of another reference",
        "resolve",
        (child(docs.RESOLVE.replace('schema:v1",', 'schema:v2",', 1)),),
        failed("executor_inconsistent"),
    ),
    # verify
    Row(
        "verified",
        "verify",
        (child(docs.VERIFY_SATISFIED), child(docs.INSPECT_SCHEMA)),
        OK,
        {"verify": {"verification_requirements": ["signature", "provenance"]}},
    ),
    Row(
        "verification finding",
        "verify",
        (child(docs.VERIFY_FINDING, 1), None),
        failed("verification_failed"),
    ),
    Row(
        "a finding with exit 0",
        "verify",
        (child(docs.VERIFY_FINDING, 0), child(docs.INSPECT_SCHEMA)),
        failed("executor_inconsistent"),
    ),
    Row(
        "another artifact type",
        "verify",
        (child(docs.VERIFY_SATISFIED), child(docs.INSPECT_MIGRATIONS)),
        failed("artifact_type_mismatch"),
    ),
    Row("verify runtime error", "verify", (child("", 2), None), failed("verify_failed")),
    # observe
    Row(
        "no drift", "observe", (child(docs.DRIFT_NONE),), OK, {"observe": {"observed_drift": False}}
    ),
    Row(
        "drift found, exit 1",
        "observe",
        (child(docs.DRIFT_FOUND, 1),),
        OK,
        {
            "observe": {
                "observed_drift": True,
                "highest_drift_severity": "destructive",
                "drift_finding_count": 2,
            }
        },
    ),
    Row("drift below the threshold, exit 0", "observe", (child(docs.DRIFT_BELOW_THRESHOLD),), OK),
    Row(
        "drift failed, exit 0",
        "observe",
        (child(docs.DRIFT_FOUND, 0),),
        failed("executor_inconsistent"),
    ),
    Row("drift error, exit 2", "observe", (child(docs.DRIFT_ERROR, 2),), failed("drift_failed")),
    Row("drift error, exit 0", "observe", (child(docs.DRIFT_ERROR, 0),), failed("drift_failed")),
    Row(
        "drift of a MySQL database",
        "observe",
        (child(docs.DRIFT_MYSQL),),
        failed("dialect_mismatch"),
    ),
    Row(
        "drift of an unknown severity",
        "observe",
        (child(docs.DRIFT_FOUND.replace('"destructive"}', '"catastrophic"}'), 1),),
        failed("executor_report_invalid"),
    ),
    Row(
        "drift truncated",
        "observe",
        (child(docs.DRIFT_NONE[:40], problem=TRUNCATED),),
        failed("executor_output_unreadable"),
    ),
    Row(
        "drift twice",
        "observe",
        (child(docs.DRIFT_NONE + docs.DRIFT_NONE),),
        failed("executor_report_invalid"),
    ),
    # plan
    Row(
        "plan with changes",
        "plan",
        (*good_plan, child(DRY_RUN)),
        OK,
        {"plan": {"plan_outcome": "Changes", "statement_count": 2, "destructive": True}},
    ),
    Row(
        "no changes",
        "plan",
        (*plan_runs(child(docs.PLAN_NO_CHANGES), child(docs.PLAN_NO_CHANGES), b""), None),
        OK,
        {"plan": {"plan_outcome": "NoChanges", "statement_count": 0}},
    ),
    Row(
        "plan refused by a fence",
        "plan",
        (PlanRun(child(docs.PLAN_REFUSED, 2)), None, None),
        failed("plan_refused"),
        withheld=("4111",),
    ),
    Row(
        "plan failed",
        "plan",
        (PlanRun(child(docs.PLAN_FAILED, 2)), None, None),
        failed("plan_failed"),
        withheld=("078-05-1120",),
    ),
    Row(
        "changes with exit 2",
        "plan",
        (PlanRun(child(CHANGES, 2)), None, None),
        failed("executor_inconsistent"),
    ),
    Row(
        "two plans differ",
        "plan",
        (
            PlanRun(child(CHANGES), docs.PLAN_FILE),
            PlanRun(child(CHANGES), docs.PLAN_FILE + b" "),
            None,
        ),
        failed("plan_unstable"),
    ),
    Row(
        "the second plan finds nothing",
        "plan",
        (*plan_runs(child(CHANGES), child(docs.PLAN_NO_CHANGES)), None),
        failed("plan_unstable"),
    ),
    Row(
        "a digest that is not the file's",
        "plan",
        (*plan_runs(child(docs.PLAN_CHANGES % ("sha256:" + "9" * 64)), child(CHANGES)), None),
        failed("executor_inconsistent"),
    ),
    Row(
        "the dry run refuses the plan",
        "plan",
        (*good_plan, child(docs.APPLY_REFUSED_STALE, 2)),
        failed("plan_validation_failed"),
    ),
    Row(
        "a MySQL plan for PostgreSQL",
        "plan",
        (*plan_runs(child(MYSQL_CHANGES), child(MYSQL_CHANGES), MYSQL_PLAN), None),
        failed("dialect_mismatch"),
    ),
    Row(
        "a plan document of contract 2",
        "plan",
        (
            PlanRun(child(CHANGES.replace('"contract_version":1', '"contract_version":2'))),
            None,
            None,
        ),
        failed("executor_report_invalid"),
    ),
    Row(
        "a plan outcome nobody taught the runner",
        "plan",
        (PlanRun(child('{"contract_version":1,"outcome":"maybe"}')), None, None),
        failed("executor_report_invalid"),
    ),
    # apply
    Row(
        "applied",
        "apply",
        (child(APPLIED),),
        DONE,
        {"apply": {"statement_count": 2, "plan_content_digest": PLAN_DIGEST}},
    ),
    Row(
        "refused: stale plan",
        "apply",
        (child(docs.APPLY_REFUSED_STALE, 2),),
        refused_before("apply_refused"),
    ),
    Row(
        "failed before sending",
        "apply",
        (child(docs.APPLY_FAILED, 2),),
        refused_before("apply_failed"),
    ),
    Row(
        "no changes",
        "apply",
        (child(docs.APPLY_NO_CHANGES, 2),),
        refused_before("apply_no_changes"),
    ),
    Row(
        "usage error",
        "apply",
        (child("", 2, stderr=USAGE),),
        refused_before("executor_usage_error"),
    ),
    Row(
        "unknown outcome",
        "apply",
        (child(docs.APPLY_UNKNOWN, 2),),
        uncertain("apply_outcome_unknown"),
        withheld=("4111",),
    ),
    Row("canceled", "apply", (child(docs.APPLY_CANCELED, 2),), uncertain("apply_canceled")),
    Row("dry run instead", "apply", (child(DRY_RUN),), uncertain("executor_inconsistent")),
    Row("applied, exit 2", "apply", (child(APPLIED, 2),), uncertain("executor_inconsistent")),
    Row(
        "failed, exit 0",
        "apply",
        (child(docs.APPLY_FAILED, 0),),
        uncertain("executor_inconsistent"),
    ),
    Row("a Go panic", "apply", (child("", 2, stderr=PANIC),), uncertain("executor_report_invalid")),
    Row("garbage", "apply", (child(docs.GARBAGE, 0),), uncertain("executor_report_invalid")),
    Row(
        "two documents", "apply", (child(APPLIED + APPLIED),), uncertain("executor_report_invalid")
    ),
    Row(
        "truncated",
        "apply",
        (child(APPLIED[:50], problem=TRUNCATED),),
        uncertain("executor_output_unreadable"),
    ),
    Row("killed by a signal", "apply", (child("", -9),), uncertain("executor_crashed")),
    Row(
        "stopped at the deadline",
        "apply",
        (child("", -15, stop=ChildStop.DEADLINE),),
        uncertain("deadline_exceeded"),
    ),
    Row(
        "another plan applied",
        "apply",
        (child(docs.APPLY_APPLIED % ("sha256:" + "9" * 64)),),
        uncertain("executor_inconsistent"),
    ),
    # migration history
    Row(
        "pending migrations",
        "migration-history",
        (child(docs.STATUS_PENDING),),
        OK,
        {
            "migration_history": {
                "current_version": "003",
                "applied_count": 3,
                "pending_count": 2,
                "dirty": False,
            }
        },
    ),
    Row(
        "modified, out of order, dirty",
        "migration-history",
        (child(docs.STATUS_TROUBLED),),
        OK,
        {
            "migration_history": {
                "current_version": "007",
                "checkpoint_version": "1",
                "dirty": True,
                "modified_versions": ["005"],
                "out_of_order_versions": ["006"],
            }
        },
    ),
    Row("nothing pending", "migration-history", (child(docs.STATUS_CURRENT),), OK),
    Row("pending, exit 1", "migration-history", (child(docs.STATUS_PENDING, 1),), OK),
    Row(
        "exit 1 without pending",
        "migration-history",
        (child(docs.STATUS_CURRENT, 1),),
        failed("executor_inconsistent"),
    ),
    Row("status error", "migration-history", (child("", 2),), failed("history_failed")),
    Row(
        "an unknown state",
        "migration-history",
        (child(docs.STATUS_PENDING.replace('"pending"}', '"skipped"}', 1)),),
        failed("executor_report_invalid"),
    ),
    Row(
        "a version listed twice",
        "migration-history",
        (child(docs.STATUS_PENDING.replace('"version":5,', '"version":4,')),),
        failed("executor_report_invalid"),
    ),
    # migration apply
    Row(
        "applied",
        "migration-apply",
        (child(docs.RUN_APPLIED),),
        DONE,
        {"migration_run": {"outcome": "Applied", "applied_versions": ["004", "005"]}},
    ),
    Row(
        "the history moved",
        "migration-apply",
        (child(docs.RUN_HISTORY_MOVED, 2),),
        refused_before("migration_failed"),
        {"migration_run": {"outcome": "Failed", "applied_versions": []}},
    ),
    Row(
        "partial",
        "migration-apply",
        (child(docs.RUN_PARTIAL, 2),),
        ("migration_partial", True, False),
        {"migration_run": {"outcome": "Partial", "applied_versions": ["004"]}},
    ),
    Row(
        "unknown",
        "migration-apply",
        (child(docs.RUN_UNKNOWN, 2),),
        uncertain("migration_outcome_unknown"),
        {"migration_run": {"outcome": "Unknown", "applied_versions": ["004"]}},
    ),
    Row(
        "up to date",
        "migration-apply",
        (child(docs.RUN_UP_TO_DATE),),
        uncertain("executor_inconsistent"),
    ),
    Row(
        "a dry run",
        "migration-apply",
        (child(docs.RUN_DRY_RUN),),
        uncertain("executor_inconsistent"),
    ),
    Row("down", "migration-apply", (child(docs.RUN_DOWN),), uncertain("executor_report_invalid")),
    Row(
        "beyond the approval",
        "migration-apply",
        (child(docs.RUN_APPLIED.replace("[4,5]", "[4,5,6]")),),
        uncertain("executor_inconsistent"),
    ),
    Row(
        "usage error",
        "migration-apply",
        (child("", 2, stderr=USAGE),),
        refused_before("executor_usage_error"),
    ),
    Row(
        "garbage",
        "migration-apply",
        (child(docs.GARBAGE, 2),),
        uncertain("executor_report_invalid"),
    ),
    Row(
        "truncated",
        "migration-apply",
        (child(docs.RUN_APPLIED[:30], problem=TRUNCATED),),
        uncertain("executor_output_unreadable"),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.operation}: {r.name}" for r in ROWS])
def test_each_document_has_one_account(row: Row) -> None:
    result = account_of(row)
    assert (result.error_code, result.mutation_started, result.uncertain) == row.expected, result
    for section, fields in row.section.items():
        found = getattr(result, section).model_dump()
        assert {k: found[k] for k in fields} == fields
    # The controller reads this account back, bound to this attempt.
    record = record_of(result)
    assert result_of_record(record, row.operation, OP_ID, job_uid=JOB_UID).result == result
    text = record.spec.result
    assert all(secret not in text for secret in row.withheld)
    if result.target_identity_digest is not None:
        assert result.target_identity_digest == target_identity_digest("PostgreSQL", SECRET_URL)


def test_every_outcome_of_every_document_has_a_row() -> None:
    stdout: dict[str, list[str]] = {row.operation: [] for row in ROWS}
    for row in ROWS:
        for item in row.children:
            outcome = item.child if isinstance(item, PlanRun) else item
            if isinstance(outcome, ChildOutcome):
                stdout[row.operation].append(outcome.stdout.decode())
    for operation, outcomes in (
        ("plan", PLAN_OUTCOMES),
        ("apply", APPLY_OUTCOMES),
        ("migration-apply", RUN_OUTCOMES),
    ):
        for outcome in outcomes:
            spelled = f'"outcome":"{outcome}"'
            assert any(spelled in text.replace(" ", "") for text in stdout[operation]), (
                operation,
                outcome,
            )


def test_a_plan_larger_than_a_record_holds_is_an_account_not_a_crash() -> None:
    statement = {"sql": "INSERT INTO t VALUES ('" + "x" * 2_000_000 + "');", "severity": "safe"}
    first_statement = json.dumps({**statement, "reason": "r"}).encode() + b","
    big = docs.PLAN_FILE.replace(b'"statements": [', b'"statements": [' + first_statement)
    digest = "sha256:" + hashlib.sha256(big).hexdigest()
    first, second = plan_runs(
        child(docs.PLAN_CHANGES % digest), child(docs.PLAN_CHANGES % digest), big
    )
    result = plan_account(config_for("plan"), first, second, child(docs.APPLY_DRY_RUN % digest))
    assert result.error_code == "executor_report_invalid" and result.plan is None
    assert result.error is not None and "cannot be recorded" in result.error.message


# Each row: the operation, whether the Job named a dev database, what ptah did (its
# exit code, its drift document), and whether the account says where to name one.
NO_DEV_ROWS = [
    ("control: observe failed with a dev database", "observe", True, 2, "", False),
    ("observe failed without one", "observe", False, 2, "", True),
    ("observe failed without one, with ptah's error", "observe", False, 2, docs.DRIFT_ERROR, True),
    ("observe found drift without one", "observe", False, 1, docs.DRIFT_FOUND, False),
    ("observe succeeded without one", "observe", False, 0, docs.DRIFT_NONE, False),
    ("plan failed without one", "plan", False, 2, "", True),
    ("history failed (no comparison)", "migration-history", False, 2, "", False),
]


@pytest.mark.parametrize(
    ("name", "operation", "dev", "code", "stdout", "noted"),
    NO_DEV_ROWS,
    ids=[r[0] for r in NO_DEV_ROWS],
)
def test_a_comparison_that_failed_without_a_dev_database_says_where_to_name_one(
    name: str, operation: str, dev: bool, code: int, stdout: str, noted: bool
) -> None:
    config = replace(config_for(operation), dev_database=dev)
    ran = child(stdout, code, stderr=b"Error: needs a dev database")
    if operation == "observe":
        result = observe_account(config, ran)
    elif operation == "plan":
        result = plan_account(config, *plan_runs(ran, None, b""), None)
    else:
        result = history_account(config, ran)
    account = noting_no_dev_database(config, result)
    message = account.error.message if account.error else ""
    assert message.endswith(NO_DEV_DATABASE) is noted, message
    assert account.error_code == result.error_code
    if not noted:
        assert account == result


def test_a_refusal_before_ptah_ran_is_not_blamed_on_the_dev_database() -> None:
    config = replace(config_for("observe"), dev_database=False)
    result = interrupted(config, ChildOutcome(started=False, start_error="no such file"))
    assert result is not None and result.child_exit_code == -1
    assert noting_no_dev_database(config, result) == result
