"""The realm rule at write time: a spec names a realm only from a namespace it admits.

A control row first (the realm lists the namespace), then one change per row and the
sentence it meets; rows that admit say what admission leaves to the controller.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobclaim.apiserver import PTAHMIGRATIONS, PTAHSCHEMAS
from tests.support.webhookscenes import Scene
from tests.webhook.tables import Row, expect, unchanged
from tests.webhook.writerscene import NAMESPACE, PERSON, stamp_writer, writer_scene
from webhook import realms as r


def _realm(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahRealm",
        "metadata": {"name": "orders-db", "uid": "realm-uid"},
        "spec": {"engine": "PostgreSQL", "namespaces": [NAMESPACE], **spec},
    }


def _namespace(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": labels},
    }


def _stored(scene: Scene, *objects: dict[str, Any]) -> None:
    scene.objects = [o for o in scene.objects if o["kind"] not in ("PtahRealm", "Namespace")]
    scene.objects += list(objects)


def _keep_target(scene: Scene) -> None:
    """The stored resource already named the realm: only its interval changes."""
    assert scene.obj is not None and scene.old is not None
    scene.old["spec"]["target"] = dict(scene.obj["spec"]["target"])


REALM_ROWS = [
    Row("a realm that lists the namespace", unchanged, None),
    Row(
        "a realm that lists another namespace",
        lambda s: _stored(s, _realm(namespaces=["billing"])),
        r.NOT_ADMITTED,
        "PtahRealm orders-db does not admit namespace shop",
    ),
    Row(
        "a realm of another engine",
        lambda s: _stored(s, _realm(engine="MySQL")),
        r.NOT_ADMITTED,
        "is a MySQL realm, not PostgreSQL",
    ),
    Row(
        "a realm admitting by a label the namespace carries",
        lambda s: _stored(
            s,
            _realm(namespaces=[], namespaceSelector={"matchLabels": {"team": "shop"}}),
            _namespace({"team": "shop"}),
        ),
        None,
    ),
    Row(
        "a realm admitting by a label the namespace does not carry",
        lambda s: _stored(
            s,
            _realm(namespaces=[], namespaceSelector={"matchLabels": {"team": "shop"}}),
            _namespace({"team": "billing"}),
        ),
        r.NOT_ADMITTED,
        "does not admit namespace shop",
    ),
    Row("a realm not created yet (the controller decides)", _stored, None),
    Row(
        "a stored refusal the write does not touch (the controller decides)",
        lambda s: (_stored(s, _realm(namespaces=["billing"])), _keep_target(s)),
        None,
    ),
]


def _on_realm(scene: Scene) -> Scene:
    assert scene.obj is not None
    target = scene.obj["spec"]["target"]
    target.pop("coordinationKey", None)
    target.update(realmRef={"name": "orders-db"}, sharedRealm=False)
    scene.objects = [*scene.objects, _realm()]
    return scene


@pytest.mark.parametrize("row", REALM_ROWS, ids=str)
@pytest.mark.parametrize("kind", [PTAHSCHEMAS, PTAHMIGRATIONS], ids=lambda k: k.kind)
def test_realm_rows(row: Row, kind: Any) -> None:
    scene = _on_realm(writer_scene(kind, "UPDATE", changed=True))
    stamp_writer(scene, PERSON)
    expect(row, scene, "decisions")
