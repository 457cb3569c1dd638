"""``make run``: the chart on the lab's real single-node cluster, changing a real PostgreSQL.

1. ``make`` builds what is missing first (the control plane, helm, crane, the node's
   Debian packages, the images; see the Makefile's ``run`` target) and reuses the rest.
2. The lab cluster starts (``lab.cluster``: kube-apiserver, etcd, controller manager,
   scheduler, kubelet, kube-proxy, containerd, runc, CNI, the registry), then a
   PostgreSQL server (``lab.postgres``) and a MariaDB server (``lab.mariadb``), both
   listening on the bridge's address, where the Pods reach them.
3. The images go into the lab registry, pinned by digest (``lab.artifacts``), and so do
   the example artifacts the examples point at.
4. The chart packaged (``helm package``, as ``make chart`` does) and pushed to the lab
   registry (``helm push``), then ``helm install`` from ``oci://`` with only the images'
   digests given (``lab.install``), until the rotator's install Job has published the
   webhook certificate and the manager Deployment is ready.
5. The realms the examples name (every ``examples/ptahrealm*.yaml``: ``orders`` and
   ``billing`` on PostgreSQL, ``catalog`` on MariaDB, each admitting ``shop``), the
   database Secrets, the verification policies, then ``examples/ptahschema.yaml``,
   ``examples/ptahmigration.yaml`` and (on MariaDB) ``examples/ptahmigration-mysql.yaml``
   (their OCI references replaced by the pushed artifacts' digests); every change of a
   resource is printed on one line. At ``AwaitingApproval`` the plan's SQL and the
   command that approves it are printed; ``--approve`` approves it itself, through
   ``kubectl ptah approve`` (admission stamps the approver). After the Apply, ``\\d`` of
   the changed tables, read from the database (``SHOW CREATE TABLE`` on MariaDB).

``--once`` exits 0 when every resource is InSync, and 1 with a sentence when one
fails or the time runs out. Otherwise it runs until Ctrl-C (or SIGTERM), which tears
everything down; the cluster's teardown checks nothing of it is left.
``--node-less`` runs the older command instead (``lab.run``: the manager as a host
process against an API server with no node, where Jobs are only recorded).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Final

import yaml

from jobclaim import PlanUnreadable
from jobclaim.apiserver import (
    CONFIGMAPS,
    NAMESPACES,
    PTAHMIGRATIONS,
    PTAHREALMS,
    PTAHSCHEMAS,
    SERVICEACCOUNTS,
    NotFound,
    Object,
    Resource,
)
from kube.client import KubeApi
from kubectl_ptah import cli as kubectl_ptah
from kubectl_ptah.render import plan_text
from lab import artifacts, install, lifecycle
from lab import run as nodeless
from lab.cluster import ClusterError, LocalCluster
from lab.executor.db import ExecutorError
from lab.mariadb import LabMariaDB, MariaDBError
from lab.postgres import BIN, LabPostgres, PostgresError
from lab.progress import DONE, FAILED, failure_of, phase_of, resource_line
from lab.run import LOCAL_BINDING

__all__ = ["EXAMPLES", "RUN_ERRORS", "Example", "LabRun", "RunFailed", "main"]

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
EXAMPLES_DIR: Final = REPO_ROOT / "examples"
SECRETS: Final = Resource("", "v1", "secrets", "Secret")
MANAGER_NAMESPACE: Final = "ptah-system"
NAMESPACE: Final = "shop"
MANAGER_IMAGE: Final = "ptah-operator"
# The manager image plus the lab layer (lab.manager): what the fault scenarios install.
LAB_MANAGER_IMAGE: Final = "ptah-lab-manager"
EXECUTOR_IMAGE: Final = "ptah-lab-executor"
# The scratch database images make images builds, by the chart key of their engine
# (execution.scratchImages): the examples' schemas say spec.dev provided, so their
# Observe and Plan Pods run one of these beside ptah.
SCRATCH_IMAGES: Final = {"postgresql": "ptah-scratch-postgresql", "mysql": "ptah-scratch-mariadb"}
# The ptah build the chart declares (execution.ptahVersion): the contract version the
# lab executor speaks, the same the node-less run binds its plans to.
PTAH_VERSION: Final = LOCAL_BINDING.ptah_version
POLICY: Final = '{"version": 1, "require_digest_pin": true}\n'


@dataclass(frozen=True)
class Example:
    """One example resource, the artifact it points at, its databases and what to show."""

    resource: Resource
    file: str
    artifact: str
    databases: tuple[tuple[str, str], ...]  # (Secret name, database name)
    tables: tuple[str, ...]
    cli_kind: str
    engine: str = "PostgreSQL"

    @property
    def name(self) -> str:
        return str(self.load()["metadata"]["name"])

    def load(self) -> Object:
        loaded: Object = yaml.safe_load((EXAMPLES_DIR / self.file).read_text())
        return loaded


EXAMPLES: Final = (
    # The schemas name no dev database: the operator provides one (spec.dev.provided).
    Example(
        PTAHSCHEMAS,
        "ptahschema.yaml",
        "shop/orders-schema",
        (("orders-db", "orders"),),
        ("orders", "customers"),
        "schema",
    ),
    Example(
        PTAHSCHEMAS,
        "ptahschema-mysql.yaml",
        "shop/inventory-schema",
        (("inventory-db", "inventory"),),
        ("warehouses", "stock"),
        "schema",
        engine="MySQL",
    ),
    Example(
        PTAHMIGRATIONS,
        "ptahmigration.yaml",
        "shop/billing-migrations",
        (("billing-db", "billing"),),
        ("invoices",),
        "migration",
    ),
    Example(
        PTAHMIGRATIONS,
        "ptahmigration-mysql.yaml",
        "shop/catalog-migrations",
        (("catalog-db", "catalog"),),
        ("products",),
        "migration",
        engine="MySQL",
    ),
)


class RunFailed(Exception):
    """The run cannot go on; the sentence says why."""


# What ends a run with a sentence rather than a traceback: a piece that would not start
# (the cluster, PostgreSQL, a push, the chart) or an example that failed or timed out.
RUN_ERRORS: Final = (
    RunFailed,
    ClusterError,
    PostgresError,
    MariaDBError,
    install.InstallError,
    artifacts.ArtifactError,
    ExecutorError,
)


def _source(example: Example, obj: Object) -> Object:
    """The example's artifact source (``spec.desired`` or ``spec.artifact``)."""
    source: Object = obj["spec"]["desired" if example.resource is PTAHSCHEMAS else "artifact"]
    return source


def _pointed(example: Example, ref: str) -> Object:
    """The example as written, with its OCI reference replaced by the pushed artifact's."""
    obj = example.load()
    source = _source(example, obj)
    source["ociRef"] = ref
    # The runner refuses a Verify with no policy to read ("the verification policy cannot
    # be read"), so an example that names none gets the lab's own (pin by digest).
    source.setdefault(
        "verificationPolicyFrom", {"name": f"{example.name}-lab-policy", "key": "policy.json"}
    )
    return obj


@dataclass
class LabRun:
    """Everything ``make run`` starts, in start order; ``close`` undoes it in reverse.

    Given a running ``cluster`` (the cluster tests' session cluster), it installs into
    that one and leaves it running on close.
    """

    workdir: Path
    say: Callable[[str], None]
    cluster: LocalCluster | None = None
    postgres: LabPostgres | None = None
    mariadb: LabMariaDB | None = None
    admin: KubeApi = field(init=False)
    images: dict[str, artifacts.PushedImage] = field(default_factory=dict)
    chart: install.ChartInstall | None = None
    chart_source: install.ChartSource | None = None
    pinned: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    log_level: str = "info"  # the manager's (ChartInstall.log_level)
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    # -- lifecycle ----------------------------------------------------------

    @property
    def lab(self) -> LocalCluster:
        if self.cluster is None:
            raise RunFailed("the lab cluster has not been started")
        return self.cluster

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._stack.close()

    def _timed(self, name: str, began: float) -> float:
        now = time.monotonic()
        self.timings[name] = now - began
        self.say(f"# {name}: {now - began:.1f}s")
        return now

    def _start(self) -> None:
        t = time.monotonic()
        built = {
            name: artifacts.built_image(name)
            for name in (MANAGER_IMAGE, EXECUTOR_IMAGE, LAB_MANAGER_IMAGE, *SCRATCH_IMAGES.values())
        }
        missing = [name for name, image in built.items() if image is None]
        if missing:
            raise RunFailed(
                f"the image(s) {', '.join(missing)} have not been built: run `make images` "
                "(`make run` does it first)"
            )
        if self.cluster is None:
            self.say(f"# starting the lab cluster (workdir {self.workdir})")
            self.cluster = LocalCluster(self.workdir / "cluster", echo=self.say)
            self.cluster.start()
            self._stack.callback(self.cluster.stop)
            t = self._timed("cluster", t)
        self.admin = self._stack.enter_context(
            KubeApi.from_kubeconfig(self.lab.kubeconfig("admin"))
        )

        topology = self.lab.topology
        self.postgres = LabPostgres(listen=[str(topology.node_ip)], clients=[topology.pod_subnet])
        # Registered after the cluster, so it stops first, while the bridge still exists.
        self._stack.callback(self.postgres.stop)
        self.postgres.start()
        t = self._timed(f"postgresql on {topology.node_ip}:{self.postgres.port}", t)
        # MariaDB the same way: on the bridge, passwords from the pod subnet only.
        self.mariadb = LabMariaDB(listen=[str(topology.node_ip)], clients=[topology.pod_subnet])
        self._stack.callback(self.mariadb.stop)
        self.mariadb.start()
        t = self._timed(f"mariadb on {topology.node_ip}:{self.mariadb.port}", t)

        registry = self.lab.registry
        work = self.workdir / "push"
        for name, image in built.items():
            assert image is not None
            env = artifacts.EXECUTOR_ENV if name == EXECUTOR_IMAGE else None
            pushed = artifacts.push_image(
                self.lab.crane, image, f"{registry}/ptah/{name}", work, env=env
            )
            self.images[name] = pushed
            self.say(f"# pushed {pushed.ref}")
        self.pinned = artifacts.push_examples(registry)
        for ref in self.pinned.values():
            self.say(f"# pushed {ref}")
        t = self._timed("images and artifacts", t)

        manager = self.images[MANAGER_IMAGE]
        chart = install.ChartInstall(
            namespace=MANAGER_NAMESPACE,
            manager_repository=manager.repository,
            manager_digest=manager.digest,
            executor_image=self.images[EXECUTOR_IMAGE].ref,
            # The manager image also supplies the Jobs' runner.
            runner_image=manager.ref,
            ptah_version=PTAH_VERSION,
            scratch_images=tuple(
                (key, self.images[name].ref) for key, name in SCRATCH_IMAGES.items()
            ),
            log_level=self.log_level,
        )
        package = install.package_chart(work / "chart")
        source = install.push_chart(package, registry)
        self.say(f"# pushed {package.name} as {source}")
        self.say(
            f"# helm install {install.RELEASE} {source} "
            + " ".join(f"--set {value}" for value in chart.values())
        )
        install.helm_install(chart, self.lab.kubeconfig("admin"), source=source)
        self.chart, self.chart_source = chart, source
        install.wait_ready(
            self.admin,
            MANAGER_NAMESPACE,
            kubeconfig=self.lab.kubeconfig("admin"),
            report=self.say,
            timeout=300.0,
            check=self.lab.check,
        )
        t = self._timed("chart installed, manager ready", t)
        self._apply_examples()
        self._timed("examples applied", t)

    # -- the examples ---------------------------------------------------------

    def _apply_examples(self) -> None:
        node_ip = str(self.lab.topology.node_ip)
        # The realms first: a resource naming a realm that does not exist yet is never
        # given its Lease (the controller looks again only every REALM_RETRY).
        for source, realm in nodeless.example_realms():
            self.admin.create(PTAHREALMS, None, realm)
            self.say(
                f"# applied examples/{source}: PtahRealm {realm['metadata']['name']} "
                f"({realm['spec']['engine']}, admits {', '.join(realm['spec']['namespaces'])})"
            )
        self.admin.create(NAMESPACES, None, {"metadata": {"name": NAMESPACE}})
        _wait_default_service_account(self.admin, NAMESPACE)
        for example in EXAMPLES:
            server = self.server(example)
            role, password = example.name, secrets.token_urlsafe(18)
            server.create_role(role, password)
            for secret, database in example.databases:
                server.create_database_named(database, owner=role)
                url = server.url(database, user=role, password=password, host=node_ip)
                self.admin.create(
                    SECRETS,
                    NAMESPACE,
                    {"metadata": {"name": secret}, "stringData": {"url": url}, "type": "Opaque"},
                )
        for example in EXAMPLES:
            # Each example's verification policy: the artifact must be pinned by digest.
            pointed = _pointed(example, self.pinned[example.artifact])
            policy = _source(example, pointed)["verificationPolicyFrom"]
            self.admin.create(
                CONFIGMAPS,
                NAMESPACE,
                {"metadata": {"name": policy["name"]}, "data": {policy["key"]: POLICY}},
            )
        for example in EXAMPLES:
            created = self.admin.create(
                example.resource, NAMESPACE, _pointed(example, self.pinned[example.artifact])
            )
            self.say(
                f"# applied examples/{example.file} as {NAMESPACE}/{created['metadata']['name']} "
                f"(artifact {self.pinned[example.artifact]})"
            )

    def server(self, example: Example) -> LabPostgres | _MariaDBServer:
        """The lab database server of the example's engine."""
        if example.engine == "MySQL":
            assert self.mariadb is not None
            return _MariaDBServer(self.mariadb)
        assert self.postgres is not None
        return self.postgres

    def get(self, example: Example) -> Object:
        return self.admin.get(example.resource, NAMESPACE, example.name)

    def plan_text(self, example: Example) -> str:
        view = kubectl_ptah.read_plan(self.admin, example.cli_kind, NAMESPACE, example.name)
        return plan_text(view)

    def approval_command(self, example: Example) -> str:
        return (
            f"KUBECONFIG={self.lab.kubeconfig('admin')} "
            f"{REPO_ROOT / '.venv' / 'bin' / 'kubectl-ptah'} approve {example.cli_kind} "
            f"{example.name} -n {NAMESPACE}"
        )

    def approve(self, example: Example) -> str:
        """Approve the pending plan by ``kubectl ptah approve --yes``; says who was stamped."""
        out = io.StringIO()
        code = kubectl_ptah.main(
            [
                "--kubeconfig",
                str(self.lab.kubeconfig("admin")),
                "-n",
                NAMESPACE,
                "approve",
                example.cli_kind,
                example.name,
                "--yes",
                "-o",
                "json",
            ],
            stdin=io.StringIO(),
            stdout=out,
        )
        if code != 0:
            raise RunFailed(f"kubectl ptah approve {example.cli_kind} {example.name} refused")
        made = json.loads(out.getvalue())
        return f"{made['kind']} {made['name']} stamped by {made['stampedBy']}"

    def describe(self, example: Example) -> str:
        """psql's ``\\d`` of the example's tables, read from its target database
        (MariaDB's ``SHOW CREATE TABLE`` for a MySQL one)."""
        database = example.databases[0][1]
        if example.engine == "MySQL":
            assert self.mariadb is not None
            shown = [self.mariadb.query(database, f"SHOW CREATE TABLE `{table}`")
                     for table in example.tables]  # fmt: skip
            return "\n".join(str(row[1]) for rows in shown for row in rows)
        assert self.postgres is not None
        commands = [arg for table in example.tables for arg in ("-c", f"\\d {table}")]
        done = subprocess.run(
            [str(BIN / "psql"), "-X", self.postgres.url(database), *commands],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        return (done.stdout + done.stderr).rstrip()

    def query(self, database: str, sql: str) -> list[tuple[object, ...]]:
        assert self.postgres is not None
        return self.postgres.query(database, sql)


@dataclass(frozen=True)
class _MariaDBServer:
    """``LabMariaDB`` under the two names ``_apply_examples`` uses of ``LabPostgres``."""

    server: LabMariaDB

    def create_role(self, name: str, password: str) -> None:
        self.server.create_user(name, password)

    def create_database_named(self, name: str, *, owner: str | None = None) -> None:
        self.server.create_database_named(name, owner=owner)

    def url(self, dbname: str, *, user: str, password: str, host: str) -> str:
        return self.server.url(dbname, user=user, password=password, host=host)


def _wait_default_service_account(admin: KubeApi, namespace: str, timeout: float = 60.0) -> None:
    # The service-account controller creates it moments after the namespace; the
    # Jobs' Pods cannot be admitted without it.
    end = time.monotonic() + timeout
    while True:
        try:
            admin.get(SERVICEACCOUNTS, namespace, "default")
            return
        except NotFound:
            if time.monotonic() > end:
                raise RunFailed(f"namespace {namespace} got no default service account") from None
            time.sleep(0.2)


# -- following the examples -------------------------------------------------------


@dataclass
class Follow:
    """Prints each change of the examples and acts at AwaitingApproval and InSync."""

    run: LabRun
    approve: bool
    say: Callable[[str], None]
    last: dict[str, str] = field(default_factory=dict)
    shown_plans: set[str] = field(default_factory=set)
    described: set[str] = field(default_factory=set)

    def step(self) -> dict[str, str]:
        """One look at every example; their phases."""
        phases = {}
        for example in EXAMPLES:
            obj = self.run.get(example)
            line = resource_line(obj)
            if self.last.get(example.name) != line:
                self.say(line)
                self.last[example.name] = line
            phase = phase_of(obj)
            phases[example.name] = phase
            plan = ((obj.get("status") or {}).get("plan") or {}).get("uid")
            if phase == "AwaitingApproval" and plan and plan not in self.shown_plans:
                self._awaiting(example, plan)
            if phase == DONE and example.name not in self.described:
                self.described.add(example.name)
                self.say(f"# {example.name} is InSync; the database now holds:")
                self.say(self.run.describe(example))
            if phase in FAILED:
                raise RunFailed(
                    f"{example.resource.kind} {NAMESPACE}/{example.name} failed: {failure_of(obj)}"
                )
        return phases

    def _awaiting(self, example: Example, plan: str) -> None:
        try:
            text = self.run.plan_text(example)
        except (PlanUnreadable, kubectl_ptah.Refused) as exc:
            # The plan object may lag its reference by a moment; the next look shows it.
            self.say(f"# the plan of {example.name} is not readable yet: {exc}")
            return
        self.shown_plans.add(plan)
        self.say(text)
        if self.approve:
            self.say(f"# --approve: {self.run.approve(example)}")
        else:
            self.say(f"# approve it with: {self.run.approval_command(example)}")


# -- the command -------------------------------------------------------------------


class _Stop(Exception):
    """A stop signal arrived."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="make run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--once", action="store_true", help="exit 0 once every example is InSync")
    parser.add_argument("--approve", action="store_true", help="approve the plans itself")
    parser.add_argument(
        "--lifecycle",
        action="store_true",
        help="with --once: then upgrade to a second packaged version, roll back, and "
        "uninstall, checking each (lab.lifecycle)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir in /tmp")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1200.0,
        help="with --once: seconds from the examples' creation to all InSync",
    )
    parser.add_argument(
        "--node-less",
        action="store_true",
        help="the older run: the manager as a host process, no node, Jobs only recorded",
    )
    return parser


def _say(line: str) -> None:
    print(line, flush=True)


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    """SIGINT and SIGTERM unwind like an exception; during teardown both are ignored."""
    signal.signal(signal.SIGTERM, _raise_stop)
    # A shell starting us in the background leaves SIGINT ignored; Ctrl-C must tear down.
    signal.signal(signal.SIGINT, _raise_stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(argv: Sequence[str] | None = None) -> int:
    args, rest = _parser().parse_known_args(argv)
    if args.node_less:
        passed = [*rest, *(["--once"] if args.once else [])]
        if args.workdir is not None:
            passed += ["--workdir", str(args.workdir)]
        return nodeless.main(passed)
    if rest:
        _parser().error(f"unrecognized arguments: {' '.join(rest)}")
    # Short: the kubelet's sockets live under it and a socket path has 107 bytes.
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="ptah-run-", dir="/tmp"))
    began = time.monotonic()
    code = 0
    with _signals():
        run = LabRun(workdir, _say)
        try:
            run.start()
            _say(
                f"# ready in {time.monotonic() - began:.1f}s: export "
                f"KUBECONFIG={run.lab.kubeconfig('admin')}"
            )
            follow = Follow(run, approve=args.approve, say=_say)
            end = time.monotonic() + args.timeout
            stopped = threading.Event()
            settled = False
            while True:
                run.lab.check()  # a component that dies ends the run
                phases = follow.step()
                if all(phase == DONE for phase in phases.values()) and not settled:
                    settled = True
                    _say(
                        f"# every example is InSync, {time.monotonic() - began:.1f}s "
                        "after the start"
                    )
                    if args.once:
                        if args.lifecycle:
                            made = [(e.resource, NAMESPACE, e.name) for e in EXAMPLES]
                            lifecycle.run_lifecycle(run, _say, made)
                        break
                    _say("# running; Ctrl-C tears everything down")
                if args.once and time.monotonic() > end:
                    raise RunFailed(
                        f"the examples were not all InSync within {args.timeout:.0f}s: "
                        + ", ".join(f"{name} {phase}" for name, phase in phases.items())
                    )
                # The controller and the node act on their own time; a short poll
                # shows each change within half a second.
                stopped.wait(0.5)
        except _Stop as stop:
            _say(f"# {stop}: tearing down")
            code = 130
        except RUN_ERRORS as exc:
            print(f"make run: {exc}", file=sys.stderr, flush=True)
            code = 1
        finally:
            try:
                run.close()
            except (ClusterError, PostgresError, MariaDBError) as exc:
                print(f"make run: {exc}", file=sys.stderr, flush=True)
                code = code or 1
    if code in (0, 130):
        _say("# stopped; everything started here has been torn down")
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
