"""The API models decode strictly and speak Kubernetes' camelCase."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from jobclaim.api import KINDS, PtahMigration, PtahSchema, to_wire_name
from jobclaim.api.schema import DEV_IS_TARGET, DEV_ONE_SOURCE

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_decodes_as_its_kind(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        model = KINDS[document["kind"]]
        decoded = model.model_validate(document)
        assert decoded.to_wire()["kind"] == document["kind"]


@pytest.mark.parametrize(
    ("name", "wire"),
    [
        ("job_uid", "jobUID"),
        ("operation_id", "operationID"),
        ("id", "id"),
        ("execution_binding_id", "executionBindingID"),
        ("dispatch_started", "dispatchStarted"),
        ("mutation_request_uid", "mutationRequestUID"),
        ("apply_pod_uids", "applyPodUIDs"),
    ],
)
def test_wire_names(name: str, wire: str) -> None:
    assert to_wire_name(name) == wire


def _schema() -> dict[str, object]:
    loaded: dict[str, object] = yaml.safe_load((EXAMPLES / "ptahschema.yaml").read_text())
    return loaded


def test_an_unknown_field_is_refused_not_dropped() -> None:
    document = _schema()
    document["spec"]["surprise"] = True  # type: ignore[index]
    with pytest.raises(ValidationError, match="surprise"):
        PtahSchema.model_validate(document)


def test_a_target_names_exactly_one_realm() -> None:
    document = _schema()
    # The example names the realm "orders"; a coordinationKey beside it is one too many.
    assert document["spec"]["target"]["realmRef"] == {"name": "orders"}  # type: ignore[index]
    document["spec"]["target"]["coordinationKey"] = "orders-primary"  # type: ignore[index]
    with pytest.raises(ValidationError, match="exactly one of coordinationKey and realmRef"):
        PtahSchema.model_validate(document)


@pytest.mark.parametrize(
    ("dev", "refused"),
    [
        ({"name": "orders-dev-db", "key": "url"}, False),
        ({"name": "orders-db", "key": "dev-url"}, False),
        ({"name": "orders-db", "key": "url"}, True),
    ],
)
def test_the_dev_database_is_never_the_targets_secret_key(
    dev: dict[str, str], refused: bool
) -> None:
    document = _schema()
    document["spec"]["dev"] = {"urlFrom": dev}  # type: ignore[index]
    if refused:
        with pytest.raises(ValidationError, match=re.escape(DEV_IS_TARGET)):
            PtahSchema.model_validate(document)
    else:
        assert PtahSchema.model_validate(document).spec.dev is not None


@pytest.mark.parametrize(
    ("dev", "refused"),
    [
        ({"urlFrom": {"name": "orders-dev-db", "key": "url"}}, False),
        ({"provided": {}}, False),
        ({"urlFrom": {"name": "orders-dev-db", "key": "url"}, "provided": {}}, True),
        ({}, True),
    ],
    ids=["its own Secret key", "provided", "both", "neither"],
)
def test_the_dev_database_has_exactly_one_source(dev: dict[str, object], refused: bool) -> None:
    document = _schema()
    document["spec"]["dev"] = dev  # type: ignore[index]
    if refused:
        with pytest.raises(ValidationError, match=re.escape(DEV_ONE_SOURCE)):
            PtahSchema.model_validate(document)
    else:
        assert PtahSchema.model_validate(document).spec.to_wire()["dev"] == dev


def test_status_records_round_trip_with_their_wire_names() -> None:
    document = {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": "PtahMigration",
        "metadata": {"name": "m", "namespace": "n"},
        "spec": {
            "target": {
                "engine": "MySQL",
                "coordinationKey": "k",
                "urlFrom": {"name": "s", "key": "url"},
            },
            "artifact": {"ociRef": "r/x:1"},
        },
        "status": {
            "unresolvedRun": {
                "outcome": "Unknown",
                "operationID": "op",
                "jobName": "j",
                "recordedAt": "2026-12-02T12:00:00Z",
            },
            "pendingLockRelease": {
                "coordinationDigest": "sha256:" + "0" * 64,
                "operationID": "op",
                "leaseDurationSeconds": 1020,
                "leaseEpoch": "v1-" + "0" * 32,
            },
        },
    }
    decoded = PtahMigration.model_validate(document)
    assert decoded.to_wire()["status"] == {
        **document["status"],  # type: ignore[dict-item]
        "conditions": [],
    }
