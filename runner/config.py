"""What the runner is asked to do, read from the environment the Job builder writes.

Pure: every function takes the environment as a mapping and the time as a value, so
what the runner decides from its inputs is tested without a process.

Two kinds of problem are told apart. Without an operation and an operation ID no frame
can be bound to anything, so the runner writes none (``ConfigurationError``). Any
other problem is a ``Refusal``: a frame that says, before any child ran, why it did
not run; the controller then knows for certain that nothing changed.

The database URL is read only to hand it to the executor through the environment and
to know what to redact. It is never put on a command line (which any process on the
node can list) and never into a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

from runner.errors import ConfigurationError
from runner.result import (
    MAX_OPERATION_ID,
    MUTATING,
    PROTOCOL_MISMATCH,
    RUNNER_OPERATIONS,
    RUNNER_PROTOCOL_VERSION,
)
from runner.summary import TERMINATION_LOG

ENV_DATABASE_URL: Final = "PTAH_DATABASE_URL"
ENV_ENGINE: Final = "PTAH_ENGINE"
ENV_EXECUTOR: Final = "PTAH_EXECUTOR"
ENV_OPERATION: Final = "PTAH_OPERATION"
ENV_OPERATION_ID: Final = "PTAH_OPERATION_ID"
ENV_PROTOCOL: Final = "PTAH_RUNNER_PROTOCOL"
ENV_NOT_AFTER: Final = "PTAH_EXECUTION_NOT_AFTER"
ENV_PLAN_DIR: Final = "PTAH_PLAN_DIR"
ENV_PLAN_DIGEST: Final = "PTAH_PLAN_CONTENT_DIGEST"
ENV_EXPECT_SEQUENCE: Final = "PTAH_EXPECT_SEQUENCE"
# Tuning, not set by the Job builder: where the summary goes and how long to wait.
ENV_TERMINATION_LOG: Final = "PTAH_TERMINATION_LOG"
ENV_KILL_GRACE: Final = "PTAH_KILL_GRACE_SECONDS"
ENV_DRAIN: Final = "PTAH_DRAIN_SECONDS"

ENGINES: Final = ("PostgreSQL", "MySQL")
DEFAULT_KILL_GRACE: Final = 10.0
DEFAULT_DRAIN: Final = 2.0
MAX_TUNING_SECONDS: Final = 30.0
REDACTED: Final = "[redacted]"
# A shorter password would redact ordinary words out of every message it appears in.
MIN_REDACTED_SECRET: Final = 6

_RFC3339: Final = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"
)
_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
_VERSION: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_DSN_PASSWORD: Final = re.compile(r"^[^:/@\s]+:([^@\s]+)@")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the runner will not start the executor; becomes a frame with exit code -1."""

    code: str
    message: str
    protocol_version: int = RUNNER_PROTOCOL_VERSION


class Redactor:
    """Removes the database URL and its password from text copied out of the child."""

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = {s for s in secrets if s}
        # Longest first, so a URL is replaced whole before its password is looked for.
        self._text = sorted(unique, key=len, reverse=True)
        self._bytes = [s.encode("utf-8", "surrogateescape") for s in self._text]
        self.longest = max((len(s) for s in self._bytes), default=0)

    def __repr__(self) -> str:
        return f"Redactor({len(self._text)} secrets)"

    def text(self, value: str) -> str:
        for secret in self._text:
            value = value.replace(secret, REDACTED)
        return value

    def data(self, value: bytes) -> bytes:
        for secret in self._bytes:
            value = value.replace(secret, REDACTED.encode("ascii"))
        return value


def secrets_of(url: str) -> tuple[str, ...]:
    """The URL and, when one can be found, its password (raw and percent-decoded)."""
    found = [url]
    password: str | None = None
    try:
        if "://" in url:
            password = urlsplit(url).password
        else:
            match = _DSN_PASSWORD.match(url)
            password = match.group(1) if match else None
    except ValueError:
        password = None
    if password:
        found.extend(p for p in (password, unquote(password)) if len(p) >= MIN_REDACTED_SECRET)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class RunConfig:
    operation: str
    operation_id: str
    executor: str
    execution_not_after: datetime | None = None
    plan_dir: str | None = None
    plan_content_digest: str | None = None
    expect_sequence: tuple[str, ...] = ()
    kill_grace_seconds: float = DEFAULT_KILL_GRACE
    drain_seconds: float = DEFAULT_DRAIN
    redactor: Redactor = field(default_factory=lambda: Redactor(()))

    @property
    def mutating(self) -> bool:
        return MUTATING[self.operation]


def _clean(value: str) -> bool:
    return bool(value) and value == value.strip() and _CONTROL.search(value) is None


def bind(env: Mapping[str, str]) -> tuple[str, str]:
    """The operation and operation ID every frame of this run is bound to."""
    operation = env.get(ENV_OPERATION, "")
    if operation not in RUNNER_OPERATIONS:
        raise ConfigurationError(f"{ENV_OPERATION} must name one of {', '.join(RUNNER_OPERATIONS)}")
    operation_id = env.get(ENV_OPERATION_ID, "")
    if not _clean(operation_id) or len(operation_id) > MAX_OPERATION_ID:
        raise ConfigurationError(
            f"{ENV_OPERATION_ID} must be one line of 1 to {MAX_OPERATION_ID} characters"
        )
    return operation, operation_id


def termination_log(env: Mapping[str, str]) -> Path:
    return Path(env.get(ENV_TERMINATION_LOG) or TERMINATION_LOG)


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 time with its zone, or None. Python reads many more spellings."""
    if not _RFC3339.fullmatch(value):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _seconds(env: Mapping[str, str], name: str, default: float) -> float | Refusal:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TUNING_SECONDS:
        return Refusal("configuration_invalid", f"{name} must be seconds in (0, 30]")
    return value


def _protocol(env: Mapping[str, str]) -> Refusal | None:
    raw = env.get(ENV_PROTOCOL, "")
    if raw == str(RUNNER_PROTOCOL_VERSION):
        return None
    # Answer in the version the Job asked for, so a controller of that version can
    # read the refusal; an unreadable request is answered in this runner's own.
    asked = int(raw) if re.fullmatch(r"[1-9][0-9]{0,8}", raw) else RUNNER_PROTOCOL_VERSION
    return Refusal(
        PROTOCOL_MISMATCH,
        f"this runner speaks protocol {RUNNER_PROTOCOL_VERSION}, and the Job asked for {raw!r}",
        protocol_version=asked,
    )


@dataclass(frozen=True, slots=True)
class _Inputs:
    plan_dir: str | None = None
    plan_content_digest: str | None = None
    expect_sequence: tuple[str, ...] = ()


def _operation_inputs(operation: str, env: Mapping[str, str]) -> _Inputs | Refusal:
    if operation == "apply":
        plan_dir, digest = env.get(ENV_PLAN_DIR, ""), env.get(ENV_PLAN_DIGEST, "")
        if not plan_dir.startswith("/") or not _clean(plan_dir):
            return Refusal("configuration_invalid", f"an apply needs {ENV_PLAN_DIR}")
        if not _DIGEST.fullmatch(digest):
            return Refusal("configuration_invalid", f"{ENV_PLAN_DIGEST} is not a sha256 digest")
        return _Inputs(plan_dir=plan_dir, plan_content_digest=digest)
    if operation == "migration-apply":
        sequence = tuple(env.get(ENV_EXPECT_SEQUENCE, "").split(","))
        if not all(_VERSION.fullmatch(v) for v in sequence) or len(set(sequence)) != len(sequence):
            return Refusal(
                "configuration_invalid",
                f"{ENV_EXPECT_SEQUENCE} must list distinct migration versions, comma-separated",
            )
        return _Inputs(expect_sequence=sequence)
    return _Inputs()


def prepare(
    env: Mapping[str, str], operation: str, operation_id: str, *, now: datetime
) -> RunConfig | Refusal:
    """The run the environment asks for, or why it must not start."""
    refusal = _protocol(env)
    if refusal:
        return refusal
    executor = env.get(ENV_EXECUTOR, "")
    if not executor.startswith("/") or not _clean(executor):
        return Refusal("configuration_invalid", f"{ENV_EXECUTOR} must be an absolute path")
    if env.get(ENV_ENGINE) not in ENGINES:
        return Refusal("configuration_invalid", f"{ENV_ENGINE} must be PostgreSQL or MySQL")
    url = env.get(ENV_DATABASE_URL, "")
    if not url:
        return Refusal("configuration_invalid", f"{ENV_DATABASE_URL} is not set")
    raw_deadline = env.get(ENV_NOT_AFTER)
    deadline = parse_time(raw_deadline) if raw_deadline is not None else None
    if raw_deadline is not None and deadline is None:
        return Refusal("configuration_invalid", f"{ENV_NOT_AFTER} is not an RFC 3339 time")
    if deadline is None and MUTATING[operation]:
        # Without a deadline nothing stops the child before the Lease lapses, and a
        # mutation running past it would share the database with the next claimant.
        return Refusal("execution_deadline_missing", "a mutating operation needs a deadline")
    if deadline is not None and deadline <= now:
        return Refusal("execution_deadline_passed", "the claim's execution deadline has passed")
    inputs = _operation_inputs(operation, env)
    if isinstance(inputs, Refusal):
        return inputs
    grace = _seconds(env, ENV_KILL_GRACE, DEFAULT_KILL_GRACE)
    if isinstance(grace, Refusal):
        return grace
    drain = _seconds(env, ENV_DRAIN, DEFAULT_DRAIN)
    if isinstance(drain, Refusal):
        return drain
    return RunConfig(
        operation=operation,
        operation_id=operation_id,
        executor=executor,
        execution_not_after=deadline,
        plan_dir=inputs.plan_dir,
        plan_content_digest=inputs.plan_content_digest,
        expect_sequence=inputs.expect_sequence,
        kill_grace_seconds=grace,
        drain_seconds=drain,
        redactor=Redactor(secrets_of(url)),
    )


def executor_argv(config: RunConfig) -> list[str]:
    """The executor's command line. Everything else it reads from the environment."""
    arguments: dict[str, list[str]] = {
        "resolve": ["resolve"],
        "verify": ["verify"],
        "observe": ["observe"],
        "plan": ["plan"],
        "apply": [
            "apply",
            "--plan-dir",
            config.plan_dir or "",
            "--plan-content-digest",
            config.plan_content_digest or "",
        ],
        "migration-history": ["migrations", "history"],
        # ptah compares the approved sequence with what it selects under its own
        # migration lock, and refuses before changing anything when history moved.
        "migration-apply": [
            "migrations",
            "up",
            "--expect-sequence",
            ",".join(config.expect_sequence),
        ],
    }
    return [config.executor, *arguments[config.operation], "--output", "json"]
