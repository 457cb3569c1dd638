"""Comparing Kubernetes objects by what they mean, not how they are spelled.

The API server rewrites some values on the way in (a quantity ``0.5`` comes back as
``500m``), so a byte comparison would refuse a Job the controller itself created.
Everything else is compared exactly, and an absent field is never equal to an empty
one. The API server never stores an empty optional map, list or string (Go's
``omitempty`` drops it, so ``nodeSelector: {}`` is stored as no nodeSelector), and the
builder writes none (``jobclaim.builder``); a Job that carries one anyway was not
written by the builder or stored by an API server, and is not its claim's.

Exactly means as JSON values, with their types (``json_equal``): Python's ``==`` says
``False == 0``, ``True == 1`` and ``900.0 == 900``, so a Job with ``backoffLimit:
false`` or a plan with ``statementCount: 28.0`` would pass for the one its claim
builds. Every comparison of wire values against a rebuild (``match``, and the plan
checks in ``jobclaim.plans``) goes through this one rule; none may depend on an API
server refusing such a value before admission sees it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from jobclaim._canonical import canonical_json

_QUANTITY: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Maps whose values are quantities, and scalar keys that hold one.
QUANTITY_MAPS: Final = frozenset({"limits", "requests", "overhead"})
QUANTITY_SCALARS: Final = frozenset({"sizeLimit"})


def quantity_value(text: str) -> Fraction | None:
    """The exact value of a Kubernetes quantity, or None when ``text`` is not one."""
    found = _QUANTITY.fullmatch(text)
    if found is None:
        return None
    value = Fraction(found["number"])
    suffix = found["suffix"] or ""
    if suffix in _BINARY:
        value *= 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    elif suffix:
        value *= Fraction(10) ** int(suffix[1:])
    return -value if found["sign"] == "-" else value


@functools.lru_cache(maxsize=4096)
def canonical_quantity(text: str) -> str:
    """A spelling-free form of a quantity for digests: ``q:<numerator>/<denominator>``.

    Text that is not a quantity is returned unchanged, so a malformed value still
    changes the digest rather than being folded into a valid one.
    """
    value = quantity_value(text)
    if value is None:
        return text
    return f"q:{value.numerator}/{value.denominator}"


def _json_kind(value: Any) -> type:
    """The JSON type of a decoded value: bool, int and float are three, never one."""
    if isinstance(value, Mapping):
        return dict
    if isinstance(value, list | tuple):
        return list
    return type(value)


def json_equal(left: Any, right: Any) -> bool:
    """Whether two decoded JSON values are the same value of the same type at every node.

    Compared by their canonical JSON bytes (sorted keys, so key order never counts),
    which spell ``false``, ``0``, ``0.0`` and ``"0"`` differently; a value with no
    canonical form (an integer beyond 64 bits) is compared node by node instead.
    """
    try:
        return canonical_json(left) == canonical_json(right)
    except ValueError:
        pass
    if _json_kind(left) is not _json_kind(right):
        return False
    if isinstance(left, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(json_equal, left, right))
    return bool(left == right)


def _equal_quantities(left: Any, right: Any) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        a, b = quantity_value(left), quantity_value(right)
        return a is not None and a == b
    return False


def semantic_equal(left: Any, right: Any, *, key: str = "") -> bool:
    """Equal by meaning: quantities by value, everything else exactly (``json_equal``),
    absent != empty."""
    if json_equal(left, right):
        return True
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        if left.keys() != right.keys():
            return False
        if key in QUANTITY_MAPS:
            return all(
                json_equal(left[k], right[k]) or _equal_quantities(left[k], right[k]) for k in left
            )
        return all(semantic_equal(left[k], right[k], key=k) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            semantic_equal(a, b, key=key) for a, b in zip(left, right, strict=True)
        )
    if key in QUANTITY_SCALARS:
        return _equal_quantities(left, right)
    return False


def _canonical_map(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    # A loop, not a comprehension: the maps hold one to three quantities, and a
    # comprehension's own call costs more than that many iterations.
    out = {}
    for key, item in value.items():
        out[key] = canonical_quantity(item) if isinstance(item, str) else item
    return out


def _canonical_container(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return container
    canonical = {}
    for key, value in resources.items():
        canonical[key] = _canonical_map(value)
    copy = dict(container)
    copy["resources"] = canonical
    return copy


def _canonical_volume(volume: Any) -> Any:
    empty_dir = volume.get("emptyDir") if isinstance(volume, dict) else None
    if not isinstance(empty_dir, dict) or not isinstance(empty_dir.get("sizeLimit"), str):
        return volume
    return {
        **volume,
        "emptyDir": {**empty_dir, "sizeLimit": canonical_quantity(empty_dir["sizeLimit"])},
    }


_CONTAINER_LISTS: Final = ("containers", "initContainers", "ephemeralContainers")


def pod_spec_with_canonical_quantities(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of a Pod spec with every quantity in a spelling-free form.

    Quantities live in exactly these places of a Pod spec: container and init
    container resources, the RuntimeClass overhead and emptyDir size limits. Only
    those paths are copied, which keeps the digest cheap enough to take per request.
    """
    out = dict(spec)
    for key in _CONTAINER_LISTS:
        containers = out.get(key)
        if isinstance(containers, list):
            out[key] = list(map(_canonical_container, containers))
    if "overhead" in out:
        out["overhead"] = _canonical_map(out["overhead"])
    volumes = out.get("volumes")
    if isinstance(volumes, list):
        out["volumes"] = list(map(_canonical_volume, volumes))
    return out
