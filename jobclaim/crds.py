"""CustomResourceDefinitions for ``operator.ptah.run``, generated from the API models.

The pydantic models in ``jobclaim.api`` are the single description of every kind:
the controller and the webhook decode with them, and the CRDs the API server
validates with are derived from them here. Two hand-kept descriptions would drift,
and a drift is a field one side stores and the other refuses (or never sees)::

    python -m jobclaim.crds --out charts/ptah-operator/crds     # write the files
    python -m jobclaim.crds --check charts/ptah-operator/crds   # exit 1 when stale

A Kubernetes CRD needs a *structural* OpenAPI v3 schema, which is narrower than the
JSON Schema pydantic emits. The translation:

- ``$ref`` is inlined (a structural schema has no references); a recursive model
  cannot be inlined and is refused.
- ``X | None`` (``anyOf [X, null]``) becomes ``X``, and the field is left out of
  ``required``: the models write ``None`` by omitting the field (``to_wire`` drops
  it), so "absent" is the only spelling of "none" the API server ever stores.
- ``Literal`` becomes ``enum``; length, pattern and range constraints carry over,
  with exclusive integer bounds made inclusive.
- ``dict[str, str]`` keeps ``additionalProperties: {type: string}``; ``dict[str, Any]``
  (Kubernetes' own deep types, such as affinity) becomes
  ``x-kubernetes-preserve-unknown-fields``.
- ``additionalProperties: false`` (the models forbid unknown fields) is dropped:
  Kubernetes forbids it and gets the same effect from the schema itself, since a
  field the schema does not list is refused under strict field validation and
  pruned otherwise.
- Defaults are the models' own, ``default_factory`` ones included (called once, and
  written as the wire form of what they return), so the API server stores what the
  controller would have read anyway and ``kubectl get -o yaml`` shows every one. A
  default of None is absence, and absence needs no default.
- A value type whose rule pydantic checks and CEL states (``jobclaim.api._values``)
  brings its ``x-kubernetes-validations`` in its own JSON Schema; they are copied.
- A rule a model enforces in a ``model_validator`` has no JSON Schema form; its CEL
  twin is declared in ``CROSS_FIELD_RULES`` (a test requires one for every
  validator), so the API server refuses what the controller would refuse.
- A person's decision is never edited (the webhook refuses it, and so does the API
  server, without it): the spec of every kind in ``DECISIONS`` carries
  ``self == oldSelf``.

Any JSON Schema keyword not listed here is an error rather than silently dropped:
a new constraint in a model must reach the CRD, or the generator must be taught
what to do with it.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from jobclaim.api import (
    GROUP,
    KINDS,
    VERSION,
    DatabaseTargetSpec,
    ExecutionSpec,
    OCIArtifactSourceSpec,
    PtahMigrationApprovalSpec,
    PtahMigrationRunAcknowledgmentSpec,
    PtahSchemaApprovalSpec,
    PtahSchemaProofSettlementSpec,
    PtahSchemaSpec,
    RegistryTransportSpec,
)
from jobclaim.api._values import DURATION_PATTERN_CEL, VALIDATIONS
from jobclaim.api.common import CA_WITHOUT_TLS, CONNECT_OUTLASTS_DEADLINE, CREDENTIAL_IN_CLEAR
from jobclaim.api.schema import DEV_IS_TARGET, DEV_ONE_SOURCE, DevDatabaseSpec
from jobclaim.apiserver import BY_KIND, Resource
from jobclaim.errors import PtahError

__all__ = [
    "CROSS_FIELD_RULES",
    "MODELS",
    "CRDError",
    "ValidationRule",
    "crd_for",
    "crds",
    "main",
    "render",
    "structural_schema",
]

Schema = dict[str, Any]

# jobclaim.api.KINDS is a dict literal, which mypy types by the classes' metaclass;
# this is the same mapping with the type its values have.
MODELS: Final[Mapping[str, type[BaseModel]]] = KINDS

HEADER: Final = (
    "# Generated from the models in jobclaim/api by\n"
    "#   python -m jobclaim.crds --out charts/ptah-operator/crds\n"
    "# Do not edit: a test fails when this file differs from what the models generate.\n"
)

# Every CRD is listed under this category, so `kubectl get ptah -A` shows them all,
# and under its family's, so `kubectl get ptah-schema` shows a schema and its satellites.
CATEGORY: Final = "ptah"
FAMILY_CATEGORY: Final = {"PtahSchema": "ptah-schema", "PtahMigration": "ptah-migration"}

# What a person types instead of the plural: `kubectl get pts`, `kubectl get ptsapproval`.
SHORT_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    "PtahSchema": ("pts",),
    "PtahSchemaPlan": ("ptsplan",),
    "PtahSchemaPlanChunk": ("ptschunk",),
    "PtahSchemaApproval": ("ptsapproval",),
    "PtahSchemaProofSettlement": ("ptssettlement",),
    "PtahMigration": ("ptm",),
    "PtahMigrationPlan": ("ptmplan",),
    "PtahMigrationApproval": ("ptmapproval",),
    "PtahMigrationRunAcknowledgment": ("ptmack",),
    "PtahResultRecord": ("ptrecord",),
    "PtahRealm": ("ptrealm",),
}


def _column(name: str, kind: str, path: str) -> Schema:
    return {"name": name, "type": kind, "jsonPath": path}


def _condition(name: str, kind: str) -> Schema:
    return _column(name, "string", f'.status.conditions[?(@.type=="{kind}")].status')


# The columns a kind prints before Age, beyond what its status implies (below): who
# decided and what, for a decision; what a plan holds, for a plan. A decision's
# Consumed and Stale say whether it was spent or outlived by its plan.
_DECISION_STATE: Final = (_condition("Consumed", "Consumed"), _condition("Stale", "Stale"))
KIND_COLUMNS: Final[Mapping[str, tuple[Schema, ...]]] = {
    "PtahSchemaPlan": (
        _column("Schema", "string", ".spec.schemaRef.name"),
        _column("Statements", "integer", ".spec.statementCount"),
        _column("Destructive", "boolean", ".spec.destructive"),
    ),
    "PtahSchemaPlanChunk": (
        _column("Plan", "string", ".spec.planRef.name"),
        _column("Index", "integer", ".spec.index"),
        _column("Size", "integer", ".spec.size"),
    ),
    "PtahSchemaApproval": (
        _column("Schema", "string", ".spec.schemaRef.name"),
        _column("Plan", "string", ".spec.planRef.name"),
        _column("Approver", "string", ".spec.approver.username"),
        *_DECISION_STATE,
    ),
    "PtahSchemaProofSettlement": (
        _column("Schema", "string", ".spec.schemaRef.name"),
        _column("Operation", "string", ".spec.applyOperationID"),
        _column("Settled By", "string", ".spec.settledBy.username"),
        *_DECISION_STATE,
    ),
    # A realm: what database it stands for, whether it may be shared, and whether its
    # claimants currently agree (RealmConflict True means nothing runs on it).
    "PtahRealm": (
        _column("Engine", "string", ".spec.engine"),
        _column("Sharing", "string", ".spec.sharing"),
        _condition("Conflict", "RealmConflict"),
    ),
    "PtahMigrationPlan": (
        _column("Migration", "string", ".spec.migrationRef.name"),
        _column("From", "string", ".spec.currentVersion"),
    ),
    "PtahMigrationApproval": (
        _column("Migration", "string", ".spec.migrationRef.name"),
        _column("Plan", "string", ".spec.planRef.name"),
        _column("Approver", "string", ".spec.approver.username"),
        *_DECISION_STATE,
    ),
    "PtahMigrationRunAcknowledgment": (
        _column("Migration", "string", ".spec.migrationRef.name"),
        _column("Operation", "string", ".spec.operationID"),
        _column("Acknowledged By", "string", ".spec.acknowledgedBy.username"),
        *_DECISION_STATE,
    ),
    "PtahResultRecord": (
        _column("Operation", "string", ".spec.operation"),
        _column("Job", "string", ".spec.job.name"),
        _column("Pod", "string", ".spec.pod.name"),
        _column("Digest", "string", ".spec.resultDigest"),
    ),
}

_TYPES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean"})
# Keywords that describe a value and are copied as they are.
_COPIED: Final = frozenset(
    {"description", "pattern", "minLength", "maxLength", "minItems", "maxItems"}
    | {"minProperties", "maxProperties", "minimum", "maximum", "enum", VALIDATIONS}
)
# Keywords that only document pydantic's view, or that Kubernetes must not see.
_DROPPED: Final = frozenset({"title"})

# Regular-expression features Go's RE2 (which the API server validates `pattern`
# with) lacks. pydantic's default engine refuses them too, but a model that opts
# into Python's `re` could use one, and the CRD would then be refused at install.
_NOT_RE2: Final = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]|\(\?P=")


class CRDError(PtahError):
    """A model cannot be expressed as a structural schema."""


@dataclass(frozen=True, slots=True)
class ValidationRule:
    """A CEL rule (``x-kubernetes-validations``) attached to one model's schema."""

    rule: str
    message: str


# The CEL twins of the models' cross-field validators. The messages are the
# models' own, so a user reads one sentence whether the API server or the
# controller refused the object.
CROSS_FIELD_RULES: Final[Mapping[type[BaseModel], tuple[ValidationRule, ...]]] = {
    DatabaseTargetSpec: (
        ValidationRule(
            rule="has(self.coordinationKey) != has(self.realmRef)",
            message="exactly one of coordinationKey and realmRef names the realm",
        ),
    ),
    DevDatabaseSpec: (
        ValidationRule(
            rule="has(self.urlFrom) != has(self.provided)",
            message=DEV_ONE_SOURCE,
        ),
    ),
    PtahSchemaSpec: (
        ValidationRule(
            rule=(
                "!has(self.dev) || !has(self.dev.urlFrom)"
                " || self.dev.urlFrom.name != self.target.urlFrom.name"
                " || self.dev.urlFrom.key != self.target.urlFrom.key"
            ),
            message=DEV_IS_TARGET,
        ),
    ),
    OCIArtifactSourceSpec: (
        ValidationRule(
            rule=(
                "!has(self.transport) || !has(self.transport.plainHTTP)"
                " || !self.transport.plainHTTP || !has(self.registryAuthFrom)"
            ),
            message=CREDENTIAL_IN_CLEAR,
        ),
    ),
    RegistryTransportSpec: (
        ValidationRule(
            rule="!has(self.caFrom) || !has(self.plainHTTP) || !self.plainHTTP",
            message=CA_WITHOUT_TLS,
        ),
    ),
    ExecutionSpec: (
        ValidationRule(
            # A malformed timeout is refused by its own rule; this one says nothing of it.
            rule=(
                "!has(self.connectTimeout) || !has(self.activeDeadlineSeconds)"
                f" || !self.connectTimeout.matches({DURATION_PATTERN_CEL})"
                # getSeconds(), not duration(string(...)): the API server prices a
                # string built at run time as unbounded, and refuses the rule's cost.
                " || duration(self.connectTimeout).getSeconds() < self.activeDeadlineSeconds"
            ),
            message=CONNECT_OUTLASTS_DEADLINE,
        ),
    ),
}

# The specs of a person's decisions: an approval, an acknowledgment, a settlement.
# Each is worth exactly what it said when it was made, so none is ever edited; the
# decisions webhook refuses an edit too, and this rule holds without it.
DECISIONS: Final[tuple[type[BaseModel], ...]] = (
    PtahSchemaApprovalSpec,
    PtahMigrationApprovalSpec,
    PtahMigrationRunAcknowledgmentSpec,
    PtahSchemaProofSettlementSpec,
)
IMMUTABLE: Final = ValidationRule(
    rule="self == oldSelf",
    message="a decision is never edited: delete it and create a new one",
)

_API_VERSION_DESCRIPTION: Final = (
    "APIVersion defines the versioned schema of this representation of an object."
)
_KIND_DESCRIPTION: Final = (
    "Kind is a string value representing the REST resource this object represents."
)


class _FactoryDefaults(GenerateJsonSchema):
    """pydantic's JSON Schema, with the defaults ``default_factory`` makes written out.

    pydantic leaves them out (a factory may return something new each call); every
    factory in the models returns a constant, so its value is the default the API
    server must apply, in the wire form ``to_wire`` writes (no nulls).
    """

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is None:
            return super().get_default_value(schema)
        if schema.get("default_factory_takes_data"):
            return NoDefault
        value = factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return value.model_dump(by_alias=True, mode="json", exclude_none=True)
        return value


def _json_schema(model: type[BaseModel]) -> Schema:
    return model.model_json_schema(
        by_alias=True, mode="validation", schema_generator=_FactoryDefaults
    )


def structural_schema(model: type[BaseModel]) -> Schema:
    """The ``openAPIV3Schema`` of one top-level kind."""
    source = _json_schema(model)
    definitions: Mapping[str, Schema] = source.get("$defs", {})
    inlining: frozenset[str] = frozenset()
    if "$ref" in source:
        # pydantic refers to the root through $defs when something inside refers back.
        name = source["$ref"].rsplit("/", 1)[-1]
        source, inlining = definitions[name], frozenset({name})
    rules = {m.__name__: r for m, r in CROSS_FIELD_RULES.items()}
    for decision in DECISIONS:
        rules[decision.__name__] = (*rules.get(decision.__name__, ()), IMMUTABLE)
    # apiVersion and kind are the API server's to check, and metadata's schema is
    # its own: a CRD may only say metadata is an object. They are described by
    # hand and not required (a stored object always has them).
    fixed: dict[str, Schema] = {
        "apiVersion": {"type": "string", "description": _API_VERSION_DESCRIPTION},
        "kind": {"type": "string", "description": _KIND_DESCRIPTION},
        "metadata": {"type": "object"},
    }
    root = {
        **{k: v for k, v in source.items() if k != "$defs"},
        "properties": {name: fixed.get(name, node) for name, node in source["properties"].items()},
        "required": [r for r in source.get("required", []) if r not in fixed],
    }
    out, _ = _Converter(definitions, rules).convert(root, "", inlining)
    for name in fixed.keys() & out["properties"].keys():
        out["properties"][name] = fixed[name]
    return out


class _Converter:
    """Translate one pydantic JSON Schema, its ``$defs`` inlined, into a structural one."""

    def __init__(
        self, definitions: Mapping[str, Schema], rules: Mapping[str, tuple[ValidationRule, ...]]
    ) -> None:
        self.definitions = definitions
        self.rules = rules

    def convert(self, node: Schema, path: str, inlining: frozenset[str]) -> tuple[Schema, bool]:
        """Return the structural schema at ``path`` and whether the field may be null."""
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in inlining:
                raise CRDError(f"{path}: {name} contains itself; a structural schema cannot")
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            converted, nullable = self.convert(
                {**self.definitions[name], **siblings}, path, inlining | {name}
            )
            if name in self.rules:
                converted[VALIDATIONS] = [
                    *converted.get(VALIDATIONS, []),
                    *({"rule": r.rule, "message": r.message} for r in self.rules[name]),
                ]
            return converted, nullable
        if "allOf" in node:
            # pydantic wraps a lone $ref that way; anything more is an intersection.
            if len(node["allOf"]) != 1:
                raise CRDError(
                    f"{path}: allOf of {len(node['allOf'])} schemas has no structural form"
                )
            siblings = {k: v for k, v in node.items() if k != "allOf"}
            return self.convert({**node["allOf"][0], **siblings}, path, inlining)
        if "anyOf" in node:
            branches = [b for b in node["anyOf"] if b != {"type": "null"}]
            if len(branches) != 1 or len(node["anyOf"]) != 2:
                raise CRDError(
                    f"{path}: only `X | None` unions have a structural form, not {node['anyOf']}"
                )
            siblings = {k: v for k, v in node.items() if k != "anyOf"}
            converted, _ = self.convert({**branches[0], **siblings}, path, inlining)
            return converted, True
        return self._value(node, path, inlining), False

    def _value(self, node: Schema, path: str, inlining: frozenset[str]) -> Schema:
        node = dict(node)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        kind = node.pop("type", None) or _enum_type(node, path)
        if kind not in _TYPES:
            raise CRDError(f"{path}: no structural type for {kind!r}")
        out: Schema = {"type": kind}
        handled = {"properties", "required", "additionalProperties", "items"}
        handled |= {"exclusiveMinimum", "exclusiveMaximum", "default"}
        unknown = set(node) - _COPIED - _DROPPED - handled
        if unknown:
            raise CRDError(f"{path}: no structural translation for {sorted(unknown)}")
        out.update({k: v for k, v in node.items() if k in _COPIED})
        if "description" in out:
            # Docstrings wrap at the source's width; `kubectl explain` wraps at its own.
            out["description"] = " ".join(out["description"].split())
        if node.get("default") is not None:
            # A default of None is absence, which is what an unset field already is.
            out["default"] = node["default"]
        if "pattern" in out and _NOT_RE2.search(out["pattern"]):
            raise CRDError(f"{path}: pattern {out['pattern']!r} uses a feature Go's RE2 lacks")
        if kind == "integer":
            if "exclusiveMinimum" in node:
                out["minimum"] = node["exclusiveMinimum"] + 1
            if "exclusiveMaximum" in node:
                out["maximum"] = node["exclusiveMaximum"] - 1
        elif "exclusiveMinimum" in node or "exclusiveMaximum" in node:
            raise CRDError(f"{path}: exclusive bounds are translated for integers only")
        if kind == "object":
            self._object(node, out, path, inlining)
        elif kind == "array":
            if "items" not in node:
                raise CRDError(f"{path}: a list needs an item type")
            out["items"], nullable = self.convert(node["items"], f"{path}[]", inlining)
            if nullable:
                raise CRDError(f"{path}: list items cannot be null")
        return out

    def _object(self, node: Schema, out: Schema, path: str, inlining: frozenset[str]) -> None:
        extra = node.get("additionalProperties")
        if "properties" in node:
            properties: dict[str, Schema] = {}
            optional: set[str] = set()
            for name, sub in node["properties"].items():
                properties[name], nullable = self.convert(sub, f"{path}.{name}", inlining)
                if nullable:
                    optional.add(name)
            required = list(node.get("required", []))
            nullable_required = sorted(optional & set(required))
            if nullable_required:
                raise CRDError(
                    f"{path}: {nullable_required} must be present yet may be null; the wire "
                    "format writes null by omission, so give the field a default of None"
                )
            out["properties"] = properties
            if required:
                out["required"] = required
            if extra not in (None, False):
                raise CRDError(f"{path}: an object with fields cannot also take any key")
        elif isinstance(extra, dict):
            out["additionalProperties"], nullable = self.convert(extra, f"{path}{{}}", inlining)
            if nullable:
                raise CRDError(f"{path}: map values cannot be null")
        elif extra is None or extra is True:
            # dict[str, Any]: a Kubernetes type the models carry verbatim.
            out["x-kubernetes-preserve-unknown-fields"] = True
        else:
            raise CRDError(f"{path}: an object with no fields that takes no keys holds nothing")


def _enum_type(node: Schema, path: str) -> str:
    values = node.get("enum", [])
    if values and all(isinstance(v, str) for v in values):
        return "string"
    raise CRDError(f"{path}: no type, and none follows from {node!r}")


def _printer_columns(kind: str, schema: Schema) -> list[Schema]:
    status = schema["properties"].get("status", {}).get("properties", {})
    columns: list[Schema] = [dict(c) for c in KIND_COLUMNS.get(kind, ())]
    if "phase" in status:
        columns.append({"name": "Phase", "type": "string", "jsonPath": ".status.phase"})
    if "type" in status.get("activeOperation", {}).get("properties", {}):
        columns.append(
            {"name": "Operation", "type": "string", "jsonPath": ".status.activeOperation.type"}
        )
    if "name" in status.get("plan", {}).get("properties", {}):
        columns.append({"name": "Plan", "type": "string", "jsonPath": ".status.plan.name"})
    if "phase" in status and "conditions" in status:
        # kstatus conditions, read the way kubectl wait and GitOps tools read them.
        for name, condition in (("Approval Needed", "ApprovalRequired"), ("Ready", "Ready")):
            columns.append(_condition(name, condition))
    if "name" in status.get("applied", {}).get("properties", {}):
        columns.append(
            {"name": "Last Applied", "type": "string", "jsonPath": ".status.applied.name"}
        )
    if "finishedAt" in status.get("lastRun", {}).get("properties", {}):
        columns.append(
            {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun.finishedAt"}
        )
    # Declaring any column removes the default Age column, so it is declared too.
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return columns


def _family_category(kind: str) -> list[str]:
    return [c for family, c in FAMILY_CATEGORY.items() if kind.startswith(family)]


def crd_for(kind: str) -> Schema:
    """The CustomResourceDefinition of one kind."""
    model = MODELS[kind]
    resource: Resource = BY_KIND[kind]
    has_status_field = "status" in model.model_fields
    # The status subresource is what lets RBAC and admission tell a status write
    # from a spec write; a kind whose model and resource disagree about having one
    # would be guarded on one side and open on the other.
    if has_status_field != resource.has_status:
        raise CRDError(
            f"{kind}: the model {'has' if has_status_field else 'has no'} status, but "
            f"jobclaim.apiserver says has_status={resource.has_status}"
        )
    schema = structural_schema(model)
    version: Schema = {"name": VERSION, "served": True, "storage": True}
    if resource.has_status:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = _printer_columns(kind, schema)
    version["schema"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{resource.plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "ptah-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": resource.plural,
                "singular": kind.lower(),
                **({"shortNames": list(SHORT_NAMES[kind])} if kind in SHORT_NAMES else {}),
                "categories": [CATEGORY, *_family_category(kind)],
            },
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [version],
        },
    }


_GENERATED: Final = f"{GROUP}_*.yaml"


def file_name(kind: str) -> str:
    return f"{GROUP}_{BY_KIND[kind].plural}.yaml"


class _PlainDumper(yaml.SafeDumper):
    """Writes a value shared by two places twice rather than as an anchor and alias.

    Inlined definitions share their lists (an enum reached through two fields);
    anchors would be valid YAML, but a reader of a CRD should not chase them.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(crd: Schema) -> str:
    """The file text: a header, then the CRD as block YAML in the generator's key order."""
    body = yaml.dump(crd, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, width=100)
    return HEADER + body


def crds() -> dict[str, str]:
    """Every CRD file, by file name."""
    # A rule for a model no kind contains would be a twin that guards nothing,
    # most likely left behind by a rename.
    reached = {name for model in MODELS.values() for name in _json_schema(model).get("$defs", {})}
    unreached = sorted(m.__name__ for m in CROSS_FIELD_RULES if m.__name__ not in reached)
    if unreached:
        raise CRDError(f"CROSS_FIELD_RULES names models no kind contains: {unreached}")
    return {file_name(kind): render(crd_for(kind)) for kind in KINDS}


def _stale(directory: Path, expected: Mapping[str, str]) -> list[str]:
    problems: list[str] = []
    present = {p.name for p in directory.glob(_GENERATED)} if directory.is_dir() else set()
    for name in sorted(present - set(expected)):
        problems.append(f"{directory / name}: no model generates it")
    for name, text in sorted(expected.items()):
        path = directory / name
        if name not in present:
            problems.append(f"{path}: missing")
            continue
        current = path.read_text()
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(), text.splitlines(), str(path), "generated", lineterm="", n=1
            )
            problems.append("\n".join(list(diff)[:40]))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobclaim.crds", description="Generate the operator.ptah.run CRDs."
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="write the CRD files into this directory")
    mode.add_argument("--check", type=Path, help="exit 1 if this directory is not up to date")
    args = parser.parse_args(argv)
    try:
        expected = crds()
    except CRDError as error:
        print(f"cannot generate the CRDs: {error}", file=sys.stderr)
        return 1
    if args.check is not None:
        problems = _stale(args.check, expected)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print(f"regenerate with: python -m jobclaim.crds --out {args.check}", file=sys.stderr)
        return 1 if problems else 0
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    # Only files this generator names are removed: the directory may hold others.
    for stale in sorted({p.name for p in out.glob(_GENERATED)} - set(expected)):
        (out / stale).unlink()
        print(f"removed {out / stale}")
    for name, text in expected.items():
        (out / name).write_text(text)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
