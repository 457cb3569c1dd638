"""What the runner reads from the Job's environment: bound, prepared, or refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.config import (
    MINIMUM_PTAH_DESCRIBE,
    RunConfig,
    StartRefusal,
    bind,
    build_problem,
    parse_time,
    prepare,
    termination_log,
)
from runner.errors import ConfigurationError
from tests.runner.runnerenv import NOW, REGISTRY, environment
from tests.support.runnerrig import OP_ID, SEQUENCE_DIGEST


def env(operation: str = "apply", /, **changes: str | None) -> dict[str, str]:
    base = environment(operation)
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    return base


@pytest.mark.parametrize(
    ("name", "changes", "problem"),
    [
        ("control", {}, None),
        ("no operation", {"PTAH_OPERATION": None}, "PTAH_OPERATION must name one of"),
        ("unknown operation", {"PTAH_OPERATION": "drop"}, "PTAH_OPERATION must name one of"),
        ("no operation ID", {"PTAH_OPERATION_ID": ""}, "PTAH_OPERATION_ID must be one line"),
        ("operation ID of two lines", {"PTAH_OPERATION_ID": "a\nb"}, "must be one line"),
        ("operation ID too long", {"PTAH_OPERATION_ID": "x" * 254}, "1 to 253 characters"),
    ],
)
def test_bind(name: str, changes: dict[str, str | None], problem: str | None) -> None:
    if problem is None:
        assert bind(env(**changes)) == ("apply", OP_ID)
    else:
        with pytest.raises(ConfigurationError, match=problem):
            bind(env(**changes))


OTHER = "sha256:" + "9" * 64
NO_REGISTRY: dict[str, str | None] = dict.fromkeys(REGISTRY)
PINNED_CA: dict[str, str | None] = {
    "PTAH_OCI_CA_FILE": "/registry-ca/ca.pem",
    "PTAH_EXPECTED_OCI_CA_DIGEST": OTHER,
}
MYSQL_URL = "mysql://ptah:s3cret-Pa55word@db.internal:3306/orders"
# Each row: the operation, one change to a valid environment, the refusal code.
REFUSALS: list[tuple[str, str, dict[str, str | None], str | None]] = [
    ("control apply", "apply", {}, None),
    ("control resolve", "resolve", {}, None),
    ("control verify", "verify", {}, None),
    ("control observe", "observe", {}, None),
    ("control plan", "plan", {}, None),
    ("control history", "migration-history", {}, None),
    ("control migration apply", "migration-apply", {}, None),
    (
        "another protocol",
        "apply",
        {"PTAH_RUNNER_PROTOCOL_VERSION": "4"},
        "runner_protocol_mismatch",
    ),
    (
        "a Job of the previous protocol",
        "observe",
        {"PTAH_RUNNER_PROTOCOL_VERSION": "5"},
        "runner_protocol_mismatch",
    ),
    ("no ptah", "apply", {"PTAH_BINARY": "ptah"}, "configuration_invalid"),
    ("an old ptah", "apply", {"PTAH_VERSION": "v0.3.0-12-gabcdef0"}, "ptah_build_unsupported"),
    ("an unreadable ptah build", "apply", {"PTAH_VERSION": "latest"}, "ptah_build_unsupported"),
    ("no engine", "apply", {"PTAH_EXPECTED_DATABASE_ENGINE": None}, "dialect_mismatch"),
    ("a URL of another engine", "apply", {"PTAH_DB_URL": MYSQL_URL}, "dialect_mismatch"),
    ("no database URL", "apply", {"PTAH_DB_URL": None}, "configuration_invalid"),
    ("no deadline", "apply", {"PTAH_EXECUTION_NOT_AFTER": None}, "execution_deadline_missing"),
    (
        "a deadline passed",
        "migration-apply",
        {"PTAH_EXECUTION_NOT_AFTER": "2026-05-01T11:59:59Z"},
        "execution_deadline_passed",
    ),
    ("a bad deadline", "apply", {"PTAH_EXECUTION_NOT_AFTER": "tomorrow"}, "configuration_invalid"),
    ("no deadline, read-only", "plan", {"PTAH_EXECUTION_NOT_AFTER": None}, None),
    (
        "a plan made for another database",
        "apply",
        {"PTAH_EXPECTED_TARGET_IDENTITY_DIGEST": OTHER},
        "target_identity_mismatch",
    ),
    (
        "a plan digest that is not one",
        "apply",
        {"PTAH_EXPECTED_PLAN_CONTENT_DIGEST": "x"},
        "configuration_invalid",
    ),
    ("a relative plan dir", "apply", {"PTAH_PLAN_DIR": "plan"}, "configuration_invalid"),
    ("resolve holding a database", "resolve", {"PTAH_DB_URL": MYSQL_URL}, "configuration_invalid"),
    (
        "a reference with a credential",
        "resolve",
        {"PTAH_REQUESTED_REFERENCE": "oci://robot:hunter22@registry.example/a:v1"},
        "credential_in_argv",
    ),
    (
        "a reference that is a flag",
        "verify",
        {"PTAH_RESOLVED_REFERENCE": "--help"},
        "configuration_invalid",
    ),
    ("no schema for a plan", "plan", {"PTAH_SCHEMA_FILE": None}, "configuration_invalid"),
    ("resolve without a registry credential", "resolve", NO_REGISTRY, None),
    ("a grant spelled in capitals", "verify", {"PTAH_OCI_REGISTRY": "Registry.Example"}, None),
    (
        "a credential granted for another registry",
        "resolve",
        {"PTAH_OCI_REGISTRY": "registry.elsewhere"},
        "registry_grant_mismatch",
    ),
    (
        "a credential granted for another port",
        "verify",
        {"PTAH_OCI_REGISTRY": "registry.example:5000"},
        "registry_grant_mismatch",
    ),
    (
        "a credential with no grant",
        "resolve",
        {"PTAH_OCI_REGISTRY": None},
        "registry_grant_missing",
    ),
    (
        "a token with no grant",
        "verify",
        {**NO_REGISTRY, "PTAH_OCI_TOKEN": "registry-token-2"},
        "registry_grant_missing",
    ),
    (
        "a plan holding a registry credential",
        "plan",
        {"PTAH_OCI_PASSWORD": "registry-token-1"},
        "configuration_invalid",
    ),
    (
        "a migration apply holding a registry grant",
        "migration-apply",
        {"PTAH_OCI_REGISTRY": "registry.example"},
        "configuration_invalid",
    ),
    ("resolve trusting a pinned CA bundle", "resolve", PINNED_CA, None),
    ("verify trusting a pinned CA bundle", "verify", PINNED_CA, None),
    (
        "a CA bundle the claim did not pin",
        "resolve",
        {"PTAH_OCI_CA_FILE": "/registry-ca/ca.pem"},
        "registry_ca_unpinned",
    ),
    (
        "a pin with no bundle",
        "verify",
        {"PTAH_EXPECTED_OCI_CA_DIGEST": OTHER},
        "configuration_invalid",
    ),
    (
        "a pin that is not a digest",
        "resolve",
        {**PINNED_CA, "PTAH_EXPECTED_OCI_CA_DIGEST": "sha256:x"},
        "configuration_invalid",
    ),
    (
        "a relative CA bundle",
        "verify",
        {**PINNED_CA, "PTAH_OCI_CA_FILE": "ca.pem"},
        "configuration_invalid",
    ),
    (
        "a plan holding the CA bundle",
        "plan",
        {"PTAH_OCI_CA_FILE": "/registry-ca/ca.pem"},
        "configuration_invalid",
    ),
    (
        "a migration apply holding a docker config",
        "migration-apply",
        {"DOCKER_CONFIG": "/registry-auth"},
        "configuration_invalid",
    ),
    (
        "resolve reading a docker config, no grant needed",
        "resolve",
        {**NO_REGISTRY, "DOCKER_CONFIG": "/registry-auth"},
        None,
    ),
    ("no dev database, read-only", "observe", {"PTAH_DEV_URL": None}, None),
    (
        "a dev database that is the target",
        "plan",
        {"PTAH_DEV_URL": "postgres://ptah:s3cret-Pa55word@db.internal:5432/orders"},
        "dev_database_is_target",
    ),
    (
        "a dev database that is the target as another user",
        "observe",
        {"PTAH_DEV_URL": "postgresql://scratch:other-pw1@DB.internal/orders"},
        "dev_database_is_target",
    ),
    (
        "a dev database in the target's server",
        "plan",
        {"PTAH_DEV_URL": "postgres://ptah:s3cret-Pa55word@db.internal:5432/scratch"},
        None,
    ),
    (
        "a dev database of another engine",
        "observe",
        {"PTAH_DEV_URL": MYSQL_URL},
        "configuration_invalid",
    ),
    (
        "verify holding a dev database",
        "verify",
        {"PTAH_DEV_URL": "postgres://dev:devpass-1@dev.internal/scratch"},
        "configuration_invalid",
    ),
    ("an exclusion that is not a name", "plan", {"PTAH_EXCLUDE": "a b"}, "configuration_invalid"),
    (
        "a sequence that is not the sealed one",
        "migration-apply",
        {"PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST": OTHER},
        "migration_sequence_mismatch",
    ),
    (
        "a comma list, not ptah's document",
        "migration-apply",
        {"PTAH_EXPECTED_MIGRATION_SEQUENCE": "004,005"},
        "migration_sequence_mismatch",
    ),
    (
        "no migrations dir",
        "migration-history",
        {"PTAH_MIGRATIONS_DIR": None},
        "configuration_invalid",
    ),
    (
        "an unknown tx mode",
        "migration-apply",
        {"PTAH_TRANSACTION_MODE": "some"},
        "configuration_invalid",
    ),
    (
        "an unknown tx mode for a schema apply",
        "apply",
        {"PTAH_TRANSACTION_MODE": "each"},
        "configuration_invalid",
    ),
]


@pytest.mark.parametrize(
    ("name", "operation", "changes", "code"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_prepare(
    name: str, operation: str, changes: dict[str, str | None], code: str | None
) -> None:
    prepared = prepare(env(operation, **changes), operation, OP_ID, now=NOW)
    if code is None:
        assert isinstance(prepared, RunConfig), prepared
    else:
        assert isinstance(prepared, StartRefusal) and prepared.code == code, prepared


def test_a_sequence_document_sealed_by_its_digest_is_what_ptah_gets() -> None:
    prepared = prepare(env("migration-apply"), "migration-apply", OP_ID, now=NOW)
    assert isinstance(prepared, RunConfig)
    assert [(e.version, e.version_key) for e in prepared.sequence] == [(4, "004"), (5, "005")]
    assert SEQUENCE_DIGEST.startswith("sha256:")


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("v0.3.0-201-g00fc362c9", True),
        ("v0.3.0-200-g00fc362c9", False),
        ("0.4.0", True),
        ("v1.9.0", True),
        ("v0.2.9", False),
        ("v0.3.0", False),
        ("nightly", False),
    ],
)
def test_the_minimum_ptah_build(version: str, supported: bool) -> None:
    assert (build_problem(version) is None) is supported
    assert MINIMUM_PTAH_DESCRIBE == "v0.3.0-201"


def test_a_protocol_mismatch_is_answered_in_the_version_asked_for() -> None:
    refusal = prepare(env(PTAH_RUNNER_PROTOCOL_VERSION="4"), "apply", OP_ID, now=NOW)
    assert isinstance(refusal, StartRefusal) and refusal.protocol_version == 4


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("2026-05-01T12:00:00Z", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("2026-05-01T12:00:00.5+00:00", datetime(2026, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2026-05-01 12:00:00Z", None),
        ("2026-05-01T12:00:00", None),
        ("20260501T120000Z", None),
    ],
)
def test_parse_time_reads_rfc3339_only(value: str, parsed: datetime | None) -> None:
    assert parse_time(value) == parsed


def test_termination_log_defaults_to_the_kubelets_path() -> None:
    assert termination_log({}) == Path("/dev/termination-log")
    assert termination_log({"PTAH_TERMINATION_LOG": "/x"}) == Path("/x")


def test_a_registry_secret_ptah_echoes_is_redacted() -> None:
    prepared = prepare(env("resolve"), "resolve", OP_ID, now=NOW)
    assert isinstance(prepared, RunConfig)
    said = prepared.redactor.text("401 for robot:registry-token-1")
    assert said == "401 for robot:[redacted]"
