"""The manager-state endpoint: status and the unresolved-run annotation are the
manager's alone; a person, another service account and system:masters are refused
alike, and every other write to an operator resource is left alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.webhookscenes import MANAGER_USERNAME, Obj, Scene, annotation_write, status_write
from tests.webhook.tables import Row, expect, unchanged
from webhook import managerstate as ms
from webhook import objects

PERSON = ("jane@example.com",)
ADMIN = ("admin", "system:masters")
NEIGHBOUR = ("system:serviceaccount:ptah-system:default", "system:serviceaccounts:ptah-system")


def by(name: str, *groups: str) -> Any:
    def change(scene: Scene) -> None:
        scene.username, scene.groups = name, groups

    return change


def new(scene: Scene) -> Obj:
    assert scene.obj is not None
    return scene.obj


def request(**fields: Any) -> Any:
    return lambda scene: scene.extra.update(fields)


STATUS_ROWS = [
    Row("the manager writes status", unchanged, None),
    Row("the manager, as a dry run", lambda s: setattr(s, "dry_run", True), None),
    Row("the manager, without its groups", by(MANAGER_USERNAME), None),
    Row("a person", by(*PERSON), ms.STATUS_NOT_MANAGER, "PtahSchema"),
    Row("an administrator in system:masters", by(*ADMIN), ms.STATUS_NOT_MANAGER),
    Row(
        "another service account of the manager's namespace", by(*NEIGHBOUR), ms.STATUS_NOT_MANAGER
    ),
    Row(
        "a person, as a dry run",
        lambda s: (by(*PERSON)(s), setattr(s, "dry_run", True)),
        ms.STATUS_NOT_MANAGER,
    ),
    Row(
        "a person clearing the dispatch mark",
        lambda s: (
            by(*PERSON)(s),
            new(s)["status"]["activeOperation"].update(dispatchStarted=False),
        ),
        ms.STATUS_NOT_MANAGER,
    ),
    Row("a scale subresource", lambda s: setattr(s, "subresource", "scale"), ms.OTHER_SUBRESOURCE),
    Row(
        "a resource outside the group",
        request(resource={"group": "batch", "version": "v1", "resource": "jobs"}),
        ms.OUTSIDE_GROUP,
        "batch/v1/jobs",
    ),
    Row(
        "a review of another kind",
        request(
            kind={"group": "operator.ptah.run", "version": "v1alpha1", "kind": "PtahMigration"}
        ),
        objects.KIND_MISMATCH,
    ),
    Row("a request naming another object", request(name="other"), objects.NOT_NAMED),
    Row(
        "an unknown status field",
        lambda s: new(s)["status"].update(shadow=1),
        objects.UNDECODABLE,
        "unknown field request.object.status.shadow",
    ),
    Row("a connect", request(operation="CONNECT"), ms.OUTSIDE_OPERATION),
]


@pytest.mark.parametrize("row", STATUS_ROWS, ids=str)
def test_only_the_manager_writes_status(row: Row) -> None:
    expect(row, status_write(), "manager-state")


def creating(value: str | None) -> Any:
    def change(scene: Scene) -> None:
        scene.operation, scene.old = "CREATE", None
        meta = new(scene)["metadata"]
        meta.pop("annotations", None)
        if value is not None:
            meta["annotations"] = {"operator.ptah.run/unresolved-run": value}

    return change


def deleting(scene: Scene) -> None:
    scene.operation, scene.obj = "DELETE", None


def set_value(value: str | None) -> Any:
    def change(scene: Scene) -> None:
        annotations = new(scene)["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop("operator.ptah.run/unresolved-run", None)
        else:
            annotations["operator.ptah.run/unresolved-run"] = value

    return change


def spec_only(scene: Scene) -> None:
    assert scene.old is not None
    scene.obj = copy.deepcopy(scene.old)
    new(scene)["spec"]["suspend"] = True


ANNOTATION_ROWS = [
    Row("the manager records an unresolved run", unchanged, None),
    Row("the manager clears it", set_value(None), None),
    Row("a person changes it", by(*PERSON), ms.ANNOTATION_NOT_MANAGER),
    Row(
        "an administrator clears it",
        lambda s: (by(*ADMIN)(s), set_value(None)(s)),
        ms.ANNOTATION_NOT_MANAGER,
    ),
    Row(
        "a person creates a resource carrying it",
        lambda s: (by(*PERSON)(s), creating("run-1")(s)),
        ms.ANNOTATION_NOT_MANAGER,
    ),
    Row(
        "a person creates a resource without it",
        lambda s: (by(*PERSON)(s), creating(None)(s)),
        None,
    ),
    Row("a person edits the spec, leaving it", lambda s: (by(*PERSON)(s), spec_only(s)), None),
    Row("a person deletes the resource", lambda s: (by(*PERSON)(s), deleting(s)), None),
    Row(
        "a person sets it to an empty value",
        lambda s: (by(*PERSON)(s), set_value("")(s)),
        ms.ANNOTATION_NOT_MANAGER,
    ),
]


@pytest.mark.parametrize("row", ANNOTATION_ROWS, ids=str)
def test_only_the_manager_changes_the_unresolved_run_annotation(row: Row) -> None:
    expect(row, annotation_write("run-2"), "manager-state")
