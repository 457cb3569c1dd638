"""Start a real kube-apiserver (with embedded etcd) on loopback, and stop it.

The binary is the Go program in ``lab/controlplane``: no package registry we
can reach ships kube-apiserver, so it is built from the published Kubernetes Go
modules by ``make controlplane`` and cached. This module is the only place that
knows how to start it, so the pytest fixture and ``make run`` share one way of
doing it:

    with LocalControlPlane() as plane:
        plane.kubeconfig("manager")  # a kubeconfig for the operator's identity

Every identity authenticates with a static bearer token that is minted fresh on
each start, so kubeconfigs are only good for the lifetime of one control plane.

Exceptions::

    ControlPlaneError
     +-- ControlPlaneBuildError   the binary is missing and cannot be built
     +-- ControlPlaneStartError   the binary ran but never became ready
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx
import yaml

__all__ = [
    "DEFAULT_CONTROLLERS",
    "DEFAULT_IDENTITIES",
    "ControlPlaneBuildError",
    "ControlPlaneError",
    "ControlPlaneStartError",
    "Identity",
    "LocalControlPlane",
    "binary_path",
    "ensure_binary",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
CONTROLPLANE_DIR = REPO_ROOT / "lab" / "controlplane"

# How many lines of the server's log an error message carries: enough to show
# why kube-apiserver refused to start, short enough to read in a test report.
_LOG_TAIL_LINES = 40

_IDENTITY_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


class ControlPlaneError(Exception):
    """The local control plane cannot be built, started or stopped."""


class ControlPlaneBuildError(ControlPlaneError):
    """The control-plane binary is missing and cannot be built.

    Raised instead of skipping: a test run that silently drops every real-API
    test would look green while proving nothing.
    """


class ControlPlaneStartError(ControlPlaneError):
    """The control-plane binary ran but did not become ready."""


@dataclass(frozen=True)
class Identity:
    """A user the API server authenticates by static bearer token."""

    user: str
    groups: tuple[str, ...] = ()


DEFAULT_IDENTITIES: Mapping[str, Identity] = {
    # The operator's own service account. A real service-account token carries
    # these two groups as well, so RBAC written against them behaves as it would
    # in a cluster.
    "manager": Identity(
        "system:serviceaccount:ptah-system:ptah-operator",
        ("system:serviceaccounts", "system:serviceaccounts:ptah-system"),
    ),
    # The chart's certificate rotator: the one identity that may patch the webhook
    # configurations (and the webhook's Secret), and nothing else.
    "rotator": Identity(
        "system:serviceaccount:ptah-system:ptah-operator-cert-rotator",
        ("system:serviceaccounts", "system:serviceaccounts:ptah-system"),
    ),
    # An ordinary person with no grants: everything they can do comes from the
    # RBAC a test sets up.
    "person": Identity("jane@example.com"),
    # system:masters bypasses RBAC; the launcher polls readiness with it and the
    # tests use it to set the stage.
    "admin": Identity("admin", ("system:masters",)),
}


# The kube-controller-manager controllers the harness runs by default: Jobs get
# their Pods (which stay Pending: there is no scheduler or kubelet), owned objects
# are garbage-collected, finished Jobs expire, and deleted namespaces actually go.
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    "job-controller",
    "garbage-collector-controller",
    "ttl-after-finished-controller",
    "namespace-controller",
)


def binary_path() -> Path:
    """Where ``make controlplane`` puts the binary."""
    return CONTROLPLANE_DIR / "bin" / "controlplane"


def ensure_binary(timeout: float | None = 3600.0) -> Path:
    """Return the control-plane binary, building it first when needed.

    Always goes through ``make controlplane`` rather than trusting an existing
    file: make knows whether the binary is older than its Go sources, and
    finishes in milliseconds when it is not. A cold build takes many minutes.
    """
    make = shutil.which("make")
    if make is None:
        raise ControlPlaneBuildError(
            "cannot build the control plane: make is not on PATH "
            "(the binary is built by `make controlplane`, which also needs go)"
        )
    try:
        result = subprocess.run(
            [make, "--no-print-directory", "controlplane"],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ControlPlaneBuildError(
            f"`make controlplane` did not finish within {timeout:.0f}s"
        ) from exc
    if result.returncode != 0:
        output = _tail(result.stdout + result.stderr)
        raise ControlPlaneBuildError(
            f"`make controlplane` failed with exit code {result.returncode}:\n{output}"
        )
    binary = binary_path()
    if not os.access(binary, os.X_OK):
        raise ControlPlaneBuildError(
            f"`make controlplane` succeeded but {binary} is not an executable file"
        )
    return binary


class LocalControlPlane:
    """A kube-apiserver and etcd on 127.0.0.1, for tests and local runs.

    ``controllers`` names the kube-controller-manager controllers to run
    alongside; pass ``()`` for a bare API server.

    ``address`` is where the API server binds and what it advertises: loopback
    for tests of the API alone, a node's bridge address for the lab cluster
    (``lab.cluster``), where pods reach it through the ``kubernetes`` Service.
    ``service_account_admission`` keeps the ServiceAccount admission plugin on,
    which only a cluster whose controllers create default service accounts wants.

    ``workdir`` receives the server's log, its state (etcd data, keys,
    certificates) and one kubeconfig per identity. When it is omitted a
    temporary directory is used and removed on stop; when it is given, it is
    kept for inspection, except the etcd data, which is large and meaningless
    once the server is gone.
    """

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        identities: Mapping[str, Identity] = DEFAULT_IDENTITIES,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        binary: Path | None = None,
        ready_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        extra_apiserver_args: Sequence[str] = (),
        address: str = "127.0.0.1",
        service_account_admission: bool = False,
    ) -> None:
        admin = identities.get("admin")
        if admin is None or "system:masters" not in admin.groups:
            raise ValueError(
                "identities must include 'admin' in group system:masters: "
                "readiness is checked with it and tests set the stage with it"
            )
        for name in identities:
            # Names become file names (kubeconfigs/<name>.yaml) and CSV uids.
            if not _IDENTITY_NAME.fullmatch(name):
                raise ValueError(
                    f"identity name {name!r} must be lower-case letters, digits and dashes"
                )
        self._requested_workdir = workdir
        self._identities = dict(identities)
        self._binary = binary
        self._ready_timeout = ready_timeout
        self._stop_timeout = stop_timeout
        self._controllers = tuple(controllers)
        self._extra_args = tuple(extra_apiserver_args)
        self._address = address
        self._service_account_admission = service_account_admission

        self._workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._state: dict[str, Any] | None = None
        self._kubeconfigs: dict[str, Path] = {}
        # Set once an early exit has been reported by start(), so stop() does
        # not report the same exit code a second time.
        self._exit_reported = False

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and return once /readyz answers ok."""
        if self._process is not None:
            raise ControlPlaneError("the control plane is already running")
        binary = self._binary if self._binary is not None else ensure_binary()

        if self._requested_workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="ptah-controlplane-"))
        else:
            self._workdir = self._requested_workdir.resolve()
            self._workdir.mkdir(parents=True, exist_ok=True)
        identities_file = self._workdir / "identities.json"
        identities_file.write_text(
            json.dumps(
                {
                    name: {"user": ident.user, "groups": list(ident.groups)}
                    for name, ident in self._identities.items()
                }
            )
        )
        self._log = self.log_path.open("wb")
        try:
            self._process = subprocess.Popen(
                [
                    str(binary),
                    f"--state-dir={self._server_dir}",
                    f"--identities={identities_file}",
                    "--exit-on-stdin-eof",
                    f"--ready-timeout={self._ready_timeout:.0f}s",
                    f"--controllers={','.join(self._controllers)}",
                    f"--address={self._address}",
                    f"--service-account-admission={str(self._service_account_admission).lower()}",
                    "--",
                    *self._extra_args,
                ],
                # stdin stays open for the server's lifetime: when this process
                # dies, however abruptly, the pipe closes and the server shuts
                # itself down instead of lingering as an orphan.
                stdin=subprocess.PIPE,
                # Logs go to a file rather than a pipe nobody drains, which
                # would block the server once the pipe buffer fills.
                stdout=self._log,
                stderr=subprocess.STDOUT,
                # Its own process group, so stop() signals the server and
                # nothing else, and a terminal's Ctrl-C reaches this process
                # (which then stops the server) rather than the server directly.
                start_new_session=True,
            )
            self._wait_until_ready(self._process)
            self._write_kubeconfigs()
        except BaseException as exc:
            # Stop what did start, without letting a second error from stopping
            # replace the one that explains why starting failed.
            try:
                self.stop()
            except ControlPlaneError as stop_error:
                exc.add_note(f"stopping it afterwards also failed: {stop_error}")
            raise

    def stop(self) -> None:
        """Stop the server gracefully, killing it if it does not stop in time.

        Safe to call more than once and on a control plane that never started.
        """
        process = self._process
        if process is None:
            self._cleanup()
            return
        problem = ""
        try:
            if process.poll() is None:
                _signal_group(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=self._stop_timeout)
                except subprocess.TimeoutExpired:
                    _signal_group(process.pid, signal.SIGKILL)
                    process.wait()
                    problem = (
                        f"did not stop within {self._stop_timeout:.0f}s of SIGTERM and was killed"
                    )
            # Anything the server left behind in its group goes too.
            _signal_group(process.pid, signal.SIGKILL)
            if not problem and process.returncode != 0 and not self._exit_reported:
                problem = f"exited with code {process.returncode} on stop"
            if problem:
                # Read now: a temporary workdir, log included, is removed below.
                problem += f"; {self._log_tail()}"
        finally:
            self._process = None
            self._exit_reported = False
            if process.stdin is not None:
                process.stdin.close()
            self._cleanup()
        if problem:
            raise ControlPlaneError(f"the control plane {problem}")

    # -- what callers use ----------------------------------------------------

    @property
    def server_url(self) -> str:
        """The API server's URL, https://127.0.0.1:PORT."""
        return str(self._ready_state()["server"])

    @property
    def ca_path(self) -> Path:
        """The CA that signed the API server's serving certificate."""
        return Path(self._ready_state()["ca"])

    @property
    def pid(self) -> int:
        """The server's process id, which is also its process group id."""
        if self._process is None:
            raise ControlPlaneError("the control plane is not running")
        return self._process.pid

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._workdir

    @property
    def log_path(self) -> Path:
        """The server's combined stdout and stderr."""
        return self.workdir / "controlplane.log"

    @property
    def identities(self) -> Mapping[str, Identity]:
        return dict(self._identities)

    def token(self, identity: str) -> str:
        """The bearer token that authenticates as ``identity``."""
        tokens = self._ready_state()["identities"]
        if identity not in tokens:
            raise KeyError(f"unknown identity {identity!r}; known: {sorted(tokens)}")
        return str(tokens[identity]["token"])

    def kubeconfig(self, identity: str) -> Path:
        """A kubeconfig file that authenticates as ``identity``."""
        self._ready_state()
        try:
            return self._kubeconfigs[identity]
        except KeyError:
            raise KeyError(
                f"unknown identity {identity!r}; known: {sorted(self._kubeconfigs)}"
            ) from None

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that trusts the API server's CA."""
        return ssl.create_default_context(cafile=str(self.ca_path))

    # -- internals -----------------------------------------------------------

    @property
    def _server_dir(self) -> Path:
        return self.workdir / "server"

    def _ready_state(self) -> dict[str, Any]:
        if self._state is None or self._process is None:
            raise ControlPlaneError("the control plane is not running")
        return self._state

    def _wait_until_ready(self, process: subprocess.Popen[bytes]) -> None:
        """Poll until the server's state file exists and /readyz says ok.

        Waiting on the process with a timeout doubles as the pause between
        polls, so a server that dies is noticed at once instead of at the
        deadline.
        """
        deadline = time.monotonic() + self._ready_timeout
        state_file = self._server_dir / "state.json"
        interval = 0.05
        last_problem = "the server has not written its state file yet"
        client: httpx.Client | None = None
        try:
            while True:
                if self._state is None and state_file.exists():
                    self._state = json.loads(state_file.read_text())
                    client = httpx.Client(verify=self.ssl_context(), timeout=5.0)
                if client is not None:
                    last_problem = _readyz_problem(client, self.server_url, self.token("admin"))
                    if last_problem == "":
                        return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ControlPlaneStartError(
                        f"the control plane was not ready within {self._ready_timeout:.0f}s "
                        f"({last_problem}); {self._log_tail()}"
                    )
                try:
                    code = process.wait(timeout=min(interval, remaining))
                except subprocess.TimeoutExpired:
                    interval = min(interval * 2, 1.0)
                    continue
                self._exit_reported = True
                raise ControlPlaneStartError(
                    f"the control plane exited with code {code} before it was ready; "
                    f"{self._log_tail()}"
                )
        finally:
            if client is not None:
                client.close()

    def _write_kubeconfigs(self) -> None:
        directory = self.workdir / "kubeconfigs"
        directory.mkdir(exist_ok=True)
        for name in self._identities:
            path = directory / f"{name}.yaml"
            config = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "ptah-local",
                        "cluster": {
                            "server": self.server_url,
                            "certificate-authority": str(self.ca_path),
                        },
                    }
                ],
                "users": [{"name": name, "user": {"token": self.token(name)}}],
                "contexts": [{"name": name, "context": {"cluster": "ptah-local", "user": name}}],
                "current-context": name,
            }
            # Tokens are credentials, even short-lived ones: owner-only.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                yaml.safe_dump(config, f, sort_keys=False)
            self._kubeconfigs[name] = path

    def _log_tail(self) -> str:
        """The end of the server's log, introduced for an error message."""
        if self._log is not None:
            self._log.flush()
        # A temporary workdir is removed on stop, so naming its log would
        # point at a file that no longer exists.
        where = "its log" if self._requested_workdir is None else str(self.log_path)
        try:
            tail = _tail(self.log_path.read_text(errors="replace"))
        except OSError as exc:
            return f"cannot read {where}: {exc}"
        return f"last lines of {where}:\n{tail}"

    def _cleanup(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        self._state = None
        self._kubeconfigs = {}
        if self._workdir is None:
            return
        if self._requested_workdir is None:
            shutil.rmtree(self._workdir)
        elif (self._server_dir / "etcd").exists():
            shutil.rmtree(self._server_dir / "etcd")
        self._workdir = None


def _readyz_problem(client: httpx.Client, server: str, token: str) -> str:
    """Return "" when /readyz answers ok, otherwise what is wrong."""
    try:
        response = client.get(f"{server}/readyz", headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        return f"/readyz: {exc!r}"
    if response.status_code == 200 and response.text.strip() == "ok":
        return ""
    return f"/readyz answered HTTP {response.status_code}: {response.text.strip()[:200]}"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # ProcessLookupError means the group is already empty, which is the goal.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])
