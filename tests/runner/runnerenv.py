"""The environment the Job gives the runner for each operation (the shared variables, the
registry's and the database's, and each operation's own), at a fixed clock: what the
runner's contract, configuration and database-URL tests start from."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from runner import RUNNER_PROTOCOL_VERSION
from tests.runner import ptah_documents as docs
from tests.support.runnerrig import (
    COORD,
    OP_ID,
    SECRET_URL,
    SEQUENCE_DIGEST,
    SEQUENCE_DOCUMENT,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
PLAN_DIGEST = "sha256:" + hashlib.sha256(docs.PLAN_FILE).hexdigest()
REQUESTED = "registry.example/shop/schema:v1"
SHARED = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/ptah",
    "PTAH_BINARY": "/usr/local/bin/ptah",
    "PTAH_VERSION": "v0.4.0",
    "PTAH_EXPECTED_DATABASE_ENGINE": "PostgreSQL",
    "PTAH_OPERATION_ID": OP_ID,
    "PTAH_RUNNER_PROTOCOL_VERSION": str(RUNNER_PROTOCOL_VERSION),
    "PTAH_EXECUTION_NOT_AFTER": "2026-05-01T12:10:00Z",
    "PTAH_RUNNER_WORK_DIR": "/work",
}
# The registry credential and its grant: only the operations that reach the registry.
REGISTRY = {
    "PTAH_OCI_REGISTRY": "registry.example",
    "PTAH_OCI_USERNAME": "robot",
    "PTAH_OCI_PASSWORD": "registry-token-1",
}
DATABASE = {
    "PTAH_DB_URL": SECRET_URL,
    "PTAH_DEV_URL": "postgres://dev:devpass-1@dev.internal/scratch",
    "PTAH_COORDINATION_DIGEST": COORD,
    "PTAH_CONNECT_TIMEOUT": "7s",
    "PTAH_LOCK_TIMEOUT": "12s",
    "PTAH_TX_MODE": "all",
}
OPERATION_ENV: dict[str, dict[str, str]] = {
    "resolve": {**REGISTRY, "PTAH_REQUESTED_REFERENCE": REQUESTED},
    "verify": {
        **REGISTRY,
        "PTAH_RESOLVED_REFERENCE": docs.PINNED,
        "PTAH_VERIFICATION_POLICY": "/policy/policy.json",
        "PTAH_EXPECTED_ARTIFACT_TYPE": "application/vnd.stokaro.ptah.schema.v1",
    },
    "observe": {**DATABASE, "PTAH_SCHEMA_FILE": "/source/schema.hcl", "PTAH_EXCLUDE": "audit_*"},
    "plan": {
        **DATABASE,
        "PTAH_SCHEMA_FILE": "/source/schema.hcl",
        "PTAH_EXCLUDE": "audit_*,tmp_*",
        "PTAH_PROTECTED_TABLES": "payments",
    },
    "apply": {
        **DATABASE,
        "PTAH_SCHEMA_FILE": "/source/schema.hcl",
        "PTAH_PLAN_DIR": "/plan",
        "PTAH_EXPECTED_PLAN_CONTENT_DIGEST": PLAN_DIGEST,
    },
    "migration-history": {**DATABASE, "PTAH_MIGRATIONS_DIR": "/source/migrations"},
    "migration-apply": {
        **DATABASE,
        "PTAH_MIGRATIONS_DIR": "/source/migrations",
        "PTAH_TRANSACTION_MODE": "file",
        "PTAH_EXPECTED_MIGRATION_SEQUENCE": SEQUENCE_DOCUMENT,
        "PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST": SEQUENCE_DIGEST,
    },
}


def environment(operation: str) -> dict[str, str]:
    return {**SHARED, "PTAH_OPERATION": operation, **OPERATION_ENV[operation]}
