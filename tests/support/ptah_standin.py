#!/usr/bin/env python3
"""A TEST STAND-IN for the ptah CLI: not ptah, and it says so (``--help``, ``version``).

The real ptah cannot be built here (the module proxy refuses it), so the runner's
end-to-end tests run this script where the Job runs ``/usr/local/bin/ptah``. It speaks
ptah's contract as ``../shared/reference/ptah-cli.md`` describes it, and is stricter
than ptah where strictness catches a runner bug:

* the command tree and flags of the commands the runner uses; an unknown command or
  flag is a usage error (exit 2, usage on stderr, nothing on stdout), as cobra does;
* every flag may come from its ``PTAH_<FLAG>`` twin, except ``--auto-approve``;
  any other ``PTAH_*`` variable in its environment is refused as a usage error, so a
  runner input leaking into ptah's environment fails the test;
* the database URL only from ``PTAH_DB_URL``; a command line holding a URL with a
  password is refused; Resolve and Verify refuse to run holding a database URL;
* documents as ptah prints them: snake_case, ``contract_version`` 1, exit 0 success,
  1 expected negative, 2 usage or runtime error.

A script in ``STANDIN_SCRIPT`` (JSON) changes what it reports or how it misbehaves:

    outcome      the outcome its document reports (per command: "plan", "apply", ...)
    document     print this JSON value instead of the document it would print
    stdout       print this raw text instead of any document
    exit         exit with this status (default: what the outcome means)
    stderr       lines to print on stderr first
    echo_url     print the database URL on stderr (a careless executor)
    drift        report drift (schema drift exits 1)
    findings     verification findings to report (oci verify exits 1)
    artifact_type  what oci inspect reports
    plan_salt    text mixed into the second plan, so two plans differ
    signal       kill itself with this signal number after printing
    hang         after printing, wait forever; with ignore_term it ignores SIGTERM
    holder       start a helper that keeps stdout and stderr open, PID to this path
    daemon       start a helper with its output closed, PID to this path
    log          append {"argv": [...], "env": {...PTAH_* names}} to this JSON-lines file
    ca_seen      write {"path": ..., "content": ...} of the PTAH_OCI_CA_FILE it was given here

Standard library only; it runs under whatever interpreter the test gives it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

BANNER = "ptah TEST STAND-IN (tests/support/ptah_standin.py): not ptah; speaks its CLI contract"
DIGEST = "sha256:" + hashlib.sha256(b"the stand-in artifact").hexdigest()
SCHEMA_TYPE = "application/vnd.stokaro.ptah.schema.v1"

# Each command the runner uses: its value flags, its boolean flags, its positionals.
COMMANDS: dict[tuple[str, ...], tuple[set[str], set[str], int]] = {
    ("oci", "resolve"): ({"format"}, set(), 1),
    ("oci", "verify"): ({"format", "policy"}, set(), 1),
    ("oci", "inspect"): ({"format"}, {"no-referrers"}, 1),
    ("schema", "drift"): (
        {"format", "db-url", "schema-file", "severity", "connect-timeout"},
        set(),
        0,
    ),
    ("schema", "plan"): (
        {
            "db-url",
            "schema-file",
            "dev-url",
            "exclude",
            "protected-table",
            "output",
            "name",
            "connect-timeout",
        },
        {"json", "save", "dry-run"},
        0,
    ),
    ("schema", "apply"): (
        {"db-url", "plan", "tx-mode", "lock-timeout", "connect-timeout", "dev-url"},
        {"json", "dry-run", "auto-approve"},
        0,
    ),
    ("migrations", "status"): ({"db-url", "migrations-dir", "connect-timeout"}, {"json"}, 0),
    ("migrations", "up"): (
        {
            "db-url",
            "migrations-dir",
            "tx-mode",
            "expect-sequence",
            "lock-timeout",
            "connect-timeout",
        },
        {"json"},
        0,
    ),
}
REPEATABLE = {"exclude", "protected-table", "schema-file"}
# ptah's own variables that are not a twin of the command's flags but are read by it.
OCI_ENV_PREFIX = "PTAH_OCI_"


def usage(message: str) -> NoReturn:
    print(f"Error: {message}\nUsage:\n  ptah <noun> <verb> [flags]\n\n{BANNER}", file=sys.stderr)
    raise SystemExit(2)


def emit(document: Any, script: dict[str, Any]) -> None:
    if "stdout" in script:
        sys.stdout.write(script["stdout"])
    else:
        value = script.get("document", document)
        sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def parse(argv: list[str]) -> tuple[tuple[str, ...], dict[str, list[str]], set[str], list[str]]:
    command = tuple(argv[:2])
    if command not in COMMANDS:
        usage(f"unknown command {' '.join(argv[:2])!r} for ptah")
    values, booleans, positionals = COMMANDS[command]
    flags: dict[str, list[str]] = {}
    switches: set[str] = set()
    operands: list[str] = []
    rest = argv[2:]
    while rest:
        word = rest.pop(0)
        if not word.startswith("--"):
            operands.append(word)
            continue
        name, _, inline = word[2:].partition("=")
        if name in booleans and not inline:
            switches.add(name)
        elif name in values:
            value = (
                inline
                if "=" in word
                else (rest.pop(0) if rest else usage(f"flag needs an argument: --{name}"))
            )
            if name in flags and name not in REPEATABLE:
                usage(f"--{name} given twice")
            flags.setdefault(name, []).append(value)
        else:
            usage(f"unknown flag: --{name}")
    if len(operands) != positionals:
        usage(f"accepts {positionals} arg(s), received {len(operands)}")
    for value in [*operands, *(v for vs in flags.values() for v in vs)]:
        if "://" in value and "@" in value.split("://", 1)[1].split("/", 1)[0]:
            usage("a command line must not carry a credential")
    # Every flag's PTAH_<FLAG> twin; an explicit flag wins. --auto-approve has none.
    for name in values:
        twin = "PTAH_" + name.upper().replace("-", "_")
        if name not in flags and os.environ.get(twin):
            flags[name] = [os.environ[twin]]
    twins = {"PTAH_" + n.upper().replace("-", "_") for n in values | booleans} - {
        "PTAH_AUTO_APPROVE"
    }
    twins |= {"PTAH_TX_MODE", "PTAH_LOCK_TIMEOUT", "PTAH_CONNECT_TIMEOUT", "PTAH_DB_URL"}
    twins |= {"PTAH_DEV_URL", "PTAH_SCHEMA_FILE"}
    strangers = sorted(
        name
        for name in os.environ
        if name.startswith("PTAH_") and name not in twins and not name.startswith(OCI_ENV_PREFIX)
    )
    if strangers:
        usage(f"unknown environment {', '.join(strangers)}: no flag of this command has that twin")
    return command, flags, switches, operands


def one(flags: dict[str, list[str]], name: str, *, required: bool = True) -> str:
    value = flags.get(name, [""])[-1]
    if required and not value:
        usage(f"required flag --{name} not set")
    return value


def database(flags: dict[str, list[str]]) -> str:
    url = one(flags, "db-url")
    if not url.startswith(("postgres://", "postgresql://", "mysql://")):
        print("Error: cannot connect: unsupported database URL", file=sys.stderr)
        raise SystemExit(2)
    return "postgres" if url.startswith("postgres") else "mysql"


def plan_file(dialect: str, salt: str) -> bytes:
    plan = {
        "format_version": 1,
        "name": "standin",
        "dialect": dialect,
        "from_fingerprint": "sha256:" + "0" * 64,
        "to_fingerprint": "sha256:" + "1" * 64,
        "destructive": False,
        "statements": [
            {
                "sql": f"CREATE TABLE orders (id bigint){salt};",
                "severity": "safe",
                "reason": "new table",
            },
            {
                "sql": "CREATE INDEX orders_id ON orders (id);",
                "severity": "safe",
                "reason": "new index",
            },
        ],
    }
    return json.dumps(plan, indent=2).encode() + b"\n"


def run(argv: list[str], script: dict[str, Any]) -> int:
    if not argv or argv[0] in ("--help", "-h", "help", "version", "--version"):
        print(BANNER)
        return 0
    command, flags, switches, operands = parse(argv)
    outcome = script.get("outcome")
    if command[0] == "oci":
        if os.environ.get("PTAH_DB_URL"):
            usage("an artifact command holds a database URL")
        if one(flags, "format") != "json":
            usage("--format must be json")
        reference = operands[0]
        base = reference.split("@", 1)[0]
        pinned = base + "@" + DIGEST
        if command[1] == "resolve":
            emit(
                {
                    "reference": reference,
                    "pinned_reference": pinned,
                    "digest": DIGEST,
                    "media_type": "application/vnd.oci.image.manifest.v1+json",
                    "size": 512,
                },
                script,
            )
            return int(script.get("exit", 0))
        if command[1] == "verify":
            Path(one(flags, "policy")).read_bytes()
            findings = script.get("findings", [])
            emit(
                {
                    "reference": reference,
                    "digest": reference.rsplit("@", 1)[-1],
                    "satisfied": [] if findings else ["signature"],
                    "findings": findings,
                },
                script,
            )
            return int(script.get("exit", 1 if findings else 0))
        emit(
            {
                "reference": reference,
                "pinned_reference": reference,
                "digest": reference.rsplit("@", 1)[-1],
                "media_type": "application/vnd.oci.image.manifest.v1+json",
                "size": 512,
                "artifact_type": script.get("artifact_type", SCHEMA_TYPE),
                "annotations": {"org.opencontainers.image.title": "schema"},
            },
            script,
        )
        return int(script.get("exit", 0))
    dialect = database(flags)
    if command == ("schema", "drift"):
        Path(one(flags, "schema-file")).read_bytes()
        drift = bool(script.get("drift"))
        findings = [{"category": "tables_added", "count": 1, "severity": "safe"}] if drift else []
        emit(
            {
                "drift": drift,
                "failed": drift,
                "failure_threshold": "all",
                "highest_severity": "safe" if drift else "",
                "dialect": dialect,
                "findings": findings,
                "diff": {"tables_added": ["orders"]} if drift else {},
                "error": "",
            },
            script,
        )
        return int(script.get("exit", 1 if drift else 0))
    if command == ("schema", "plan"):
        if "json" not in switches:
            usage("the stand-in speaks --json only")
        Path(one(flags, "schema-file")).read_bytes()
        output = one(flags, "output")
        outcome = outcome or "changes"
        if outcome == "changes":
            salt = script.get("plan_salt", "") if output.endswith("second.plan.json") else ""
            content = plan_file(dialect, salt)
            Path(output).write_bytes(content)
            digest = "sha256:" + hashlib.sha256(content).hexdigest()
            emit(
                {
                    "contract_version": 1,
                    "outcome": "changes",
                    "plan_digest": digest,
                    "plan_path": output,
                },
                script,
            )
            return int(script.get("exit", 0))
        refusal = (
            {"code": "protected-table", "tables": ["orders"]} if outcome == "refused" else None
        )
        document: dict[str, Any] = {"contract_version": 1, "outcome": outcome}
        if refusal:
            document["refusal"] = refusal
        if outcome == "failed":
            document["error"] = "SELECT secret FROM orders WHERE card = '4111'"
        emit(document, script)
        return int(script.get("exit", 0 if outcome == "no-changes" else 2))
    if command == ("schema", "apply"):
        if "json" not in switches:
            usage("the stand-in speaks --json only")
        if os.environ.get("PTAH_SCHEMA_FILE"):
            usage("--plan and a desired schema source are exclusive")
        dry = "dry-run" in switches
        if not dry and "auto-approve" not in switches:
            print("Error: approval required and no terminal to ask", file=sys.stderr)
            return 2
        content = Path(one(flags, "plan")).read_bytes()
        plan = json.loads(content)
        outcome = outcome or ("dry-run" if dry else "applied")
        document = {
            "contract_version": 1,
            "outcome": outcome,
            "plan_name": plan["name"],
            "plan_digest": "sha256:" + hashlib.sha256(content).hexdigest(),
        }
        if outcome in ("applied", "dry-run"):
            document["statements"] = [s["sql"] for s in plan["statements"]]
        if outcome == "refused":
            document["refusal"] = {"code": "stale-plan", "changed": "schema"}
        if outcome in ("failed", "unknown", "canceled"):
            document["error"] = "ERROR: duplicate key value (4111) in INSERT INTO orders"
        emit(document, script)
        return int(script.get("exit", 0 if outcome in ("applied", "dry-run", "no-changes") else 2))
    directory = Path(one(flags, "migrations-dir"))
    if not directory.is_dir():
        print(f"Error: migrations directory {directory} does not exist", file=sys.stderr)
        return 2
    if command == ("migrations", "status"):
        emit(
            {
                "contract_version": 1,
                "current_version": 3,
                "total_migrations": 5,
                "has_pending_changes": True,
                "migrations": [
                    {
                        "version": 3,
                        "version_key": "003",
                        "description": "three",
                        "checksum": "c3",
                        "state": "applied",
                    },
                    {
                        "version": 4,
                        "version_key": "004",
                        "description": "four",
                        "checksum": "c4",
                        "state": "pending",
                    },
                    {
                        "version": 5,
                        "version_key": "005",
                        "description": "five",
                        "checksum": "c5",
                        "state": "pending",
                    },
                ],
            },
            script,
        )
        return int(script.get("exit", 0))
    sequence = json.loads(Path(one(flags, "expect-sequence")).read_text())
    if set(sequence) != {"migrations"} or not isinstance(sequence["migrations"], list):
        usage("--expect-sequence: not an approved sequence document")
    approved = [entry["version"] for entry in sequence["migrations"]]
    outcome = outcome or "applied"
    applied = {"applied": approved, "partial": approved[:1], "unknown": approved[:1]}.get(
        outcome, []
    )
    document = {
        "contract_version": 1,
        "direction": "up",
        "outcome": outcome,
        "planned": approved,
        "applied": applied,
    }
    if outcome not in ("applied", "up-to-date"):
        document["error"] = (
            "the selected migrations are [2 3 4], the approved sequence is "
            f"{approved}: the history moved after approval, so nothing was run"
        )
    emit(document, script)
    return int(script.get("exit", 0 if outcome in ("applied", "up-to-date") else 2))


def main() -> int:
    script: dict[str, Any] = json.loads(os.environ.get("STANDIN_SCRIPT", "{}"))
    argv = sys.argv[1:]
    if script.get("log"):
        seen = {k: v for k, v in os.environ.items() if k.startswith("PTAH_")}
        with Path(script["log"]).open("a", encoding="utf-8") as log:
            log.write(json.dumps({"argv": argv, "env": sorted(seen)}) + "\n")
    if script.get("ca_seen") and os.environ.get("PTAH_OCI_CA_FILE"):
        path = os.environ["PTAH_OCI_CA_FILE"]
        seen_ca = {"path": path, "content": Path(path).read_text(encoding="utf-8")}
        Path(script["ca_seen"]).write_text(json.dumps(seen_ca), encoding="utf-8")
    if script.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in script.get("stderr", []):
        print(line, file=sys.stderr, flush=True)
    if script.get("echo_url"):
        print(f"connecting to {os.environ.get('PTAH_DB_URL', '')}", file=sys.stderr, flush=True)
    code = run(argv, script)
    if script.get("holder"):
        # A helper in the same process group that outlives this process and keeps
        # its pipes open, as a careless executor's background worker would.
        helper = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(60)"])
        Path(script["holder"]).write_text(str(helper.pid), encoding="utf-8")
    if script.get("daemon"):
        helper = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        Path(script["daemon"]).write_text(str(helper.pid), encoding="utf-8")
    if script.get("hang"):
        print("started", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)
    if script.get("signal"):
        os.kill(os.getpid(), int(script["signal"]))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
