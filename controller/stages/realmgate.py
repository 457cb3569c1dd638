"""Whether a resource may take the database realm it names: admission and census.

A ``realmRef`` names a cluster PtahRealm, and the realm's Lease is shared by every
resource naming it, in any namespace. Without this gate any namespace could name
any realm and take turns on another team's database (a denial of service at least),
and two resources that each think they own a database would take turns undoing each
other's work. So, before a claim is made and again at every Lease step:

- the realm must exist, declare the resource's engine, and admit its namespace (by
  name, or by a label selector over the namespace's labels);
- the census: every PtahSchema and PtahMigration naming the realm is a claimant, and
  more than one refuses all of them (``RealmConflict``) unless the realm is
  ``Shared`` and every one of them sets ``sharedRealm: true``.

Every read here is uncached: a realm edited a moment ago must be what the next Lease
step sees, since a cached realm could hand a database to a namespace it just dropped.
The decisions are ``jobclaim.realms``' (the webhook decides by them too);
``realm_refusal`` only reads and hands them what it read.
"""

from __future__ import annotations

import contextlib
from typing import Final

from pydantic import ValidationError

from controller.context.passcontext import PassContext
from controller.mutationlifecycle import Stop
from controller.stages.claimwrites import retire_undispatched
from jobclaim import (
    RealmClaimant,
    RealmRefusal,
    realm_admission,
    realm_census,
    realm_conditions,
)
from jobclaim.api import Condition, DatabaseTargetSpec, PtahRealm, PtahRealmStatus
from jobclaim.apiserver import (
    NAMESPACES,
    PTAHMIGRATIONS,
    PTAHREALMS,
    PTAHSCHEMAS,
    ApiClient,
    Conflict,
    NotFound,
)
from jobclaim.times import timestamp, utc_now

__all__ = [
    "REALM_CONDITION",
    "REALM_RETRY",
    "gate_lease",
    "gate_new_claim",
    "realm_refusal",
]

# The condition a refused resource carries while the refusal stands.
REALM_CONDITION: Final = "RealmAdmitted"


# -- the shell ---------------------------------------------------------------------------


def _read_realm(api: ApiClient, name: str) -> PtahRealm | None:
    try:
        return PtahRealm.model_validate(api.get(PTAHREALMS, None, name))
    except NotFound:
        return None


def _namespace_labels(
    api: ApiClient, realm: PtahRealm | None, namespace: str
) -> dict[str, str] | None:
    if realm is None or realm.spec.namespace_selector is None or namespace in realm.spec.namespaces:
        return None
    try:
        found = api.get(NAMESPACES, None, namespace)
    except NotFound:
        return None
    labels = (found.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _claimants(api: ApiClient, realm_name: str) -> list[RealmClaimant]:
    out: list[RealmClaimant] = []
    for resource in (PTAHSCHEMAS, PTAHMIGRATIONS):
        for obj in api.list(resource, None):
            target = ((obj.get("spec") or {}).get("target")) or {}
            if ((target.get("realmRef")) or {}).get("name") != realm_name:
                continue
            meta = obj.get("metadata") or {}
            out.append(
                RealmClaimant(
                    resource.kind,
                    str(meta.get("namespace", "")),
                    str(meta.get("name", "")),
                    target.get("sharedRealm") is True,
                )
            )
    return out


def realm_refusal(
    api: ApiClient, target: DatabaseTargetSpec, namespace: str
) -> RealmRefusal | None:
    """Read the realm ``target`` names, its namespace's labels and the census, all
    uncached, and decide. None when the target names no realm (a coordinationKey is
    scoped to its own namespace and needs no realm's leave)."""
    if target.realm_ref is None:
        return None
    name = target.realm_ref.name
    try:
        realm = _read_realm(api, name)
    except ValidationError as error:
        # Fail closed: a realm this build cannot read admits nobody.
        return RealmRefusal("RealmUnreadable", f"PtahRealm {name} cannot be read: {error}")
    refusal = realm_admission(
        realm,
        realm_name=name,
        engine=target.engine,
        namespace=namespace,
        namespace_labels=_namespace_labels(api, realm, namespace),
    )
    if refusal is not None or realm is None:
        return refusal
    conflict = realm_census(realm, _claimants(api, name))
    _publish_census(api, realm, conflict)
    return conflict


def _publish_census(api: ApiClient, realm: PtahRealm, conflict: RealmRefusal | None) -> None:
    """Write the realm's RealmConflict condition when the census changed it.

    Best effort: the realm's status is an account for people, and every refused
    resource carries the refusal it acts by. A Conflict (another resource's pass wrote
    first) is left to the next pass, which decides again from the stored realm.
    """
    conditions = realm_conditions(realm, conflict, now=timestamp(utc_now()))
    if conditions is None:
        return
    status = PtahRealmStatus(observed_generation=realm.metadata.generation, conditions=conditions)
    with contextlib.suppress(Conflict):
        api.patch_status(
            PTAHREALMS,
            None,
            realm.metadata.name or "",
            status.to_wire(),
            resource_version=realm.metadata.resource_version or "",
        )


# -- over one pass -----------------------------------------------------------------------

# How soon a refused resource looks again. Nothing of ours watches realms (a realm is
# a platform team's object, changed seldom), so a realm created or edited to admit the
# resource is seen by looking; a refusal costs one uncached read per this interval.
REALM_RETRY: Final = 30.0


def _refused_condition(refusal: RealmRefusal, generation: int | None, now: str) -> Condition:
    return Condition(
        type=REALM_CONDITION,
        status="False",
        reason=refusal.reason,
        message=refusal.message,
        last_transition_time=now,
        observed_generation=generation,
    )


def gate_new_claim(ctx: PassContext) -> Stop | None:
    """Before anything is claimed: a resource its realm refuses claims nothing.

    The refusal is written as a condition, and said by one Event when it is first
    written or changes; a pass that finds the same refusal writes nothing and says
    nothing, so a resource refused for a day does not fill the Event store.
    """
    refusal = realm_refusal(ctx.api, ctx.subject.spec.target, ctx.namespace)
    if refusal is None:
        return None
    status = ctx.status or ctx.family.empty_status()
    old = next((c for c in status.conditions if c.type == REALM_CONDITION), None)
    if old is None or (old.status, old.reason, old.message) != (
        "False",
        refusal.reason,
        refusal.message,
    ):
        generation = ctx.subject.metadata.generation
        condition = _refused_condition(refusal, generation, timestamp(ctx.now()))
        kept = [c for c in status.conditions if c.type != REALM_CONDITION]
        ctx.write_status(status.model_copy(update={"conditions": [*kept, condition]}))
        # One Event reason for every refusal (its kind is the condition's reason and
        # leads the note), so the Event vocabulary stays a closed list of literals.
        ctx.crossed("RealmRefused", f"{refusal.reason}: {refusal.message}", warning=True)
    return Stop(f"the realm refuses the resource: {refusal.message}", requeue_after=REALM_RETRY)


def gate_lease(ctx: PassContext) -> Stop | None:
    """At the Lease step, before the Lease is taken or renewed for an undispatched claim.

    A realm edited since the claim was made (a namespace dropped, a second claimant
    named it, the realm deleted) retires the claim and releases what it held; the
    next pass's ``gate_new_claim`` says why. A claim carrying out a proof is exempt:
    the proof is the account of an Apply that already ran, and withholding it would
    leave the database's state unknown for good.
    """
    if ctx.proof_outstanding and ctx.info.serves_proof:
        return None
    refusal = realm_refusal(ctx.api, ctx.subject.spec.target, ctx.namespace)
    if refusal is None:
        return None
    return retire_undispatched(ctx, refusal.message)
