"""Values whose rule the models and the API server both enforce, from one declaration.

A field typed ``GoDuration(low, high)`` or ``Matching(pattern, message)`` is checked
twice: by pydantic when the controller or the webhook decodes it, and by the API
server through the CEL rule (``x-kubernetes-validations``) the same object writes
into the field's JSON Schema, which ``jobclaim.crds`` carries into the CRD. One
declaration, so the API server never stores a value the controller then refuses,
and a user reads one sentence whichever of the two refused it.

CEL is evaluated under a cost budget the API server computes from the schema, so
every value a rule reads is bounded here by a ``maxLength``: an unbounded string
makes even ``matches`` cost as much as the largest request could.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from jobclaim.times import DURATION_PATTERN, parse_duration

VALIDATIONS: Final = "x-kubernetes-validations"
# The duration pattern as a CEL raw-string literal, anchored, for rules that read one.
DURATION_PATTERN_CEL: Final = f"r'^(?:{DURATION_PATTERN})$'"


def _with_rule(schema: JsonSchemaValue, max_length: int, rule: str, message: str) -> None:
    schema["maxLength"] = max_length
    schema[VALIDATIONS] = [*schema.get(VALIDATIONS, []), {"rule": rule, "message": message}]


def _go(seconds: float) -> str:
    """The shortest Go spelling of a whole number of seconds (``86400`` -> ``24h``)."""
    whole = int(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


@dataclass(frozen=True, slots=True)
class GoDuration:
    """A Go duration (``30s``, ``10m``, ``1h30m``) from ``low`` to ``high`` seconds."""

    low: int
    high: int
    example: str
    max_length: int = 32

    @property
    def message(self) -> str:
        return (
            f"must be a duration such as {self.example}, "
            f"from {_go(self.low)} to {_go(self.high)} (units h, m, s, ms)"
        )

    @property
    def rule(self) -> str:
        # `&&` absorbs an error on its right when its left is false, so a string that
        # is no duration is refused with the message instead of a CEL evaluation error.
        return (
            f"self.matches({DURATION_PATTERN_CEL})"
            f" && duration(self) >= duration('{_go(self.low)}')"
            f" && duration(self) <= duration('{_go(self.high)}')"
        )

    def check(self, value: str) -> str:
        if len(value) > self.max_length or not re.fullmatch(DURATION_PATTERN, value):
            raise ValueError(self.message)
        if not self.low <= parse_duration(value) <= self.high:
            raise ValueError(self.message)
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        _with_rule(json_schema, self.max_length, self.rule, self.message)
        return json_schema


@dataclass(frozen=True, slots=True)
class Matching:
    """A string the whole of which matches ``pattern`` (RE2 and Python agree on it)."""

    pattern: str
    message: str
    max_length: int

    def check(self, value: str) -> str:
        if len(value) > self.max_length or not re.fullmatch(self.pattern, value):
            raise ValueError(self.message)
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        rule = f"self.matches(r'^(?:{self.pattern})$')"
        _with_rule(json_schema, self.max_length, rule, self.message)
        return json_schema


# An OCI reference as registries and ptah read one: [scheme][host[:port]/]path[:tag][@digest].
# Host components may carry capitals and dots; path components are lower-case, as the
# distribution spec requires; a digest is SHA-256, the only one the operator pins by.
OCI_REFERENCE: Final = (
    r"(oci://)?"
    r"([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"(:[0-9]{1,5})?/)?"
    r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?"
    r"(@sha256:[0-9a-f]{64})?"
)
OCI_REFERENCE_RULE: Final = Matching(
    OCI_REFERENCE,
    "must be an OCI reference such as registry.example.com/team/schema:1.0 "
    "or registry.example.com/team/schema@sha256:<64 hex digits>",
    max_length=512,
)

# The bounds each duration field is held to. A reading interval under 10s would keep
# a database busy with readings; over a day, drift goes unseen for longer than anyone
# expects of "observed". Lock and connect timeouts are bounded by the longest Job.
INTERVAL: Final = GoDuration(10, 86400, "10m")
RETRY_INTERVAL: Final = GoDuration(1, 3600, "30s")
CONNECT_TIMEOUT: Final = GoDuration(1, 600, "10s")
LOCK_TIMEOUT: Final = GoDuration(1, 3600, "30s")
