"""The API boundary both sides read and write through: resources, errors, protocols.

The controller and the webhook each receive an object implementing these protocols:
the real adapter (the one module that imports the ``kubernetes`` client) in
production, the in-memory double in tests. Defining the boundary here, beside the
contract, keeps one error hierarchy for both: a webhook that mapped a failed read
differently from the controller would allow what the controller refuses.

    PtahError
     └── ApiError                   the API server answered, or could not be reached
          ├── NotFound              404
          ├── Conflict              409 on a stale resourceVersion or precondition
          ├── AlreadyExists         409 on create: something stands under the name
          ├── Refused               refused before storing: 400/401/403/422/429, or an
          │                         admission webhook that failed closed
          ├── Invalid(Refused)      422: the object does not validate
          └── Unavailable           timeouts, connection errors, other 5xx: the write
                                    may or may not have happened
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar

from jobclaim.api._base import GROUP, VERSION
from jobclaim.errors import PtahError

Object = dict[str, Any]


class ApiError(PtahError):
    """Any failed API call. ``status`` is the HTTP code when there was one."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class AlreadyExists(ApiError):
    pass


class Refused(ApiError):
    """The API server refused the request before storing anything."""


class Invalid(Refused):
    pass


class Unavailable(ApiError):
    """No answer, or an answer that does not say whether the write happened."""


_T = TypeVar("_T")

# How many times a read-decide-write races another writer before giving up: enough
# for a burst of writers, few enough that a pass never spins.
CAS_ATTEMPTS: Final = 5


def compare_and_swap(
    attempt: Callable[[], _T],
    *,
    races: tuple[type[ApiError], ...] = (Conflict,),
    attempts: int = CAS_ATTEMPTS,
) -> _T:
    """Run ``attempt`` (read, decide, write at the version read) until it wins its race.

    A ``races`` error means someone wrote between the read and the write: the next
    attempt decides again from what they wrote, never from what was read before it.
    After ``attempts`` lost races the last one is raised; any other error at once.
    """
    for remaining in range(attempts - 1, -1, -1):
        try:
            return attempt()
        except races:
            if remaining == 0:
                raise
    raise AssertionError("compare_and_swap needs at least one attempt")


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: enough to build its URL and to name it in a sentence."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    has_status: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


JOBS: Final = Resource("batch", "v1", "jobs", "Job", has_status=True)
PODS: Final = Resource("", "v1", "pods", "Pod", has_status=True)
CONFIGMAPS: Final = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS: Final = Resource("", "v1", "secrets", "Secret")
SERVICEACCOUNTS: Final = Resource("", "v1", "serviceaccounts", "ServiceAccount")
LIMITRANGES: Final = Resource("", "v1", "limitranges", "LimitRange")
EVENTS: Final = Resource("events.k8s.io", "v1", "events", "Event")
NAMESPACES: Final = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease")
RUNTIMECLASSES: Final = Resource(
    "node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False
)
VALIDATING_WEBHOOK_CONFIGURATIONS: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
MUTATING_WEBHOOK_CONFIGURATIONS: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
PRIORITYCLASSES: Final = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)


def _ptah(plural: str, kind: str, *, has_status: bool = True) -> Resource:
    return Resource(GROUP, VERSION, plural, kind, has_status=has_status)


PTAHSCHEMAS: Final = _ptah("ptahschemas", "PtahSchema")
PTAHSCHEMAPLANS: Final = _ptah("ptahschemaplans", "PtahSchemaPlan")
PTAHSCHEMAPLANCHUNKS: Final = _ptah("ptahschemaplanchunks", "PtahSchemaPlanChunk", has_status=False)
PTAHSCHEMAAPPROVALS: Final = _ptah("ptahschemaapprovals", "PtahSchemaApproval")
PTAHSCHEMAPROOFSETTLEMENTS: Final = _ptah("ptahschemaproofsettlements", "PtahSchemaProofSettlement")
PTAHMIGRATIONS: Final = _ptah("ptahmigrations", "PtahMigration")
PTAHMIGRATIONPLANS: Final = _ptah("ptahmigrationplans", "PtahMigrationPlan", has_status=False)
PTAHMIGRATIONAPPROVALS: Final = _ptah("ptahmigrationapprovals", "PtahMigrationApproval")
PTAHMIGRATIONRUNACKNOWLEDGMENTS: Final = _ptah(
    "ptahmigrationrunacknowledgments", "PtahMigrationRunAcknowledgment"
)
PTAHRESULTRECORDS: Final = _ptah("ptahresultrecords", "PtahResultRecord", has_status=False)

# Cluster-scoped and written by a platform team, never by the manager's families: it
# stays out of PTAH_RESOURCES, whose members the webhook judges as family objects.
PTAHREALMS: Final = Resource(
    GROUP, VERSION, "ptahrealms", "PtahRealm", namespaced=False, has_status=True
)

PTAH_RESOURCES: Final = (
    PTAHSCHEMAS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPROOFSETTLEMENTS,
    PTAHMIGRATIONS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHRESULTRECORDS,
)
BY_KIND: Final[Mapping[str, Resource]] = {
    r.kind: r
    for r in (
        JOBS,
        PODS,
        CONFIGMAPS,
        SECRETS,
        SERVICEACCOUNTS,
        LIMITRANGES,
        EVENTS,
        NAMESPACES,
        LEASES,
        RUNTIMECLASSES,
        PRIORITYCLASSES,
        VALIDATING_WEBHOOK_CONFIGURATIONS,
        MUTATING_WEBHOOK_CONFIGURATIONS,
        *PTAH_RESOURCES,
        PTAHREALMS,
    )
}


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: Object


def check_field_patch(fields: Mapping[str, Any], resource_version: str) -> None:
    """Refuse a ``patch_fields`` call every implementation must refuse: one without the
    resourceVersion it was decided at, or one that reaches into metadata or status."""
    if not resource_version or {"metadata", "status"} & set(fields):
        raise ValueError("a field patch needs a resourceVersion and leaves metadata and status")


class ApiReader(Protocol):
    """Uncached reads. Every decision reads through this, never through a cache."""

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        """The object as stored; raises NotFound, or Unavailable when it cannot say."""
        ...

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: Mapping[str, str] | None = None,
    ) -> list[Object]: ...


class ApiClient(ApiReader, Protocol):
    """Reads and writes. Writes return the object as stored after the write."""

    def create(self, resource: Resource, namespace: str | None, obj: Object) -> Object: ...

    def replace(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        """Whole-object update guarded by ``metadata.resourceVersion`` (409 if stale)."""
        ...

    def patch_metadata(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        metadata: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        """JSON merge patch of ``metadata`` (labels, annotations, finalizers)."""
        ...

    def patch_spec(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        spec: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        """JSON merge patch of ``spec`` (a Job's cleanup TTL)."""
        ...

    def patch_status(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        """Replace ``status`` through the status subresource, only at ``resource_version``."""
        ...

    def patch_fields(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        fields: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        """JSON merge patch of top-level fields other than ``metadata`` and ``status``
        (a webhook configuration's ``webhooks``), only at ``resource_version``: the
        ``patch`` verb, for an identity RBAC grants no ``update``."""
        ...

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Foreground", "Background", "Orphan"] = "Background",
    ) -> None: ...

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 60,
        label_selector: Mapping[str, str] | None = None,
    ) -> Iterator[WatchEvent]:
        """Change notifications; they only trigger work, decisions read uncached.
        ``label_selector`` keeps the server from sending objects not labelled so."""
        ...
