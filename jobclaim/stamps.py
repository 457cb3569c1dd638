"""Admission's stamp: who made a person's decision object, when, in which request.

Four kinds record a person's decision: the two approvals (which authorize SQL), a
migration's run acknowledgment and a schema's proof settlement (which end an account
nobody could read). Each carries an identity (username, UID, groups), a time and the
admission request UID. The client's own words there are worthless: the mutating
webhook overwrites all three from the AdmissionRequest on CREATE, the validating
webhook refuses a create whose stamp is not its own request's and any later change.

This module is the one table of which field holds what, and the one reading of a
stamp, shared by the webhook (which writes and checks it), the controller (which
acts only on a stamp it can verify) and the ``kubectl ptah`` plugin (which shows it).
Pure: no I/O, no clock; every time is an input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONRUNACKNOWLEDGMENTS,
    PTAHMIGRATIONS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAPROOFSETTLEMENTS,
    PTAHSCHEMAS,
    Resource,
)

# A stamp's time is read as every other recorded time is: a spelling the webhook never
# writes is not admission's stamp.
from jobclaim.times import parse_time, timestamp

__all__ = [
    "REQUEST_UID_FIELD",
    "STAMPED",
    "STAMP_FUTURE_SKEW_SECONDS",
    "STAMP_WINDOW_SECONDS",
    "Stamp",
    "StampedKind",
    "parse_time",
    "stamp_problem",
    "stamp_time",
    "written_stamp",
]

REQUEST_UID_FIELD: Final = "mutationRequestUID"
# How old a stamp may be when the validating webhook sees it, and how far from the
# API server's creationTimestamp the controller accepts it. The mutating and the
# validating call of one request are milliseconds apart; the margin is for webhook
# replicas and the API server on clocks that disagree by a little. A write that
# skipped the mutating webhook and copied an old stamp falls outside it.
STAMP_WINDOW_SECONDS: Final = 120
# A stamp from the future is another clock's; no more than this much is believed.
STAMP_FUTURE_SKEW_SECONDS: Final = 30


@dataclass(frozen=True, slots=True)
class StampedKind:
    """Where one kind keeps its stamp, and which resource it speaks for."""

    resource: Resource
    identity_field: str  # wire name: approver, acknowledgedBy, settledBy
    time_field: str  # wire name: approvedAt, acknowledgedAt, settledAt
    target_field: str  # the reference to the resource it decides for
    target: Resource
    # Whether the target's four-eyes policy binds who may create it: approvals only,
    # since only they authorize SQL.
    four_eyes: bool

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def fields(self) -> tuple[str, str, str]:
        return (self.identity_field, self.time_field, REQUEST_UID_FIELD)


STAMPED: Final[Mapping[str, StampedKind]] = {
    k.kind: k
    for k in (
        StampedKind(PTAHSCHEMAAPPROVALS, "approver", "approvedAt", "schemaRef", PTAHSCHEMAS, True),
        StampedKind(
            PTAHMIGRATIONAPPROVALS, "approver", "approvedAt", "migrationRef", PTAHMIGRATIONS, True
        ),
        StampedKind(
            PTAHMIGRATIONRUNACKNOWLEDGMENTS,
            "acknowledgedBy",
            "acknowledgedAt",
            "migrationRef",
            PTAHMIGRATIONS,
            False,
        ),
        StampedKind(
            PTAHSCHEMAPROOFSETTLEMENTS, "settledBy", "settledAt", "schemaRef", PTAHSCHEMAS, False
        ),
    )
}


def stamp_time(now: datetime) -> str:
    """``now`` as the API server writes a time (``jobclaim.times.timestamp``)."""
    return timestamp(now)


@dataclass(frozen=True, slots=True)
class Stamp:
    """One request's identity and time, as the mutating webhook writes them."""

    username: str
    uid: str
    groups: tuple[str, ...]
    request_uid: str
    at: str

    def identity(self) -> dict[str, Any]:
        """The identity record as stored: no ``uid`` key when the request had none."""
        record: dict[str, Any] = {"username": self.username}
        if self.uid:
            record["uid"] = self.uid
        record["groups"] = list(self.groups)
        return record

    def fields(self, kind: StampedKind) -> dict[str, Any]:
        """The three stamped spec fields, by wire name."""
        return {
            kind.identity_field: self.identity(),
            kind.time_field: self.at,
            REQUEST_UID_FIELD: self.request_uid,
        }


def written_stamp(kind: StampedKind, spec: Mapping[str, Any]) -> Stamp | None:
    """The stamp ``spec`` carries, or None when any part of it is missing or malformed."""
    identity = spec.get(kind.identity_field)
    at, request_uid = spec.get(kind.time_field), spec.get(REQUEST_UID_FIELD)
    if not isinstance(identity, Mapping) or not isinstance(at, str) or not at:
        return None
    if not isinstance(request_uid, str) or not request_uid:
        return None
    username, uid = identity.get("username"), identity.get("uid", "")
    groups = identity.get("groups", [])
    if not isinstance(username, str) or not username or not isinstance(uid, str):
        return None
    if not isinstance(groups, Sequence) or not all(isinstance(g, str) for g in groups):
        return None
    return Stamp(username, uid, tuple(groups), request_uid, at)


def stamp_problem(kind: StampedKind, spec: Mapping[str, Any], created: str | None) -> str | None:
    """Why the stamp on a stored object cannot be believed, or None.

    The controller cannot replay admission, so it checks what a stored object can
    still show: every part present, and the stamp's time within the window of the
    ``creationTimestamp`` the API server itself wrote on create. An object written
    while the webhooks were not registered (or edited since, which the validating
    webhook refuses) carries no stamp, an old one copied from elsewhere, or one out
    of step with its own creation.
    """
    stamp = written_stamp(kind, spec)
    if stamp is None:
        missing = [f for f in kind.fields if not spec.get(f)]
        named = ", ".join(missing) if missing else "its stamp"
        return f"it carries no admission stamp ({named} missing or malformed)"
    at, born = parse_time(stamp.at), parse_time(created)
    if at is None:
        return f"its {kind.time_field} {stamp.at!r} is not a time"
    if born is None:
        return "it carries no creationTimestamp to check its stamp against"
    drift = (at - born).total_seconds()
    if drift > STAMP_FUTURE_SKEW_SECONDS or -drift > STAMP_WINDOW_SECONDS:
        return (
            f"its {kind.time_field} {stamp.at} is not the time it was created "
            f"({created}): the stamp is not admission's"
        )
    return None
