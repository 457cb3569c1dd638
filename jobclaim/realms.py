"""Which namespaces a PtahRealm admits, and whether its claimants may share it. Pure.

Both the controller (before every Lease step) and the admission webhook (at write
time) decide by these functions, so the sentence a person reads at ``kubectl apply``
is the one the controller's condition would give, and the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from jobclaim.api import Condition, NamespaceSelector, PtahRealm

__all__ = [
    "REALM_REFUSAL_REASONS",
    "RealmClaimant",
    "RealmRefusal",
    "RealmRefusalReason",
    "realm_admission",
    "realm_census",
    "realm_conditions",
    "selector_matches",
]


# The RealmAdmitted condition's reasons (controller.pieces.vocabulary documents each).
RealmRefusalReason = Literal[
    "RealmNotFound",
    "RealmEngineMismatch",
    "NamespaceNotAdmitted",
    "RealmConflict",
    "RealmUnreadable",
]
REALM_REFUSAL_REASONS: Final = get_args(RealmRefusalReason)


@dataclass(frozen=True, slots=True)
class RealmRefusal:
    """Why a resource may not take its realm: a CamelCase reason and a sentence."""

    reason: RealmRefusalReason
    message: str


@dataclass(frozen=True, slots=True)
class RealmClaimant:
    """A resource naming a realm, as the census counts it."""

    kind: str
    namespace: str
    name: str
    shared_realm: bool


def selector_matches(selector: NamespaceSelector, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` meet ``selector``. Pure.

    An empty selector matches nothing, unlike Kubernetes' own: a realm that admits every
    namespace must say so by listing them, never by leaving a selector blank.
    """
    if not selector.match_labels and not selector.match_expressions:
        return False
    if any(labels.get(key) != value for key, value in selector.match_labels.items()):
        return False
    for requirement in selector.match_expressions:
        present = requirement.key in labels
        value = labels.get(requirement.key)
        held = {
            "In": present and value in requirement.values,
            "NotIn": not present or value not in requirement.values,
            "Exists": present,
            "DoesNotExist": not present,
        }[requirement.operator]
        if not held:
            return False
    return True


def realm_admission(
    realm: PtahRealm | None,
    *,
    realm_name: str,
    engine: str,
    namespace: str,
    namespace_labels: Mapping[str, str] | None,
) -> RealmRefusal | None:
    """Whether ``realm`` lets a resource in ``namespace`` on ``engine`` name it. Pure.

    ``namespace_labels`` None means the labels were not read (the namespace is listed
    by name, or the realm has no selector); a selector then admits nothing.
    """
    if realm is None:
        return RealmRefusal("RealmNotFound", f"PtahRealm {realm_name} does not exist")
    if realm.metadata.deletion_timestamp:
        return RealmRefusal("RealmNotFound", f"PtahRealm {realm_name} is being deleted")
    if realm.spec.engine != engine:
        return RealmRefusal(
            "RealmEngineMismatch",
            f"PtahRealm {realm_name} is a {realm.spec.engine} realm, not {engine}",
        )
    if namespace in realm.spec.namespaces:
        return None
    selector = realm.spec.namespace_selector
    if (
        selector is not None
        and namespace_labels is not None
        and selector_matches(selector, namespace_labels)
    ):
        return None
    return RealmRefusal(
        "NamespaceNotAdmitted", f"PtahRealm {realm_name} does not admit namespace {namespace}"
    )


def realm_census(realm: PtahRealm, claimants: Iterable[RealmClaimant]) -> RealmRefusal | None:
    """Whether the resources naming ``realm`` may share it. Pure.

    One claimant (or none: the resource asking is always among them once stored) is
    always allowed; more than one only on a Shared realm whose every claimant says it
    shares, since a resource that does not say so expects to own the database and
    would undo the others' work.
    """
    found = sorted(claimants, key=lambda c: (c.namespace, c.kind, c.name))
    if len(found) <= 1:
        return None
    name = realm.metadata.name or "?"
    if realm.spec.sharing == "Shared" and all(c.shared_realm for c in found):
        return None
    named = ", ".join(f"{c.kind} {c.namespace}/{c.name}" for c in found)
    why = (
        f"PtahRealm {name} is Exclusive"
        if realm.spec.sharing != "Shared"
        else "not every one sets spec.target.sharedRealm"
    )
    return RealmRefusal(
        "RealmConflict", f"{len(found)} resources name PtahRealm {name} ({named}): {why}"
    )


def realm_conditions(
    realm: PtahRealm, conflict: RealmRefusal | None, *, now: str
) -> list[Condition] | None:
    """The conditions ``realm`` should carry after a census found ``conflict`` (None:
    none), or None when it carries them already. Pure.

    ``RealmConflict`` is the realm's own account of its census, for the platform team
    reading ``kubectl get ptahrealm``; each refused resource says the same in its own
    condition, which is what the controller acts by. The transition time moves only
    when the status does, so an unchanged census writes nothing.
    """
    old = realm.status.conditions if realm.status else []
    before = next((c for c in old if c.type == "RealmConflict"), None)
    status = "True" if conflict else "False"
    reason = conflict.reason if conflict else "NoConflict"
    message = conflict.message if conflict else "the resources naming the realm may share it"
    if before is not None and (before.status, before.reason, before.message) == (
        status,
        reason,
        message,
    ):
        return None
    moved = before is None or before.status != status
    condition = Condition(
        type="RealmConflict",
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now if moved or before is None else before.last_transition_time,
        observed_generation=realm.metadata.generation,
    )
    return [*(c for c in old if c.type != "RealmConflict"), condition]
