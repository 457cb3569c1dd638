"""The CRDs: generated from the models, committed as generated, and structural.

The models in jobclaim.api are the one description of every kind. These tests
hold the committed CRDs to what the models generate, hold the generated schemas
to the Kubernetes structural rules, and check that the API server and the models
would agree about what to accept.
"""

from __future__ import annotations

import copy
import functools
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from jobclaim.api import UNRESOLVED_RUN_ANNOTATION, WireModel
from jobclaim.api.common import CONNECT_OUTLASTS_DEADLINE, CREDENTIAL_IN_CLEAR
from jobclaim.apiserver import BY_KIND
from jobclaim.crds import (
    CROSS_FIELD_RULES,
    IMMUTABLE,
    MODELS,
    CRDError,
    crd_for,
    crds,
    main,
    structural_schema,
)
from tests.chart.structural import Schema, defaulted, structural_problems, validate
from tests.support.chartrender import CRDS, ROOT, load_documents

# Every document of every example file, as (file, index): examples/ptahrealm.yaml holds
# two realms, and each document is checked on its own. Loaded afresh per test, since
# the tests below change what they load.
EXAMPLES = [
    (path, index)
    for path in sorted((ROOT / "examples").glob("*.yaml"))
    for index in range(len(load_documents(path.read_text())))
]


def _load(example: tuple[Path, int]) -> dict[str, Any]:
    path, index = example
    document: dict[str, Any] = load_documents(path.read_text())[index]
    return document


def _example_id(example: tuple[Path, int]) -> str:
    path, index = example
    return f"{path.name}[{index}]" if index else path.name


DIGEST = "sha256:" + "ab" * 32
EPOCH = "v1-" + "0" * 32


@functools.cache
def _crd(kind: str) -> Schema:
    # Generating a schema takes a while; the tests only read the result.
    return crd_for(kind)


def schema_of(kind: str) -> Schema:
    schema: Schema = _crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def at(schema: Schema, path: str) -> Schema:
    """The schema node at a dotted path; `[]` steps into list items."""
    node = schema
    for part in path.strip(".").split("."):
        if part.endswith("[]"):
            node = node["properties"][part[:-2]]["items"]
        else:
            node = node["properties"][part]
    return node


def example(kind: str) -> dict[str, Any]:
    for found in EXAMPLES:
        document = _load(found)
        if document["kind"] == kind:
            return document
    raise AssertionError(f"no example of {kind}")


# --- committed == generated ---------------------------------------------------


def test_the_committed_crds_are_exactly_the_generated_ones() -> None:
    expected = crds()
    committed = {p.name: p.read_text() for p in CRDS.glob("*.yaml")}
    assert sorted(committed) == sorted(expected), "a CRD file is missing or no model makes it"
    stale = sorted(name for name, text in expected.items() if committed[name] != text)
    assert not stale, (
        f"{stale} differ from what the models generate; "
        "run: python -m jobclaim.crds --out charts/ptah-operator/crds"
    )


def test_there_is_one_crd_per_kind() -> None:
    assert len(crds()) == len(MODELS) == 11


def _copy_of_committed(tmp_path: Path) -> Path:
    directory = tmp_path / "crds"
    shutil.copytree(CRDS, directory)
    return directory


@pytest.mark.parametrize(
    ("tamper", "complaint"),
    [
        pytest.param(lambda d: None, None, id="untouched copy passes"),
        pytest.param(
            lambda d: (d / "operator.ptah.run_ptahschemas.yaml").write_text(
                (d / "operator.ptah.run_ptahschemas.yaml")
                .read_text()
                .replace("maxLength: 512", "maxLength: 4096")
            ),
            "maxLength: 4096",
            id="a hand-edited constraint",
        ),
        pytest.param(
            lambda d: (d / "operator.ptah.run_ptahmigrations.yaml").unlink(),
            "missing",
            id="a deleted CRD",
        ),
        pytest.param(
            lambda d: (d / "operator.ptah.run_ptahtenants.yaml").write_text("kind: X\n"),
            "no model generates it",
            id="a CRD no model generates",
        ),
    ],
)
def test_check_mode_reports_every_way_the_files_can_drift(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tamper: Callable[[Path], object],
    complaint: str | None,
) -> None:
    directory = _copy_of_committed(tmp_path)
    tamper(directory)
    status = main(["--check", str(directory)])
    error = capsys.readouterr().err
    if complaint is None:
        assert (status, error) == (0, "")
    else:
        assert status == 1
        assert complaint in error
        assert "python -m jobclaim.crds --out" in error


def test_out_mode_writes_what_check_mode_then_accepts(tmp_path: Path) -> None:
    directory = tmp_path / "fresh"
    assert main(["--out", str(directory)]) == 0
    assert main(["--check", str(directory)]) == 0
    assert {p.name for p in directory.iterdir()} == set(crds())


# --- structural -----------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_schema_is_structural(kind: str) -> None:
    assert structural_problems(schema_of(kind)) == []


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_each_crd_names_its_kind_as_the_api_boundary_does(kind: str) -> None:
    crd = _crd(kind)
    resource = BY_KIND[kind]
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == f"{resource.plural}.operator.ptah.run"
    assert crd["spec"]["names"]["plural"] == resource.plural
    assert crd["spec"]["names"]["kind"] == kind
    # A realm is the platform's, above every namespace; everything else is a tenant's.
    assert crd["spec"]["scope"] == ("Namespaced" if resource.namespaced else "Cluster")
    assert resource.namespaced == (kind != "PtahRealm")
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    # Without the subresource a status write is a spec write: RBAC and the
    # status-writer policy could not tell them apart.
    assert ("subresources" in version) == resource.has_status
    if resource.has_status:
        assert version["subresources"] == {"status": {}}


DECISION = ["Consumed", "Stale", "Age"]
# Every kind prints more than its Age: `kubectl get` of a decision says who decided
# what, of a plan what it holds.
PRINTER_COLUMNS = {
    "PtahSchema": ["Phase", "Operation", "Plan", "Approval Needed", "Ready", "Last Applied", "Age"],
    "PtahMigration": ["Phase", "Operation", "Plan", "Approval Needed", "Ready", "Last Run", "Age"],
    "PtahSchemaPlan": ["Schema", "Statements", "Destructive", "Age"],
    "PtahSchemaPlanChunk": ["Plan", "Index", "Size", "Age"],
    "PtahSchemaApproval": ["Schema", "Plan", "Approver", *DECISION],
    "PtahSchemaProofSettlement": ["Schema", "Operation", "Settled By", *DECISION],
    "PtahMigrationPlan": ["Migration", "From", "Age"],
    "PtahMigrationApproval": ["Migration", "Plan", "Approver", *DECISION],
    "PtahMigrationRunAcknowledgment": ["Migration", "Operation", "Acknowledged By", *DECISION],
    "PtahResultRecord": ["Operation", "Job", "Pod", "Digest", "Age"],
    "PtahRealm": ["Engine", "Sharing", "Conflict", "Age"],
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_printer_columns_say_what_each_kind_is_about(kind: str) -> None:
    columns = _crd(kind)["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == PRINTER_COLUMNS[kind]
    schema = schema_of(kind)
    for column in columns:
        path = column["jsonPath"]
        if path == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        if "[?(" in path:
            # A condition's status, picked by type from the conditions list.
            listed, _, rest = path.partition("[?(")
            assert at(schema, listed)["type"] == "array", path
            assert rest.endswith(")].status") and column["type"] == "string", path
            continue
        # A column whose path the schema does not describe prints nothing, forever.
        # A date column prints a timestamp, which the schema holds as a string.
        wanted = "string" if column["type"] == "date" else column["type"]
        assert at(schema, path)["type"] == wanted, path


def _fields(node: dict[str, Any], path: str) -> list[tuple[str, bool]]:
    """Every field under ``node`` (nested ones and those of list items), described or not."""
    found: list[tuple[str, bool]] = []
    for name, child in (node.get("properties") or {}).items():
        found.append((f"{path}.{name}", bool(child.get("description"))))
        found += _fields(child, f"{path}.{name}")
    items = node.get("items")
    if isinstance(items, dict):
        found += _fields(items, f"{path}[]")
    return found


def test_kubectl_explain_describes_every_field_of_every_kind() -> None:
    # `kubectl explain ptahschema.status.plan` prints these descriptions, generated from
    # the models' field docstrings: a field without one explains nothing to a person.
    # Counted over the generated CRDs, spec and status, nested fields included.
    counted = [
        field
        for kind in sorted(MODELS)
        for top in ("spec", "status")
        if top in schema_of(kind)["properties"]
        for field in _fields(schema_of(kind)["properties"][top], f"{kind}.{top}")
    ]
    missing = [path for path, described in counted if not described]
    # More fields than any one kind has: the walk reached into every kind.
    assert len(counted) > 700
    assert missing == [], f"{len(counted) - len(missing)} of {len(counted)} described"


# The translation, one rule per row: the node at `path` contains `expected`.
TRANSLATIONS = [
    ("PtahSchema", ".spec.execution.affinity", {"x-kubernetes-preserve-unknown-fields": True}),
    (
        "PtahSchema",
        ".spec.execution.podMetadata.labels",
        {"additionalProperties": {"type": "string"}, "maxProperties": 16},
    ),
    ("PtahSchema", ".spec.target.engine", {"type": "string", "enum": ["PostgreSQL", "MySQL"]}),
    ("PtahSchema", ".spec.execution.activeDeadlineSeconds", {"minimum": 30, "maximum": 86400}),
    ("PtahSchema", ".status.activeOperation.jobName", {"minLength": 1, "maxLength": 63}),
    (
        "PtahSchema",
        ".status.activeOperation.admissionSnapshot.version",
        {"type": "string", "enum": ["v1"]},
    ),
    # lt=16 becomes an inclusive maximum of 15.
    ("PtahSchemaPlan", ".spec.chunks[].index", {"minimum": 0, "maximum": 15}),
    ("PtahSchemaPlan", ".spec.chunks", {"minItems": 1, "maxItems": 16}),
    ("PtahSchemaPlan", ".spec.fingerprint", {"pattern": "^sha256:[0-9a-f]{64}$"}),
    ("PtahMigration", ".status.lastRun.appliedVersions", {"maxItems": 256}),
]


@pytest.mark.parametrize(("kind", "path", "expected"), TRANSLATIONS)
def test_model_constraints_reach_the_schema(kind: str, path: str, expected: Schema) -> None:
    node = at(schema_of(kind), path)
    assert {k: node.get(k) for k in expected} == expected


# Optional (`X | None = None`) fields are optional in the CRD and carry no null branch.
OPTIONAL = [
    ("PtahSchema", "", "status"),
    ("PtahSchema", ".spec.target", "coordinationKey"),
    ("PtahSchema", ".spec.target", "realmRef"),
    ("PtahSchema", ".status.activeOperation", "jobUID"),
    ("PtahMigration", ".status", "unresolvedRun"),
]


@pytest.mark.parametrize(("kind", "parent", "field"), OPTIONAL)
def test_a_nullable_field_becomes_an_optional_one(kind: str, parent: str, field: str) -> None:
    schema = schema_of(kind)
    node = at(schema, parent) if parent else schema
    assert field in node["properties"]
    assert field not in node.get("required", [])
    assert "anyOf" not in node["properties"][field]


def test_required_fields_stay_required() -> None:
    target = at(schema_of("PtahSchema"), ".spec.target")
    assert target["required"] == ["engine", "urlFrom"]
    assert schema_of("PtahSchema")["required"] == ["spec"]


# --- cross-field rules ------------------------------------------------------------


def _models_in(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    if model in seen:
        return
    seen.add(model)
    for field in model.model_fields.values():
        for candidate in _annotation_models(field.annotation):
            _models_in(candidate, seen)


def _annotation_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _annotation_models(arg)]


def test_every_model_validator_has_a_cel_twin() -> None:
    models: set[type[BaseModel]] = set()
    for model in MODELS.values():
        _models_in(model, models)
    validated = {
        m
        for m in models
        if m.__pydantic_decorators__.model_validators or m.__pydantic_decorators__.field_validators
    }
    # A validator without a twin is a rule the controller enforces and the API
    # server does not: the object is stored, then refused on every reconcile.
    assert validated, "no validated model found, so nothing below proves anything"
    assert validated <= set(CROSS_FIELD_RULES), sorted(m.__name__ for m in validated)


@pytest.mark.parametrize("kind", ["PtahSchema", "PtahMigration"])
def test_the_realm_rule_is_on_every_target_with_the_models_own_message(kind: str) -> None:
    rules = at(schema_of(kind), ".spec.target")["x-kubernetes-validations"]
    assert rules == [
        {
            "rule": "has(self.coordinationKey) != has(self.realmRef)",
            "message": "exactly one of coordinationKey and realmRef names the realm",
        }
    ]
    document = example(kind)
    # The examples name a realm; a coordinationKey beside it names a second.
    assert "realmRef" in document["spec"]["target"]
    document["spec"]["target"]["coordinationKey"] = "k"
    with pytest.raises(ValidationError, match=rules[0]["message"]):
        MODELS[kind].model_validate(document)


# --- defaults: the API server's are the models' -----------------------------------------

MINIMAL = {
    "PtahSchema": {
        "target": {
            "engine": "PostgreSQL",
            "coordinationKey": "k",
            "urlFrom": {"name": "s", "key": "u"},
        },
        "desired": {"ociRef": "registry.example.com/shop/orders:1"},
    },
    "PtahMigration": {
        "target": {
            "engine": "MySQL",
            "realmRef": {"name": "r"},
            "urlFrom": {"name": "s", "key": "u"},
        },
        "artifact": {"ociRef": "registry.example.com/shop/billing:1"},
    },
}


@pytest.mark.parametrize("kind", sorted(MINIMAL))
def test_the_api_server_stores_the_defaults_the_models_apply(kind: str) -> None:
    # What `kubectl get -o yaml` shows of a minimal resource is what the controller
    # reads from it: one set of defaults, the models', applied by both.
    document = {"apiVersion": "operator.ptah.run/v1alpha1", "kind": kind, "metadata": {}}
    document["spec"] = copy.deepcopy(MINIMAL[kind])
    stored = defaulted(schema_of(kind), document)
    assert validate(schema_of(kind), stored) == []
    assert stored["spec"] == MODELS[kind].model_validate(document).to_wire()["spec"]
    # The control: defaulting really added something, or the equality proves nothing.
    assert stored["spec"]["interval"] == "10m"
    assert stored["spec"]["execution"]["activeDeadlineSeconds"] == 900


@pytest.mark.parametrize("example", EXAMPLES, ids=_example_id)
def test_an_example_defaults_to_what_its_model_reads(example: tuple[Path, int]) -> None:
    document = _load(example)
    kind = document["kind"]
    expected = MODELS[kind].model_validate(document).to_wire()
    assert defaulted(schema_of(kind), document)["spec"] == expected["spec"]


def test_a_default_object_is_written_out_and_a_default_of_none_is_not() -> None:
    policy = at(schema_of("PtahSchema"), ".spec.policy")
    assert policy["default"]["lockTimeout"] == "30s"
    assert "approval" not in policy["default"]
    assert "default" not in at(schema_of("PtahSchema"), ".spec.dev")


# --- CEL rules: one declaration, the model's check and the API server's rule -----------

# Each row: a field, a value the model refuses, and the message the CRD's rule for the
# field says. The API server evaluating the rules is tests/realapi/test_crd_validation.py.
CEL_FIELDS = [
    ("PtahSchema", "spec.interval", "5s", "must be a duration such as 10m, from 10s to 24h"),
    ("PtahSchema", "spec.interval", "ten minutes", "must be a duration such as 10m"),
    ("PtahSchema", "spec.interval", "25h", "from 10s to 24h"),
    ("PtahMigration", "spec.interval", "0s", "from 10s to 24h"),
    (
        "PtahSchema",
        "spec.policy.lockTimeout",
        "2h",
        "must be a duration such as 30s, from 1s to 1h",
    ),
    ("PtahMigration", "spec.policy.lockTimeout", "5", "must be a duration such as 30s"),
    ("PtahSchema", "spec.execution.connectTimeout", "11m", "from 1s to 10m"),
    ("PtahSchema", "spec.execution.failureRetryInterval", "2h", "from 1s to 1h"),
    ("PtahSchema", "spec.desired.ociRef", "not a reference", "must be an OCI reference"),
    ("PtahMigration", "spec.artifact.ociRef", "Registry/UPPER:1", "must be an OCI reference"),
]


def _rule_messages(kind: str, path: str) -> list[str]:
    node = at(schema_of(kind), "." + path)
    return [r["message"] for r in node.get("x-kubernetes-validations", [])]


@pytest.mark.parametrize(("kind", "path", "value", "message"), CEL_FIELDS)
def test_a_value_the_model_refuses_is_refused_by_the_crds_rule_with_its_message(
    kind: str, path: str, value: str, message: str
) -> None:
    document = example(kind)
    _set(path, value)(document)
    with pytest.raises(ValidationError, match=re.escape(message)):
        MODELS[kind].model_validate(document)
    assert any(message in m for m in _rule_messages(kind, path)), _rule_messages(kind, path)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.interval", "10s"),
        ("spec.interval", "24h"),
        ("spec.interval", "1h30m"),
        ("spec.interval", "1.5h"),
        ("spec.policy.lockTimeout", "1500ms"),
        ("spec.desired.ociRef", "oci://localhost:5000/shop/orders@sha256:" + "a" * 64),
        ("spec.desired.ociRef", "postgres"),
    ],
)
def test_values_at_and_within_the_bounds_are_accepted(path: str, value: str) -> None:
    document = example("PtahSchema")
    _set(path, value)(document)
    MODELS["PtahSchema"].model_validate(document)


def test_a_connect_timeout_must_fit_in_the_deadline() -> None:
    rules = at(schema_of("PtahSchema"), ".spec.execution")["x-kubernetes-validations"]
    assert [r["message"] for r in rules] == [CONNECT_OUTLASTS_DEADLINE]
    document = example("PtahSchema")
    _set("spec.execution.activeDeadlineSeconds", 60)(document)
    _set("spec.execution.connectTimeout", "59s")(document)
    MODELS["PtahSchema"].model_validate(document)
    _set("spec.execution.connectTimeout", "1m")(document)
    with pytest.raises(ValidationError, match=CONNECT_OUTLASTS_DEADLINE):
        MODELS["PtahSchema"].model_validate(document)


@pytest.mark.parametrize(
    ("kind", "field"), [("PtahSchema", "desired"), ("PtahMigration", "artifact")]
)
def test_plain_http_never_carries_a_registry_credential(kind: str, field: str) -> None:
    rules = at(schema_of(kind), f".spec.{field}")["x-kubernetes-validations"]
    assert [r["message"] for r in rules] == [CREDENTIAL_IN_CLEAR]
    document = example(kind)
    document["spec"][field].pop("registryAuthFrom", None)
    _set(f"spec.{field}.transport.plainHTTP", True)(document)
    # The control: plain HTTP alone is accepted, and defaults to off.
    assert MODELS[kind].model_validate(document)
    assert at(schema_of(kind), f".spec.{field}.transport.plainHTTP")["default"] is False
    _set(f"spec.{field}.registryAuthFrom", {"name": "registry-credentials"})(document)
    with pytest.raises(ValidationError, match=re.escape(CREDENTIAL_IN_CLEAR)):
        MODELS[kind].model_validate(document)


DECISION_KINDS = [
    "PtahSchemaApproval",
    "PtahMigrationApproval",
    "PtahMigrationRunAcknowledgment",
    "PtahSchemaProofSettlement",
]


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_only_a_decisions_spec_is_immutable(kind: str) -> None:
    rules = at(schema_of(kind), ".spec").get("x-kubernetes-validations", [])
    immutable = {"rule": "self == oldSelf", "message": IMMUTABLE.message} in rules
    assert immutable == (kind in DECISION_KINDS)


def test_every_rule_reads_only_bounded_strings() -> None:
    # The API server prices a rule by the largest value it could read, and refuses a
    # CRD whose rules cost too much: every string a `matches` reads is bounded.
    for kind in MODELS:
        for path, node in _nodes(schema_of(kind), ""):
            for rule in node.get("x-kubernetes-validations", []):
                if rule["rule"].startswith("self.matches("):
                    assert node.get("maxLength", 0) <= 512, f"{kind}{path}"


def _nodes(node: Schema, path: str) -> list[tuple[str, Schema]]:
    found = [(path, node)]
    for name, child in (node.get("properties") or {}).items():
        found += _nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _nodes(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_kind_has_a_short_name_and_the_ptah_categories(kind: str) -> None:
    names = _crd(kind)["spec"]["names"]
    assert names["shortNames"], kind
    assert names["categories"][0] == "ptah"
    # A result record belongs to a Job of either family.
    family = {"PtahSchema": ["ptah-schema"], "PtahMigration": ["ptah-migration"]}
    expected = next((f for prefix, f in family.items() if kind.startswith(prefix)), [])
    assert names["categories"][1:] == expected


def test_short_names_are_unique() -> None:
    every = [n for kind in MODELS for n in _crd(kind)["spec"]["names"]["shortNames"]]
    assert len(every) == len(set(every))


# --- the schemas against objects ---------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=_example_id)
def test_every_example_is_accepted(example: tuple[Path, int]) -> None:
    document = _load(example)
    assert validate(schema_of(document["kind"]), document) == []


UNKNOWN_FIELD_PLACES = [(), ("spec",), ("spec", "target"), ("spec", "target", "urlFrom")]


def _has(example: tuple[Path, int], where: tuple[str, ...]) -> bool:
    node = _load(example)
    for key in where:
        if key not in node:
            return False
        node = node[key]
    return True


# Each example at each place it has (a PtahRealm has no target).
UNKNOWN_FIELD_ROWS = [
    (example, where)
    for example in EXAMPLES
    for where in UNKNOWN_FIELD_PLACES
    if _has(example, where)
]


@pytest.mark.parametrize(
    ("example", "where"),
    UNKNOWN_FIELD_ROWS,
    ids=[f"{'.'.join(w) or 'root'}-{_example_id(e)}" for e, w in UNKNOWN_FIELD_ROWS],
)
def test_an_unknown_field_is_refused(example: tuple[Path, int], where: tuple[str, ...]) -> None:
    document = _load(example)
    node = document
    for key in where:
        node = node[key]
    node["surprise"] = True
    assert validate(schema_of(document["kind"]), document) == [
        f'{"".join("." + k for k in where)}.surprise: unknown field "surprise"'
    ]


def test_fields_of_kubernetes_own_deep_types_are_kept_verbatim() -> None:
    document = example("PtahSchema")
    document["spec"].setdefault("execution", {})["affinity"] = {
        "nodeAffinity": {"anything": [{"the": "api server checks it in the Pod"}]}
    }
    assert validate(schema_of("PtahSchema"), document) == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def apply(document: dict[str, Any]) -> None:
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return apply


ACTIVE_OPERATION = {
    "type": "Plan",
    "id": "op-1",
    "inputFingerprint": DIGEST,
    "jobName": "ptah-plan-orders-0123456789abcdef",
    "executionBindingID": EPOCH,
}

# Each row changes the example PtahSchema one way; the models and the CRD must
# reach the same verdict. The first row is the control: without it accepting,
# every refusal below could come from a broken fixture.
AGREEMENT = [
    ("the example as it is", lambda d: None, True),
    ("an engine the operator does not know", _set("spec.target.engine", "Oracle"), False),
    ("a deadline below the minimum", _set("spec.execution.activeDeadlineSeconds", 10), False),
    ("a deadline at the maximum", _set("spec.execution.activeDeadlineSeconds", 86400), True),
    ("an empty artifact reference", _set("spec.desired.ociRef", ""), False),
    ("an apply policy that does not exist", _set("spec.policy.apply", "Sometimes"), False),
    (
        "seventeen Pod labels",
        _set("spec.execution.podMetadata.labels", {f"k{i}": "v" for i in range(17)}),
        False,
    ),
    ("a quantity as a number", _set("spec.execution.resources.requests.cpu", 1), False),
    ("a toleration operator", _set("spec.execution.tolerations", [{"operator": "Maybe"}]), False),
    ("a known phase", _set("status.phase", "InSync"), True),
    ("an unknown phase", _set("status.phase", "Done"), False),
    ("a claim", _set("status.activeOperation", ACTIVE_OPERATION), True),
    (
        "a claim with a Job name over 63 characters",
        _set("status.activeOperation", {**ACTIVE_OPERATION, "jobName": "j" * 64}),
        False,
    ),
    (
        "a claim with a malformed epoch",
        _set("status.activeOperation", {**ACTIVE_OPERATION, "executionBindingID": "v2-0"}),
        False,
    ),
    ("a claim missing its Job name", _set("status.activeOperation", {"type": "Plan"}), False),
    ("a timestamp in another format", _set("status.lastAttemptTime", "yesterday"), False),
]


@pytest.mark.parametrize(
    ("change", "accepted"), [(r[1], r[2]) for r in AGREEMENT], ids=[r[0] for r in AGREEMENT]
)
def test_the_crd_and_the_models_agree(
    change: Callable[[dict[str, Any]], None], accepted: bool
) -> None:
    document = copy.deepcopy(example("PtahSchema"))
    change(document)
    crd_errors = validate(schema_of("PtahSchema"), document)
    try:
        MODELS["PtahSchema"].model_validate(document)
        model_accepts = True
    except ValidationError:
        model_accepts = False
    assert (not crd_errors, model_accepts) == (accepted, accepted), crd_errors


def test_a_migration_status_with_every_record_kind_is_accepted() -> None:
    document = example("PtahMigration")
    document["metadata"]["annotations"] = {UNRESOLVED_RUN_ANNOTATION: "{}"}
    document["status"] = {
        "phase": "Blocked",
        "unresolvedRun": {
            "outcome": "Unknown",
            "operationID": "op",
            "jobName": "j",
            "recordedAt": "2026-12-02T12:00:00Z",
        },
        "pendingLockRelease": {
            "coordinationDigest": DIGEST,
            "operationID": "op",
            "leaseDurationSeconds": 300,
            "leaseEpoch": EPOCH,
        },
    }
    MODELS["PtahMigration"].model_validate(document)
    assert validate(schema_of("PtahMigration"), document) == []


# --- what the generator refuses -------------------------------------------------------


class _Recursive(WireModel):
    child: _Recursive | None = None


class _Union(WireModel):
    value: int | str


class _NullableRequired(WireModel):
    value: str | None


class _Lookahead(WireModel):
    # pydantic's default regex engine refuses look-arounds as RE2 does; a model
    # that opts into Python's engine could carry one to the CRD.
    model_config = ConfigDict(regex_engine="python-re")
    value: Annotated[str, StringConstraints(pattern=r"^(?!x)")]


class _ExclusiveFloat(WireModel):
    value: float = Field(gt=0)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_Recursive, "contains itself"),
        (_Union, "only `X | None` unions"),
        (_NullableRequired, "must be present yet may be null"),
        (_Lookahead, "RE2"),
        (_ExclusiveFloat, "exclusive bounds are translated for integers only"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else v,
)
def test_the_generator_refuses_what_a_structural_schema_cannot_say(
    model: type[BaseModel], message: str
) -> None:
    with pytest.raises(CRDError, match=message):
        structural_schema(model)


def test_an_exclusive_integer_bound_becomes_inclusive() -> None:
    class Bounded(WireModel):
        value: int = Field(gt=0, lt=10)

    assert structural_schema(Bounded)["properties"]["value"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 9,
    }
