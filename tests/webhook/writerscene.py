"""A person writing a PtahSchema or PtahMigration, as the decision tables and the realm
rule's table stage it: the target as stored (its spec's last writer recorded as bob's),
the person's write of it, and the spec-writer record a row may change.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any, Final

from jobclaim.api import SPEC_WRITER_ANNOTATION
from jobclaim.apiserver import PTAHMIGRATIONS, PTAHSCHEMAS
from jobclaim.stamps import STAMPED, StampedKind
from tests.support.claimworld import example
from tests.support.webhookscenes import Obj, Scene

NOW: Final = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
STAMPED_AT: Final = "2026-12-03T12:00:00Z"
PERSON: Final = "jane@example.com"
PERSON_GROUPS: Final = ("developers", "system:authenticated")
NAMESPACE: Final = "shop"
TARGET_UIDS: Final = {PTAHSCHEMAS.kind: "schema-uid-1", PTAHMIGRATIONS.kind: "migration-uid-1"}


def target(kind: StampedKind, *, writer: str | None = "bob") -> Obj:
    """The PtahSchema or PtahMigration a decision names, as stored."""
    raw = example("ptahschema.yaml" if kind.target is PTAHSCHEMAS else "ptahmigration.yaml")
    raw["metadata"].update(uid=TARGET_UIDS[kind.target.kind], resourceVersion="7")
    raw["metadata"]["creationTimestamp"] = STAMPED_AT
    if writer is not None:
        raw["metadata"]["annotations"] = {SPEC_WRITER_ANNOTATION: writer}
    return dict(raw)


def writer_scene(kind: Any, operation: str, *, changed: bool) -> Scene:
    """A PtahSchema or PtahMigration written by a person, recorded as bob's before."""
    old = target(STAMPED["PtahSchemaApproval" if kind is PTAHSCHEMAS else "PtahMigrationApproval"])
    new = copy.deepcopy(old)
    if changed:
        new["spec"]["interval"] = "5m"
    if operation == "CREATE":
        new["metadata"] = {"name": old["metadata"]["name"], "namespace": NAMESPACE}
        return Scene(kind, "CREATE", new, [], username=PERSON, groups=PERSON_GROUPS, now=NOW)
    return Scene(kind, "UPDATE", new, [], old=old, username=PERSON, groups=PERSON_GROUPS, now=NOW)


def stamp_writer(scene: Scene, name: str | None) -> None:
    assert scene.obj is not None
    if name is None:
        scene.obj["metadata"].pop("annotations", None)
    else:
        scene.obj["metadata"]["annotations"] = {SPEC_WRITER_ANNOTATION: name}
