"""The two families and one world of the lifecycle tests: a site on a backend with one
approved resource, and a manager whose every call goes through ``faultrig.StepApi``.

The dispatch-order table (``test_dispatch_order``), the continuity-loss rows and the
snapshot pin each arm their own faults on the same world, so what a pass is run
against, and what is read of the store afterwards (``World.holding``), is one thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from controller.context.passcontext import Environment
from controller.mutationlifecycle import Driver
from controller.runtime.lifecyclepass import run_pass
from controller.runtime.reconciler import Key
from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAS,
    Resource,
)
from tests.lifecycle.backends import DOUBLE, Backend, Site
from tests.support.dispatchworld import (
    Clocks,
    Cluster,
    add_migration,
    add_schema,
    manager_environment,
)
from tests.support.faultrig import Contender, Holding, StepApi, read_holding

# A pass that raised: the reconciler logs and retries it, a row notes it as a problem.
PASS_RAISED = "a pass raised"


class Seed(Protocol):
    """Seeds one approved resource of a family, addressing ``coordination_key``."""

    def __call__(self, rig: Cluster, *, coordination_key: str) -> Key: ...


@dataclass(frozen=True)
class Family:
    name: str
    resource: Resource
    approvals: Resource
    add: Seed
    # The database its resource addresses (a site may set it apart: ``Site.database``).
    database: str
    # The record an unknown outcome leaves, once issue 5 writes it.
    record: str


SCHEMA = Family(
    "schema", PTAHSCHEMAS, PTAHSCHEMAAPPROVALS, add_schema, "orders-primary", "pendingObservation"
)
MIGRATION = Family(
    "migration",
    PTAHMIGRATIONS,
    PTAHMIGRATIONAPPROVALS,
    add_migration,
    "billing-primary",
    "unresolvedRun",
)


@dataclass
class World:
    site: Site
    api: StepApi
    env: Environment
    contender: Contender
    key: Key
    family: Family
    raised: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, family: Family, driver: Driver, backend: Backend = DOUBLE) -> World:
        """A fresh site on ``backend`` with one resource of ``family``, and a manager
        whose every call goes through the fault-injecting ``StepApi``."""
        clocks = Clocks()
        site = backend.site(clocks)
        key = family.add(site, coordination_key=site.database(family.database))
        api = StepApi(site.manager, site.peek)
        env, _ = manager_environment(api, clocks, driver, lease_namespace=site.lease_namespace)
        contender = Contender.on(site.api, site.lease_namespace, clocks.wall)
        return cls(site, api, env, contender, key, family)

    def run(self) -> str:
        """One pass, as the reconciler runs it: a pass that raises is logged and
        retried there, so here it is noted (a problem in itself) and the row goes on."""
        try:
            result = run_pass(self.env, self.key.kind, self.key.namespace, self.key.name)
        except Exception as error:  # the reconciler's own catch-all
            self.raised.append(f"{PASS_RAISED}: {type(error).__name__}")
            return PASS_RAISED
        return result.stop.reason

    def holding(self) -> Holding:
        return read_holding(
            self.site.peek,
            self.site.jobs,
            self.family.resource,
            self.site.namespace,
            self.key.name,
            lease_namespace=self.site.lease_namespace,
            consumed_uids=self.api.consumed_uids,
        )

    def contend(self) -> bool:
        """A second claimant takes the claim's realm; False when there is no claim."""
        claim = self.holding().claim
        if not claim.get("coordinationDigest") or not claim.get("leaseDurationSeconds"):
            return False
        digest, duration = str(claim["coordinationDigest"]), int(claim["leaseDurationSeconds"])
        return self.contender.take(digest, duration)

    def bump_generation(self) -> None:
        site = self.site
        site.api.patch_spec(self.family.resource, site.namespace, self.key.name, {"interval": "1h"})

    def replace_approval(self) -> None:
        site, name = self.site, f"{self.key.name}-approval"
        old = site.api.get(self.family.approvals, site.namespace, name)
        site.api.delete(self.family.approvals, site.namespace, name)
        site.api.create(
            self.family.approvals,
            site.namespace,
            {"metadata": {"name": name}, "spec": old["spec"]},
        )
