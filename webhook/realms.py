"""A PtahSchema or PtahMigration names a realm only from a namespace the realm admits.

The controller re-checks before every Lease step, so nothing here is what keeps a
database safe; this rule turns the refusal a resource would otherwise meet minutes
later, as a condition, into the answer to ``kubectl apply``. It decides by the
contract's own ``realm_admission``, so both say the same sentence.

What admission cannot know at write time it leaves to the controller: a realm not
created yet (a GitOps tool may apply the realm after the resource, and refusing would
wedge the sync), and the census (another claimant may be written a moment later, so
the census is counted where the Lease is taken).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from jobclaim import realm_admission
from jobclaim.api import PtahRealm
from jobclaim.apiserver import NAMESPACES, PTAHREALMS
from webhook.objects import stored
from webhook.rules import DECISIONS, ReadKey, Reads, Trail, read, rule

REALM_ADMITS: Final = rule(
    "realm-admits-namespace",
    (DECISIONS,),
    "A realm is named only from a namespace it admits",
    description="""
    On CREATE of a PtahSchema or PtahMigration, and on an UPDATE that changes its
    spec.target, a spec.target.realmRef must name a PtahRealm that declares the
    resource's engine and admits its namespace, by name or by its namespaceSelector
    over the namespace's labels (both read uncached). A realm that does not exist yet
    is left to the controller, which never takes its Lease while it is missing; so is
    the census of resources sharing the realm, which only the Lease step can count.
    """,
    admits=(
        "specs naming no realm, writes that leave spec.target alone, realms not yet "
        "created, and realms that admit the namespace and declare the engine"
    ),
)
NOT_ADMITTED: Final = REALM_ADMITS.refuses("spec.target.realmRef: {why}")


def _target(raw: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (raw or {}).get("spec")
    target = spec.get("target") if isinstance(spec, Mapping) else None
    return target if isinstance(target, Mapping) else {}


def judge_realm(
    new: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str, trail: Trail
) -> Reads[None]:
    """Refuse (``raise trail.deny``) a target naming a realm that refuses it."""
    trail.enter(REALM_ADMITS)
    target = _target(new)
    ref = target.get("realmRef")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if not isinstance(name, str) or not name:
        trail.passed("the spec names no realm")
        return
    if old is not None and _target(old) == target:
        trail.passed("spec.target is as it was")
        return
    realm_key = ReadKey(PTAHREALMS, "", name)
    namespace_key = ReadKey(NAMESPACES, "", namespace)
    fetched = yield from read(realm_key, namespace_key)
    realm = stored(fetched, realm_key, PtahRealm, trail)
    if realm is None:
        trail.passed(f"PtahRealm {name} does not exist yet; the controller decides")
        return
    found = fetched.get(namespace_key)
    labels = ((found.tree().get("metadata") or {}).get("labels") or {}) if found else {}
    refusal = realm_admission(
        realm,
        realm_name=name,
        engine=str(target.get("engine", "")),
        namespace=namespace,
        namespace_labels={str(k): str(v) for k, v in labels.items()},
    )
    if refusal is not None:
        raise trail.deny(NOT_ADMITTED, why=refusal.message)
    trail.passed(f"PtahRealm {name} admits namespace {namespace}")
