"""A small Kubernetes structural-schema checker and validator, for the generated CRDs.

Two questions, each answered with a list of sentences (empty means yes):

- ``structural_problems(schema)``: would the API server accept this
  ``openAPIV3Schema`` as structural? These are the rules of the Kubernetes
  "structural schema" section, made a little stricter where the generator never
  needs the latitude (no ``allOf``/``anyOf``/``oneOf``/``not`` at all).
- ``validate(schema, value)``: would it accept this object under strict field
  validation (what ``kubectl apply`` does by default)? Unknown fields are
  errors, as are wrong types, and every constraint the generator emits.

``defaulted(schema, value)`` applies the schema's defaults the way the API server
does before it validates or stores an object: a field that is absent takes its
default, in every object that is present (a default object is then defaulted in
turn), and so in list items and map values.

CEL rules (``x-kubernetes-validations``) are only checked for shape here; the
API server evaluates them, and the real-API tests exercise them.

No dependency was added for this: the venv has no JSON Schema library, and the
subset the generator emits is small enough to check completely.
"""

from __future__ import annotations

import copy
import re
from typing import Any

Schema = dict[str, Any]

_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
# Keywords the generator may emit; anything else is a problem to look at.
_KEYWORDS = {
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "default",
}


def structural_problems(schema: Schema) -> list[str]:
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append("the root is not `type: object`")
    metadata = schema.get("properties", {}).get("metadata")
    if metadata is not None and metadata != {"type": "object"}:
        problems.append("metadata at the root may only be `type: object`")
    _check_node(schema, "", problems)
    return problems


def _check_node(node: Schema, path: str, problems: list[str]) -> None:
    where = path or "<root>"
    unknown = set(node) - _KEYWORDS
    if unknown:
        problems.append(
            f"{where}: keywords a structural schema here must not use: {sorted(unknown)}"
        )
    kind = node.get("type")
    if kind not in _TYPES:
        problems.append(f"{where}: no valid type ({kind!r})")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties and additionalProperties together")
    if node.get("additionalProperties") is False:
        problems.append(f"{where}: additionalProperties: false is forbidden")
    if kind != "object" and {"properties", "additionalProperties", "required"} & set(node):
        problems.append(f"{where}: object keywords on a {kind}")
    if kind == "array" and not isinstance(node.get("items"), dict):
        problems.append(f"{where}: an array needs one items schema")
    if kind != "array" and "items" in node:
        problems.append(f"{where}: items on a {kind}")
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if preserve is not None and (preserve is not True or kind != "object"):
        problems.append(f"{where}: x-kubernetes-preserve-unknown-fields must be true on an object")
    for name in node.get("required", []):
        if name not in node.get("properties", {}):
            problems.append(f"{where}: requires {name}, which it does not describe")
    for rule in node.get("x-kubernetes-validations", []):
        if not isinstance(rule.get("rule"), str) or not rule["rule"]:
            problems.append(f"{where}: a validation without a rule")
        if "\n" in str(rule.get("message", "")):
            problems.append(f"{where}: a validation message with a line break")
    if "default" in node:
        # The API server refuses a CRD whose default its own schema would refuse.
        for error in validate(node, defaulted(node, node["default"]), path):
            problems.append(f"{where}: the default is invalid: {error}")
    for name, child in node.get("properties", {}).items():
        _check_node(child, f"{path}.{name}", problems)
    if isinstance(node.get("additionalProperties"), dict):
        _check_node(node["additionalProperties"], f"{path}{{}}", problems)
    if isinstance(node.get("items"), dict):
        _check_node(node["items"], f"{path}[]", problems)


def validate(schema: Schema, value: Any, path: str = "") -> list[str]:
    """Every reason the API server would refuse ``value`` under ``schema``."""
    where = path or "<root>"
    kind = schema["type"]
    if not _is_type(value, kind):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if kind == "string":
        errors += _string(schema, value, where)
    elif kind in {"integer", "number"}:
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} is below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} is above {schema['maximum']}")
    elif kind == "array":
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        for index, item in enumerate(value):
            errors += validate(schema["items"], item, f"{path}[{index}]")
    elif kind == "object":
        errors += _object(schema, value, path, where)
    return errors


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    python = {"string": str, "boolean": bool, "object": dict, "array": list}[kind]
    return isinstance(value, python)


def _string(schema: Schema, value: str, where: str) -> list[str]:
    errors: list[str] = []
    if len(value) < schema.get("minLength", 0):
        errors.append(f"{where}: shorter than {schema['minLength']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: longer than {schema['maxLength']}")
    # OpenAPI patterns are unanchored searches; the generated ones anchor themselves.
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    return errors


def _object(schema: Schema, value: dict[str, Any], path: str, where: str) -> list[str]:
    errors: list[str] = []
    if len(value) < schema.get("minProperties", 0):
        errors.append(f"{where}: fewer than {schema['minProperties']} keys")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(f"{where}: more than {schema['maxProperties']} keys")
    for name in schema.get("required", []):
        if name not in value:
            errors.append(f"{where}: {name} is required")
    properties: dict[str, Schema] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        child = f"{path}.{key}"
        if path == "" and key == "metadata":
            # The API server validates ObjectMeta itself; a CRD only says "object".
            if not isinstance(item, dict):
                errors.append(f"{child}: expected object")
        elif key in properties:
            errors += validate(properties[key], item, child)
        elif isinstance(extra, dict):
            errors += validate(extra, item, child)
        elif not schema.get("x-kubernetes-preserve-unknown-fields"):
            errors.append(f'{child}: unknown field "{key}"')
    return errors


def defaulted(schema: Schema, value: Any) -> Any:
    """``value`` with every default ``schema`` declares applied, as the API server does."""
    if isinstance(value, dict) and schema.get("type") == "object":
        out = dict(value)
        for name, child in schema.get("properties", {}).items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = defaulted(child, out[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            out = {k: defaulted(extra, v) for k, v in out.items()}
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [defaulted(schema["items"], item) for item in value]
    return value
