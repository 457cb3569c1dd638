"""The result payload is strict: a control row per operation, then one contradiction per
row, each refused with the sentence that names it."""

from __future__ import annotations

from typing import Any

import pytest

from runner.result import (
    MUTATING,
    RUNNER_OPERATIONS,
    RunnerResult,
    decode_result,
    encode_json,
)
from tests.support.runnerrig import DIGEST, TARGET, failed_wire, wire


@pytest.mark.parametrize("operation", RUNNER_OPERATIONS)
def test_every_operation_has_a_valid_success_and_failure_that_round_trip(operation: str) -> None:
    for data in (wire(operation), failed_wire(operation)):
        result = decode_result(encode_json(data))
        assert decode_result(encode_json(result.to_wire())) == result
        assert result.operation == data["operation"]


def test_the_mutating_operations_are_the_tables_mutating_ones() -> None:
    assert {op for op, mutating in MUTATING.items() if mutating} == {"apply", "migration-apply"}


def _run(outcome: str, versions: list[str]) -> dict[str, Any]:
    return {"outcome": outcome, "appliedVersions": versions}


ERR = {"code": "boom", "message": "it broke"}
ROWS: list[tuple[str, dict[str, Any], str | None]] = [
    ("control: a successful apply", wire("apply"), None),
    (
        "successful apply that never started its mutation",
        wire("apply", mutationStarted=False),
        "successful apply must report that its mutation started",
    ),
    (
        "successful apply that is uncertain",
        wire("apply", uncertain=True),
        "uncertain outcome is an error",
    ),
    (
        "apply without mutation flags",
        wire("apply", mutationStarted=None),
        "must say whether its mutation started",
    ),
    (
        "read-only plan with mutation flags",
        wire("plan", mutationStarted=False, uncertain=False),
        "read-only operation reports no mutation flags",
    ),
    (
        "plan carrying an apply section",
        wire("plan", apply={"planContentDigest": DIGEST, "statementCount": 1}),
        "another operation's section",
    ),
    ("success without its section", wire("observe", observe=None), "carries its observe section"),
    (
        "success from a child that exited 1",
        wire("plan", childExitCode=1),
        "successful result comes from a child that exited 0",
    ),
    (
        "a failure carrying its section",
        failed_wire("plan", plan=wire("plan")["plan"]),
        "failed plan result carries no plan section",
    ),
    (
        "a refusal that started its mutation",
        failed_wire("apply", childExitCode=-1, mutationStarted=True, uncertain=True),
        "refusal before the child ran",
    ),
    (
        "a refusal without an error",
        wire("verify", childExitCode=-1, verify=None, error=None),
        "refusal before the child ran carries an error",
    ),
    (
        "uncertain without a started mutation",
        failed_wire("apply", uncertain=True),
        "uncertain outcome is an error of a mutation that started",
    ),
    ("unknown field", wire("plan", surprise=1), "extra inputs are not permitted"),
    ("python field name", {**wire("plan"), "operation_id": "x"}, "extra inputs"),
    ("bool as a number", wire("apply", mutationStarted=1), "valid boolean"),
    ("number as a string", wire("plan", childExitCode="0"), "valid integer"),
    ("another protocol", wire("plan", protocolVersion=4), "runner protocol 4 is not 7"),
    # The protocol before the drift findings' shape changed: refused by name.
    ("the previous protocol", wire("observe", protocolVersion=6), "runner protocol 6 is not 7"),
    (
        "another protocol in the refusal shape",
        failed_wire(
            "plan",
            protocolVersion=4,
            childExitCode=-1,
            error={"code": "runner_protocol_mismatch", "message": "speaks 5"},
        ),
        None,
    ),
    (
        "a protocol refusal after a child ran",
        failed_wire("plan", error={"code": "runner_protocol_mismatch", "message": "x"}),
        "protocol refusal is made before any child runs",
    ),
    ("unknown operation", {**wire("plan"), "operation": "drop"}, "operation"),
    ("operation ID with a newline", wire("plan", operationId="a\nb"), "one line"),
    ("error code in capitals", failed_wire("plan", error={**ERR, "code": "Boom"}), "error.code"),
    (
        "resolve that opened a database",
        wire("resolve", targetIdentityDigest=TARGET),
        "never opens the database",
    ),
    (
        "database success without an identity",
        wire("observe", targetIdentityDigest=None),
        "must report the database it opened",
    ),
    (
        "applied run with nothing applied",
        wire("migration-apply", migrationRun=_run("Applied", [])),
        "applied versions exactly when its outcome is Applied",
    ),
    (
        "up-to-date run that applied",
        wire("migration-apply", migrationRun=_run("UpToDate", ["1"])),
        "applied versions exactly when",
    ),
    (
        "control: up to date without starting",
        wire("migration-apply", migrationRun=_run("UpToDate", []), mutationStarted=False),
        None,
    ),
    (
        "control: partial run",
        failed_wire("migration-apply", mutationStarted=True, migrationRun=_run("Partial", ["004"])),
        None,
    ),
    (
        "failed run that applied",
        failed_wire("migration-apply", mutationStarted=True, migrationRun=_run("Failed", ["1"])),
        "a run that applied some versions is Partial",
    ),
    (
        "unknown run that is not uncertain",
        failed_wire("migration-apply", mutationStarted=True, migrationRun=_run("Unknown", [])),
        "must be reported uncertain",
    ),
    (
        "applied run with an error",
        failed_wire("migration-apply", mutationStarted=True, migrationRun=_run("Applied", ["1"])),
        "carries no error",
    ),
    (
        "plan whose outcome contradicts its statements",
        wire("plan", plan={**wire("plan")["plan"], "planOutcome": "NoChanges"}),
        "statements exactly when its outcome is Changes",
    ),
    (
        "observe whose listed findings exceed their count",
        wire(
            "observe",
            observe={
                **wire("observe")["observe"],
                "driftFindingCount": 0,
                "driftFindings": [{"category": "tables_added", "count": 1, "severity": "safe"}],
            },
        ),
        "the listed drift findings disagree with their count",
    ),
    (
        "history listing more pending than counted",
        wire(
            "migration-history",
            migrationHistory={**wire("migration-history")["migrationHistory"], "pendingCount": 0},
        ),
        "more pending migrations are listed than counted",
    ),
]


@pytest.mark.parametrize(("name", "data", "problem"), ROWS, ids=[r[0] for r in ROWS])
def test_result_rules(name: str, data: dict[str, Any], problem: str | None) -> None:
    if problem is None:
        assert isinstance(decode_result(encode_json(data)), RunnerResult)
        return
    with pytest.raises(ValueError, match=problem):
        decode_result(encode_json(data))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a":1,"a":2}', "repeats a key"),
        ('{"a":NaN}', "NaN is not a JSON number"),
        ("[" * 100_000, "nests too deeply"),
        ('{"a":1} trailing', "Extra data"),
        ('"just a string"', "valid dictionary"),
    ],
)
def test_payload_json_has_one_reading(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        decode_result(text.encode())


def test_a_payload_is_utf8_not_a_guess() -> None:
    # json.loads would read a leading NUL as UTF-16; the decoder refuses instead.
    with pytest.raises(ValueError, match=r"not UTF-8|control character|Expecting"):
        decode_result("{}".encode("utf-16-le"))
