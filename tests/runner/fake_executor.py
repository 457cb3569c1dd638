"""A stand-in for the ptah executor: prints what a real one would, or misbehaves on cue.

Invoked by the runner exactly as the real executor is (``<path> <subcommand...>
--output json``), it reads a script from ``FAKE_EXECUTOR_SCRIPT`` (JSON, in the
environment the runner passes through) that says how to behave:

    report      the JSON report to print on stdout; "auto" builds a plausible
                successful report from the command line, as ptah would
    stdout      raw text to print on stdout instead of a report
    stderr      lines to print on stderr first
    exit        the exit status (default 0)
    signal      kill itself with this signal number instead of exiting
    hang        after printing, wait forever; with ignore_term it ignores SIGTERM
    echo_url    print the database URL on stderr (a careless executor)
    holder      start a helper that keeps stdout and stderr open, write its PID to
                this path, then exit
    daemon      start a helper with its output closed, write its PID to this path,
                then exit
    argv_file   write the command line it was given (as JSON) to this path

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
from typing import Any

TARGET = "sha256:" + hashlib.sha256(b"the test database").hexdigest()


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else ""


def auto_report(argv: list[str]) -> dict[str, Any]:
    """The report a real executor prints for a successful run of this command line."""
    digest = "sha256:" + "d" * 64
    words = argv[1:]
    if words[:1] == ["resolve"]:
        return {
            "resolve": {
                "resolvedDigest": digest,
                "resolvedReference": "registry.example/schema@" + digest,
                "resolvedMediaType": "application/vnd.ptah.schema.v1",
                "resolvedSize": 1234,
            }
        }
    if words[:1] == ["verify"]:
        return {"verify": {"verificationPolicyDigest": digest}}
    if words[:1] == ["observe"]:
        return {
            "targetIdentityDigest": TARGET,
            "observe": {
                "observedDialect": "postgresql-16",
                "observedDrift": False,
                "driftFindingCount": 0,
                "driftReportDigest": digest,
            },
        }
    if words[:1] == ["plan"]:
        return {
            "targetIdentityDigest": TARGET,
            "plan": {
                "planOutcome": "Changes",
                "planContentDigest": digest,
                "statementCount": 1,
                "stdout": "CREATE TABLE orders (id bigint);\n",
            },
        }
    if words[:1] == ["apply"]:
        return {
            "targetIdentityDigest": TARGET,
            "mutationStarted": True,
            "uncertain": False,
            "apply": {
                "planContentDigest": _flag(argv, "--plan-content-digest"),
                "statementCount": 1,
            },
        }
    if words[:2] == ["migrations", "history"]:
        return {
            "targetIdentityDigest": TARGET,
            "migrationHistory": {
                "contractVersion": 1,
                "appliedCount": 0,
                "pendingCount": 0,
                "fingerprint": digest,
            },
        }
    if words[:2] == ["migrations", "up"]:
        versions = [v for v in _flag(argv, "--expect-sequence").split(",") if v]
        return {
            "targetIdentityDigest": TARGET,
            "mutationStarted": True,
            "uncertain": False,
            "migrationRun": {"outcome": "Applied", "appliedVersions": versions},
        }
    return {"error": {"code": "usage", "message": "unknown command"}}


def main() -> int:
    script: dict[str, Any] = json.loads(os.environ.get("FAKE_EXECUTOR_SCRIPT", "{}"))
    argv = list(sys.argv)
    if script.get("argv_file"):
        Path(script["argv_file"]).write_text(json.dumps(argv), encoding="utf-8")
    if script.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in script.get("stderr", []):
        print(line, file=sys.stderr, flush=True)
    if script.get("echo_url"):
        url = os.environ.get("PTAH_DATABASE_URL", "")
        print(f"connecting to {url}", file=sys.stderr, flush=True)
    if "stdout" in script:
        sys.stdout.write(script["stdout"])
    elif "report" in script:
        report = script["report"]
        report = auto_report(argv) if report == "auto" else report
        sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    if script.get("holder"):
        # A helper in the same process group that outlives this process and keeps
        # its pipes open, as a careless executor's background worker would.
        helper = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(60)"])
        Path(script["holder"]).write_text(str(helper.pid), encoding="utf-8")
    if script.get("daemon"):
        # A helper that keeps running with its output closed: no pipe betrays it.
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
    return int(script.get("exit", 0))


if __name__ == "__main__":
    raise SystemExit(main())
