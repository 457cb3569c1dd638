"""Deterministic names: the Job a claim reserves, the realm's Lease and its holder.

The claim persists the Job name before the Job exists. Because the name folds the
resource UID, operation type, operation ID, epoch, input fingerprint and attempt, no
other claim can produce it, which is how a restarted controller tells a Job it
created from one it has not. Inputs that cannot form a name are refused, never cut.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import unicodedata
from typing import Final

from jobclaim._canonical import digest_of, is_digest, is_epoch
from jobclaim.errors import InvalidInput
from jobclaim.operations import operation_info

MAX_DNS_LABEL: Final = 63
_SUFFIX_HEX: Final = 16
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PREFIX: Final = {"schema": "ptah-", "migration": "ptah-m-"}


def is_dns_label(value: str) -> bool:
    return len(value) <= MAX_DNS_LABEL and _DNS_LABEL.fullmatch(value) is not None


def job_name(
    *,
    family: str,
    owner_name: str,
    owner_uid: str,
    operation: str,
    operation_id: str,
    epoch: str,
    input_fingerprint: str,
    attempt: int,
) -> str:
    """The Job name a claim reserves: ``ptah[-m]-<op>-<owner>-<16 hex>``, a DNS label."""
    what = "schema" if family == "schema" else "migration"
    if family not in _PREFIX:
        raise InvalidInput(f"{family!r} is not a family that dispatches Jobs")
    if not owner_name or not owner_uid:
        raise InvalidInput(f"a {what} without a name and UID cannot form a Job name")
    if not operation_info(family, operation).known:
        raise InvalidInput(f"{operation!r} is not a {what} operation this operator defines")
    if not operation_id:
        raise InvalidInput("an empty operation ID cannot form a Job name")
    if family == "migration" and not is_digest(operation_id):
        raise InvalidInput("a migration operation ID must be a sha256 digest")
    if not is_digest(input_fingerprint):
        raise InvalidInput("the input fingerprint must be a sha256 digest")
    if not is_epoch(epoch):
        raise InvalidInput("the execution epoch must be v1- followed by 32 lowercase hex")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidInput("the attempt must be a whole number of at least 1")

    folded = "\x00".join(
        (owner_uid, operation, operation_id, epoch, input_fingerprint, str(attempt))
    )
    suffix = hashlib.sha256(folded.encode("utf-8")).hexdigest()[:_SUFFIX_HEX]
    prefix = f"{_PREFIX[family]}{operation.lower()}-"
    room = MAX_DNS_LABEL - len(prefix) - 1 - _SUFFIX_HEX
    # The owner name is only for people reading `kubectl get jobs`; the suffix carries
    # identity, so shortening the readable part loses nothing that decides anything.
    readable = owner_name.strip("-")[:room].rstrip("-")
    if not readable:
        raise InvalidInput(f"{what} name {owner_name!r} cannot form a Job name")
    name = f"{prefix}{readable}-{suffix}"
    if not is_dns_label(name):
        raise InvalidInput(f"{what} name {owner_name!r} does not form a valid DNS label")
    return name


def plan_name(plan_fingerprint: str) -> str:
    """``ptah-plan-<24 hex>``: a plan is named by what it binds."""
    if not is_digest(plan_fingerprint):
        raise InvalidInput("a plan fingerprint must be a sha256 digest")
    return "ptah-plan-" + plan_fingerprint.removeprefix("sha256:")[:24]


def migration_plan_name(plan_fingerprint: str) -> str:
    if not is_digest(plan_fingerprint):
        raise InvalidInput("a migration plan fingerprint must be a sha256 digest")
    return "ptah-mplan-" + plan_fingerprint.removeprefix("sha256:")[:24]


def projection_names(plan: str, chunk_count: int) -> tuple[str, ...]:
    """The ConfigMaps a schema Apply mounts: ``<plan>-000`` .. one per chunk."""
    if not 1 <= chunk_count <= 16:
        raise InvalidInput("a plan has between 1 and 16 chunks")
    return tuple(f"{plan}-{index:03d}" for index in range(chunk_count))


def _coordination_key(key: str) -> str:
    # Two spellings of one key must serialize: "Orders" and " orders " name the same
    # database to a person, so they must name the same Lease.
    return unicodedata.normalize("NFKC", key).strip().casefold()


# A pure function of four strings that every Job create's authority check and every
# pass of the controller asks again for the same target: remembered, bounded. An input
# it refuses raises and is not remembered.
def coordination_digest(
    *, engine: str, namespace: str, coordination_key: str | None, realm: str | None
) -> str:
    """The digest one Lease serializes on: per database realm, not per resource."""
    # A typed front for the remembered function: lru_cache's wrapper takes any
    # Hashable, so without it mypy would stop checking the callers' argument types.
    return _coordination_digest(
        engine=engine, namespace=namespace, coordination_key=coordination_key, realm=realm
    )


@functools.lru_cache(maxsize=256, typed=True)
def _coordination_digest(
    *, engine: str, namespace: str, coordination_key: str | None, realm: str | None
) -> str:
    if (coordination_key is None) == (realm is None):
        raise InvalidInput("exactly one of a coordination key and a realm names the target")
    engine_name = engine.lower()
    if engine_name not in ("postgresql", "mysql"):
        raise InvalidInput(f"{engine!r} is not a supported engine")
    if realm is not None:
        if not realm:
            raise InvalidInput("an empty realm name cannot be coordinated on")
        return digest_of({"contract_version": 1, "engine": engine_name, "realm": realm})
    assert coordination_key is not None
    key = _coordination_key(coordination_key)
    if not key or not namespace:
        raise InvalidInput("a coordination key and its namespace must not be empty")
    return digest_of(
        {
            "contract_version": 1,
            "engine": engine_name,
            "namespace": namespace,
            "coordination_key": key,
        }
    )


def _base32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii").rstrip("=").lower()


def lease_name(coord_digest: str) -> str:
    """``ptah-t-<base32>`` of the coordination digest: 59 characters, a DNS label."""
    if not is_digest(coord_digest):
        raise InvalidInput("a coordination digest must be a sha256 digest")
    return "ptah-t-" + _base32(bytes.fromhex(coord_digest.removeprefix("sha256:")))


# The annotation a realm Lease carries its tenure's epoch in: the controller writes it
# on every take, and admission reads it as the evidence a release was done.
LEASE_EPOCH_ANNOTATION: Final = "operator.ptah.run/lease-epoch"


def lease_holder(resource_uid: str, operation_id: str) -> str:
    """The Lease holder identity of one claim of one resource."""
    if not resource_uid or not operation_id:
        raise InvalidInput("a Lease holder needs a resource UID and an operation ID")
    folded = resource_uid.encode("utf-8") + b"\x00" + operation_id.encode("utf-8")
    return "ptah-h-" + _base32(hashlib.sha256(folded).digest())
