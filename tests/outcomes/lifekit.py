"""A resource's life on the API double with the scripted node, as a person lives it:
create a resource (with the realms and policy the examples name), approve its plan,
and drive passes and node steps until its status says what the test waits for.

The planning and the freshness life tests share it; each claim in them is the
controller's own (the ``no_requested_claims`` fixture in this folder's conftest).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from controller.runtime.reconciler import Key
from jobclaim.apiserver import (
    CONFIGMAPS,
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHREALMS,
    PTAHSCHEMAAPPROVALS,
    PTAHSCHEMAS,
    AlreadyExists,
)
from lab.run import example_realms
from tests.support.claimworld import example
from tests.support.dispatchworld import NS, Rig
from tests.support.outcomeworld import status_of
from tests.support.scriptednode import POLICY, ScriptedNode

Status = dict[str, Any]
APPROVER = {
    "approver": {"username": "alice", "uid": "alice-uid", "groups": ["dba"]},
    "approvedAt": "2026-12-02T11:59:00Z",
    "mutationRequestUID": "admission-request-1",
}


def realms(rig: Rig) -> None:
    """The realms the examples name (examples/ptahrealm.yaml), each once per rig."""
    for _, realm in example_realms():
        with contextlib.suppress(AlreadyExists):
            rig.api.create(PTAHREALMS, None, realm)


def new_schema(rig: Rig) -> Key:
    rig.api.create(
        CONFIGMAPS,
        NS,
        {
            "metadata": {"name": "orders-schema-policy", "namespace": NS},
            "data": {"policy.json": POLICY},
        },
    )
    realms(rig)
    raw = example("ptahschema.yaml")
    rig.api.create(PTAHSCHEMAS, NS, raw)
    return Key("PtahSchema", NS, raw["metadata"]["name"])


def new_migration(rig: Rig) -> Key:
    realms(rig)
    raw = example("ptahmigration.yaml")
    rig.api.create(PTAHMIGRATIONS, NS, raw)
    return Key("PtahMigration", NS, raw["metadata"]["name"])


def drive(rig: Rig, node: ScriptedNode, key: Key, until: Callable[[Status], bool]) -> Status:
    """Passes and node steps until ``until`` holds of the status (bounded)."""
    for _ in range(40):
        rig.settle(key, limit=40)
        status = status_of(rig, key)
        if until(status):
            return status
        if node.run_jobs() == 0:
            rig.settle(key, limit=40)
            if until(status_of(rig, key)):
                return status_of(rig, key)
            raise AssertionError(f"stuck at {status.get('phase')}: nothing runs, ran {node.ran}")
    raise AssertionError(f"no progress to the wanted state; ran {node.ran}")


def phase(name: str) -> Callable[[Status], bool]:
    return lambda status: status.get("phase") == name and "activeOperation" not in status


def approve(rig: Rig, key: Key) -> str:
    resource = rig.resource(key)
    status = resource["status"]
    plan = status["plan"]
    schema = key.kind == "PtahSchema"
    ref = {"name": key.name, "uid": resource["metadata"]["uid"]}
    fingerprint = (
        plan["fingerprint"]
        if schema
        else rig.api.get(PTAHMIGRATIONPLANS, NS, plan["name"])["spec"]["fingerprint"]
    )
    name = f"{key.name}-approval-{len(rig.api.list(approvals(key), NS))}"
    rig.api.create(
        approvals(key),
        NS,
        {
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                ("schemaRef" if schema else "migrationRef"): ref,
                "planRef": {"name": plan["name"], "uid": plan["uid"]},
                "planFingerprint": fingerprint,
                "executionBindingID": status["executionBinding"]["epoch"],
                **APPROVER,
            },
        },
    )
    return name


def approvals(key: Key) -> Any:
    return PTAHSCHEMAAPPROVALS if key.kind == "PtahSchema" else PTAHMIGRATIONAPPROVALS


def apply_jobs(rig: Rig) -> list[str]:
    return [j["metadata"]["name"] for j in rig.jobs() if "-apply-" in j["metadata"]["name"]]
