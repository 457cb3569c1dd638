"""The base every wire and CRD model shares: camelCase on the wire, strict decoding.

Strict means an unknown field is refused rather than dropped. A field this code does
not know may carry a rule it does not enforce, so accepting the object while ignoring
the field would admit or act on something nobody reviewed.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from jobclaim.times import RFC3339

GROUP: Final = "operator.ptah.run"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

_ACRONYMS: Final = {"id": "ID", "uid": "UID", "ids": "IDs", "uids": "UIDs"}


def to_wire_name(name: str) -> str:
    """``job_uid`` -> ``jobUID``, ``operation_id`` -> ``operationID``, ``id`` -> ``id``.

    Kubernetes spells identifier suffixes in capitals; a generic camelCase converter
    would produce ``jobUid``, which the API server and every other client would read
    as a different field.
    """
    head, *rest = name.split("_")
    return head + "".join(_ACRONYMS.get(part, part[:1].upper() + part[1:]) for part in rest)


class WireModel(BaseModel):
    """Strict, camelCase, immutable once decoded."""

    model_config = ConfigDict(
        alias_generator=to_wire_name,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        strict=False,
        validate_default=True,
        # NaN and infinities have no JSON spelling, so no digest could cover them.
        allow_inf_nan=False,
        # A field's docstring is its description in the CRD, so `kubectl explain`
        # says what the model says, from one text.
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict the API server stores: camelCase, no unset optionals."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# Times stay the exact strings the API server wrote: a parsed and re-rendered time
# can change spelling ("Z" vs "+00:00"), and a changed spelling is a changed object.
Timestamp = Annotated[str, StringConstraints(pattern=RFC3339.pattern)]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Epoch = Annotated[str, StringConstraints(pattern=r"^v1-[0-9a-f]{32}$")]
PinnedImage = Annotated[str, StringConstraints(pattern=r"^[^\s@]+@sha256:[0-9a-f]{64}$")]
Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]
Uid = Annotated[str, StringConstraints(min_length=1, max_length=128)]
PositiveInt32 = Annotated[int, Field(ge=1, le=2**31 - 1)]
