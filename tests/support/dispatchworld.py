"""A small cluster for the dispatch tests: resources with plans and approvals on the
in-memory API, a manager over it, and injected clocks.

Everything is built through the product's models and written through the API, so a
pass sees exactly what it would read from a real server. The seeding functions
(``add_schema``, ``add_migration``) and ``manager_environment`` need only the adapter
protocol and a namespace (a ``Cluster``), so a suite can seed a real API server
with them too; ``NS`` and ``LEASE_NS`` are the double's defaults, and a rig on a
shared server takes namespaces of its own.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from controller.context.passcontext import Environment
from controller.mutationlifecycle import Driver, Stop
from controller.pieces.events import RecordingSink
from controller.pieces.managerconfig import BindingInputs, ManagerConfig
from controller.pieces.targetlock import TargetLock
from controller.runtime.reconciler import Key, Reconciler
from jobclaim import digest_of, migration_plan_name, plan_name, projection_names, sha256_digest
from jobclaim.api import CurrentPlanStatus
from jobclaim.apiserver import (
    JOBS,
    LEASES,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    SERVICEACCOUNTS,
    ApiClient,
    Object,
)
from kube.fake.inmemory import InMemoryApi
from tests.support.claimworld import BINDING, EPOCH, MANAGER, example

NS = "shop"
LEASE_NS = "ptah-system"
START = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
STATEMENTS = b"CREATE TABLE orders (id bigint primary key);\n"


@dataclass
class Clocks:
    """A monotonic clock and a wall clock that move only when a test says so."""

    mono: float = 1000.0
    wall_time: datetime = START

    def monotonic(self) -> float:
        return self.mono

    def wall(self) -> datetime:
        return self.wall_time

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall_time += timedelta(seconds=seconds)


class Cluster(Protocol):
    """Where resources are seeded: an API written through with every right a person
    setting the stage has, and the namespace the resources live in."""

    @property
    def api(self) -> ApiClient: ...

    @property
    def namespace(self) -> str: ...


@dataclass
class Rig:
    api: InMemoryApi
    env: Environment
    sink: RecordingSink
    reconciler: Reconciler
    clocks: Clocks
    nonces: list[int] = field(default_factory=lambda: [0])
    namespace: str = NS
    lease_namespace: str = LEASE_NS

    def reconcile(self, key: Key) -> Stop:
        return self.reconciler.reconcile(key)

    def settle(self, key: Key, *, limit: int = 20) -> list[Stop]:
        """Passes while each asks to be run again at once (or ``limit``); the stops."""
        stops: list[Stop] = []
        for _ in range(limit):
            stop = self.reconcile(key)
            stops.append(stop)
            if stop.requeue_after != 0.0 or self.api.stopped:
                break
        return stops

    def resource(self, key: Key) -> Object:
        resource = PTAHSCHEMAS if key.kind == "PtahSchema" else PTAHMIGRATIONS
        found = self.api.peek(resource, key.namespace, key.name)
        assert found is not None
        return found

    def claim(self, key: Key) -> dict[str, Any]:
        return dict(self.resource(key).get("status", {}).get("activeOperation") or {})

    def jobs(self) -> list[Object]:
        return self.api.list(JOBS, self.namespace)

    def job_creates(self) -> int:
        return sum(1 for c in self.api.calls if c.verb == "create" and c.resource == JOBS)

    def leases(self) -> list[Object]:
        return self.api.list(LEASES, self.lease_namespace)


def _entropy(rig_nonces: list[int]) -> Callable[[int], bytes]:
    def entropy(size: int) -> bytes:
        rig_nonces[0] += 1
        return rig_nonces[0].to_bytes(size, "big")

    return entropy


def manager_environment(
    api: ApiClient,
    clocks: Clocks,
    driver: Driver | None = None,
    *,
    lease_namespace: str = LEASE_NS,
) -> tuple[Environment, list[int]]:
    """The manager over ``api``: the test binding, fixed epochs, the clocks, and a
    counter for entropy (returned with it), so every world starts from the same
    nonces and names whatever API server it runs on."""
    config = ManagerConfig(
        manager=MANAGER,
        binding=BindingInputs(
            controller_state_version=BINDING.controller_state_version,
            ptah_version=BINDING.ptah_version,
            executor_image=BINDING.executor_image,
            runner_protocol_version=BINDING.runner_protocol_version,
            scratch_images=BINDING.scratch_images,
        ),
        lease_namespace=lease_namespace,
    )
    nonces = [0]
    env = Environment(
        api=api,
        config=config,
        lock=TargetLock(api, lease_namespace, clock=clocks.monotonic, wall=clocks.wall),
        driver=driver or Driver(),
        wall=clocks.wall,
        entropy=_entropy(nonces),
        epochs=lambda: EPOCH,
    )
    return env, nonces


def make_rig(
    driver: Driver | None = None,
    *,
    api: InMemoryApi | None = None,
    namespace: str = NS,
    lease_namespace: str = LEASE_NS,
) -> Rig:
    clocks = Clocks()
    api = api or InMemoryApi(clock=clocks.wall)
    env, nonces = manager_environment(api, clocks, driver, lease_namespace=lease_namespace)
    sink = RecordingSink()
    add_service_account(api, namespace)
    return Rig(api, env, sink, Reconciler(env, sink), clocks, nonces, namespace, lease_namespace)


def add_service_account(api: ApiClient, namespace: str) -> None:
    """The ServiceAccount a Job runs as, which the admission snapshot binds by UID.
    Nothing makes it on the double (nor on the harness's real server, which runs no
    service-account controller), and the double needs no namespace created first."""
    api.create(
        SERVICEACCOUNTS, namespace, {"metadata": {"name": "default", "namespace": namespace}}
    )


def _approver(at: str) -> dict[str, Any]:
    """Admission's stamp, at ``at``: a time the server wrote a moment before, so the
    stamp is within the window of the approval's own creationTimestamp on the double
    (which keeps the world's clock) and on a real server (which keeps its own)."""
    return {
        "approver": {"username": "alice", "uid": "alice-uid", "groups": ["dba"]},
        "approvedAt": at,
        "mutationRequestUID": "admission-request-1",
    }


ARTIFACT = sha256_digest(b"artifact")
READ_AT = "2026-12-02T11:58:00Z"


def read_up_to_plan(resource: Object, *, drift: bool = False) -> dict[str, Any]:
    """The readings a resource records before its plan: the spec observed, the
    artifact resolved and verified, and for a schema the drift it was planned for.
    A seeded plan stands on them, as a planned one would."""
    # Pinned by digest in the repository the spec names: a Job pulls from nowhere else.
    repository = (resource["spec"].get("desired") or resource["spec"]["artifact"])["ociRef"]
    name = repository.split("@", 1)[0].rsplit(":", 1)[0]  # without its digest or tag
    source = {"reference": f"{name}@{ARTIFACT}", "digest": ARTIFACT}
    verification: dict[str, Any] = {"artifactDigest": ARTIFACT, "verifiedAt": READ_AT}
    if (resource["spec"].get("desired") or resource["spec"]["artifact"]).get(
        "verificationPolicyFrom"
    ):
        # Verified under the policy the spec names, as its Verify reading records.
        verification["policyDigest"] = sha256_digest(b"the spec's verification policy")
    readings: dict[str, Any] = {
        "observedGeneration": resource["metadata"]["generation"],
        "verification": verification,
    }
    if resource["kind"] == "PtahSchema":
        readings["source"] = source
        readings["observation"] = {
            "observedAt": READ_AT,
            "artifactDigest": ARTIFACT,
            "drift": drift,
        }
    else:
        readings["artifact"] = source
    return readings


def on_key(raw: dict[str, Any], coordination_key: str) -> None:
    """Point an example's target at ``coordination_key`` instead of the realm it names.

    The examples name a PtahRealm (examples/ptahrealm.yaml); the rig's resources are
    keyed, since what they test is the lifecycle on one database, and the realm gate
    (its uncached realm read and census) is tests/controller/test_realm_gate.py's.
    A test that wants a realm says ``realm=`` and creates it.
    """
    target = raw["spec"]["target"]
    target.pop("realmRef", None)
    target.pop("sharedRealm", None)
    target["coordinationKey"] = coordination_key


def add_insync_schema(
    rig: Rig, name: str, *, coordination_key: str, reference: str | None = None
) -> Key:
    """A PtahSchema standing InSync: resolved, verified and observed without drift at
    ``READ_AT``, with no plan and no claim, as a real one stands between intervals.
    ``reference`` replaces the example's tag (a digest-pinned one is never resolved
    again)."""
    raw = example("ptahschema.yaml")
    raw["metadata"].update(name=name, namespace=rig.namespace)
    if reference is not None:
        raw["spec"]["desired"]["ociRef"] = reference
    on_key(raw, coordination_key)
    created = rig.api.create(PTAHSCHEMAS, rig.namespace, raw)
    rig.api.patch_status(
        PTAHSCHEMAS,
        rig.namespace,
        name,
        {
            "executionBinding": BINDING.to_wire(),
            "phase": "InSync",
            "lastSuccessfulReconciliation": READ_AT,
            **read_up_to_plan(created, drift=False),
        },
        resource_version=created["metadata"]["resourceVersion"],
    )
    return Key("PtahSchema", rig.namespace, name)


def add_schema(
    rig: Cluster,
    name: str = "orders",
    *,
    coordination_key: str = "orders-primary",
    approve: bool = True,
    chunks: Iterable[bytes] = (STATEMENTS,),
    apply_policy: str = "OnApproval",
    realm: str | None = None,
    shared_realm: bool = False,
) -> Key:
    """A PtahSchema whose current plan is published and (optionally) approved; on the
    PtahRealm ``realm`` instead of its coordination key when one is named."""
    api, ns = rig.api, rig.namespace
    raw = example("ptahschema.yaml")
    raw["metadata"].update(name=name, namespace=ns)
    on_key(raw, coordination_key)
    if realm is not None:
        del raw["spec"]["target"]["coordinationKey"]
        raw["spec"]["target"].update(realmRef={"name": realm}, sharedRealm=shared_realm)
    raw["spec"]["policy"]["apply"] = apply_policy
    schema = api.create(PTAHSCHEMAS, ns, raw)
    uid = schema["metadata"]["uid"]
    data = list(chunks)
    fingerprint = digest_of({"schema": name, "uid": uid})
    plan = plan_name(fingerprint)
    names = projection_names(plan, len(data))
    content = sha256_digest(b"".join(data))
    plan_obj = api.create(
        PTAHSCHEMAPLANS,
        ns,
        {
            "metadata": {"name": plan, "namespace": ns},
            "spec": {
                "schemaRef": {"name": name, "uid": uid},
                "fingerprint": fingerprint,
                "contentDigest": content,
                "coordinationDigest": digest_of({"db": coordination_key}),
                "executionBindingID": EPOCH,
                "controllerStateVersion": BINDING.controller_state_version,
                "ptahVersion": BINDING.ptah_version,
                "executorImage": BINDING.executor_image,
                "runnerProtocolVersion": BINDING.runner_protocol_version,
                "statementCount": 1,
                "chunks": [
                    {"name": n, "index": i, "digest": sha256_digest(d), "size": len(d)}
                    for i, (n, d) in enumerate(zip(names, data, strict=True))
                ],
            },
        },
    )
    plan_uid = plan_obj["metadata"]["uid"]
    for i, (chunk_name, chunk) in enumerate(zip(names, data, strict=True)):
        api.create(
            PTAHSCHEMAPLANCHUNKS,
            ns,
            {
                "metadata": {"name": chunk_name, "namespace": ns},
                "spec": {
                    "planRef": {"name": plan, "uid": plan_uid},
                    "index": i,
                    "data": base64.b64encode(chunk).decode(),
                    "digest": sha256_digest(chunk),
                    "size": len(chunk),
                },
            },
        )
    current = CurrentPlanStatus(
        name=plan,
        uid=plan_uid,
        fingerprint=fingerprint,
        content_digest=content,
        execution_binding_id=EPOCH,
        controller_state_version=BINDING.controller_state_version,
        ptah_version=BINDING.ptah_version,
        statement_count=1,
        chunk_count=len(data),
    )
    api.patch_status(
        PTAHSCHEMAS,
        ns,
        name,
        {
            "executionBinding": BINDING.to_wire(),
            "plan": current.to_wire(),
            "phase": "Pending",
            **read_up_to_plan(schema, drift=True),
        },
        resource_version=schema["metadata"]["resourceVersion"],
    )
    if approve:
        api.create(
            PTAHSCHEMAAPPROVALS,
            ns,
            {
                "metadata": {"name": f"{name}-approval", "namespace": ns},
                "spec": {
                    "schemaRef": {"name": name, "uid": uid},
                    "planRef": {"name": plan, "uid": plan_uid},
                    "planFingerprint": fingerprint,
                    "executionBindingID": EPOCH,
                    **_approver(plan_obj["metadata"]["creationTimestamp"]),
                },
            },
        )
    return Key("PtahSchema", ns, name)


def add_migration(
    rig: Cluster, name: str = "billing", *, coordination_key: str = "billing-primary"
) -> Key:
    """A PtahMigration whose plan is published and approved."""
    api, ns = rig.api, rig.namespace
    raw = example("ptahmigration.yaml")
    raw["metadata"].update(name=name, namespace=ns)
    on_key(raw, coordination_key)
    migration = api.create(PTAHMIGRATIONS, ns, raw)
    uid = migration["metadata"]["uid"]
    fingerprint = digest_of({"migration": name, "uid": uid})
    plan = migration_plan_name(fingerprint)
    plan_obj = api.create(
        PTAHMIGRATIONPLANS,
        ns,
        {
            "metadata": {"name": plan, "namespace": ns},
            "spec": {
                "migrationRef": {"name": name, "uid": uid},
                "fingerprint": fingerprint,
                "migrations": [
                    {"version": "20260101000000", "digest": sha256_digest(b"one")},
                    {"version": "20260102000000", "digest": sha256_digest(b"two")},
                ],
                "historyFingerprint": digest_of({"history": name}),
                "artifactDigest": sha256_digest(b"artifact"),
                "coordinationDigest": digest_of({"db": coordination_key}),
                "executionBindingID": EPOCH,
                "controllerStateVersion": BINDING.controller_state_version,
                "ptahVersion": BINDING.ptah_version,
                "executorImage": BINDING.executor_image,
                "runnerProtocolVersion": BINDING.runner_protocol_version,
            },
        },
    )
    plan_uid = plan_obj["metadata"]["uid"]
    api.patch_status(
        PTAHMIGRATIONS,
        ns,
        name,
        {
            "executionBinding": BINDING.to_wire(),
            "plan": {"name": plan, "uid": plan_uid},
            "phase": "AwaitingApproval",
            **read_up_to_plan(migration),
        },
        resource_version=migration["metadata"]["resourceVersion"],
    )
    api.create(
        PTAHMIGRATIONAPPROVALS,
        ns,
        {
            "metadata": {"name": f"{name}-approval", "namespace": ns},
            "spec": {
                "migrationRef": {"name": name, "uid": uid},
                "planRef": {"name": plan, "uid": plan_uid},
                "planFingerprint": fingerprint,
                "executionBindingID": EPOCH,
                **_approver(plan_obj["metadata"]["creationTimestamp"]),
            },
        },
    )
    return Key("PtahMigration", ns, name)


def conditions(obj: Object) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def dumps(obj: object) -> str:
    return json.dumps(obj, sort_keys=True)
