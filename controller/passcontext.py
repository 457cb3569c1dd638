"""One pass over one resource: what it holds, and the only way it writes status.

Every decision of a pass reads the resource as this pass last stored or read it
(``ctx.subject``), and every status write goes through ``write_status`` with that
object's resourceVersion as a precondition. A pass that lost a race therefore fails
its write with a Conflict and ends, instead of overwriting what another writer
decided from newer facts.

The two families differ only in what a ``Family`` supplies; everything here is the
same for a PtahSchema and a PtahMigration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from controller.events import EventRecord
from controller.managerconfig import ManagerConfig
from controller.mutationlifecycle import Disposition, Driver, Retirement, Stop, realm_held_by
from controller.targetlock import TargetLock
from jobclaim import Claim, OperationInfo, lease_holder, operation_info
from jobclaim.api import (
    ActiveOperationStatus,
    ExecutionBindingStatus,
    ManagerRecord,
    MigrationOperationStatus,
    ObjectReference,
    PtahMigration,
    PtahMigrationApproval,
    PtahMigrationPlan,
    PtahMigrationStatus,
    PtahSchema,
    PtahSchemaApproval,
    PtahSchemaPlan,
    PtahSchemaStatus,
)
from jobclaim.apiserver import ApiClient, Object, Resource
from jobclaim.errors import PtahError
from jobclaim.times import timestamp, utc_now

if TYPE_CHECKING:
    from controller.jobaccount import Harvest

Subject = PtahSchema | PtahMigration
Operation = ActiveOperationStatus | MigrationOperationStatus
Status = PtahSchemaStatus | PtahMigrationStatus
Approval = PtahSchemaApproval | PtahMigrationApproval


class NoClaim(PtahError):
    """A step that needs the resource's claim found none (a programming error)."""


class NotThisFamily(PtahError):
    """A step of one family was handed the other family's resource (a programming
    error): it raises rather than reading the other family's status as its own."""


@dataclass(slots=True)
class Environment:
    """What lives longer than one pass: the API, the configuration, the Lease memory
    (foreign-Lease sightings must survive between passes), clocks and entropy."""

    api: ApiClient
    config: ManagerConfig
    lock: TargetLock
    driver: Driver = field(default_factory=Driver)
    wall: Callable[[], datetime] = utc_now
    entropy: Callable[[int], bytes] = os.urandom
    # Epochs for first sight of a resource; a test injects a fixed one.
    epochs: Callable[[], str] | None = None


class Family(Protocol):
    """What differs between PtahSchema and PtahMigration: how a claim is authorized,
    what its Job is, and where the family keeps its status."""

    @property
    def name(self) -> str:
        """``schema`` or ``migration``: the operation table the family claims from."""
        ...

    @property
    def kind(self) -> str: ...

    @property
    def resource(self) -> Resource: ...

    @property
    def approvals(self) -> Resource: ...

    @property
    def finalizer(self) -> str: ...

    def parse(self, obj: Object) -> Subject: ...

    def inputs(self, ctx: PassContext, operation: str) -> dict[str, Any] | None:
        """What a claim of ``operation`` is decided from, or None if it cannot be formed."""
        ...

    def authorize(self, ctx: PassContext) -> Stop | None: ...

    def stage(self, ctx: PassContext) -> Stop | None: ...

    def build(
        self, ctx: PassContext, *, snapshot_digest: str | None, manager: ManagerRecord | None
    ) -> Object: ...

    def claim(self, ctx: PassContext, built: Mapping[str, Any] | None) -> Claim: ...

    def approval(self, ctx: PassContext) -> ObjectReference | None:
        """The approval the claim holds by reference, if its work needs one."""
        ...

    def retired(self, status: Any, *, drop_plan: bool) -> Any:
        """The status with the claim gone (and, when its plan moved, the plan too)."""
        ...

    def next_claim(self, ctx: PassContext) -> tuple[str, Approval | None] | Stop | None:
        """Which work to claim now and the approval it spends; a Stop to wait."""
        ...

    def new_claim(self, ctx: PassContext, operation: str, approval: Approval | None) -> Status:
        """The status carrying a fresh claim of ``operation`` (not yet written)."""
        ...

    def empty_status(self) -> Status:
        """The status of a resource seen for the first time."""
        ...

    def operation(
        self,
        ctx: PassContext,
        *,
        operation: str,
        fingerprint: str,
        epoch: str,
        nonce: bytes,
        started_at: str,
    ) -> Operation:
        """The claim this family writes before its Job exists (``controller.operationidentity``)."""
        ...

    def prelude(self, ctx: PassContext) -> Stop | None:
        """What the family settles before anything else in a pass (its own records)."""
        ...

    def record_unknown(self, ctx: PassContext, reason: str) -> Stop:
        """Record a mutating claim's unknown outcome as this family's record."""
        ...

    def outcome(self, ctx: PassContext, harvested: Harvest) -> Stop:
        """What a claim's terminal Job accounts for, in this family's records."""
        ...

    def retire_unread(self, ctx: PassContext, reason: str) -> Stop:
        """A read-only claim whose result will not be used: discarded, records kept."""
        ...


@dataclass(slots=True)
class PassContext:
    """One pass: the resource as last read or written, and what steps hand each other."""

    env: Environment
    family: Family
    subject: Subject
    events: list[EventRecord] = field(default_factory=list)
    built: Object | None = None
    created: Object | None = None
    chunks: list[bytes] | None = None
    # The plan object authorize re-read: a schema Apply stages it, a migration Apply
    # builds its Job from its sequence.
    plan_object: PtahSchemaPlan | PtahMigrationPlan | None = None

    @property
    def api(self) -> ApiClient:
        return self.env.api

    @property
    def namespace(self) -> str:
        return self.subject.metadata.namespace or ""

    @property
    def name(self) -> str:
        return self.subject.metadata.name or ""

    @property
    def uid(self) -> str:
        return self.subject.metadata.uid or ""

    @property
    def status(self) -> Status | None:
        return self.subject.status

    @property
    def operation(self) -> Operation:
        status = self.subject.status
        if status is None or status.active_operation is None:
            raise NoClaim(f"{self.family.kind} {self.name} holds no claim")
        return status.active_operation

    @property
    def info(self) -> OperationInfo:
        return operation_info(self.family.name, self.operation.type)

    def info_for(self, operation: str) -> OperationInfo:
        return operation_info(self.family.name, operation)

    @property
    def binding(self) -> ExecutionBindingStatus | None:
        status = self.subject.status
        return status.execution_binding if status else None

    @property
    def proof_outstanding(self) -> bool:
        """Whether a schema's Apply still owes its proof (its record holds the realm)."""
        status = self.subject.status
        return isinstance(status, PtahSchemaStatus) and status.pending_observation is not None

    def retirement(
        self,
        disposition: Disposition,
        *,
        record_holds_realm: bool = False,
        may_still_write: bool = False,
        ends_proof: bool = False,
    ) -> Retirement:
        """This claim's retirement, described by what decides its release: who holds the
        realm for it is read here once, for every write that retires or discards it."""
        info = self.info
        return Retirement(
            holder=realm_held_by(
                mutating=info.mutating,
                serves_proof=info.serves_proof,
                locked=bool(self.operation.lease_epoch),
                proof_outstanding=self.proof_outstanding,
            ),
            mutating=info.mutating,
            disposition=disposition,
            record_holds_realm=record_holds_realm,
            may_still_write=may_still_write,
            ends_proof=ends_proof,
        )

    @property
    def holder(self) -> str:
        """Who holds the realm for this claim. A claim that serves a proof holds it as
        the Apply it proves, so the proof's reading runs under the Apply's own tenure
        and no other claimant can write between the Apply and that reading."""
        status = self.subject.status
        pending = status.pending_observation if isinstance(status, PtahSchemaStatus) else None
        if pending is not None and self.info.serves_proof:
            return lease_holder(self.uid, pending.apply_operation_id)
        return lease_holder(self.uid, self.operation.id)

    def now(self) -> datetime:
        return self.env.wall()

    def later(self, seconds: int) -> str:
        return timestamp(self.now() + timedelta(seconds=seconds))

    def crossed(self, reason: str, note: str, *, warning: bool = False) -> None:
        """Note a boundary crossed; Events are sent after the pass, never between steps,
        so nothing that can fail sits between a durable write and the step it covers."""
        self.events.append(EventRecord(reason, note, "Warning" if warning else "Normal"))

    def write_status(self, status: Status) -> None:
        """Replace the status at the version this pass decided from."""
        stored = self.api.patch_status(
            self.family.resource,
            self.namespace,
            self.name,
            status.to_wire(),
            resource_version=self.subject.metadata.resource_version or "",
        )
        self.subject = self.family.parse(stored)

    def write_operation(self, **update: Any) -> None:
        """Write the claim with ``update`` applied, nothing else in status changed."""
        status = self.subject.status
        assert status is not None
        operation = self.operation.model_copy(update=update)
        self.write_status(status.model_copy(update={"active_operation": operation}))

    def write_metadata(self, metadata: Mapping[str, Any]) -> None:
        stored = self.api.patch_metadata(
            self.family.resource,
            self.namespace,
            self.name,
            metadata,
            resource_version=self.subject.metadata.resource_version,
        )
        self.subject = self.family.parse(stored)


# -- a family's own steps, narrowed ----------------------------------------------------
# A step that only one family takes (its dispatch, its records) reads the pass's
# resource as that family's type through these, the one place that checks it.

_Narrowed = TypeVar("_Narrowed")


def _narrowed(ctx: PassContext, value: object, kind: type[_Narrowed]) -> _Narrowed:
    if not isinstance(value, kind):
        raise NotThisFamily(f"{ctx.family.kind} {ctx.name} has no {kind.__name__} here")
    return value


def schema_of(ctx: PassContext) -> PtahSchema:
    return _narrowed(ctx, ctx.subject, PtahSchema)


def schema_status_of(ctx: PassContext) -> PtahSchemaStatus:
    return _narrowed(ctx, ctx.subject.status, PtahSchemaStatus)


def schema_operation_of(ctx: PassContext) -> ActiveOperationStatus:
    return _narrowed(ctx, ctx.operation, ActiveOperationStatus)


def migration_of(ctx: PassContext) -> PtahMigration:
    return _narrowed(ctx, ctx.subject, PtahMigration)


def migration_status_of(ctx: PassContext) -> PtahMigrationStatus:
    return _narrowed(ctx, ctx.subject.status, PtahMigrationStatus)


def migration_operation_of(ctx: PassContext) -> MigrationOperationStatus:
    return _narrowed(ctx, ctx.operation, MigrationOperationStatus)
