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
from contextlib import suppress
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, Unpack

from typing_extensions import TypeVar

from controller.mutationlifecycle import (
    Disposition,
    Driver,
    Retirement,
    Stop,
    realm_held_by,
)
from controller.pieces.events import EventRecord, EventType
from controller.pieces.faultpoints import FaultPoints, crossed
from controller.pieces.freshness import digest_pinned
from controller.pieces.harvested import Harvest
from controller.pieces.managerconfig import ManagerConfig
from controller.pieces.operationidentity import ClaimFields
from controller.pieces.phasemachine import Facts
from controller.pieces.statusconditions import aligned
from controller.pieces.targetlock import TargetLock
from controller.pieces.vocabulary import EventReason
from jobclaim import OperationInfo, lease_holder, operation_info, requested_reference
from jobclaim.api import (
    ActiveOperationStatus,
    BindingRetirementStatus,
    Condition,
    ConfigMapKeySelector,
    ExecutionBindingStatus,
    MigrationOperationStatus,
    ObjectReference,
    OCIArtifactAccessBinding,
    PendingObservationStatus,
    PtahMigration,
    PtahMigrationApproval,
    PtahMigrationStatus,
    PtahSchema,
    PtahSchemaApproval,
    PtahSchemaPlan,
    PtahSchemaStatus,
)
from jobclaim.apiserver import ApiClient, Object, Resource
from jobclaim.errors import PtahError
from jobclaim.times import timestamp, utc_now

Subject = PtahSchema | PtahMigration
# The resource a pass holds, narrowed once when the pass reads it: a family's own
# steps take ``PassContext[PtahSchema]`` (or ``[PtahMigration]``) and read
# ``ctx.subject`` as their own type; the shared stages take ``PassContext``, either.
S_co = TypeVar("S_co", bound=Subject, covariant=True, default=Subject)
# The same, for the Family protocol (invariant: it takes and returns its resource).
F = TypeVar("F", bound=Subject, default=Subject)
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
    # Told about each Apply boundary crossed; only a lab manager has any
    # (controller.pieces.faultpoints).
    faults: FaultPoints | None = None


@dataclass(frozen=True, slots=True)
class Authorized:
    """What a family's authorize found holding, re-read uncached, for the dispatch steps
    after it: they read it as data instead of calling the family back mid-step."""

    # The approval the claim spends (the consume step), if its work needs one.
    approval: ObjectReference | None = None
    # The verified plan and its chunks, for the stage step (a schema Apply's).
    plan: PtahSchemaPlan | None = None
    chunks: tuple[bytes, ...] = ()
    # The versions the Job is held to (a migration Apply's plan's sequence).
    sequence: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FamilyRecords:
    """What a family's own records owe, read once from each stored version of the
    resource (``Family.read``): every stage asks these, none re-derives them."""

    # The record of an Apply that still owes its proof (it holds the realm).
    pending_proof: PendingObservationStatus | None = None
    # What a rotated execution binding still owes before anything else.
    binding_retirement: BindingRetirementStatus | None = None


class Family(Protocol[F]):
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

    def parse(self, obj: Object) -> F: ...

    def records(self, subject: F) -> FamilyRecords:
        """What this family's records on ``subject`` owe."""
        ...

    def read(self, obj: Object) -> tuple[F, FamilyRecords]:
        """``obj`` parsed, and its records read from the parsed resource at once."""
        ...

    def inputs(self, ctx: PassContext[F], operation: str) -> dict[str, Any] | None:
        """What a claim of ``operation`` is decided from, or None if it cannot be formed."""
        ...

    def authorize(self, ctx: PassContext[F]) -> Stop | Authorized:
        """Re-read, uncached, what permits the claim's work; what was found holding is
        handed to the later dispatch steps as data (``Authorized``)."""
        ...

    def sequence(self, ctx: PassContext[F]) -> tuple[str, ...]:
        """The versions the claim's Job is held to, read from its plan (a migration
        Apply's; empty for everything else): what only this family's Job adds to the
        contract's per-family inputs (``jobclaim.owner_family``)."""
        ...

    def next_claim(self, ctx: PassContext[F]) -> tuple[str, Approval | None] | Stop | None:
        """Which work to claim now and the approval it spends; a Stop to wait."""
        ...

    def new_claim(self, ctx: PassContext[F], operation: str, approval: Approval | None) -> Status:
        """The status carrying a fresh claim of ``operation`` (not yet written)."""
        ...

    def empty_status(self) -> Status:
        """The status of a resource seen for the first time."""
        ...

    def operation(self, ctx: PassContext[F], **fields: Unpack[ClaimFields]) -> Operation:
        """The claim this family writes before its Job exists
        (``controller.pieces.operationidentity``)."""
        ...

    def prelude(self, ctx: PassContext[F]) -> Stop | None:
        """What the family settles before anything else in a pass (its own records)."""
        ...

    def record_unknown(self, ctx: PassContext[F], reason: str) -> Stop:
        """Record a mutating claim's unknown outcome as this family's record."""
        ...

    def outcome(self, ctx: PassContext[F], harvested: Harvest) -> Stop:
        """What a claim's terminal Job accounts for, in this family's records."""
        ...

    def retire_unread(self, ctx: PassContext[F], reason: str) -> Stop:
        """A read-only claim whose result will not be used: discarded, records kept."""
        ...

    # -- the family's readings and records, as the shared stages ask for them --------
    # Each difference between the families is answered here once, so the shared
    # modules (planning, readings, publishing, conditions, binding_rotation,
    # retirement) never ask which family they hold.

    def artifact(self, status: Status) -> OCIArtifactAccessBinding | None:
        """The artifact the last Resolve recorded (a schema's source, a migration's
        artifact)."""
        ...

    def resolved(self, source: OCIArtifactAccessBinding) -> dict[str, Any]:
        """The status fields a Resolve writes: the artifact, and the reading made from
        the old one cleared."""
        ...

    def policy_selector(self, ctx: PassContext[F]) -> ConfigMapKeySelector | None:
        """The ConfigMap key the spec names as the artifact's verification policy."""
        ...

    def last_reading(self, ctx: PassContext[F]) -> datetime | None:
        """When the rung above Verify was last read (the interval counts from it)."""
        ...

    def facts(self, ctx: PassContext[F]) -> Facts:
        """The family's records reduced to what the phase machine decides from (the
        fields both families share are the caller's)."""
        ...

    def own_conditions(self, status: Status) -> list[Condition]:
        """The conditions only this family publishes, from ``status``."""
        ...

    def retire_reading(
        self, ctx: PassContext[F], reason: str, disposition: Disposition, update: dict[str, Any]
    ) -> Stop:
        """Retire a reading's claim with what it recorded (``update``)."""
        ...

    def keeps_reading(self, ctx: PassContext[F], harvested: Harvest) -> bool:
        """Whether the family's own records take this reading's account, so that the
        readings record nothing (a migration's History that may settle its
        unresolved run)."""
        ...

    def settle_record(self, ctx: PassContext[F]) -> Stop | None:
        """Work the record an earlier run left toward its end, with no claim standing
        (a schema's proof, a migration's acknowledged unresolved run); None when
        there is nothing to do."""
        ...

    def rotate_binding(self, ctx: PassContext[F]) -> Stop:
        """Move the resource to the binding now in force, or work off what its last
        rotation still owes (``binding_retirement``)."""
        ...

    def restart_proof(self, ctx: PassContext[F], why: str) -> Stop:
        """Retire a proof's reading unread and restart the proof it serves as an unknown
        outcome (only a family whose record owes a proof has one)."""
        ...


# What ``_gather`` derives from the claim, unset while there is none.
_CLAIM_FACTS: Final = frozenset({"operation", "info", "holder"})


@dataclass(slots=True)
class PassContext(Generic[S_co]):
    """One pass: the resource as last read or written, and what steps hand each other.

    What every step asks of the resource (its name, status, binding, claim, and whether
    an Apply still owes its proof) is gathered once per stored version, when the pass
    loads or writes it (``_gather``), and read as plain fields: a step reads the same
    answers the pass decided from, and the family is asked about its records once per
    version instead of once per question.
    """

    env: Environment
    family: Family[S_co]
    subject: S_co
    # The boundaries crossed, as ``crossed`` noted them; made Events once, after the
    # pass (``event_records``).
    crossings: list[tuple[EventReason, str, EventType]] = field(default_factory=list)
    # -- gathered from ``subject`` by ``_gather``, never assigned elsewhere -----------
    api: ApiClient = field(init=False)
    namespace: str = field(init=False)
    name: str = field(init=False)
    uid: str = field(init=False)
    status: Status | None = field(init=False)
    binding: ExecutionBindingStatus | None = field(init=False)
    # The claim, None when there is none.
    claim: Operation | None = field(init=False)
    # -- gathered from the claim, present only while there is one ---------------------
    # Read without a claim they raise NoClaim (``__getattr__``): a step that needs the
    # claim and finds none is a programming error, never a silent None.
    operation: Operation = field(init=False, repr=False, compare=False)
    # The operation table's entry for the claim's type.
    info: OperationInfo = field(init=False, repr=False, compare=False)
    # Who holds the realm for this claim. A claim that serves a proof holds it as the
    # Apply it proves, so the proof's reading runs under the Apply's own tenure and no
    # other claimant can write between the Apply and that reading.
    holder: str = field(init=False, repr=False, compare=False)
    # The record of an Apply that still owes its proof (``FamilyRecords``).
    pending_proof: PendingObservationStatus | None = field(init=False)
    # What a rotated execution binding still owes (``FamilyRecords``).
    binding_retirement: BindingRetirementStatus | None = field(init=False)
    # Whether an Apply still owes its proof (its record holds the realm).
    proof_outstanding: bool = field(init=False)
    # -- read once per pass ---------------------------------------------------------
    # Whether the reference names its bytes by digest (``freshness.digest_pinned``): a
    # fact of the spec, which no status or metadata write of the pass changes.
    pinned: bool = field(init=False)

    # What the family's records on ``subject`` owe, when the loader read them with it
    # (``Family.read``); a copy made with ``dataclasses.replace`` reads them again.
    records: InitVar[FamilyRecords | None] = None

    def __post_init__(self, records: FamilyRecords | None) -> None:
        self.api = self.env.api
        self._gather(
            self.subject, records if records is not None else self.family.records(self.subject)
        )
        self.pinned = digest_pinned(requested_reference(self.subject))

    def _gather(self, subject: Subject, records: FamilyRecords) -> None:
        """Take ``subject`` as the resource this pass decides from, and what every
        step asks of it."""
        # Checked once per stored version: the family's own steps read it as theirs.
        self.subject = narrowed(subject, type(self.subject))
        metadata = subject.metadata
        self.namespace = metadata.namespace or ""
        self.name = metadata.name or ""
        self.uid = metadata.uid or ""
        status = subject.status
        self.status = status
        self.binding = status.execution_binding if status else None
        self.claim = status.active_operation if status else None
        self.pending_proof = records.pending_proof
        self.binding_retirement = records.binding_retirement
        self.proof_outstanding = self.pending_proof is not None
        claim = self.claim
        if claim is None:
            for name in _CLAIM_FACTS:
                with suppress(AttributeError):  # unset already: never had a claim
                    delattr(self, name)
            return
        info = operation_info(self.family.name, claim.type)
        pending = self.pending_proof
        self.operation = claim
        self.info = info
        self.holder = lease_holder(
            self.uid,
            pending.apply_operation_id if pending is not None and info.serves_proof else claim.id,
        )

    if not TYPE_CHECKING:
        # Only reached when a claim fact is unset: there is no claim.

        def __getattr__(self, name: str) -> object:
            if name in _CLAIM_FACTS:
                raise NoClaim(f"{self.family.kind} {self.name} holds no claim")
            raise AttributeError(name)

    def info_for(self, operation: str) -> OperationInfo:
        return operation_info(self.family.name, operation)

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

    def now(self) -> datetime:
        return self.env.wall()

    def later(self, seconds: int) -> str:
        return timestamp(self.now() + timedelta(seconds=seconds))

    def crossed(self, reason: EventReason, note: str, *, warning: bool = False) -> None:
        """Note a boundary crossed; Events are sent after the pass, never between steps,
        so nothing that can fail sits between a durable write and the step it covers."""
        self.crossings.append((reason, note, "Warning" if warning else "Normal"))

    def event_records(self) -> list[EventRecord]:
        """The Events this pass owes, in the order its boundaries were crossed."""
        return [EventRecord(reason, note, kind) for reason, note, kind in self.crossings]

    def write_status(self, status: Status, *, records: FamilyRecords | None = None) -> None:
        """Replace the status at the version this pass decided from. ``records``: what
        the family's records owe in ``status``, when the writer knows them (a write of
        the claim alone); otherwise the family reads them from the stored object."""
        before = self.subject.status.active_operation if self.subject.status else None
        # The conditions describe the status written with them, in the same write.
        # Its facts handed in, the clock read here and the pinned reference as the pass
        # read it: the derivation itself is pure.
        now = timestamp(self.now())
        conditions = aligned(self.subject, status, now=now, pinned=self.pinned)
        status = status.model_copy(update={"conditions": conditions})
        stored = self.api.patch_status(
            self.family.resource,
            self.namespace,
            self.name,
            status.to_wire(),
            resource_version=self.subject.metadata.resource_version or "",
        )
        if records is None:
            self._gather(*self.family.read(stored))
        else:
            self._gather(type(self.subject).model_validate(stored), records)
        if self.env.faults is not None:
            after = self.subject.status.active_operation if self.subject.status else None
            for boundary, operation in crossed(before, after):
                self.env.faults.after(boundary, self.subject, operation)

    def write_operation(self, **update: Any) -> None:
        """Write the claim with ``update`` applied, nothing else in status changed."""
        status = self.subject.status
        assert status is not None
        operation = self.operation.model_copy(update=update)
        # Only the claim changes, at the version the records were read from (a Conflict
        # otherwise), and no family keeps a record in its claim
        # (tests/controller/test_claim_write_records.py): the stored version's records
        # are the ones gathered, so the family is not asked to read them again.
        kept = FamilyRecords(
            pending_proof=self.pending_proof, binding_retirement=self.binding_retirement
        )
        self.write_status(status.model_copy(update={"active_operation": operation}), records=kept)

    def write_metadata(self, metadata: Mapping[str, Any]) -> None:
        stored = self.api.patch_metadata(
            self.family.resource,
            self.namespace,
            self.name,
            metadata,
            resource_version=self.subject.metadata.resource_version,
        )
        self._gather(*self.family.read(stored))


# -- a family's own steps, narrowed ----------------------------------------------------
# A step that only one family takes (its dispatch, its records, its answers to the
# Family questions) reads the pass's resource as that family's type through these,
# the one place that checks it.

_Narrowed = TypeVar("_Narrowed")


def narrowed(value: object, kind: type[_Narrowed]) -> _Narrowed:
    """``value`` as the family's own ``kind``; anything else is a step handed the
    other family's resource."""
    if not isinstance(value, kind):
        raise NotThisFamily(f"a {kind.__name__} was expected, not a {type(value).__name__}")
    return value


def schema_of(ctx: PassContext) -> PtahSchema:
    return narrowed(ctx.subject, PtahSchema)


def schema_status_of(ctx: PassContext) -> PtahSchemaStatus:
    return narrowed(ctx.subject.status, PtahSchemaStatus)


def schema_operation_of(ctx: PassContext) -> ActiveOperationStatus:
    return narrowed(ctx.operation, ActiveOperationStatus)


def migration_of(ctx: PassContext) -> PtahMigration:
    return narrowed(ctx.subject, PtahMigration)


def migration_status_of(ctx: PassContext) -> PtahMigrationStatus:
    return narrowed(ctx.subject.status, PtahMigrationStatus)


def migration_operation_of(ctx: PassContext) -> MigrationOperationStatus:
    return narrowed(ctx.operation, MigrationOperationStatus)
