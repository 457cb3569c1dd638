"""What retiring a claim owes the database: one decision for both families.

A schema keeps the realm through the reading that settles an Apply's account; a
migration hands it back once nothing its claim dispatched can still write. The two
orders are one rule with one input that differs (``record_holds_realm``), so the
rule lives here once instead of twice beside each family's retirement.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from jobclaim import is_digest, is_epoch
from jobclaim.api import TargetLockReleaseStatus
from jobclaim.errors import InvalidInput


class Disposition(enum.Enum):
    """Why a claim is going."""

    DISCARD = "discard"  # never dispatched, or a read-only result not used
    ACCOUNTED = "accounted"  # its own result was read and recorded
    UNACCOUNTED = "unaccounted"  # a mutating run whose effect nobody established


class RealmHolder(enum.Enum):
    PROOF = "proof"  # a pending observation's proof holds the realm
    CLAIM = "claim"  # the claim itself holds it
    NONE = "none"


def realm_held_by(
    *, mutating: bool, serves_proof: bool, locked: bool, proof_outstanding: bool
) -> RealmHolder:
    """Who the realm's Lease is held for while this claim stands."""
    if proof_outstanding and serves_proof:
        return RealmHolder.PROOF
    if locked and (mutating or serves_proof):
        return RealmHolder.CLAIM
    return RealmHolder.NONE


@dataclass(frozen=True, slots=True)
class Retirement:
    """A claim's retirement, described by what decides its release.

    ``record_holds_realm``: the record a mutating run leaves keeps the realm (a
    schema's pending observation does; a migration's unresolved run does not).
    ``may_still_write``: something the claim dispatched may still be running.
    ``ends_proof``: the retiring write also removes the pending observation.
    """

    holder: RealmHolder
    mutating: bool
    disposition: Disposition
    record_holds_realm: bool = False
    may_still_write: bool = False
    ends_proof: bool = False

    def releases(self) -> bool:
        """Whether the retiring write stages a Lease release."""
        if self.holder is RealmHolder.PROOF:
            # A proof Observe or Plan retires under the Apply's Lease; only the write
            # that settles the proof hands the database back.
            return self.ends_proof
        if self.holder is RealmHolder.CLAIM:
            if self.mutating and self.disposition is not Disposition.DISCARD:
                # A run that may have changed the database: release only when its
                # record does not hold the realm and nothing can still write.
                return not (self.record_holds_realm or self.may_still_write)
            return True
        return False


def owed_release(
    *,
    coordination_digest: str | None,
    operation_id: str | None,
    lease_duration_seconds: int | None,
    lease_epoch: str | None,
) -> TargetLockReleaseStatus:
    """The ``pendingLockRelease`` record a retiring write carries.

    All four parts are needed to release exactly the Lease this claim holds; an
    incomplete binding is refused rather than staged, since a release that cannot be
    performed would hold finalizers forever.
    """
    if not is_digest(coordination_digest):
        raise InvalidInput("a release needs the claim's coordination digest")
    if not operation_id:
        raise InvalidInput("a release needs the claim's operation ID")
    if lease_duration_seconds is None or not 5 <= lease_duration_seconds <= 86460:
        raise InvalidInput("a release needs a Lease duration between 5 and 86460 seconds")
    if not is_epoch(lease_epoch):
        raise InvalidInput("a release needs the exact Lease epoch")
    assert coordination_digest is not None and lease_epoch is not None
    return TargetLockReleaseStatus(
        coordination_digest=coordination_digest,
        operation_id=operation_id,
        lease_duration_seconds=lease_duration_seconds,
        lease_epoch=lease_epoch,
    )
