"""From what ptah did to the account the runner gives: pure functions, one per operation.

ptah prints its own documents (``documents``); the runner states everything a result
carries that ptah does not: the protocol, the operation and attempt, the child's exit
status, the database it opened (``targetIdentityDigest``, derived from the URL) and the
realm. A result says what ptah's documents and exit codes mean together:

* exit 0 is success, 1 an expected negative (drift found, a verification finding), 2
  a usage or runtime error, 128+n a death by signal n (ptah's exit-code contract);
* for Apply and migration Apply, a document that says nothing reached the target
  (``refused``, ``failed``) is a certain failure that never started, and so is a
  usage error that printed no document (cobra refuses a command line before any of
  it runs). Whenever the runner cannot establish what a mutating child did, the
  account is ``uncertain``, never ``failed``: a child killed at the deadline, one that
  crashed, one whose output was cut, garbled or contradicts its exit status, may each
  have changed the database, and a "failed" would let the controller plan again over
  a change nobody recorded.

Messages quote ptah's own error text only for the commands that cannot quote SQL:
``schema plan`` and ``schema apply`` put statements (and their row values) in errors,
so their results name a code and never ptah's sentence.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from runner.config import Redactor, RunConfig, StartRefusal
from runner.documents import (
    ApplyReport,
    Document,
    DocumentError,
    DriftDocument,
    InspectDocument,
    PlanReport,
    ResolveDocument,
    RunDocument,
    StatusDocument,
    VerifyDocument,
    decode,
)
from runner.planfile import PlanRefused, decode_plan, dialect_matches
from runner.result import (
    MAX_MESSAGE,
    MUTATING,
    RUNNER_PROTOCOL_VERSION,
    ErrorReport,
    RunnerResult,
    first_problem,
    runner_operation,
)

_D = TypeVar("_D", bound=Document)
_WHITESPACE: Final = re.compile(r"[\x00-\x20\x7f]+")
_VERSION_WORD: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
# What a Go program prints when its runtime, not its code, ends it: a panic exits 2
# like a usage error does, and may have happened in the middle of a statement.
GO_CRASH: Final = (b"panic:", b"fatal error:", b"goroutine ")
EXIT_NEGATIVE: Final = 1
EXIT_ERROR: Final = 2
MAX_FINDINGS: Final = 64
INVALID: Final = "executor_report_invalid"
INCONSISTENT: Final = "executor_inconsistent"


class ChildStop(enum.Enum):
    """Why the child stopped."""

    EXITED = "exited"  # on its own
    DEADLINE = "deadline"  # killed at the claim's execution deadline
    TERMINATED = "terminated"  # killed because the runner itself was asked to stop


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What supervising one ptah run established. ``returncode`` is Popen's (-n: signal n)."""

    started: bool
    start_error: str | None = None
    stop: ChildStop = ChildStop.EXITED
    returncode: int | None = None
    stdout: bytes = b""
    # The head of the child's stderr, kept in memory to tell a usage error from a
    # crash; it is never printed for a command whose stderr is discarded.
    stderr: bytes = b""
    # Why the child's stdout cannot be taken as its whole report, or None.
    output_problem: str | None = None

    @property
    def code(self) -> int:
        return exit_code(self.returncode)


def exit_code(returncode: int | None) -> int:
    """The child's exit status as a shell spells it: 128+n for a death by signal n."""
    if returncode is None:
        return -1
    return min(255, 128 - returncode if returncode < 0 else returncode)


def one_line(text: str, redactor: Redactor, limit: int = MAX_MESSAGE) -> str:
    """Redacted, on one line, and short enough for a result."""
    text = _WHITESPACE.sub(" ", redactor.text(text)).strip() or "no message"
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def refused(operation: str, operation_id: str, refusal: StartRefusal) -> RunnerResult:
    """The result of a run that started nothing: certain that nothing changed."""
    flag = False if MUTATING[operation] else None
    return RunnerResult(
        protocol_version=refusal.protocol_version,
        operation=runner_operation(operation),
        operation_id=operation_id,
        child_exit_code=-1,
        mutation_started=flag,
        uncertain=flag,
        error=ErrorReport(code=refusal.code, message=refusal.message),
    )


def _identity(config: RunConfig) -> dict[str, Any]:
    if not config.database:
        return {}
    return {
        "target_identity_digest": config.target_identity_digest,
        "coordination_digest": config.coordination_digest,
    }


def account(
    config: RunConfig,
    code: int,
    *,
    error: tuple[str, str] | None = None,
    started: bool = False,
    uncertain: bool = False,
    **section: Any,
) -> RunnerResult:
    """A result of this run: the runner's fields, the outcome, and the operation's section.

    A section built from ptah's values that a result may not carry (a plan longer than
    a record holds, a version no result can name) makes the account one of a report
    that cannot be believed, never a runner that dies without a result.
    """
    flag = config.mutating
    fields: dict[str, Any] = {
        "protocol_version": RUNNER_PROTOCOL_VERSION,
        "operation": runner_operation(config.operation),
        "operation_id": config.operation_id,
        "child_exit_code": code,
        "mutation_started": started if flag else None,
        "uncertain": uncertain if flag else None,
        **_identity(config),
    }
    if error:
        fields["error"] = ErrorReport(code=error[0], message=one_line(error[1], config.redactor))
    try:
        return RunnerResult(**fields, **section)
    except ValidationError as problem:
        message = f"ptah's report cannot be recorded: {first_problem(problem)}"
        fields.update(
            error=ErrorReport(code=INVALID, message=one_line(message, config.redactor)),
            mutation_started=True if flag else None,
            uncertain=True if flag else None,
        )
        return RunnerResult(**fields)


def failed(config: RunConfig, code: int, error: str, message: str, **section: Any) -> RunnerResult:
    """A certain failure: nothing reached the database (or a read-only run failed)."""
    return account(config, code, error=(error, message), **section)


def unaccounted(config: RunConfig, code: int, error: str, message: str) -> RunnerResult:
    """The result of a run whose effect the runner cannot establish."""
    if not config.mutating:
        return failed(config, code, error, message)
    return account(config, code, error=(error, message), started=True, uncertain=True)


def interrupted(config: RunConfig, child: ChildOutcome) -> RunnerResult | None:
    """The account of a run that did not end on its own with whole output, or None."""
    if not child.started:
        reason = child.start_error or "it could not be started"
        return refused(
            config.operation,
            config.operation_id,
            StartRefusal("executor_unavailable", f"the executor did not start: {reason}"),
        )
    code = child.code
    if child.stop is ChildStop.DEADLINE:
        message = "the executor was stopped at the claim's execution deadline"
        return unaccounted(config, code, "deadline_exceeded", message)
    if child.stop is ChildStop.TERMINATED:
        message = "the runner was told to stop and stopped the executor before it finished"
        return unaccounted(config, code, "runner_terminated", message)
    if child.output_problem is not None:
        # Truncated output is never parsed: a cut document can read as a whole one.
        return unaccounted(config, code, "executor_output_unreadable", child.output_problem)
    if child.returncode is not None and child.returncode < 0:
        message = f"the executor was killed by signal {code - 128}"
        return unaccounted(config, code, "executor_crashed", message)
    return None


def usage_error(child: ChildOutcome) -> bool:
    """Whether ptah refused its command line: exit 2, no document, no Go crash.

    A usage error is raised while the command line is parsed, before anything runs;
    a Go panic also exits 2 and prints no document, but says so on stderr.
    """
    return (
        child.code == EXIT_ERROR
        and not child.stdout.strip()
        and bool(child.stderr.strip())
        and not any(marker in child.stderr for marker in GO_CRASH)
    )


def _no_document(config: RunConfig, child: ChildOutcome, problem: DocumentError) -> RunnerResult:
    if usage_error(child):
        return failed(config, child.code, "executor_usage_error", "ptah refused its command line")
    return unaccounted(config, child.code, INVALID, str(problem))


def _decode_or_account(config: RunConfig, child: ChildOutcome, kind: type[_D]) -> _D | RunnerResult:
    try:
        return decode(kind, child.stdout)
    except DocumentError as problem:
        return _no_document(config, child, problem)


# -- the comparisons' scratch database ---------------------------------------------

# ptah says in its own words what stopped it, and for schema plan the runner never
# repeats them; a reading that failed with no dev database says where one is named.
NO_DEV_DATABASE: Final = (
    "the Job names no dev database (PTAH_DEV_URL): if ptah needs one to compare, "
    "name its Secret key in the PtahSchema's spec.dev.urlFrom"
)


def noting_no_dev_database(config: RunConfig, result: RunnerResult) -> RunnerResult:
    """The account of a comparison ptah ended with a runtime error (exit 2) while the
    Job named no dev database, with a sentence that says where to name one. Pure.

    Only a hint: ptah's reason is not parsed (its words differ by build), and a
    refusal of the runner's own (exit -1) or an expected negative is left as it is.
    """
    error = result.error
    if (
        config.operation not in ("observe", "plan")
        or config.dev_database
        or error is None
        or result.child_exit_code != EXIT_ERROR
    ):
        return result
    head = one_line(error.message, config.redactor, MAX_MESSAGE - len(NO_DEV_DATABASE) - 2)
    noted = error.model_copy(update={"message": f"{head}; {NO_DEV_DATABASE}"})
    return result.model_copy(update={"error": noted})


# -- resolve and verify ------------------------------------------------------------


def resolve_account(config: RunConfig, child: ChildOutcome) -> RunnerResult:
    if child.code != 0:
        return failed(config, child.code, "resolve_failed", f"ptah oci resolve exited {child.code}")
    doc = _decode_or_account(config, child, ResolveDocument)
    if isinstance(doc, RunnerResult):
        return doc
    if doc.reference != config.requested_reference:
        return failed(config, 0, INCONSISTENT, "ptah resolved another reference than it was given")
    return account(
        config,
        0,
        resolve={
            "resolved_digest": doc.digest,
            "resolved_reference": doc.pinned_reference,
            "resolved_media_type": doc.media_type,
            "resolved_size": doc.size,
        },
    )


def verify_account(
    config: RunConfig,
    verify: ChildOutcome,
    inspect: ChildOutcome | None,
    policy_digest: str,
) -> RunnerResult:
    if verify.code not in (0, EXIT_NEGATIVE):
        return failed(config, verify.code, "verify_failed", f"ptah oci verify exited {verify.code}")
    doc = _decode_or_account(config, verify, VerifyDocument)
    if isinstance(doc, RunnerResult):
        return doc
    if doc.reference != config.resolved_reference:
        return failed(config, verify.code, INCONSISTENT, "ptah verified another reference")
    if (verify.code == EXIT_NEGATIVE) != bool(doc.findings):
        message = f"ptah oci verify exited {verify.code} and reported {len(doc.findings)} findings"
        return failed(config, verify.code, INCONSISTENT, message)
    if doc.findings:
        names = ", ".join(f.requirement for f in doc.findings)
        return failed(config, verify.code, "verification_failed", f"unsatisfied: {names}")
    if inspect is None:
        return failed(config, -1, INCONSISTENT, "the artifact was not inspected")
    stopped = interrupted(config, inspect)
    if stopped is not None:
        return stopped
    if inspect.code != 0:
        return failed(
            config, inspect.code, "inspect_failed", f"ptah oci inspect exited {inspect.code}"
        )
    described = _decode_or_account(config, inspect, InspectDocument)
    if isinstance(described, RunnerResult):
        return described
    if described.digest != doc.digest:
        return failed(config, 0, INCONSISTENT, "ptah inspected another artifact than it verified")
    if described.artifact_type != config.expected_artifact_type:
        found, wanted = described.artifact_type, config.expected_artifact_type
        message = f"the artifact is a {found!r}, not a {wanted!r}"
        return failed(config, 0, "artifact_type_mismatch", message)
    return account(
        config,
        0,
        verify={
            "verification_policy_digest": policy_digest,
            "verification_requirements": list(doc.satisfied),
        },
    )


# -- observe -----------------------------------------------------------------------


def drift_report_digest(doc: DriftDocument) -> str:
    """What one comparison found, for audit: not a schema fingerprint (only a plan's is)."""
    return sha256_digest(
        canonical(
            {
                "dialect": doc.dialect.strip().lower(),
                "ignored_tables": list(doc.ignored_tables),
                "diff": doc.diff,
            }
        )
    )


def observe_account(config: RunConfig, child: ChildOutcome) -> RunnerResult:
    if child.code not in (0, EXIT_NEGATIVE):
        return failed(config, child.code, "drift_failed", f"ptah schema drift exited {child.code}")
    doc = _decode_or_account(config, child, DriftDocument)
    if isinstance(doc, RunnerResult):
        return doc
    if doc.error:
        return failed(config, child.code, "drift_failed", doc.error)
    if doc.failed != (child.code == EXIT_NEGATIVE):
        message = f"ptah schema drift exited {child.code} and reported failed={doc.failed}"
        return failed(config, child.code, INCONSISTENT, message)
    if not isinstance(doc.diff, dict):
        return failed(config, child.code, INVALID, "the drift report carries no comparison")
    if not dialect_matches(config.engine, doc.dialect):
        message = f"ptah observed a {doc.dialect!r} database, and the claim is for {config.engine}"
        return failed(config, child.code, "dialect_mismatch", message)
    findings = [f.model_dump() for f in doc.findings]
    return account(
        config,
        child.code,
        observe={
            "observed_dialect": doc.dialect,
            "observed_drift": doc.drift,
            "highest_drift_severity": doc.highest_severity if doc.drift else None,
            "drift_finding_count": len(findings),
            "drift_findings": findings[:MAX_FINDINGS],
            "drift_findings_truncated": len(findings) > MAX_FINDINGS,
            "drift_report_digest": drift_report_digest(doc),
        },
    )


# -- plan --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanRun:
    """One ``schema plan`` run and the bytes of the file it saved (None: none read)."""

    child: ChildOutcome
    saved: bytes | None = None


def _plan_refusal(config: RunConfig, code: int, report: PlanReport) -> RunnerResult:
    refusal = report.refusal
    if refusal is None:
        return failed(config, code, "plan_failed", "ptah could not make the plan")
    tables = f" ({', '.join(refusal.tables)})" if refusal.tables else ""
    return failed(config, code, "plan_refused", f"ptah refused the plan: {refusal.code}{tables}")


def plan_report(config: RunConfig, run: PlanRun) -> PlanReport | RunnerResult:
    """The first look at a plan run: its report, or the account that ends the run."""
    stopped = interrupted(config, run.child)
    if stopped is not None:
        return stopped
    report = _decode_or_account(config, run.child, PlanReport)
    if isinstance(report, RunnerResult):
        return report
    success = report.outcome in ("changes", "no-changes")
    if success != (run.child.code == 0):
        message = f"ptah schema plan exited {run.child.code} and reported {report.outcome}"
        return failed(config, run.child.code, INCONSISTENT, message)
    if not success:
        return _plan_refusal(config, run.child.code, report)
    return report


def plan_account(
    config: RunConfig,
    first: PlanRun,
    second: PlanRun | None,
    validation: ChildOutcome | None,
) -> RunnerResult:
    report = plan_report(config, first)
    if isinstance(report, RunnerResult):
        return report
    again = plan_report(config, second) if second is not None else None
    if isinstance(again, RunnerResult):
        return again
    if again is None or again.outcome != report.outcome:
        return failed(config, 0, "plan_unstable", "two plans of the same inputs disagree")
    if report.outcome == "no-changes":
        return account(
            config,
            0,
            plan={
                "plan_outcome": "NoChanges",
                "plan_content_digest": sha256_digest(b""),
                "statement_count": 0,
            },
        )
    content, repeated = first.saved, second.saved if second else None
    if content is None or repeated is None:
        return failed(config, 0, INVALID, "ptah reported a saved plan the runner cannot read")
    if content != repeated:
        return failed(
            config, 0, "plan_unstable", "two plans of the same inputs differ in their bytes"
        )
    digest = sha256_digest(content)
    if report.plan_digest != digest or again.plan_digest != digest:
        return failed(
            config, 0, INCONSISTENT, "ptah's plan digest is not the digest of its plan file"
        )
    try:
        plan = decode_plan(content, config.engine)
    except PlanRefused as refusal:
        return failed(config, 0, refusal.code, str(refusal))
    checked = _validation_problem(config, validation, digest)
    if checked is not None:
        return checked
    return account(
        config,
        0,
        plan={
            "plan_outcome": "Changes",
            "plan_content_digest": digest,
            "statement_count": len(plan.statements),
            "destructive": plan.any_destructive,
            "stdout": content.decode("utf-8"),
        },
    )


def _validation_problem(
    config: RunConfig, validation: ChildOutcome | None, digest: str
) -> RunnerResult | None:
    """Why ptah's own dry run of the saved plan does not vouch for it, or None."""
    if validation is None:
        return failed(config, -1, INCONSISTENT, "the plan was not validated")
    stopped = interrupted(config, validation)
    if stopped is not None:
        return stopped
    report = _decode_or_account(config, validation, ApplyReport)
    if isinstance(report, RunnerResult):
        return report
    code = validation.code
    if report.outcome != "dry-run" or code != 0:
        detail = f": {report.refusal.code}" if report.refusal else ""
        message = f"ptah's dry run of the plan reported {report.outcome}{detail}"
        return failed(config, code, "plan_validation_failed", message)
    if report.plan_digest and report.plan_digest != digest:
        return failed(config, code, INCONSISTENT, "ptah dry-ran another plan than it saved")
    return None


# -- apply -------------------------------------------------------------------------


def apply_account(config: RunConfig, child: ChildOutcome, statement_count: int) -> RunnerResult:
    stopped = interrupted(config, child)
    if stopped is not None:
        return stopped
    report = _decode_or_account(config, child, ApplyReport)
    if isinstance(report, RunnerResult):
        return report
    code, outcome = child.code, report.outcome
    if report.plan_digest and report.plan_digest != config.plan_content_digest:
        return unaccounted(config, code, INCONSISTENT, "ptah reports applying another plan")
    if outcome == "applied":
        if code != 0:
            return unaccounted(
                config, code, INCONSISTENT, f"ptah reported applied and exited {code}"
            )
        section = {
            "plan_content_digest": config.plan_content_digest,
            "statement_count": len(report.statements) or statement_count,
        }
        return account(config, 0, started=True, apply=section)
    if outcome in ("refused", "failed", "no-changes"):
        # ptah's contract: nothing of the plan reached the target.
        if code == 0:
            return unaccounted(config, code, INCONSISTENT, f"ptah reported {outcome} and exited 0")
        if outcome == "refused":
            assert report.refusal is not None
            refusal = report.refusal
            moved = f" ({refusal.changed} moved)" if refusal.changed else ""
            return failed(
                config, code, "apply_refused", f"ptah refused the plan: {refusal.code}{moved}"
            )
        if outcome == "no-changes":
            return failed(
                config, code, "apply_no_changes", "ptah found nothing to apply in the plan"
            )
        return failed(config, code, "apply_failed", "ptah could not apply the plan; nothing ran")
    if outcome == "dry-run":
        return unaccounted(config, code, INCONSISTENT, "ptah reported a dry run of a real apply")
    if outcome == "canceled":
        return unaccounted(config, code, "apply_canceled", "ptah's apply was canceled part way")
    return unaccounted(
        config, code, "apply_outcome_unknown", "ptah sent the plan and cannot say what ran"
    )


# -- migrations --------------------------------------------------------------------


def _key(version: int, records: Sequence[Any]) -> str:
    for record in records:
        if record.version == version and _VERSION_WORD.fullmatch(record.version_key or ""):
            return str(record.version_key)
    return str(version)


def history_section(doc: StatusDocument) -> dict[str, Any]:
    """The result's history section from ptah's status document."""
    records = doc.migrations
    pending = doc.versions_in("pending", "out-of-order")
    fingerprint = sha256_digest(canonical(doc.model_dump(mode="json")))
    return {
        "contract_version": doc.contract_version,
        "current_version": _key(doc.current_version, records) if doc.current_version else None,
        "checkpoint_version": _key(doc.checkpoint_version, records)
        if doc.checkpoint_version
        else None,
        "applied_count": len(doc.versions_in("applied", "modified", "dirty", "checkpoint-covered")),
        "pending_count": len(pending),
        "pending": [
            {
                "version": _key(m.version, records),
                "name": m.description or None,
                "digest": sha256_digest(canonical([m.version, m.version_key, m.checksum])),
            }
            for m in pending[:256]
        ],
        "fingerprint": fingerprint,
        "dirty": doc.dirty_revision is not None or bool(doc.versions_in("dirty")),
        "modified_versions": [_key(m.version, records) for m in doc.versions_in("modified")][:256],
        "out_of_order_versions": [
            _key(m.version, records) for m in doc.versions_in("out-of-order")
        ][:256],
        "ahead": history_ahead(doc),
    }


def history_ahead(doc: StatusDocument) -> bool:
    """Whether the database is at a version above every one the artifact holds: a
    history the artifact cannot describe, so nothing may be planned from it. Pure."""
    highest = max((m.version for m in doc.migrations), default=0)
    return doc.current_version > highest


def history_account(config: RunConfig, child: ChildOutcome) -> RunnerResult:
    if child.code not in (0, EXIT_NEGATIVE):
        message = f"ptah migrations status exited {child.code}"
        return failed(config, child.code, "history_failed", message)
    doc = _decode_or_account(config, child, StatusDocument)
    if isinstance(doc, RunnerResult):
        return doc
    if child.code == EXIT_NEGATIVE and not doc.has_pending_changes:
        message = "ptah migrations status exited 1 without pending migrations"
        return failed(config, child.code, INCONSISTENT, message)
    try:
        return account(config, child.code, migration_history=history_section(doc))
    except ValidationError as error:
        return failed(config, child.code, INVALID, first_problem(error))


_RUN_OUTCOMES: Final = {
    "up-to-date": "UpToDate",
    "applied": "Applied",
    "failed": "Failed",
    "partial": "Partial",
    "unknown": "Unknown",
}


def migration_account(config: RunConfig, child: ChildOutcome) -> RunnerResult:
    stopped = interrupted(config, child)
    if stopped is not None:
        return stopped
    doc = _decode_or_account(config, child, RunDocument)
    if isinstance(doc, RunnerResult):
        return doc
    code, approved = child.code, [entry.version for entry in config.sequence]
    keys = {entry.version: entry.version_key for entry in config.sequence}
    if doc.applied != approved[: len(doc.applied)]:
        return unaccounted(config, code, INCONSISTENT, "ptah reports versions outside the approval")
    versions = [keys[v] for v in doc.applied]
    outcome = doc.outcome
    error_text = one_line(doc.error, config.redactor) if doc.error else ""
    if outcome == "applied":
        if code != 0 or doc.applied != approved:
            return unaccounted(
                config, code, INCONSISTENT, "ptah's applied run is not the approved one"
            )
        run = {"outcome": "Applied", "applied_versions": versions}
        return account(config, 0, started=True, migration_run=run)
    if outcome == "failed":
        if code == 0 or doc.applied:
            return unaccounted(config, code, INCONSISTENT, "ptah's failed run contradicts itself")
        run = {"outcome": "Failed", "applied_versions": []}
        message = error_text or "ptah ran no migration"
        return account(config, code, error=("migration_failed", message), migration_run=run)
    if outcome == "partial" and code != 0 and doc.applied:
        run = {"outcome": "Partial", "applied_versions": versions}
        message = error_text or "ptah applied some of the approved migrations"
        return account(
            config, code, error=("migration_partial", message), started=True, migration_run=run
        )
    if outcome == "unknown":
        run = {"outcome": "Unknown", "applied_versions": versions}
        message = error_text or "ptah cannot say what the run applied"
        return account(
            config,
            code,
            error=("migration_outcome_unknown", message),
            started=True,
            uncertain=True,
            migration_run=run,
        )
    # up-to-date under an approved sequence is what ptah's plan guard makes impossible,
    # and a dry run is not what it was told to do: neither can be believed.
    return unaccounted(config, code, INCONSISTENT, f"ptah reported {outcome} for the approved run")


def too_large(config: RunConfig, result: RunnerResult) -> RunnerResult:
    """The account that replaces one too large for a record; it keeps no section."""
    message = "the executor's result is larger than a result record may carry"
    return unaccounted(config, result.child_exit_code, "result_too_large", message)
