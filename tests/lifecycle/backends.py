"""Where a dispatch-order world runs: the in-memory double, or the real kube-apiserver of
the lab/controlplane harness, behind the same adapter protocol.

A ``Backend`` hands out ``Site``s, one per world: an isolated place with an admin API
that sets the stage and reads what is held (never faulted, never attributed to a step),
the API the manager's ``faultrig.StepApi`` wraps, and the namespaces the resource and
its Lease live in. Everything a world reads of the store goes through ``Site.peek``,
which on the real server is an uncached get (``faultrig.peek_through``), so the rows,
faults and invariant checks are the same code on both.

On the real server the manager is the manager: the controller calls the API server as
the manager identity of the harness, with the chart's permissions (granted once by
``lab.run``, as ``make run`` grants them), so a call the chart does not
allow fails a row instead of passing unnoticed. Each site gets a fresh namespace with
its default ServiceAccount (no service-account controller runs in the harness, and the
admission snapshot binds the Job's ServiceAccount by UID), and its resource addresses a
database of its own (``Site.database``), so its Lease, named by that database's digest
in the manager's one Lease namespace, is no other row's. Rows share nothing: not a Job
name, not a Lease.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final, Protocol

from jobclaim.apiserver import JOBS, ApiClient, Object
from kube.client import KubeApi
from kube.fake.inmemory import InMemoryApi
from lab import run as localrun
from tests.support.dispatchworld import LEASE_NS, NS, Clocks, add_service_account
from tests.support.faultrig import Peek, peek_through

MEMORY: Final = "memory"
REAL: Final = "real"


@dataclass(frozen=True)
class Site:
    """One world's place on a backend. ``api`` is the admin's (it satisfies
    ``dispatchworld.Cluster``, so the seeding functions write through it); ``manager``
    is what the controller's ``StepApi`` wraps; ``suffix`` sets the site's databases
    apart from every other site's on a shared server ("" on the double, which is
    never shared)."""

    backend: str
    api: ApiClient
    manager: ApiClient
    peek: Peek
    namespace: str
    lease_namespace: str
    suffix: str = ""

    def database(self, coordination_key: str) -> str:
        """The coordination key a resource of this site addresses."""
        return f"{coordination_key}-{self.suffix}" if self.suffix else coordination_key

    def jobs(self) -> list[Object]:
        return self.api.list(JOBS, self.namespace)


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    def site(self, clocks: Clocks) -> Site:
        """A fresh, isolated site; ``clocks`` are the world's (the double stamps its
        objects by them; a real server keeps its own time)."""
        ...


@dataclass(frozen=True)
class InMemory:
    """The double. ``protocol_only`` reads the store through the adapter protocol
    alone, as the real server is read, instead of the double's ``peek``."""

    protocol_only: bool = False

    @property
    def name(self) -> str:
        return MEMORY

    def site(self, clocks: Clocks) -> Site:
        api = InMemoryApi(clock=clocks.wall)
        add_service_account(api, NS)
        peek = peek_through(api) if self.protocol_only else api.peek
        return Site(MEMORY, api, api, peek, NS, LEASE_NS)


DOUBLE: Final = InMemory()


@dataclass(frozen=True)
class RealServer:
    """The harness's kube-apiserver, with the operator's CRDs installed and the manager
    granted the chart's permissions, its Leases in ``lease_namespace``."""

    admin: KubeApi
    manager: KubeApi
    lease_namespace: str

    @property
    def name(self) -> str:
        return REAL

    def site(self, clocks: Clocks) -> Site:
        del clocks  # the server stamps its objects by its own clock
        suffix = uuid.uuid4().hex[:10]
        namespace = f"do-{suffix}"
        localrun.prepare_namespace(self.admin, namespace)
        peek = peek_through(self.admin)
        return Site(REAL, self.admin, self.manager, peek, namespace, self.lease_namespace, suffix)
