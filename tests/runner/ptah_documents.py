"""Documents ptah prints, WRITTEN BY HAND from ``../shared/reference/ptah-cli.md`` and
ptah's public sources (its ``--json`` contract, contract_version 1; the original
operator's ``internal/dataplane`` readers). Never generated from this runner's own
decoder: a fixture produced by the code under test could only agree with it.

Each constant is the exact text ptah writes on stdout, as a literal; long lines are
kept as ptah writes them.
"""

# ruff: noqa: E501

from __future__ import annotations

PINNED = "registry.example/shop/schema@sha256:" + "5" * 64
DIGEST5 = "sha256:" + "5" * 64

RESOLVE = """{"reference":"registry.example/shop/schema:v1",
 "pinned_reference":"registry.example/shop/schema:v1@sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "digest":"sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "media_type":"application/vnd.oci.image.manifest.v1+json","size":741}
"""

VERIFY_SATISFIED = """{"reference":"registry.example/shop/schema@sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "digest":"sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "satisfied":["signature","provenance"],"findings":[]}
"""

VERIFY_FINDING = """{"reference":"registry.example/shop/schema@sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "digest":"sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "satisfied":["signature"],
 "findings":[{"requirement":"provenance","detail":"no SLSA provenance attestation refers to the artifact"}]}
"""

INSPECT_SCHEMA = """{"reference":"registry.example/shop/schema@sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "pinned_reference":"registry.example/shop/schema@sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "digest":"sha256:5555555555555555555555555555555555555555555555555555555555555555",
 "media_type":"application/vnd.oci.image.manifest.v1+json","size":741,
 "artifact_type":"application/vnd.stokaro.ptah.schema.v1",
 "annotations":{"org.opencontainers.image.created":"2026-05-01T00:00:00Z"},"layers":[]}
"""

INSPECT_MIGRATIONS = INSPECT_SCHEMA.replace("ptah.schema.v1", "ptah.migrations.v1")

DRIFT_NONE = """{"drift":false,"failed":false,"failure_threshold":"all","highest_severity":"",
 "dialect":"postgres","sources":"schema.hcl","findings":[],"diff":{},"error":""}
"""

DRIFT_FOUND = """{"drift":true,"failed":true,"failure_threshold":"all","highest_severity":"destructive",
 "dialect":"postgres","sources":"schema.hcl","database_url":"postgres://db.internal:5432/orders",
 "ignored_tables":["audit_log"],
 "findings":[{"category":"tables_added","count":2,"severity":"safe"},
             {"category":"columns_removed","count":1,"severity":"destructive"}],
 "diff":{"tables_added":["invoices","refunds"],"columns_removed":["orders.note"]},"error":""}
"""

# Drift found, under a --severity threshold it does not meet: exit 0.
DRIFT_BELOW_THRESHOLD = """{"drift":true,"failed":false,"failure_threshold":"destructive",
 "highest_severity":"warning","dialect":"postgres",
 "findings":[{"category":"indexes_added","count":1,"severity":"warning"}],
 "diff":{"indexes_added":["orders_created_at"]},"error":""}
"""

DRIFT_ERROR = """{"drift":false,"failed":false,"highest_severity":"","dialect":"postgres",
 "error":"connect: dial tcp 10.0.0.7:5432: connection refused"}
"""

DRIFT_MYSQL = DRIFT_NONE.replace('"postgres"', '"mysql"')

PLAN_FILE = b"""{
  "format_version": 1,
  "name": "20260501120000",
  "dialect": "postgres",
  "from_fingerprint": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
  "to_fingerprint": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
  "exclude": [],
  "destructive": false,
  "statements": [
    {"sql": "CREATE TABLE \\"invoices\\" (\\"id\\" bigint NOT NULL);", "severity": "safe", "reason": "table added"},
    {"sql": "ALTER TABLE \\"orders\\" DROP COLUMN \\"note\\";", "severity": "destructive", "reason": "column removed"}
  ]
}
"""

PLAN_CHANGES = """{"contract_version":1,"outcome":"changes","plan_digest":"%s",
 "plan_path":"/tmp/ptah-runner-x/first.plan.json"}
"""

PLAN_NO_CHANGES = '{"contract_version":1,"outcome":"no-changes"}\n'

PLAN_REFUSED = """{"contract_version":1,"outcome":"refused",
 "refusal":{"code":"protected-table","tables":["payments"]},
 "error":"statement DELETE FROM payments WHERE card = '4111111111111111' touches a protected table"}
"""

PLAN_FAILED = """{"contract_version":1,"outcome":"failed",
 "error":"compute plan: column \\"ssn\\" value '078-05-1120' violates check"}
"""

APPLY_DRY_RUN = """{"contract_version":1,"outcome":"dry-run","plan_name":"20260501120000",
 "plan_digest":"%s","statements":["CREATE TABLE \\"invoices\\" (\\"id\\" bigint NOT NULL);"]}
"""

APPLY_APPLIED = """{"contract_version":1,"outcome":"applied","plan_name":"20260501120000",
 "plan_digest":"%s",
 "statements":["CREATE TABLE \\"invoices\\" (\\"id\\" bigint NOT NULL);",
               "ALTER TABLE \\"orders\\" DROP COLUMN \\"note\\";"]}
"""

APPLY_NO_CHANGES = '{"contract_version":1,"outcome":"no-changes","plan_name":"20260501120000"}\n'

APPLY_CANCELED = """{"contract_version":1,"outcome":"canceled","plan_name":"20260501120000",
 "error":"context canceled"}
"""

APPLY_REFUSED_STALE = """{"contract_version":1,"outcome":"refused","plan_name":"20260501120000",
 "refusal":{"code":"stale-plan","changed":"rows",
  "plan_fingerprint":"sha256:0000000000000000000000000000000000000000000000000000000000000000",
  "database_fingerprint":"sha256:9999999999999999999999999999999999999999999999999999999999999999"},
 "error":"the database no longer matches the plan"}
"""

APPLY_FAILED = """{"contract_version":1,"outcome":"failed","plan_name":"20260501120000",
 "error":"acquire advisory lock: timeout after 12s"}
"""

APPLY_UNKNOWN = """{"contract_version":1,"outcome":"unknown","plan_name":"20260501120000",
 "statements":["CREATE TABLE \\"invoices\\" (\\"id\\" bigint NOT NULL);"],
 "error":"ERROR: duplicate key value violates unique constraint (id)=(4111) in INSERT INTO orders"}
"""

STATUS_PENDING = """{"contract_version":1,"current_version":3,"total_migrations":5,
 "has_pending_changes":true,
 "migrations":[
  {"version":1,"version_key":"001","description":"create orders","checksum":"h1:aa","applied_checksum":"h1:aa","state":"checkpoint-covered","checkpoint":true},
  {"version":2,"version_key":"002","description":"add note","checksum":"h1:bb","applied_checksum":"h1:bb","state":"applied"},
  {"version":3,"version_key":"003","description":"index","checksum":"h1:cc","applied_checksum":"h1:cc","state":"applied","transaction_mode":"file"},
  {"version":4,"version_key":"004","description":"invoices","checksum":"h1:dd","state":"pending"},
  {"version":5,"version_key":"005","description":"refunds","checksum":"h1:ee","state":"pending"}]}
"""

STATUS_TROUBLED = """{"contract_version":1,"current_version":7,"checkpoint_version":1,
 "total_migrations":8,"has_pending_changes":true,
 "migrations":[
  {"version":5,"version_key":"005","checksum":"h1:ee","applied_checksum":"h1:e0","state":"modified"},
  {"version":6,"version_key":"006","checksum":"h1:ff","state":"out-of-order"},
  {"version":7,"version_key":"007","checksum":"h1:gg","state":"dirty"},
  {"version":8,"version_key":"008","checksum":"h1:hh","state":"pending"}],
 "dirty_revision":{"version":7,"applied":1,"total":3,"error":"relation already exists"}}
"""

STATUS_CURRENT = """{"contract_version":1,"current_version":5,"total_migrations":5,
 "has_pending_changes":false,"migrations":[]}
"""

RUN_APPLIED = """{"contract_version":1,"direction":"up","outcome":"applied","planned":[4,5],
 "applied":[4,5],
 "status":{"contract_version":1,"current_version":5,"total_migrations":5,"has_pending_changes":false}}
"""

RUN_HISTORY_MOVED = """{"contract_version":1,"direction":"up","outcome":"failed","planned":[2,3,4],
 "applied":[],
 "error":"selected migrations [2 3 4] do not match the approved sequence [4 5]: the history moved after approval, so nothing was run"}
"""

RUN_PARTIAL = """{"contract_version":1,"direction":"up","outcome":"partial","planned":[4,5],
 "applied":[4],"error":"migration 5: relation \\"refunds\\" already exists"}
"""

RUN_UNKNOWN = """{"contract_version":1,"direction":"up","outcome":"unknown","planned":[4,5],
 "applied":[4],"error":"migration 5: connection reset by peer during COMMIT"}
"""

RUN_UP_TO_DATE = """{"contract_version":1,"direction":"up","outcome":"up-to-date","planned":[],
 "applied":[]}
"""

RUN_DRY_RUN = """{"contract_version":1,"direction":"up","outcome":"dry-run","planned":[4,5],
 "applied":[]}
"""

RUN_DOWN = """{"contract_version":1,"direction":"down","outcome":"applied","planned":[5],
 "applied":[5]}
"""

GARBAGE = "panic: runtime error: index out of range [3] with length 3\n"
