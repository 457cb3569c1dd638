"""The manager's whole configuration, read from the environment the chart sets.

Every variable the manager reads is named in ``VARIABLES`` and nowhere else; the chart
test holds the chart's Deployment to this table in both directions (every variable the
chart sets is read here, every variable read here is set by the chart or documented
optional with its default). A missing or malformed value fails the start with one
lower-case sentence per problem, naming the variable: a manager that guessed its
identity or its images would dispatch Jobs nobody approved of.

Reading is pure: ``load`` takes a mapping (``os.environ`` in production, a dict in a
test) and answers a frozen ``Config`` or raises ``ConfigError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final

from controller import (
    CONTROLLER_STATE_VERSION,
    BindingInputs,
    ManagerConfig,
    WatchScope,
    timing_problem,
)
from jobclaim import is_pinned_image, scratch_images_of
from jobclaim.api import ManagerRecord, NamespaceSelector
from runner import RUNNER_PROTOCOL_VERSION
from webhook.rules import ImagePins, Settings

LOG_LEVELS: Final = ("debug", "info", "warning", "error")
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_SERVICE_ACCOUNT: Final = re.compile(
    r"system:serviceaccount:[a-z0-9][-a-z0-9]*:[a-z0-9][-a-z0-9.]*"
)


class ConfigError(Exception):
    """The environment does not configure a manager; ``problems`` says why, one each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# -- value parsers: each answers the value or raises ValueError with what is wrong ----------


def _text(raw: str) -> str:
    if not raw.strip() or raw != raw.strip():
        raise ValueError("must be non-empty text without surrounding spaces")
    return raw


def _name(raw: str) -> str:
    if not _DNS_SUBDOMAIN.fullmatch(raw):
        raise ValueError(f"{raw!r} is not a kubernetes object name")
    return raw


def _namespace(raw: str) -> str:
    if not _DNS_LABEL.fullmatch(raw):
        raise ValueError(f"{raw!r} is not a namespace name")
    return raw


def _pinned(raw: str) -> str:
    if not is_pinned_image(raw):
        raise ValueError(f"{raw!r} is not an image pinned by digest (repository@sha256:<64 hex>)")
    return raw


def _optional_pinned(raw: str) -> str:
    # Empty: the chart names no such image (a provided scratch database of that engine
    # is then refused at its build); anything else must be pinned like every Job image.
    return _pinned(raw) if raw else ""


def _username(raw: str) -> str:
    if not _SERVICE_ACCOUNT.fullmatch(raw):
        raise ValueError(
            f"{raw!r} is not a service account username (system:serviceaccount:ns:name)"
        )
    return raw


def _bool(raw: str) -> bool:
    if raw not in ("true", "false"):
        raise ValueError(f"{raw!r} is neither true nor false")
    return raw == "true"


def _port(raw: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]{0,4}", raw) or int(raw) > 65535:
        raise ValueError(f"{raw!r} is not a port (1-65535)")
    return int(raw)


def _seconds(raw: str) -> float:
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", raw) or float(raw) <= 0:
        raise ValueError(f"{raw!r} is not a positive number of seconds")
    return float(raw)


def _whole_seconds(raw: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]{0,5}", raw):
        raise ValueError(f"{raw!r} is not a positive whole number of seconds")
    return int(raw)


def _names(raw: str) -> tuple[str, ...]:
    parts = tuple(raw.split(","))
    for part in parts:
        _name(part)
    if len(set(parts)) != len(parts):
        raise ValueError("names a configuration twice")
    return parts


def _optional_names(raw: str) -> tuple[str, ...]:
    return _names(raw) if raw else ()


def _level(raw: str) -> str:
    if raw.lower() not in LOG_LEVELS:
        raise ValueError(f"{raw!r} is not one of {', '.join(LOG_LEVELS)}")
    return raw.lower()


def _directory(raw: str) -> Path:
    if not raw.startswith("/"):
        raise ValueError(f"{raw!r} is not an absolute path")
    return Path(raw)


def _optional_file(raw: str) -> Path | None:
    return Path(raw) if raw else None


def _watch_namespaces(raw: str) -> tuple[str, ...]:
    if not raw:
        return ()
    parts = tuple(raw.split(","))
    for part in parts:
        _namespace(part)
    if len(set(parts)) != len(parts):
        raise ValueError("names a namespace twice")
    return parts


def _namespace_selector(raw: str) -> NamespaceSelector | None:
    if not raw:
        return None
    try:
        selector = NamespaceSelector.model_validate_json(raw)
    except ValueError:
        raise ValueError(
            f"{raw!r} is not a label selector in json, with 'matchLabels' and "
            "'matchExpressions' only"
        ) from None
    if not selector.match_labels and not selector.match_expressions:
        # An empty selector would mean every namespace to Kubernetes and none to a
        # realm: a scope is written out, never implied.
        raise ValueError("is an empty selector; leave it unset to watch every namespace")
    return selector


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: its name, how it is read, and its default if optional."""

    name: str
    parse: Callable[[str], Any]
    doc: str
    default: str | None = None  # None: required

    @property
    def required(self) -> bool:
        return self.default is None


# The one place every variable is named. The first block is the chart's contract; the
# second is optional, each with the default a missing value means.
VARIABLES: Final[tuple[Variable, ...]] = (
    Variable("POD_NAME", _name, "this replica's name: its leader-election identity"),
    Variable("POD_NAMESPACE", _namespace, "the release namespace, where readiness probes a read"),
    Variable(
        "PTAH_MANAGER_USERNAME", _username, "whose writes the webhook treats as the manager's"
    ),
    Variable("PTAH_MANAGER_IMAGE", _pinned, "this image, recorded in every dispatched Job"),
    Variable("PTAH_EXECUTOR_IMAGE", _pinned, "the image operation Jobs run ptah in"),
    Variable("PTAH_RUNNER_IMAGE", _pinned, "the image that supplies the Jobs' runner"),
    Variable("PTAH_VERSION", _text, "the ptah version the executor image runs"),
    Variable("PTAH_COORDINATION_NAMESPACE", _namespace, "where the Leases live"),
    Variable("PTAH_LEADER_ELECTION", _bool, "whether to reconcile only under the leader Lease"),
    Variable("PTAH_LEADER_ELECTION_LEASE_NAME", _name, "the leader Lease"),
    Variable("PTAH_LEADER_ELECTION_LEASE_DURATION_SECONDS", _whole_seconds, "its duration"),
    Variable("PTAH_LEADER_ELECTION_RENEW_DEADLINE_SECONDS", _seconds, "stop leading after"),
    Variable("PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS", _seconds, "between attempts"),
    Variable("PTAH_WEBHOOK_PORT", _port, "the HTTPS port of admission, /healthz and /readyz"),
    Variable("PTAH_WEBHOOK_CERT_DIR", _directory, "the mounted tls.crt and tls.key"),
    Variable(
        "PTAH_WEBHOOK_CONFIGURATIONS",
        _optional_names,
        "webhook configurations whose caBundle /readyz checks (needs get on them; the chart "
        "grants the manager none and leaves this empty: its certificate rotator checks)",
        default="",
    ),
    Variable(
        "PTAH_REQUIRE_DISTINCT_APPROVER",
        _bool,
        "four-eyes, the chart's approval setting: the webhook refuses an approval by the "
        "identity that last changed the resource's spec",
    ),
    Variable("PTAH_METRICS_PORT", _port, "the plain-HTTP port of /metrics"),
    Variable("PTAH_LOG_LEVEL", _level, "debug, info, warning or error"),
    Variable("PTAH_SHUTDOWN_SECONDS", _seconds, "how long a SIGTERM may take, all told"),
    # Optional.
    Variable(
        "PTAH_STALL_SECONDS",
        _seconds,
        "a pass or loop turn older than this fails /healthz",
        default="120",
    ),
    Variable(
        "PTAH_READY_REFRESH_SECONDS",
        _seconds,
        "how often /readyz's facts are read from the API server, off the probe's path",
        default="5",
    ),
    Variable(
        "PTAH_READY_WINDOW_SECONDS",
        _seconds,
        "/readyz fails once no API read has succeeded for this long",
        default="60",
    ),
    Variable(
        "PTAH_SCRATCH_IMAGE_POSTGRESQL",
        _optional_pinned,
        "the PostgreSQL scratch database image a provided spec.dev runs (chart value "
        "execution.scratchImages.postgresql; empty: none)",
        default="",
    ),
    Variable(
        "PTAH_SCRATCH_IMAGE_MYSQL",
        _optional_pinned,
        "the MySQL-family scratch database image a provided spec.dev runs (chart value "
        "execution.scratchImages.mysql; empty: none)",
        default="",
    ),
    Variable("PTAH_BIND_ADDRESS", _text, "the address both servers listen on", default="0.0.0.0"),
    Variable(
        "PTAH_WATCH_NAMESPACES",
        _watch_namespaces,
        "serve these namespaces only, comma-separated (chart value watch.namespaces; "
        "empty: every namespace)",
        default="",
    ),
    Variable(
        "PTAH_WATCH_NAMESPACE_SELECTOR",
        _namespace_selector,
        "serve only namespaces whose labels match this label selector, as JSON (chart "
        "value watch.namespaceSelector; empty: no selector)",
        default="",
    ),
    Variable(
        "PTAH_KUBECONFIG",
        _optional_file,
        "connect with this kubeconfig instead of the Pod's service account (development)",
        default="",
    ),
    Variable(
        "PTAH_TEST_WEDGE_PASSES",
        _bool,
        "test hook: every pass blocks until shutdown; refused with in-cluster credentials",
        default="false",
    ),
)

# Read by the Python interpreter, not by the manager; the chart sets them for the
# read-only root filesystem and for unbuffered logs.
INTERPRETER_VARIABLES: Final = frozenset({"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"})


@dataclass(frozen=True, slots=True)
class LeaderElection:
    lease_name: str
    duration_seconds: int
    renew_deadline_seconds: float
    retry_period_seconds: float


@dataclass(frozen=True, slots=True)
class Config:
    """What the manager runs with; built only by ``load``."""

    identity: str
    pod_namespace: str
    manager_username: str
    controller: ManagerConfig
    leader_election: LeaderElection | None
    webhook_port: int
    cert_dir: Path
    webhook_configurations: tuple[str, ...]
    metrics_port: int
    log_level: str
    shutdown_seconds: float
    stall_seconds: float
    ready_refresh_seconds: float
    ready_window_seconds: float
    bind_address: str
    watch_scope: WatchScope
    kubeconfig: Path | None
    wedge_passes: bool
    require_distinct_approver: bool

    def webhook_settings(self) -> Settings:
        """The webhook's settings: the manager's identity, the images its own
        environment (the chart's values) pins every operation Job to, and whether an
        approval needs a distinct approver."""
        binding, record = self.controller.binding, self.controller.manager
        pins = ImagePins(
            executor_image=binding.executor_image,
            runner_image=record.runner_image,
            manager_image=record.controller_image,
            ptah_version=binding.ptah_version,
            scratch_images=binding.scratch_images,
        )
        return Settings(
            manager_username=self.manager_username,
            pins=pins,
            coordination_namespace=self.controller.lease_namespace,
            require_distinct_approver=self.require_distinct_approver,
        )


def controller_revision() -> str:
    """The installed package's version: the revision every dispatched Job records."""
    try:
        return version("ptah-operator")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "source"


def _read(env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    problems: list[str] = []
    for variable in VARIABLES:
        raw = env.get(variable.name)
        if raw is None:
            if variable.required:
                problems.append(f"{variable.name} is not set ({variable.doc})")
                continue
            raw = variable.default
        assert raw is not None
        try:
            values[variable.name] = variable.parse(raw)
        except ValueError as error:
            problems.append(f"{variable.name}: {error}")
    return values, problems


def load(env: Mapping[str, str]) -> Config:
    """The configuration ``env`` describes, or ``ConfigError`` with every problem in it."""
    values, problems = _read(env)
    if problems:
        raise ConfigError(problems)
    election = None
    if values["PTAH_LEADER_ELECTION"]:
        election = LeaderElection(
            lease_name=values["PTAH_LEADER_ELECTION_LEASE_NAME"],
            duration_seconds=values["PTAH_LEADER_ELECTION_LEASE_DURATION_SECONDS"],
            renew_deadline_seconds=values["PTAH_LEADER_ELECTION_RENEW_DEADLINE_SECONDS"],
            retry_period_seconds=values["PTAH_LEADER_ELECTION_RETRY_PERIOD_SECONDS"],
        )
        timing = timing_problem(
            election.duration_seconds,
            election.renew_deadline_seconds,
            election.retry_period_seconds,
        )
        if timing is not None:
            problems.append(f"PTAH_LEADER_ELECTION_*: {timing}")
    kubeconfig: Path | None = values["PTAH_KUBECONFIG"]
    in_cluster = kubeconfig is None
    if values["PTAH_TEST_WEDGE_PASSES"] and in_cluster:
        problems.append(
            "PTAH_TEST_WEDGE_PASSES is a test hook and is refused for a manager "
            "running with in-cluster credentials"
        )
    if values["PTAH_WEBHOOK_PORT"] == values["PTAH_METRICS_PORT"]:
        problems.append("PTAH_METRICS_PORT must differ from PTAH_WEBHOOK_PORT")
    if problems:
        raise ConfigError(problems)
    controller = ManagerConfig(
        manager=ManagerRecord(
            controller_image=values["PTAH_MANAGER_IMAGE"],
            controller_revision=controller_revision(),
            runner_image=values["PTAH_RUNNER_IMAGE"],
        ),
        binding=BindingInputs(
            controller_state_version=CONTROLLER_STATE_VERSION,
            ptah_version=values["PTAH_VERSION"],
            executor_image=values["PTAH_EXECUTOR_IMAGE"],
            runner_protocol_version=RUNNER_PROTOCOL_VERSION,
            scratch_images=scratch_images_of(
                values["PTAH_SCRATCH_IMAGE_POSTGRESQL"], values["PTAH_SCRATCH_IMAGE_MYSQL"]
            ),
        ),
        lease_namespace=values["PTAH_COORDINATION_NAMESPACE"],
        identity=values["POD_NAME"],
    )
    return Config(
        identity=values["POD_NAME"],
        pod_namespace=values["POD_NAMESPACE"],
        manager_username=values["PTAH_MANAGER_USERNAME"],
        controller=controller,
        leader_election=election,
        webhook_port=values["PTAH_WEBHOOK_PORT"],
        cert_dir=values["PTAH_WEBHOOK_CERT_DIR"],
        webhook_configurations=values["PTAH_WEBHOOK_CONFIGURATIONS"],
        metrics_port=values["PTAH_METRICS_PORT"],
        log_level=values["PTAH_LOG_LEVEL"],
        shutdown_seconds=values["PTAH_SHUTDOWN_SECONDS"],
        stall_seconds=values["PTAH_STALL_SECONDS"],
        ready_refresh_seconds=values["PTAH_READY_REFRESH_SECONDS"],
        ready_window_seconds=values["PTAH_READY_WINDOW_SECONDS"],
        bind_address=values["PTAH_BIND_ADDRESS"],
        watch_scope=WatchScope(
            values["PTAH_WATCH_NAMESPACES"], values["PTAH_WATCH_NAMESPACE_SELECTOR"]
        ),
        kubeconfig=kubeconfig,
        wedge_passes=values["PTAH_TEST_WEDGE_PASSES"],
        require_distinct_approver=values["PTAH_REQUIRE_DISTINCT_APPROVER"],
    )


def describe() -> str:
    """The variables as a table, for ``--help`` and docs/install.md."""
    lines = []
    for variable in VARIABLES:
        when = "required" if variable.required else f"optional, default {variable.default!r}"
        lines.append(f"  {variable.name:<46} {variable.doc} ({when})")
    return "\n".join(lines)
