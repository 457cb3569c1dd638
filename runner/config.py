"""What the runner is asked to do, read from the environment the Job builder writes.

Pure: every function takes the environment as a mapping and the time as a value, so
what the runner decides from its inputs is tested without a process.

Two kinds of problem are told apart. Without an operation and an operation ID no result
can be bound to anything, so the runner writes none (``ConfigurationError``). Any
other problem is a ``StartRefusal``: a result that says, before any child ran, why it did
not run; the controller then knows for certain that nothing changed.

The names are the original runner's (``../shared/reference/ptah-cli.md``). Every
``PTAH_*`` name here is the runner's own, and none reaches ptah: ptah reads every flag
from a ``PTAH_<FLAG>`` twin, so a runner input left in the child's environment would
be a flag nobody put on its command line (``ptahcli.child_environment``).

The database URL (``PTAH_DB_URL``, ptah's own twin of ``--db-url``) is read only to
know what to redact and which database the run opens; it reaches ptah through the
environment, never a command line (which any process on the node can list).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

from jobclaim import RECORD_IDENTITY_ENV
from jobclaim.times import parse_time
from runner.dburl import url_problem
from runner.errors import ConfigurationError
from runner.result import (
    MAX_OPERATION_ID,
    MUTATING,
    PROTOCOL_MISMATCH,
    RUNNER_OPERATIONS,
    RUNNER_PROTOCOL_VERSION,
)
from runner.scratchdb import ENV_DEV_PROVIDED, READY_SECONDS, DevServer, provided_problem
from runner.summary import TERMINATION_LOG

# ptah's own variables: they stay in the child's environment.
ENV_DB_URL: Final = "PTAH_DB_URL"
ENV_DEV_URL: Final = "PTAH_DEV_URL"
ENV_SCHEMA_FILE: Final = "PTAH_SCHEMA_FILE"
ENV_TX_MODE: Final = "PTAH_TX_MODE"
ENV_CONNECT_TIMEOUT: Final = "PTAH_CONNECT_TIMEOUT"
ENV_LOCK_TIMEOUT: Final = "PTAH_LOCK_TIMEOUT"
# ptah's registry credential, and the registry its Secret's owner granted it for.
ENV_OCI_REGISTRY: Final = "PTAH_OCI_REGISTRY"
ENV_OCI_CREDENTIAL: Final = ("PTAH_OCI_USERNAME", "PTAH_OCI_PASSWORD", "PTAH_OCI_TOKEN")
ENV_OCI_SECRETS: Final = ("PTAH_OCI_PASSWORD", "PTAH_OCI_TOKEN")
# ptah's CA bundle for the registry (its docs/oci.md) and docker's configuration
# directory, where a DockerConfigJSON Secret's credential is mounted.
ENV_OCI_CA_FILE: Final = "PTAH_OCI_CA_FILE"
ENV_DOCKER_CONFIG: Final = "DOCKER_CONFIG"

# The runner's inputs: stripped from the child's environment.
ENV_OPERATION: Final = "PTAH_OPERATION"
ENV_OPERATION_ID: Final = "PTAH_OPERATION_ID"
ENV_PROTOCOL: Final = "PTAH_RUNNER_PROTOCOL_VERSION"
ENV_PTAH_BINARY: Final = "PTAH_BINARY"
ENV_PTAH_VERSION: Final = "PTAH_VERSION"
ENV_ENGINE: Final = "PTAH_EXPECTED_DATABASE_ENGINE"
ENV_COORDINATION_DIGEST: Final = "PTAH_COORDINATION_DIGEST"
ENV_EXPECTED_TARGET: Final = "PTAH_EXPECTED_TARGET_IDENTITY_DIGEST"
ENV_REQUESTED_REFERENCE: Final = "PTAH_REQUESTED_REFERENCE"
ENV_RESOLVED_REFERENCE: Final = "PTAH_RESOLVED_REFERENCE"
ENV_VERIFICATION_POLICY: Final = "PTAH_VERIFICATION_POLICY"
ENV_EXPECTED_ARTIFACT_TYPE: Final = "PTAH_EXPECTED_ARTIFACT_TYPE"
ENV_PLAN_DIR: Final = "PTAH_PLAN_DIR"
ENV_PLAN_DIGEST: Final = "PTAH_EXPECTED_PLAN_CONTENT_DIGEST"
ENV_NOT_AFTER: Final = "PTAH_EXECUTION_NOT_AFTER"
ENV_SEQUENCE: Final = "PTAH_EXPECTED_MIGRATION_SEQUENCE"
ENV_SEQUENCE_DIGEST: Final = "PTAH_EXPECTED_MIGRATION_SEQUENCE_DIGEST"
ENV_MIGRATIONS_DIR: Final = "PTAH_MIGRATIONS_DIR"
ENV_TRANSACTION_MODE: Final = "PTAH_TRANSACTION_MODE"
ENV_EXCLUDE: Final = "PTAH_EXCLUDE"
ENV_PROTECTED_TABLES: Final = "PTAH_PROTECTED_TABLES"
ENV_WORK_DIR: Final = "PTAH_RUNNER_WORK_DIR"
ENV_EXPECTED_CA_DIGEST: Final = "PTAH_EXPECTED_OCI_CA_DIGEST"
# Tuning, not set by the Job builder: where the summary goes and how long to wait.
ENV_TERMINATION_LOG: Final = "PTAH_TERMINATION_LOG"
ENV_KILL_GRACE: Final = "PTAH_KILL_GRACE_SECONDS"
ENV_DRAIN: Final = "PTAH_DRAIN_SECONDS"
ENV_DEV_READY: Final = "PTAH_DEV_READY_SECONDS"

RUNNER_KEYS: Final = frozenset(
    {
        ENV_OPERATION,
        ENV_OPERATION_ID,
        ENV_PROTOCOL,
        ENV_PTAH_BINARY,
        ENV_PTAH_VERSION,
        ENV_ENGINE,
        ENV_COORDINATION_DIGEST,
        ENV_EXPECTED_TARGET,
        ENV_REQUESTED_REFERENCE,
        ENV_RESOLVED_REFERENCE,
        ENV_VERIFICATION_POLICY,
        ENV_EXPECTED_ARTIFACT_TYPE,
        ENV_PLAN_DIR,
        ENV_PLAN_DIGEST,
        ENV_NOT_AFTER,
        ENV_SEQUENCE,
        ENV_SEQUENCE_DIGEST,
        ENV_MIGRATIONS_DIR,
        ENV_TRANSACTION_MODE,
        ENV_EXCLUDE,
        ENV_PROTECTED_TABLES,
        ENV_WORK_DIR,
        ENV_EXPECTED_CA_DIGEST,
        ENV_TERMINATION_LOG,
        ENV_KILL_GRACE,
        ENV_DRAIN,
        ENV_DEV_READY,
        # Whether PTAH_DEV_URL is the operator's scratch sidecar (runner.scratchdb):
        # ptah would read it as a --dev-provided flag nobody gave.
        ENV_DEV_PROVIDED,
        # The Pod's own identity, for its result record (jobclaim.recordpod).
        *RECORD_IDENTITY_ENV,
    }
)

ENGINES: Final = ("PostgreSQL", "MySQL")
# The URL schemes ptah reads for each engine the operator claims.
ENGINE_SCHEMES: Final[dict[str, frozenset[str]]] = {
    "PostgreSQL": frozenset({"postgres", "postgresql"}),
    "MySQL": frozenset({"mysql", "mariadb"}),
}
DEFAULT_PORTS: Final = {"PostgreSQL": 5432, "MySQL": 3306}
# The oldest ptah build whose plan, apply and migration commands print the
# contract_version 1 --json documents this runner reads: the build the original
# operator's lifecycle suite verified (v0.3.0-201-g00fc362c9).
MINIMUM_PTAH_BUILD: Final = (0, 3, 0, 201)
MINIMUM_PTAH_DESCRIBE: Final = "v0.3.0-201"
DEFAULT_KILL_GRACE: Final = 10.0
DEFAULT_DRAIN: Final = 2.0
DEFAULT_WORK_DIR: Final = "/tmp"
MAX_TUNING_SECONDS: Final = 30.0
MAX_SEQUENCE_BYTES: Final = 64 * 1024
REDACTED: Final = "[redacted]"
# A shorter password would redact ordinary words out of every message it appears in.
MIN_REDACTED_SECRET: Final = 6

_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_DSN_PASSWORD: Final = re.compile(r"^[^:/@\s]+:([^@\s]+)@")
_BUILD: Final = re.compile(r"^v?(\d{1,6})\.(\d{1,6})\.(\d{1,6})(?:-(\d{1,6})-g[0-9a-f]{4,40})?$")
_KEY_VERSION: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_LIST_ITEM: Final = re.compile(r"^[A-Za-z0-9_.*\"$-]{1,256}$")


@dataclass(frozen=True, slots=True)
class StartRefusal:
    """Why the runner will not start the executor; becomes a result with exit code -1."""

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

    def holds(self, value: str) -> bool:
        return any(secret in value for secret in self._text)


def password_of(url: str) -> str | None:
    try:
        if "://" in url:
            return urlsplit(url).password
        match = _DSN_PASSWORD.match(url)
        return match.group(1) if match else None
    except ValueError:
        return None


def secrets_of(url: str) -> tuple[str, ...]:
    """The URL and, when one can be found, its password (raw and percent-decoded)."""
    found = [url]
    password = password_of(url)
    if password:
        found.extend(p for p in (password, unquote(password)) if len(p) >= MIN_REDACTED_SECRET)
    return tuple(found)


def _route(engine: str, url: str) -> dict[str, object] | None:
    """What routes a connection of ``url``: engine, host, port, database, user."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(engine)
    except ValueError:
        return None
    if parts.scheme.lower() not in ENGINE_SCHEMES.get(engine, frozenset()) or not parts.hostname:
        return None
    return {
        "database": unquote(parts.path.lstrip("/")),
        "engine": engine,
        "host": parts.hostname.lower(),
        "port": port,
        "user": unquote(parts.username or ""),
    }


def target_identity_digest(engine: str, url: str) -> str | None:
    """Which database a URL routes to, without its credential; None if it names none.

    The runner derives it (ptah prints no such thing) from what routes a connection:
    the engine, host, port, database and user. The password and the query (TLS
    files, timeouts) are left out, so a rotated password is still the same database.
    """
    identity = _route(engine, url)
    if identity is None:
        return None
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def build_problem(version: str) -> str | None:
    """Why a declared ptah build is not one whose documents this runner reads, or None."""
    match = _BUILD.fullmatch(version)
    if match is None:
        return f"the ptah build {version!r} is not a version this runner can compare"
    build = tuple(int(part or 0) for part in match.groups())
    if build < MINIMUM_PTAH_BUILD:
        first = MINIMUM_PTAH_DESCRIBE
        return f"ptah {version} predates {first}, the first build with --json documents"
    return None


@dataclass(frozen=True, slots=True)
class SequenceEntry:
    version: int
    version_key: str


@dataclass(frozen=True, slots=True)
class RunConfig:
    operation: str
    operation_id: str
    ptah: str
    engine: str
    work_dir: str = DEFAULT_WORK_DIR
    target_identity_digest: str | None = None
    coordination_digest: str | None = None
    expected_target_identity_digest: str | None = None
    execution_not_after: datetime | None = None
    requested_reference: str = ""
    resolved_reference: str = ""
    verification_policy: str = ""
    expected_artifact_type: str = ""
    plan_dir: str = ""
    plan_content_digest: str = ""
    sequence_document: bytes = b""
    sequence: tuple[SequenceEntry, ...] = ()
    migrations_dir: str = ""
    # The registry CA bundle the Job mounts, and the digest the claim pinned it by.
    registry_ca_file: str = ""
    registry_ca_digest: str = ""
    transaction_mode: str = "all"
    exclude: tuple[str, ...] = ()
    protected_tables: tuple[str, ...] = ()
    # Whether the Job named a scratch database (PTAH_DEV_URL) for ptah to compare in.
    dev_database: bool = False
    # The operator-provided scratch database the runner waits for before ptah starts.
    dev_server: DevServer | None = None
    dev_ready_seconds: float = READY_SECONDS
    kill_grace_seconds: float = DEFAULT_KILL_GRACE
    drain_seconds: float = DEFAULT_DRAIN
    redactor: Redactor = field(default_factory=lambda: Redactor(()))

    @property
    def mutating(self) -> bool:
        return MUTATING[self.operation]

    @property
    def database(self) -> bool:
        return self.operation not in ("resolve", "verify")


def _clean(value: str) -> bool:
    return bool(value) and value == value.strip() and _CONTROL.search(value) is None


def bind(env: Mapping[str, str]) -> tuple[str, str]:
    """The operation and operation ID every result of this run is bound to."""
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


def _seconds(env: Mapping[str, str], name: str, default: float) -> float | StartRefusal:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TUNING_SECONDS:
        return StartRefusal("configuration_invalid", f"{name} must be seconds in (0, 30]")
    return value


def _protocol(env: Mapping[str, str]) -> StartRefusal | None:
    raw = env.get(ENV_PROTOCOL, "")
    if raw == str(RUNNER_PROTOCOL_VERSION):
        return None
    # Answer in the version the Job asked for, so a controller of that version can
    # read the refusal; an unreadable request is answered in this runner's own.
    asked = int(raw) if re.fullmatch(r"[1-9][0-9]{0,8}", raw) else RUNNER_PROTOCOL_VERSION
    return StartRefusal(
        PROTOCOL_MISMATCH,
        f"this runner speaks protocol {RUNNER_PROTOCOL_VERSION}, and the Job asked for {raw!r}",
        protocol_version=asked,
    )


def _invalid(message: str) -> StartRefusal:
    return StartRefusal("configuration_invalid", message)


def reference_problem(reference: str, what: str) -> str | None:
    """Why an OCI reference may not go on ptah's command line, or None."""
    if not _clean(reference) or reference.startswith("-") or " " in reference:
        return f"{what} is not one clean word"
    if password_of(reference if "://" in reference else "oci://" + reference):
        return f"{what} carries a credential, and a command line is readable by the whole node"
    return None


def authority_of(reference: str) -> str:
    """The registry ``host[:port]`` an OCI reference names, lower-cased."""
    bare = reference.split("://", 1)[-1]
    return bare.split("/", 1)[0].lower()


def registry_problem(operation: str, env: Mapping[str, str], reference: str) -> StartRefusal | None:
    """Why the registry credential in the environment must not reach ptah, or None.

    The Secret's owner grants its credential to one registry (its ``registry`` key,
    ``PTAH_OCI_REGISTRY``): a resource author who could point the reference elsewhere
    would otherwise send someone else's credential to a registry of their choosing.
    """
    credential = [name for name in ENV_OCI_CREDENTIAL if env.get(name)]
    granted = env.get(ENV_OCI_REGISTRY, "")
    registry_only = [n for n in (ENV_DOCKER_CONFIG, ENV_OCI_CA_FILE) if env.get(n)]
    if operation not in ("resolve", "verify") and registry_only:
        # A DockerConfigJSON credential or the CA bundle is mounted only where the
        # registry is reached (the fetch step pulled the artifact before this started).
        return _invalid(f"{operation} opens the database and must not hold {registry_only[0]}")
    if not credential and not granted:
        return None
    if operation not in ("resolve", "verify"):
        # The process that opens the database never holds a registry credential
        # (the fetch step pulled the artifact before it started).
        return _invalid(
            f"{operation} opens the database and must not hold {ENV_OCI_REGISTRY} "
            f"or {', '.join(ENV_OCI_CREDENTIAL)}"
        )
    if not granted:
        return StartRefusal(
            "registry_grant_missing",
            f"a registry credential is set without {ENV_OCI_REGISTRY}, the registry it is for",
        )
    if granted.lower() != authority_of(reference):
        return StartRefusal(
            "registry_grant_mismatch",
            "the registry credential is granted for another registry than the reference names",
        )
    return None


def _registry_ca(env: Mapping[str, str]) -> dict[str, object] | StartRefusal:
    """The CA bundle ptah is to trust and the digest the claim pinned it by; both or
    neither. A bundle with no pin is refused: whoever may edit the ConfigMap could then
    choose which registry certificates ptah believes."""
    ca_file = env.get(ENV_OCI_CA_FILE, "")
    digest = env.get(ENV_EXPECTED_CA_DIGEST, "")
    if not ca_file and not digest:
        return {}
    if not ca_file:
        return _invalid(f"{ENV_EXPECTED_CA_DIGEST} is set without {ENV_OCI_CA_FILE}")
    if not digest:
        return StartRefusal(
            "registry_ca_unpinned",
            f"{ENV_OCI_CA_FILE} is set without {ENV_EXPECTED_CA_DIGEST}, the digest the claim "
            "pinned it by",
        )
    path = _absolute(env, ENV_OCI_CA_FILE)
    if isinstance(path, StartRefusal):
        return path
    if not _DIGEST.fullmatch(digest):
        return _invalid(f"{ENV_EXPECTED_CA_DIGEST} is not a sha256 digest")
    return {"registry_ca_file": path, "registry_ca_digest": digest}


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...] | StartRefusal:
    raw = env.get(name, "")
    items = tuple(item for item in raw.split(",") if item) if raw else ()
    if not all(_LIST_ITEM.fullmatch(item) for item in items):
        return _invalid(f"{name} must be a comma-separated list of object names")
    return items


def parse_sequence(raw: str, digest: str) -> tuple[bytes, tuple[SequenceEntry, ...]] | StartRefusal:
    """The approved sequence ptah's --expect-sequence file holds, checked against its digest.

    The document is ptah's own shape, ``{"migrations":[{"version":N,"version_key":"…"}]}``,
    written by the controller and sealed by its digest; the runner passes the same bytes.
    """
    data = raw.encode("utf-8")
    if len(data) > MAX_SEQUENCE_BYTES:
        return _invalid(f"{ENV_SEQUENCE} is longer than {MAX_SEQUENCE_BYTES} bytes")
    if not _DIGEST.fullmatch(digest):
        return _invalid(f"{ENV_SEQUENCE_DIGEST} is not a sha256 digest")
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        return StartRefusal(
            "migration_sequence_mismatch",
            "the approved migration sequence does not have the digest the claim sealed",
        )
    try:
        document = json.loads(raw)
    except ValueError:
        return _invalid(f"{ENV_SEQUENCE} is not JSON")
    migrations = document.get("migrations") if isinstance(document, dict) else None
    if not isinstance(document, dict) or set(document) != {"migrations"} or not migrations:
        return _invalid(f"{ENV_SEQUENCE} must hold exactly a non-empty migrations list")
    entries: list[SequenceEntry] = []
    for item in migrations:
        if not isinstance(item, dict) or set(item) != {"version", "version_key"}:
            return _invalid(f"{ENV_SEQUENCE} entries hold exactly version and version_key")
        version, key = item["version"], item["version_key"]
        if type(version) is not int or version <= 0 or not isinstance(key, str):
            return _invalid(f"{ENV_SEQUENCE} versions are positive integers with a key")
        if not _KEY_VERSION.fullmatch(key):
            return _invalid(f"{ENV_SEQUENCE} holds a version key that is not one word")
        entries.append(SequenceEntry(version, key))
    if len({e.version for e in entries}) != len(entries):
        return _invalid(f"{ENV_SEQUENCE} names a version twice")
    return data, tuple(entries)


def _absolute(env: Mapping[str, str], name: str) -> str | StartRefusal:
    value = env.get(name, "")
    if not value.startswith("/") or not _clean(value):
        return _invalid(f"{name} must be an absolute path")
    return value


def _operation_inputs(operation: str, env: Mapping[str, str]) -> dict[str, object] | StartRefusal:
    found: dict[str, object] = {}
    if operation in ("resolve", "verify"):
        reference = env.get(
            ENV_REQUESTED_REFERENCE if operation == "resolve" else ENV_RESOLVED_REFERENCE, ""
        )
        name = ENV_REQUESTED_REFERENCE if operation == "resolve" else ENV_RESOLVED_REFERENCE
        problem = reference_problem(reference, name)
        if problem:
            return StartRefusal(
                "configuration_invalid" if "credential" not in problem else "credential_in_argv",
                problem,
            )
        found["requested_reference" if operation == "resolve" else "resolved_reference"] = reference
        refusal = registry_problem(operation, env, reference)
        if refusal is not None:
            return refusal
        pinned = _registry_ca(env)
        if isinstance(pinned, StartRefusal):
            return pinned
        found.update(pinned)
    else:
        refusal = registry_problem(operation, env, "")
        if refusal is not None:
            return refusal
    if operation == "verify":
        policy = _absolute(env, ENV_VERIFICATION_POLICY)
        if isinstance(policy, StartRefusal):
            return policy
        artifact_type = env.get(ENV_EXPECTED_ARTIFACT_TYPE, "")
        if not _clean(artifact_type):
            return _invalid(f"{ENV_EXPECTED_ARTIFACT_TYPE} must name the artifact type")
        found.update(verification_policy=policy, expected_artifact_type=artifact_type)
    if operation == "apply":
        plan_dir = _absolute(env, ENV_PLAN_DIR)
        if isinstance(plan_dir, StartRefusal):
            return plan_dir
        digest = env.get(ENV_PLAN_DIGEST, "")
        if not _DIGEST.fullmatch(digest):
            return _invalid(f"{ENV_PLAN_DIGEST} is not a sha256 digest")
        found.update(plan_dir=plan_dir, plan_content_digest=digest)
    if operation in ("observe", "plan") and not env.get(ENV_SCHEMA_FILE, "").startswith("/"):
        return _invalid(f"{operation} needs {ENV_SCHEMA_FILE}, the schema the fetch step pulled")
    if operation == "plan":
        for name, key in ((ENV_EXCLUDE, "exclude"), (ENV_PROTECTED_TABLES, "protected_tables")):
            listed = _list(env, name)
            if isinstance(listed, StartRefusal):
                return listed
            found[key] = listed
    if operation in ("migration-history", "migration-apply"):
        directory = _absolute(env, ENV_MIGRATIONS_DIR)
        if isinstance(directory, StartRefusal):
            return directory
        found["migrations_dir"] = directory
    if operation == "migration-apply":
        sequence = parse_sequence(env.get(ENV_SEQUENCE, ""), env.get(ENV_SEQUENCE_DIGEST, ""))
        if isinstance(sequence, StartRefusal):
            return sequence
        found.update(sequence_document=sequence[0], sequence=sequence[1])
    if operation in ("apply", "migration-apply"):
        # The two writes take the policy's transaction mode to ptah's --tx-mode.
        mode = env.get(ENV_TRANSACTION_MODE, "all")
        if mode not in ("all", "file", "none"):
            return _invalid(f"{ENV_TRANSACTION_MODE} must be all, file or none")
        found["transaction_mode"] = mode
    return found


def _database(
    operation: str, env: Mapping[str, str], engine: str
) -> dict[str, object] | StartRefusal:
    """The database a database operation opens, as the runner may state it."""
    url = env.get(ENV_DB_URL, "")
    if operation in ("resolve", "verify"):
        # Resolve and Verify talk to a registry; a Job that holds a database
        # credential for them holds one nobody needs.
        for name in (ENV_DB_URL, ENV_DEV_URL, ENV_DEV_PROVIDED):
            if env.get(name, ""):
                return _invalid(f"{operation} reads an artifact and must not hold {name}")
        return {"redactor": Redactor(_registry_secrets(env))}
    if not url:
        return _invalid(f"{ENV_DB_URL} is not set")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ENGINE_SCHEMES[engine]:
        return StartRefusal(
            "dialect_mismatch",
            f"the database URL is not a {engine} URL, and the claim was made for {engine}",
        )
    refusal = _url_refusal(engine, url, "the database URL")
    if refusal is not None:
        return refusal
    identity = target_identity_digest(engine, url)
    if identity is None:
        return _invalid("the database URL names no host")
    expected = env.get(ENV_EXPECTED_TARGET) or None
    if expected is not None and not _DIGEST.fullmatch(expected):
        return _invalid(f"{ENV_EXPECTED_TARGET} is not a sha256 digest")
    if expected is not None and expected != identity:
        # The plan was made against another database than this URL opens now.
        return StartRefusal(
            "target_identity_mismatch",
            "the database URL routes to another database than the one the plan was made for",
        )
    coordination = env.get(ENV_COORDINATION_DIGEST) or None
    if coordination is not None and not _DIGEST.fullmatch(coordination):
        return _invalid(f"{ENV_COORDINATION_DIGEST} is not a sha256 digest")
    secrets = list(secrets_of(url))
    dev_url = env.get(ENV_DEV_URL, "")
    if dev_url:
        refusal = _url_refusal(engine, dev_url, "the dev database URL") or _dev_problem(
            engine, url, dev_url
        )
        if refusal is not None:
            return refusal
        secrets.extend(secrets_of(dev_url))
    provided = provided_problem(env, engine, DEFAULT_PORTS)
    if isinstance(provided, str):
        return _invalid(provided)
    return {
        "target_identity_digest": identity,
        "coordination_digest": coordination,
        "expected_target_identity_digest": expected,
        "redactor": Redactor(secrets),
        "dev_database": bool(dev_url),
        "dev_server": provided,
    }


def _registry_secrets(env: Mapping[str, str]) -> list[str]:
    # A registry password or token ptah echoes is redacted like the database's.
    return [v for v in (env.get(n, "") for n in ENV_OCI_SECRETS) if len(v) >= MIN_REDACTED_SECRET]


def _url_refusal(engine: str, url: str, what: str) -> StartRefusal | None:
    """A URL whose parameters would let its writer run SQL past the plan (runner.dburl)."""
    problem = url_problem(engine, url, what)
    return StartRefusal("database_url_refused", problem) if problem else None


def _dev_problem(engine: str, url: str, dev_url: str) -> StartRefusal | None:
    """Why the dev database must not be handed to ptah, or None."""
    dev = _route(engine, dev_url)
    if dev is None:
        return _invalid(f"{ENV_DEV_URL} is not a {engine} URL that names a host")
    target = _route(engine, url)
    if target is not None and {**dev, "user": ""} == {**target, "user": ""}:
        # ptah creates and drops scratch objects in the dev database; in the target
        # that is a change nobody planned or approved. Another user is the same place.
        return StartRefusal(
            "dev_database_is_target",
            "the dev database URL routes to the target database; ptah's scratch work "
            "must never run there",
        )
    return None


def prepare(
    env: Mapping[str, str], operation: str, operation_id: str, *, now: datetime
) -> RunConfig | StartRefusal:
    """The run the environment asks for, or why it must not start."""
    refusal = _protocol(env)
    if refusal:
        return refusal
    ptah = env.get(ENV_PTAH_BINARY, "")
    if not ptah.startswith("/") or not _clean(ptah):
        return _invalid(f"{ENV_PTAH_BINARY} must be an absolute path")
    problem = build_problem(env.get(ENV_PTAH_VERSION, ""))
    if problem:
        return StartRefusal("ptah_build_unsupported", problem)
    engine = env.get(ENV_ENGINE, "")
    if engine not in ENGINES:
        return StartRefusal("dialect_mismatch", f"{ENV_ENGINE} must be PostgreSQL or MySQL")
    raw_deadline = env.get(ENV_NOT_AFTER)
    deadline = parse_time(raw_deadline) if raw_deadline is not None else None
    if raw_deadline is not None and deadline is None:
        return _invalid(f"{ENV_NOT_AFTER} is not an RFC 3339 time")
    if deadline is None and MUTATING[operation]:
        # Without a deadline nothing stops the child before the Lease lapses, and a
        # mutation running past it would share the database with the next claimant.
        return StartRefusal("execution_deadline_missing", "a mutating operation needs a deadline")
    if deadline is not None and deadline <= now:
        return StartRefusal(
            "execution_deadline_passed", "the claim's execution deadline has passed"
        )
    database = _database(operation, env, engine)
    if isinstance(database, StartRefusal):
        return database
    inputs = _operation_inputs(operation, env)
    if isinstance(inputs, StartRefusal):
        return inputs
    grace = _seconds(env, ENV_KILL_GRACE, DEFAULT_KILL_GRACE)
    if isinstance(grace, StartRefusal):
        return grace
    drain = _seconds(env, ENV_DRAIN, DEFAULT_DRAIN)
    if isinstance(drain, StartRefusal):
        return drain
    dev_ready = _seconds(env, ENV_DEV_READY, READY_SECONDS)
    if isinstance(dev_ready, StartRefusal):
        return dev_ready
    work_dir = env.get(ENV_WORK_DIR, DEFAULT_WORK_DIR)
    if not work_dir.startswith("/") or not _clean(work_dir):
        return _invalid(f"{ENV_WORK_DIR} must be an absolute path")
    return RunConfig(
        operation=operation,
        operation_id=operation_id,
        ptah=ptah,
        engine=engine,
        work_dir=work_dir,
        execution_not_after=deadline,
        kill_grace_seconds=grace,
        drain_seconds=drain,
        dev_ready_seconds=dev_ready,
        **database,  # type: ignore[arg-type]
        **inputs,  # type: ignore[arg-type]
    )
