"""Who may write on the controller-write route, which writes exist, and the strict,
complete decoding of the review: a real API server's request is judged, a malformed
one is a 400 naming its field, and nothing malformed is ever admitted."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, get_args
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from jobclaim.apiserver import JOBS, Resource
from tests.support.examples import examples
from tests.support.webhookscenes import (
    Obj,
    Scene,
    decide,
    job_cleanup,
    job_create,
    migration_plan_create,
    plan_chunk_create,
    projection_create,
    schema_plan_create,
)
from tests.webhook.tables import Change, Row, expect, unchanged
from webhook import StateReader, objects, review
from webhook import controllerwrite as cw
from webhook.rules import Malformed

MANAGER = "system:serviceaccount:ptah-system:ptah-operator"


def job(scene: Scene) -> Obj:
    assert scene.obj is not None
    return scene.obj


def user(name: str, *groups: str) -> Any:
    def change(scene: Scene) -> None:
        scene.username, scene.groups = name, groups

    return change


def request(**fields: Any) -> Any:
    return lambda scene: scene.extra.update(fields)


def deleting_request(scene: Scene) -> None:
    scene.operation, scene.old, scene.obj = "DELETE", scene.obj, None


def as_operation(operation: str) -> Any:
    def change(scene: Scene) -> None:
        scene.operation = operation
        if operation == "UPDATE":
            scene.old = scene.obj

    return change


IDENTITY_ROWS = [
    Row("the manager creating its claim's Job", unchanged, None),
    Row("a person", user("jane@example.com"), cw.NOT_MANAGER),
    Row("an administrator in system:masters", user("admin", "system:masters"), cw.NOT_MANAGER),
    Row(
        "another service account of the manager's namespace",
        user("system:serviceaccount:ptah-system:default", "system:serviceaccounts:ptah-system"),
        cw.NOT_MANAGER,
    ),
    Row("the manager's name padded", user(MANAGER + " "), cw.NOT_MANAGER),
    Row("the manager's name in capitals", user(MANAGER.upper()), cw.NOT_MANAGER),
    Row("the manager, without its groups", user(MANAGER), None),
    Row("a subresource", lambda s: setattr(s, "subresource", "status"), cw.SUBRESOURCE),
    Row("a request subresource", request(requestSubResource="status"), cw.SUBRESOURCE),
    Row(
        "a Secret",
        request(resource={"group": "", "version": "v1", "resource": "secrets"}),
        cw.OUTSIDE,
        "v1/secrets",
    ),
    Row(
        "a PtahSchema",
        request(
            resource={
                "group": "operator.ptah.run",
                "version": "v1alpha1",
                "resource": "ptahschemas",
            }
        ),
        cw.OUTSIDE,
    ),
    Row(
        "Jobs of another version",
        request(resource={"group": "batch", "version": "v2", "resource": "jobs"}),
        cw.OUTSIDE,
    ),
    Row("a Job delete", deleting_request, cw.JOB_VERBS, "DELETE"),
    Row("a Job connect", as_operation("CONNECT"), cw.JOB_VERBS, "CONNECT"),
]


@pytest.mark.parametrize("row", IDENTITY_ROWS, ids=str)
def test_only_the_manager_and_only_the_contracted_writes(row: Row) -> None:
    expect(row, job_create("schema", "Plan"))


@pytest.mark.parametrize(
    ("scene", "operation", "refusal"),
    [
        (projection_create, "UPDATE", cw.CONFIGMAP_VERBS),
        (schema_plan_create, "UPDATE", cw.SCHEMA_PLAN_VERBS),
        (plan_chunk_create, "UPDATE", cw.CHUNK_VERBS),
        (migration_plan_create, "UPDATE", cw.MIGRATION_PLAN_VERBS),
    ],
)
def test_every_other_verb_is_refused_by_name(scene: Any, operation: str, refusal: Any) -> None:
    expect(Row(operation, as_operation(operation), refusal, operation), scene())


def renamed(scene: Scene) -> None:
    scene.extra["name"] = "ptah-plan-something-else"


DECODING_ROWS = [
    Row(
        "the exact Job, with status {} as the API server sends it",
        lambda s: job(s).update(status={}),
        None,
    ),
    Row(
        "a review of another kind",
        request(kind={"group": "", "version": "v1", "kind": "ConfigMap"}),
        objects.KIND_MISMATCH,
    ),
    Row(
        "a request converted from another version",
        request(requestKind={"group": "batch", "version": "v1beta1", "kind": "Job"}),
        objects.CONVERTED,
    ),
    Row(
        "a request made against an equivalent resource",
        request(requestResource={"group": "extensions", "version": "v1", "resource": "jobs"}),
        objects.CONVERTED,
    ),
    Row("a request naming another object", renamed, objects.NOT_NAMED),
    Row("a request in another namespace", request(namespace="elsewhere"), objects.NOT_NAMED),
    Row("a request with no name", request(name=""), objects.NOT_NAMED),
    Row(
        "an object of another apiVersion",
        lambda s: job(s).update(apiVersion="batch/v2"),
        objects.OBJECT_KIND,
        "request.object is not a Job of batch/v1",
    ),
    Row(
        "a create carrying an oldObject",
        lambda s: setattr(s, "old", s.obj),
        objects.CREATE_WITH_OLD,
    ),
    Row(
        "a Job with an unknown top-level field",
        lambda s: job(s).update(shadow=1),
        objects.UNDECODABLE,
        "shadow",
    ),
    Row(
        "a Job whose spec is not an object",
        lambda s: job(s).update(spec=[]),
        objects.UNDECODABLE,
        "spec",
    ),
    Row(
        "a label that is not a string",
        lambda s: job(s)["metadata"]["labels"].update(team=1),
        objects.UNDECODABLE,
        "request.object.metadata.labels.team",
    ),
]


@pytest.mark.parametrize("row", DECODING_ROWS, ids=str)
def test_the_object_is_the_one_the_request_names_decoded_strictly(row: Row) -> None:
    expect(row, job_create("schema", "Plan"))


def test_a_create_without_an_object_is_malformed() -> None:
    scene = job_create("schema", "Plan")
    body = scene.review()
    body["request"]["object"] = None
    outcome = judge_raw(json.dumps(body).encode())
    assert (outcome.http_status, outcome.decision.message) == (
        400,
        "the create request carries no object",
    )


# -- the review itself ---------------------------------------------------------------------


def judge_raw(body: bytes) -> Any:
    return decide(_RawScene(body))


class _RawScene(Scene):
    """``base`` (a schema Plan Job create by default) answering with ``body`` as is."""

    def __init__(self, body: bytes, base: Scene | None = None) -> None:
        base = base or job_create("schema", "Plan")
        super().__init__(**{k: getattr(base, k) for k in base.__dataclass_fields__})
        self._raw = body

    def body(self) -> bytes:
        return self._raw


def base_review() -> Obj:
    return job_create("schema", "Plan").review()


def minimal(review_body: Obj) -> Obj:
    """What an API server that omits every empty field sends."""
    request_body = review_body["request"]
    for optional in ("requestKind", "requestResource", "dryRun", "options", "oldObject"):
        del request_body[optional]
    request_body["userInfo"] = {"username": request_body["userInfo"]["username"]}
    for gv in (request_body["kind"], request_body["resource"]):
        if gv["group"] == "":
            del gv["group"]
    return review_body


def test_a_real_request_with_every_field_is_judged() -> None:
    outcome = judge_raw(json.dumps(base_review()).encode())
    assert outcome.decision.allowed
    assert outcome.body()["response"]["uid"] == base_review()["request"]["uid"]


def test_a_real_request_omitting_empty_fields_is_judged() -> None:
    assert judge_raw(json.dumps(minimal(base_review())).encode()).decision.allowed
    core = projection_create()
    assert decide(_Body(core, minimal(core.review()))).decision.allowed


def at(path: str, value: Any) -> Any:
    def change(body: Obj) -> None:
        target = body
        *parents, last = path.split(".")
        for part in parents:
            target = target[part]
        target[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (at("shadow", 1), "unknown field shadow"),
        (at("request.shadow", 1), "unknown field request.shadow"),
        (at("request.userInfo.shadow", 1), "unknown field request.userInfo.shadow"),
        (at("request.kind.shadow", 1), "unknown field request.kind.shadow"),
        (at("request.options.shadow", 1), "unknown field request.options.shadow"),
        (
            at("request.options.preconditions", {"uid": "u", "x": 1}),
            "request.options.preconditions.x",
        ),
        (at("request.dryRun", "false"), "request.dryRun: input should be a valid boolean"),
        (at("request.operation", "PATCH"), "request.operation"),
        (at("apiVersion", "admission.k8s.io/v1beta1"), "apiVersion"),
        (at("request.userInfo.extra", {"k": "not-a-list"}), "request.userInfo.extra.k"),
    ],
)
def test_an_unknown_or_mistyped_review_field_is_a_400_naming_it(change: Any, field: str) -> None:
    body = base_review()
    change(body)
    outcome = judge_raw(json.dumps(body).encode())
    assert (outcome.http_status, outcome.decision.allowed) == (400, False)
    assert field in outcome.decision.message
    assert outcome.body()["response"]["uid"] == body["request"]["uid"]


def duplicated(text: str, key: str, occurrence: int = 0) -> str:
    """``text`` with its ``occurrence``-th ``"key":`` pair written twice."""
    marker = f'"{key}": '
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(marker, start + 1)
    return text[:start] + f'{marker}"shadow", ' + text[start:]


@pytest.mark.parametrize(
    ("key", "occurrence", "path"),
    [
        ("apiVersion", 0, "duplicate field apiVersion"),
        ("uid", 0, "duplicate field request.uid"),
        ("username", 0, "duplicate field request.userInfo.username"),
        ("image", 0, "duplicate field request.object.spec.template.spec.containers[0].image"),
        ("serviceAccountName", 0, "duplicate field request.object.spec.template.spec"),
    ],
)
def test_a_duplicate_key_anywhere_is_a_400_naming_it(key: str, occurrence: int, path: str) -> None:
    text = duplicated(json.dumps(base_review()), key, occurrence)
    outcome = judge_raw(text.encode())
    assert (outcome.http_status, outcome.decision.allowed) == (400, False)
    assert outcome.decision.message.startswith(path), outcome.decision.message


_REVIEW = json.dumps(job_create("schema", "Plan").review()).encode()


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        (b"", review.NOT_JSON),
        (b"{", review.NOT_JSON),
        (b'{"apiVersion": NaN}', review.NOT_JSON),
        (b"\xff\xfe\x00", review.NOT_JSON),
        # What the standard library would read but orjson, the one reading, refuses:
        # none of it is what an API server sends.
        (b"\xef\xbb\xbf" + _REVIEW, review.NOT_JSON),
        (_REVIEW.decode().encode("utf-16"), review.NOT_JSON),
        (_REVIEW.replace(b'"uid": "', b'"uid": "\\ud800', 1), review.NOT_JSON),
        (_REVIEW.replace(b'"generation": 1', b'"generation": 1e400', 1), review.NOT_JSON),
        (b"[" * 100_000 + b"]" * 100_000, review.TOO_DEEP),
        (b" " * (review.MAX_BODY_BYTES + 1), review.TOO_LARGE),
        (b"[]", review.NOT_A_REVIEW),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', review.NOT_A_REVIEW),
    ],
)
def test_what_is_not_a_review_is_a_400(body: bytes, refusal: Any) -> None:
    outcome = judge_raw(body)
    assert (outcome.http_status, outcome.decision.allowed) == (400, False)
    assert outcome.decision.message.startswith(refusal.template.split("{")[0])


def test_a_review_without_a_request_uid_is_a_400() -> None:
    body = base_review()
    body["request"]["uid"] = ""
    outcome = judge_raw(json.dumps(body).encode())
    assert (outcome.http_status, outcome.decision.message) == (400, review.NO_UID.template)


def test_an_update_sent_for_a_patch_is_judged_as_an_update() -> None:
    """A PATCH reaches admission as UPDATE with the options of an update."""
    scene = job_cleanup("schema", "Plan")
    body = scene.review()
    body["request"]["options"] = {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "UpdateOptions",
        "fieldManager": "ptah-operator",
        "fieldValidation": "Strict",
    }
    assert decide(_Body(scene, body)).decision.allowed


class _Body(Scene):
    def __init__(self, base: Scene, body: Obj) -> None:
        super().__init__(**{k: getattr(base, k) for k in base.__dataclass_fields__})
        self._body = body

    def body(self) -> bytes:
        return json.dumps(self._body).encode()


def test_the_jobs_route_is_the_batch_v1_resource() -> None:
    assert cw.ROUTES[("batch", "v1", "jobs")].resource == JOBS


# -- Reading the JSON: counting quotes settles the common case, reading pair by pair the
# rest. The oracle is the generated document itself, not either reader.


class Pairs(list[tuple[str, Any]]):
    """A JSON object as written: its pairs in order, a key possibly repeated."""


class Text(str):
    """A string and how it is written: as is, ASCII-escaped, or every character escaped."""

    spelling: str

    @classmethod
    def spelled(cls, text: str, spelling: str) -> Text:
        written = cls(text)
        written.spelling = spelling
        return written


def texts(choices: list[str]) -> st.SearchStrategy[Text]:
    spellings = st.sampled_from(["as is", "ascii", "escaped"])
    return st.builds(Text.spelled, st.sampled_from(choices), spellings)


TRICKY = ["", ":", '":', '"', "\\", "x y", " ", "é", "\u2028", "\n", "a"]
KEYS = texts(["a", "b", "", ":", ":a", "a:", " a", 'q"', "\\", "é", "\u2028"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), texts(TRICKY))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.lists(st.tuples(KEYS, inner), max_size=4).map(Pairs)
    ),
    max_leaves=24,
)
OBJECTS = st.lists(st.tuples(KEYS, VALUES), max_size=5).map(Pairs)
# How the document is laid out: the item separator and the key separator.
LAYOUTS = st.tuples(
    st.sampled_from([",", ", ", " , ", ",\n  "]), st.sampled_from([":", ": ", " :", "\t:\t"])
)


def write(value: Any, layout: tuple[str, str]) -> str:
    item, colon = layout
    if isinstance(value, Pairs):
        pairs = (write(k, layout) + colon + write(v, layout) for k, v in value)
        return "{" + item.join(pairs) + "}"
    if isinstance(value, list):
        return "[" + item.join(write(v, layout) for v in value) + "]"
    if isinstance(value, Text) and value.spelling == "escaped":
        return '"' + "".join(f"\\u{ord(c):04x}" for c in value) + '"'
    ascii_only = isinstance(value, Text) and value.spelling == "ascii"
    return json.dumps(value, ensure_ascii=ascii_only)


def repeats(value: Any) -> bool:
    if isinstance(value, Pairs):
        keys = [k for k, _ in value]
        return len(set(keys)) != len(keys) or any(repeats(v) for _, v in value)
    return isinstance(value, list) and any(repeats(v) for v in value)


def plain(value: Any) -> Any:
    if isinstance(value, Pairs):
        return {str(k): plain(v) for k, v in value}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, Text) else value


def with_object(document: str) -> bytes:
    """The Job-create review with ``document`` written in as its object."""
    body = job_create("schema", "Plan").review()
    body["request"]["object"] = "<object>"
    return json.dumps(body).replace('"<object>"', document).encode()


def without_the_pair_reader() -> Any:
    return mock.patch.object(
        review, "_pairs_exactly", side_effect=AssertionError("read pair by pair")
    )


@settings(max_examples=examples(250), deadline=None)
@given(document=OBJECTS, layout=LAYOUTS)
def test_a_repeated_key_is_found_however_the_json_is_written(
    document: Pairs, layout: tuple[str, str]
) -> None:
    body = with_object(write(document, layout))
    if repeats(document):
        with pytest.raises(Malformed) as refused:
            review.parse_review(body)
        assert refused.value.message.startswith("duplicate field")
        return
    # Counting settles every body that repeats nothing: no object is read pair by pair.
    with without_the_pair_reader():
        parsed = review.parse_review(body)
    assert parsed.request.object == plain(document)


@pytest.mark.parametrize(
    "scene",
    [job_create("schema", op) for op in ("Plan", "Apply", "Verify")]
    + [job_create("migration", op) for op in ("Apply", "Verify")],
    ids=["schema-Plan", "schema-Apply", "schema-Verify", "migration-Apply", "migration-Verify"],
)
def test_a_job_create_review_is_read_without_reading_pair_by_pair(scene: Scene) -> None:
    """Both as this suite writes it and as an API server sends it: compact, with a
    trailing newline and managedFields, whose keys hold escaped quotes."""
    body = scene.review()
    body["request"]["object"]["metadata"]["managedFields"] = [MANAGED_FIELDS]
    as_sent = json.dumps(body, separators=(",", ":")).encode() + b"\n"
    assert b'\\"' in as_sent
    with without_the_pair_reader():
        assert decide(scene).decision.allowed
        assert decide(_RawScene(as_sent, scene)).decision.allowed


MANAGED_FIELDS = {
    "manager": "ptah-operator",
    "operation": "Update",
    "apiVersion": "batch/v1",
    "time": "2026-12-02T12:00:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {
        "f:metadata": {"f:ownerReferences": {".": {}, 'k:{"uid":"schema-uid-1"}': {}}},
        "f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"ptah"}': {}}}}},
    },
}


# -- Wire names only. The models accept a Python field name too (``populate_by_name``,
# so code can build them by name), but an API server never sends ``user_info`` for
# ``userInfo``: every decode of wire input reads the wire names alone, and a Python
# name is an unknown field, named as sent. Each row would be admitted (or read as
# something else) if the Python name were accepted.


@dataclass
class Edited(Scene):
    """A scene whose review is edited as JSON once written: a key renamed or added."""

    edits: list[Callable[[Obj], None]] = field(default_factory=list)

    @classmethod
    def of(cls, base: Scene) -> Edited:
        return cls(**{k: getattr(base, k) for k in base.__dataclass_fields__})

    def review(self) -> Obj:
        body = super().review()
        for edit in self.edits:
            edit(body)
        return body


def rename(mapping: Obj, key: str, to: str) -> None:
    """``mapping`` with ``key`` spelled ``to``, in the same place."""
    assert key in mapping, key
    pairs = [(to if k == key else k, v) for k, v in mapping.items()]
    mapping.clear()
    mapping.update(pairs)


def in_request(key: str, to: str) -> Change:
    def change(scene: Scene) -> None:
        assert isinstance(scene, Edited)
        scene.edits.append(lambda body: rename(body["request"], key, to))

    return change


def added_to_request(key: str, value: Any) -> Change:
    def change(scene: Scene) -> None:
        assert isinstance(scene, Edited)
        scene.edits.append(lambda body: body["request"].update({key: value}))

    return change


def stored_owner_status(key: str, to: str) -> Change:
    return lambda scene: rename(scene.find("PtahSchema")["status"], key, to)


WIRE_NAME_ROWS = [
    Row("the review with every key spelled as the API server spells it", unchanged, None),
    Row(
        "user_info for userInfo",
        in_request("userInfo", "user_info"),
        review.NOT_A_REVIEW,
        "the review does not decode: unknown field request.user_info;",
    ),
    Row(
        "request_kind for requestKind",
        in_request("requestKind", "request_kind"),
        review.NOT_A_REVIEW,
        "the review does not decode: unknown field request.request_kind",
    ),
    Row(
        "an empty sub_resource",
        added_to_request("sub_resource", ""),
        review.NOT_A_REVIEW,
        "the review does not decode: unknown field request.sub_resource",
    ),
    Row(
        "old_object for oldObject",
        in_request("oldObject", "old_object"),
        review.NOT_A_REVIEW,
        "the review does not decode: unknown field request.old_object",
    ),
    Row(
        "owner_references for ownerReferences in the Job's metadata",
        lambda s: rename(job(s)["metadata"], "ownerReferences", "owner_references"),
        objects.UNDECODABLE,
        "request.object does not decode: unknown field request.object.metadata.owner_references",
    ),
    Row(
        "the stored PtahSchema with active_operation for activeOperation",
        stored_owner_status("activeOperation", "active_operation"),
        objects.STORED_UNDECODABLE,
        "the stored PtahSchema shop/orders does not decode: unknown field status.active_operation",
    ),
]


@pytest.mark.parametrize("row", WIRE_NAME_ROWS, ids=str)
def test_a_python_field_name_in_the_review_is_an_unknown_field(row: Row) -> None:
    outcome = expect(row, Edited.of(job_create("schema", "Plan")))
    if row.refusal is not None and row.refusal.code == 400:
        assert outcome.http_status == 400
        assert outcome.body()["response"]["uid"] == job_create().uid


def plan_spec(scene: Scene) -> Obj:
    assert scene.obj is not None
    spec: Obj = scene.obj["spec"]
    return spec


SCHEMA_PLAN_WIRE_NAME_ROWS = [
    Row("the plan as the harvested Plan Job's rebuild", unchanged, None),
    Row(
        "content_digest for contentDigest in the plan's spec",
        lambda s: rename(plan_spec(s), "contentDigest", "content_digest"),
        objects.UNDECODABLE,
        "request.object does not decode: unknown field request.object.spec.content_digest;",
    ),
    Row(
        "a snake_case key beside its wire name in the plan's spec",
        lambda s: plan_spec(s).update(statement_count=plan_spec(s)["statementCount"]),
        objects.UNDECODABLE,
        "unknown field request.object.spec.statement_count",
    ),
]


@pytest.mark.parametrize("row", SCHEMA_PLAN_WIRE_NAME_ROWS, ids=str)
def test_a_python_field_name_in_an_operator_object_is_an_unknown_field(row: Row) -> None:
    outcome = expect(row, schema_plan_create())
    if row.refusal is not None:
        assert outcome.http_status == 400


class TreeReader:
    """A reader that answers decoded trees only (no ``get_text``), as a client whose
    reads are parsed for it does: the stored object is decoded from the tree."""

    def __init__(self, objects: list[Obj]) -> None:
        self._state = StateReader(objects)

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        return self._state.get(resource, namespace, name)


def test_a_stored_python_field_name_is_refused_from_the_tree_as_from_the_text() -> None:
    scene = job_create("schema", "Plan")
    assert decide(scene, reader=TreeReader(scene.objects)).decision.allowed
    rename(scene.find("PtahSchema")["status"], "activeOperation", "active_operation")
    from_text, from_tree = decide(scene), decide(scene, reader=TreeReader(scene.objects))
    assert from_tree.decision == from_text.decision
    assert from_tree.decision.rule == objects.STORED_UNDECODABLE.rule
    assert "unknown field status.active_operation" in from_tree.decision.message


def review_models(model: type[BaseModel], path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """Each model the review is decoded with, at the path of its JSON object."""
    yield path, model
    for name, info in model.model_fields.items():
        key = info.alias or name
        for inner in (info.annotation, *get_args(info.annotation)):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                yield from review_models(inner, f"{path}.{key}" if path else key)


# Every field of every review model whose Python name is not its wire name.
ALIASED = sorted(
    {
        (path, name, info.alias)
        for path, model in review_models(review.AdmissionReview, "")
        for name, info in model.model_fields.items()
        if info.alias and info.alias != name
    }
)


def aliased_review() -> Obj:
    """A real review holding an object at every path ``ALIASED`` names."""
    body = base_review()
    body["request"]["options"]["preconditions"] = {"uid": "u", "resourceVersion": "1"}
    return body


def test_the_aliased_fields_are_the_ones_a_python_name_could_stand_for() -> None:
    assert judge_raw(json.dumps(aliased_review()).encode()).decision.allowed
    request_fields = {(n, a) for p, n, a in ALIASED if p == "request"}
    assert {("user_info", "userInfo"), ("old_object", "oldObject")} <= request_fields
    assert len(request_fields) == 7, request_fields
    assert {p for p, _, _ in ALIASED} == {
        "",
        "request",
        "request.options",
        "request.options.preconditions",
    }


def at_path(body: Obj, path: str) -> Obj:
    target = body
    for part in filter(None, path.split(".")):
        target = target[part]
    return target


_SAME = object()


@pytest.mark.parametrize(("path", "name", "alias"), ALIASED, ids=lambda v: str(v or "."))
@settings(max_examples=examples(12), deadline=None)
@given(
    keep_alias=st.booleans(),
    first=st.booleans(),
    value=st.one_of(st.just(_SAME), st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
)
def test_sending_a_python_name_for_a_wire_name_is_a_400_naming_it(
    path: str, name: str, alias: str, keep_alias: bool, first: bool, value: Any
) -> None:
    """In place of the wire name or beside it, first or last, whatever its value."""
    body = aliased_review()
    target = at_path(body, path)
    if value is _SAME:
        value = target.get(alias)
    if not keep_alias:
        target.pop(alias, None)
    pairs = list(target.items())
    target.clear()
    target.update([(name, value), *pairs] if first else [*pairs, (name, value)])
    outcome = judge_raw(json.dumps(body).encode())
    where = f"{path}.{name}" if path else name
    assert (outcome.http_status, outcome.decision.allowed) == (400, False)
    assert outcome.decision.rule == review.NOT_A_REVIEW.rule
    assert outcome.decision.message.startswith(
        f"the review does not decode: unknown field {where}"
    ), outcome.decision.message
    assert outcome.body()["response"]["uid"] == body["request"]["uid"]
