"""The command lines and environments the runner gives the real ``ptah`` CLI. Pure.

One table of steps per operation (``../shared/reference/ptah-cli.md``):

    resolve            oci resolve <requested> --format json
    verify             oci verify <resolved> --policy <file> --format json
                       oci inspect <resolved> --format json --no-referrers
    observe            schema drift --format json                  (exit 0 or 1)
    plan               schema plan --output <work>/first.plan.json --json
                         [--exclude=…] [--protected-table=…]
                       schema plan --output <work>/second.plan.json --json …   (bytes compared)
                       schema apply --plan <work>/first.plan.json --auto-approve --json --dry-run
    apply              schema apply --plan <work>/apply.plan.json --auto-approve --json
                         [--tx-mode file|none]
    migration-history  migrations status --migrations-dir <dir> --json
    migration-apply    migrations up --migrations-dir <dir> --json [--tx-mode file|none]
                       --expect-sequence <work>/expected-sequence.json

Everything else ptah reads from its environment, where every flag has a
``PTAH_<FLAG>`` twin. So the child's environment is the runner's minus every runner
input (a runner input left there would be a flag nobody put on the command line),
and per step minus what that step must not see: Apply's plan is its only desired
state, so it does not get the schema file; the plan's validation dry-run gets neither
the schema file nor the dev database. ``--auto-approve`` has no twin and is on argv.

The child's stderr reaches the Pod log only for the commands that cannot quote SQL:
``schema plan`` and ``schema apply`` can quote a statement with row values, so their
stderr is read for nothing but the runner's own judgement and never printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Final

from runner.config import (
    ENV_DB_URL,
    ENV_DEV_URL,
    ENV_SCHEMA_FILE,
    RUNNER_KEYS,
    Redactor,
    RunConfig,
    password_of,
)

FIRST_PLAN: Final = "first.plan.json"
SECOND_PLAN: Final = "second.plan.json"
APPLY_PLAN: Final = "apply.plan.json"
SEQUENCE_FILE: Final = "expected-sequence.json"


@dataclass(frozen=True, slots=True)
class Step:
    """One run of ptah: what it is for, its command line, its environment."""

    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    # Whether the child's stderr may reach the Pod log (prefixed and redacted).
    relay_stderr: bool


def work_path(config: RunConfig, name: str) -> str:
    return str(PurePosixPath(config.work_dir) / name)


def child_environment(
    env: Mapping[str, str], *, without: frozenset[str] = frozenset()
) -> tuple[tuple[str, str], ...]:
    """The runner's environment minus the runner's inputs and ``without``; sorted."""
    dropped = RUNNER_KEYS | without
    return tuple(sorted((k, v) for k, v in env.items() if k not in dropped))


def _plan_argv(config: RunConfig, output: str) -> tuple[str, ...]:
    return (
        config.ptah,
        "schema",
        "plan",
        "--output",
        work_path(config, output),
        "--json",
        *(f"--exclude={item}" for item in config.exclude),
        *(f"--protected-table={item}" for item in config.protected_tables),
    )


def _tx_mode(config: RunConfig) -> tuple[str, ...]:
    """The policy's transaction mode as a flag; ``all`` is what the child's environment
    (``PTAH_TX_MODE=all``) already says, so only another mode is written out."""
    mode = config.transaction_mode
    return ("--tx-mode", mode) if mode != "all" else ()


def steps(config: RunConfig, env: Mapping[str, str]) -> tuple[Step, ...]:
    """Every ptah run of the operation, in order."""
    ptah = config.ptah
    base = child_environment(env)
    operation = config.operation
    if operation == "resolve":
        argv = (ptah, "oci", "resolve", config.requested_reference, "--format", "json")
        return (Step("resolve", argv, base, True),)
    if operation == "verify":
        ref = config.resolved_reference
        verify = (ptah, "oci", "verify", ref, "--policy", config.verification_policy)
        inspect = (ptah, "oci", "inspect", ref, "--format", "json", "--no-referrers")
        return (
            Step("verify", (*verify, "--format", "json"), base, True),
            Step("inspect", inspect, base, True),
        )
    if operation == "observe":
        return (Step("drift", (ptah, "schema", "drift", "--format", "json"), base, True),)
    if operation == "plan":
        validate = (
            ptah,
            "schema",
            "apply",
            "--plan",
            work_path(config, FIRST_PLAN),
            "--auto-approve",
            "--json",
            "--dry-run",
        )
        bare = child_environment(env, without=frozenset({ENV_SCHEMA_FILE, ENV_DEV_URL}))
        return (
            Step("plan", _plan_argv(config, FIRST_PLAN), base, False),
            Step("plan-again", _plan_argv(config, SECOND_PLAN), base, False),
            Step("validate", validate, bare, False),
        )
    if operation == "apply":
        argv = (ptah, "schema", "apply", "--plan", work_path(config, APPLY_PLAN), "--auto-approve")
        plan_only = child_environment(env, without=frozenset({ENV_SCHEMA_FILE}))
        return (Step("apply", (*argv, "--json", *_tx_mode(config)), plan_only, False),)
    directory = ("--migrations-dir", config.migrations_dir, "--json")
    if operation == "migration-history":
        return (Step("status", (ptah, "migrations", "status", *directory), base, True),)
    if operation == "migration-apply":
        expect = ("--expect-sequence", work_path(config, SEQUENCE_FILE))
        up = (ptah, "migrations", "up", *directory, *_tx_mode(config), *expect)
        return (Step("up", up, base, True),)
    raise ValueError(f"{operation!r} is not a runner operation")


def argv_problem(argv: tuple[str, ...], redactor: Redactor) -> str | None:
    """Why a command line must not be run, or None.

    A command line is readable by every process on the node (``/proc/<pid>/cmdline``),
    so none may carry the database URL, its password, or any URL with a password.
    """
    for argument in argv:
        if redactor.holds(argument):
            return "a command line would carry the database credential"
        if "://" in argument and password_of(argument.split("=", 1)[-1]):
            return "a command line would carry a URL with a password"
    return None


def database_env_problem(step: Step) -> str | None:
    """Why a step's environment holds what its command must not see, or None."""
    names = {name for name, _ in step.env}
    if step.name in ("resolve", "verify", "inspect") and ENV_DB_URL in names:
        return f"{step.name} must not hold the database URL"
    return None
