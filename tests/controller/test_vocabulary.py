"""The published vocabulary is the code's: every condition reason and Event reason the
controller can emit is in ``controller.pieces.vocabulary``, and the committed reference pages
are the registry's render."""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from controller.context.passcontext import Family, Status
from controller.families.migration.dispatch import MIGRATION
from controller.families.schema.dispatch import SCHEMA
from controller.pieces.phasemachine import Decision, Event, Wait
from controller.pieces.vocabulary import (
    CONDITIONS,
    EVENTS,
    PHASES,
    READINGS,
    EventReason,
    render_conditions,
    render_events,
)
from controller.stages.conditions import conditions_for
from jobclaim import MIGRATION_OPERATIONS, SCHEMA_OPERATIONS
from jobclaim.api import PtahMigrationStatus, PtahRealm, PtahSchemaStatus
from jobclaim.api.migration import MigrationPhase
from jobclaim.api.schema import SchemaPhase
from jobclaim.realms import (
    REALM_REFUSAL_REASONS,
    RealmClaimant,
    realm_census,
    realm_conditions,
)
from manager import statusmetrics

ROOT = Path(__file__).resolve().parents[2]
SHIPPING = ("controller", "manager", "webhook", "jobclaim", "runner", "certs", "kube")
NOW = "2026-12-05T00:00:00Z"


@pytest.mark.parametrize(
    ("page", "render", "command"),
    [
        ("conditions.md", render_conditions, "conditions"),
        ("events.md", render_events, "events"),
    ],
)
def test_the_committed_reference_is_the_registrys_render(
    page: str, render: Any, command: str
) -> None:
    committed = (ROOT / "docs" / "reference" / page).read_text()
    hint = f"run: python -m controller.pieces.vocabulary {command} > docs/reference/{page}"
    assert committed == render(), hint
    printed = subprocess.run(
        [sys.executable, "-m", "controller.pieces.vocabulary", command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == committed


def test_every_event_reason_the_type_allows_has_its_entry() -> None:
    assert sorted(get_args(EventReason)) == sorted(EVENTS)


def crossings(source: str) -> Iterator[tuple[int, str | None, bool]]:
    """(line, reason literal or None, warning) for each ``.crossed(...)`` call."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "crossed"
        ):
            first = node.args[0] if node.args else None
            reason = first.value if isinstance(first, ast.Constant) else None
            warning = any(
                k.arg == "warning" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            )
            yield node.lineno, reason if isinstance(reason, str) else None, warning


def unregistered(source: str) -> list[str]:
    """Each ``crossed`` call whose reason is not a registered literal, or whose Normal or
    Warning type is not the registered one."""
    wrong = []
    for line, reason, warning in crossings(source):
        doc = EVENTS.get(reason) if reason else None  # type: ignore[call-overload]
        if doc is None:
            wrong.append(f"{line}: {reason!r} is not registered")
        elif (doc.type == "Warning") != warning:
            wrong.append(f"{line}: {reason} is sent as the wrong type")
    return wrong


CALL = 'ctx.crossed("JobCreated", "a note")\n'


@pytest.mark.parametrize(
    ("source", "wrong"),
    [
        (CALL, False),
        (CALL.replace("JobCreated", "JobMade"), True),
        (CALL.replace('"JobCreated"', "reason"), True),
        (CALL.replace('")', '", warning=True)'), True),
    ],
    ids=["registered", "unregistered", "not-a-literal", "wrong-type"],
)
def test_the_scan_refuses_a_reason_it_cannot_find_registered(source: str, wrong: bool) -> None:
    assert bool(unregistered(source)) is wrong


def test_every_event_the_code_sends_is_registered_with_its_type() -> None:
    found: dict[str, list[str]] = {}
    calls = 0
    for package in SHIPPING:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text()
            calls += sum(1 for _ in crossings(source))
            if wrong := unregistered(source):
                found[str(path.relative_to(ROOT))] = wrong
    assert calls > 40  # the scan sees the emitters, not an empty tree
    assert found == {}


def test_the_reasons_status_metrics_count_are_registered() -> None:
    counted = {
        statusmetrics.READING_FAILED,
        statusmetrics.APPROVAL_SPENT,
        statusmetrics.CLAIMED,
        statusmetrics.RELEASED,
        *statusmetrics.SETTLED_REASONS,
    }
    assert counted <= set(EVENTS)


def test_every_phase_is_described_once() -> None:
    assert set(PHASES) == set(get_args(SchemaPhase)) | set(get_args(MigrationPhase))


def test_every_reading_operation_has_its_failed_reason() -> None:
    readings = {
        op
        for table in (SCHEMA_OPERATIONS, MIGRATION_OPERATIONS)
        for op, info in table.items()
        if info.read_only
    }
    assert readings == set(READINGS)


FAMILIES: list[tuple[Family, str, tuple[str, ...], tuple[str, ...]]] = [
    (SCHEMA, "ptahschema.yaml", get_args(SchemaPhase), ("Resolve", "Verify", "Observe", "Plan")),
    (MIGRATION, "ptahmigration.yaml", get_args(MigrationPhase), ("Resolve", "Verify", "History")),
]


@functools.cache
def example_object(example: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "examples" / example).read_text())
    return loaded


def published(
    family: Family,
    example: str,
    phase: str,
    event: Event,
    failed: str | None,
    records: dict[str, Any] | None = None,
    code: str | None = None,
) -> list[tuple[str, str]]:
    records = records or {}
    obj = copy.deepcopy(example_object(example))
    obj["metadata"].update(generation=4, uid="00000000-0000-0000-0000-000000000004")
    obj["spec"]["suspend"] = event is Event.SUSPENDED
    status_type = PtahSchemaStatus if family is SCHEMA else PtahMigrationStatus
    failure = (
        {
            "operation": failed,
            "message": "refused",
            "failures": 1,
            "failedAt": NOW,
            "retryNotBefore": NOW,
            "code": code,
        }
        if failed
        else None
    )
    fields: dict[str, Any] = {"observedGeneration": 4, "phase": phase, "readingFailure": failure}
    fields.update(records)
    status: Status = status_type.model_validate(fields)
    decision = Decision(event, phase, None, Wait.INTERVAL)
    conditions = conditions_for(family, family.parse(obj), status, decision, now=NOW)
    return [(c.type, c.reason or "") for c in conditions]


ARTIFACT = {
    "reference": "registry.example/orders@sha256:" + "a" * 64,
    "digest": "sha256:" + "a" * 64,
}
HISTORY = {"observedAt": NOW, "fingerprint": "sha256:" + "b" * 64}
RECORDS: dict[str, list[dict[str, Any]]] = {
    "schema": [
        {
            "source": ARTIFACT,
            "observation": {
                "observedAt": NOW,
                "artifactDigest": ARTIFACT["digest"],
                "drift": False,
            },
        },
    ],
    "migration": [
        {"artifact": ARTIFACT, "history": HISTORY},
        {"artifact": ARTIFACT, "history": {**HISTORY, "dirty": True}},
        {"artifact": ARTIFACT, "history": {**HISTORY, "modifiedVersions": ["3"]}},
        {"artifact": ARTIFACT, "history": {**HISTORY, "outOfOrderVersions": ["2"]}},
        {"artifact": ARTIFACT, "history": {**HISTORY, "ahead": True}},
        {
            "artifact": ARTIFACT,
            "unresolvedRun": {
                "outcome": "Unknown",
                "operationID": "sha256:" + "c" * 64,
                "jobName": "run",
                "recordedAt": NOW,
            },
        },
    ],
}


def pinned_published(family: Family, obj: dict[str, Any]) -> list[tuple[str, str]]:
    status_type = PtahSchemaStatus if family is SCHEMA else PtahMigrationStatus
    status: Status = status_type.model_validate({"observedGeneration": 1, "phase": "InSync"})
    decision = Decision(Event.IN_SYNC, "InSync", None, Wait.INTERVAL)
    conditions = conditions_for(family, family.parse(obj), status, decision, now=NOW)
    return [(c.type, c.reason or "") for c in conditions]


def test_every_condition_the_code_writes_is_registered() -> None:
    # Every phase, every decision and every failed reading, for both families: the
    # reasons are a phase, an event's name or an operation's, so this is all of them.
    seen: set[tuple[str, str]] = set()
    for family, example, phases, readings in FAMILIES:
        for phase, event, failed in itertools.product(phases, Event, (None, *readings)):
            seen.update(published(family, example, phase, event, failed))
        # The records the phase-tied and freshness conditions also read: a resolved
        # artifact and a reading (a refresh failed, the database reached), an engine
        # refused, a migration's blocking records.
        for failed, records in itertools.product((None, *readings), RECORDS[family.name]):
            seen.update(published(family, example, "Blocked", Event.IN_SYNC, failed, records))
        for phase in phases:
            seen.update(
                published(family, example, phase, Event.IN_SYNC, "Observe", code="dialect_mismatch")
            )
        pinned = copy.deepcopy(example_object(example))
        spec = pinned["spec"]["desired" if family is SCHEMA else "artifact"]
        spec["ociRef"] = "registry.example/orders@sha256:" + "a" * 64
        seen.update(pinned_published(family, pinned))
    unknown = sorted(
        (kind, reason)
        for kind, reason in seen
        if kind not in CONDITIONS or reason not in CONDITIONS[kind].reasons
    )
    assert unknown == []
    # And the registry lists nothing the code cannot write.
    registered = {
        (kind, reason)
        for kind, doc in CONDITIONS.items()
        if set(doc.kinds) & {"PtahSchema", "PtahMigration"}
        for reason in doc.reasons
    }
    assert registered - seen <= {
        ("ArtifactResolved", "Resolved"),
        ("ArtifactVerified", "Verified"),
        ("PlanReady", "PlanPublished"),
        ("DriftDetected", "Drift"),
        # Written by the realm gate, not the phase machine: its reasons are a Literal.
        *(("RealmAdmitted", reason) for reason in REALM_REFUSAL_REASONS),
    }


def test_the_realm_gate_writes_only_registered_reasons() -> None:
    assert set(REALM_REFUSAL_REASONS) == set(CONDITIONS["RealmAdmitted"].reasons)


# -- the conditions written on decisions and realms ----------------------------------------


def _literal(node: ast.expr | None, names: dict[str, Any]) -> str | None:
    """A string literal, or a module-level string constant by name; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and isinstance(names.get(node.id), str):
        return str(names[node.id])
    return None


def written_conditions(source: str, names: dict[str, Any]) -> Iterator[tuple[int, str, str]]:
    """(line, type, reason) of each condition written as a dict literal (the keys
    ``type``, ``status`` and ``reason``: an Event has no ``status``); a value that is not
    a literal or a named constant is ``"?"``."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Dict):
            continue
        fields = {
            key.value: value
            for key, value in zip(node.keys, node.values, strict=True)
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
        }
        if {"type", "status", "reason"} <= fields.keys():
            kind = _literal(fields["type"], names) or "?"
            yield node.lineno, kind, _literal(fields["reason"], names) or "?"


def unregistered_conditions(source: str, names: dict[str, Any]) -> list[str]:
    return [
        f"{line}: {kind}={reason} is not registered"
        for line, kind, reason in written_conditions(source, names)
        if kind not in CONDITIONS or reason not in CONDITIONS[kind].reasons
    ]


WRITE = 'c = {"type": "Stale", "status": "True", "reason": "PlanInputsMoved", "message": "m"}\n'


@pytest.mark.parametrize(
    ("source", "wrong"),
    [
        (WRITE, False),
        (WRITE.replace('"PlanInputsMoved"', "STALE_REASON"), False),
        (WRITE.replace("PlanInputsMoved", "TagMoved"), True),
        (WRITE.replace('"Stale"', '"Outdated"'), True),
        (WRITE.replace('"PlanInputsMoved"', "reason"), True),
        (WRITE.replace('"PlanInputsMoved"', "NOT_A_STRING"), True),
    ],
    ids=[
        "registered",
        "named-constant",
        "unregistered-reason",
        "unregistered-type",
        "not-a-literal",
        "not-a-string",
    ],
)
def test_the_condition_scan_refuses_a_write_it_cannot_find_registered(
    source: str, wrong: bool
) -> None:
    names = {"STALE_REASON": "PlanInputsMoved", "NOT_A_STRING": 3}
    assert bool(unregistered_conditions(source, names)) is wrong


# A write whose reason is its function's parameter, and where the reasons passed are found.
PARAMETER_REASONS = {"controller/stages/approvalstaleness.py": "mark_plan_approvals_stale"}


def stale_reasons_passed(function: str) -> set[str]:
    """The reasons every call of ``function`` passes, and its default; "?" for one that
    is not a literal."""
    found: set[str] = set()
    for package in SHIPPING:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name == function:
                    kwonly = zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                    found |= {_literal(d, {}) or "?" for a, d in kwonly if a.arg == "reason"}
                elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == function:
                    found |= {
                        _literal(k.value, {}) or "?" for k in node.keywords if k.arg == "reason"
                    }
    return found


def test_every_condition_written_on_a_decision_is_registered() -> None:
    found: dict[str, list[str]] = {}
    writes = 0
    for package in SHIPPING:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            source = path.read_text()
            if not any(written_conditions(source, {})):
                continue  # imported only when it writes one (a __main__ would run)
            module = importlib.import_module(relative.removesuffix(".py").replace("/", "."))
            names = vars(module)
            writes += sum(1 for _ in written_conditions(source, names))
            if relative in PARAMETER_REASONS:
                names = {**names, "reason": "PlanInputsMoved"}  # checked below, call by call
            if wrong := unregistered_conditions(source, names):
                found[relative] = wrong
    assert writes >= 4  # approvals consumed and stale, settlements, acknowledgments
    assert found == {}
    passed = stale_reasons_passed(PARAMETER_REASONS["controller/stages/approvalstaleness.py"])
    assert passed == {"PlanInputsMoved", "ExecutionBindingChanged"}
    assert passed <= set(CONDITIONS["Stale"].reasons)


def test_a_realms_conflict_condition_says_only_registered_reasons() -> None:
    realm = PtahRealm.model_validate(
        {
            "metadata": {"name": "orders", "generation": 1},
            "spec": {"engine": "PostgreSQL", "sharing": "Exclusive"},
        }
    )
    claimants = [RealmClaimant("PtahSchema", "shop", name, False) for name in ("a", "b")]
    conflict = realm_census(realm, claimants)
    assert conflict is not None
    said = {
        (c.type, c.reason)
        for refusal in (None, conflict)
        for c in realm_conditions(realm, refusal, now=NOW) or []
    }
    assert said == {("RealmConflict", "NoConflict"), ("RealmConflict", "RealmConflict")}
    assert {reason for _, reason in said} == set(CONDITIONS["RealmConflict"].reasons)
