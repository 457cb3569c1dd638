"""The envelope's key and value rules, each held to the plain statement of the rule.

``match`` asks these of every Job it holds to an envelope, so they are written for
speed (set operations, string methods instead of regular expressions). Each test
states the rule the simple way and requires the fast spelling to agree on every input,
including the awkward ones: unicode digits and spaces, control characters, claimed
values of None, keys that only look reserved.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jobclaim._canonical import (
    CANONICAL_POSITIVE_INT,
    INT32_MAX,
    PINNED_IMAGE_PATTERN,
    is_canonical_positive_int32,
    is_clean_text,
)
from jobclaim.envelope import (
    ANN_CONTROLLER_IMAGE,
    ANN_CONTROLLER_REVISION,
    ANN_PTAH_VERSION,
    ANN_STATE_VERSION,
    LABEL_OPERATION,
    MANAGER_RECORD_KEYS,
    MAX_DECLARED_KEYS,
    claimed_labels,
    claimed_metadata_problem,
    is_reserved_key,
)
from jobclaim.match import manager_record_problem
from tests.support.examples import examples

RESERVED_DOMAINS = ("ptah.run/", "kubernetes.io/", "k8s.io/")
# A no-break space, a line separator, Arabic-Indic and full-width three, é, superscript two.
NON_ASCII = ["\u00a0", "\u2028", "\u0663", "\uff13", "\u00e9", "\u00b2"]
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

LOOKALIKES = [".", "/", "a", "x.", "ptah.run", "k8s.io", "run/", "io/", "s.io/", "-", "\n"]
key_fragments = st.sampled_from(
    [*RESERVED_DOMAINS, *LOOKALIKES, "controller-uid", "job-name", "team"]
)
keys = st.lists(key_fragments, max_size=5).map("".join)
texts = st.text(
    alphabet=st.sampled_from([*"0139a-+. _", "\t", "\n", "\x00", "\x1f", "\x7f", *NON_ASCII])
    | st.characters(),
    max_size=12,
)


def reserved_by_rule(key: str) -> bool:
    return key in ("controller-uid", "job-name") or any(
        key.startswith(d) or ("." + d) in key for d in RESERVED_DOMAINS
    )


@given(keys)
@example("team")
@example("app.kubernetes.io/name")
@example("example.com/k8s.io")
@example("kubernetes.io")
def test_a_reserved_key_is_a_reserved_domain_as_prefix_or_subdomain(key: str) -> None:
    assert is_reserved_key(key) == reserved_by_rule(key)


def problem_by_rule(actual: dict[str, str | None], claimed: dict[str, str | None]) -> str | None:
    differing = sorted(k for k, v in claimed.items() if actual.get(k) != v)
    if differing:
        return f"{differing[0]} is not the claim's value"
    others = sorted(k for k in actual if k not in claimed)
    for key in others:
        if reserved_by_rule(key):
            return f"{key} is a reserved key the claim does not fix"
    if len(others) > MAX_DECLARED_KEYS:
        return (
            f"{len(others)} declared keys exceed the {MAX_DECLARED_KEYS} "
            "spec.execution.podMetadata allows"
        )
    return None


values = st.sampled_from(["v", "w", ""])
maps = st.dictionaries(keys, values, max_size=20)


@settings(max_examples=examples(400))
@given(maps, st.dictionaries(keys, values | st.none(), max_size=6), st.data())
def test_claimed_metadata_is_judged_by_its_rule(
    extra: dict[str, str], claimed: dict[str, str | None], data: st.DataObject
) -> None:
    # Most Jobs carry what is claimed, so start from that and let the draw change it.
    actual: dict[str, str | None] = {k: v for k, v in claimed.items() if v is not None}
    if data.draw(st.booleans()):
        actual.update(extra)
    assert claimed_metadata_problem(actual, claimed) == problem_by_rule(actual, claimed)  # type: ignore[arg-type]


def test_seventeen_declared_keys_are_one_too_many() -> None:
    claimed = {"operator.ptah.run/operation": "apply"}
    actual = {**claimed, **{f"k{i}": "v" for i in range(MAX_DECLARED_KEYS)}}
    assert claimed_metadata_problem(actual, claimed) is None
    actual["k-last"] = "v"
    assert claimed_metadata_problem(actual, claimed) == problem_by_rule(actual, claimed)  # type: ignore[arg-type]


def utf8_size(value: str) -> int | None:
    """The UTF-8 size of ``value``, or None when it has no UTF-8 form (a lone surrogate)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def clean_by_rule(value: object, limit: int) -> bool:
    if not isinstance(value, str):
        return False
    size = utf8_size(value)
    return (
        bool(value)
        and value == value.strip()
        and size is not None
        and size <= limit
        and CONTROL.search(value) is None
    )


@given(texts | st.none() | st.integers(), st.sampled_from([1, 3, 8, 128]))
@example("x" * 128, 128)
@example("x" * 129, 128)
@example("\ud800", 8)
@example("\u00e9" * 64, 128)
@example("\u00e9" * 65, 128)
@example("r\x7f1", 128)
def test_clean_text_is_its_rule(value: object, limit: int) -> None:
    assert is_clean_text(value, limit=limit) == clean_by_rule(value, limit)


@given(texts | st.integers().map(str) | st.none())
@example("2147483647")
@example("2147483648")
@example("9999999999")
@example("10000000000")
@example("0")
@example("01")
@example("+1")
@example("1\n")
@example("\uff13")
@example("1_0")
def test_a_canonical_positive_int32_is_the_pattern(value: str | None) -> None:
    by_pattern = (
        isinstance(value, str)
        and CANONICAL_POSITIVE_INT.fullmatch(value) is not None
        and int(value) <= INT32_MAX
    )
    assert is_canonical_positive_int32(value) == by_pattern


def record_problem_by_rule(annotations: dict[str, object]) -> str | None:
    image = annotations.get(ANN_CONTROLLER_IMAGE)
    if not (isinstance(image, str) and PINNED_IMAGE_PATTERN.fullmatch(image)):
        return "the Job's controller image is not pinned by a lowercase SHA-256 digest"
    if not clean_by_rule(annotations.get(ANN_CONTROLLER_REVISION), 128):
        return "the Job's controller revision is invalid: empty, padded, too long or not text"
    state = annotations.get(ANN_STATE_VERSION)
    if not (
        isinstance(state, str)
        and CANONICAL_POSITIVE_INT.fullmatch(state)
        and int(state) <= INT32_MAX
    ):
        return "the Job's controller state version is not a canonical positive integer"
    if not clean_by_rule(annotations.get(ANN_PTAH_VERSION), 128):
        return "the Job's data-plane version is empty or ambiguous"
    return None


PINNED = "registry.example.com/ptah-operator@sha256:" + "2" * 64
# JSON can spell any of these as an annotation value; the memo must neither confuse
# two of them that Python calls equal (3 and "3", 1 and True) nor fail on a list.
record_values = st.one_of(
    st.sampled_from([PINNED, PINNED.upper(), "r1", " r1", "3", "03", "1.9.0", ""]),
    st.sampled_from([3, 1, True, 1.0, None, ["3"], {"v": "3"}]),
    texts,
)


@settings(max_examples=examples(300))
@given(st.lists(st.dictionaries(st.sampled_from(MANAGER_RECORD_KEYS), record_values), max_size=6))
def test_the_manager_record_verdict_is_its_rule_every_time_it_is_asked(
    records: list[dict[str, object]],
) -> None:
    # Each record is asked twice, among others, so the second answer comes from the memo.
    for record in [*records, *records]:
        assert manager_record_problem(record) == record_problem_by_rule(record)


def test_a_claims_labels_are_read_only() -> None:
    labels = claimed_labels("schema", "orders", "Apply", "sha256:" + "a" * 64)
    with pytest.raises(TypeError):
        labels[LABEL_OPERATION] = "plan"  # type: ignore[index]
    assert claimed_labels("schema", "orders", "Apply", "sha256:" + "a" * 64)[LABEL_OPERATION] == (
        "apply"
    )
