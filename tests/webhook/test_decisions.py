"""A person's decisions, stamped by admission (webhook.decisions).

The mutating endpoint overwrites every stamped field from the request; the validating
endpoint refuses a create whose stamp is not its request's, any later change, a
forged spec-writer record and, with four-eyes, the spec's last writer approving.
Every stamped field of every decision kind is tried forged, missing and changed later.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jobclaim.api import SPEC_WRITER_ANNOTATION
from jobclaim.apiserver import PTAHMIGRATIONS, PTAHSCHEMAS
from jobclaim.stamps import REQUEST_UID_FIELD, STAMPED, StampedKind, stamp_problem
from tests.support.webhookscenes import Obj, Scene, decide
from tests.webhook.tables import Row, expect, unchanged
from tests.webhook.writerscene import (
    NAMESPACE,
    NOW,
    PERSON,
    PERSON_GROUPS,
    STAMPED_AT,
    TARGET_UIDS,
    stamp_writer,
    target,
    writer_scene,
)
from webhook import Settings, objects
from webhook import decisions as d
from webhook.__main__ import main as cli
from webhook.explain import endpoint_of, explain_files

PERSON_UID: Final = "9a1e0f4c-0000-4000-8000-00000000000a"  # what Scene.review sends
REQUEST_UID: Final = "3f1c2b7a-0000-4000-8000-000000000001"
FORGED_IDENTITY: Final = {"username": "cto@example.com", "groups": ["system:masters"]}


def decision(kind: StampedKind, *, stamped: bool = True) -> Obj:
    """A decision of ``kind`` naming its target; stamped as this scene's request would be."""
    spec: Obj = {kind.target_field: {"name": "orders", "uid": TARGET_UIDS[kind.target.kind]}}
    if kind.target is PTAHMIGRATIONS:
        spec[kind.target_field]["name"] = "billing"
    digest = "sha256:" + "1" * 64
    if kind.kind in ("PtahSchemaApproval", "PtahMigrationApproval"):
        spec.update(planRef={"name": "plan-1", "uid": "plan-uid-1"}, planFingerprint=digest)
    else:
        spec["operationID" if kind.kind.startswith("PtahMigration") else "applyOperationID"] = (
            "op-1"
        )
    if stamped:
        spec.update(
            {
                kind.identity_field: {
                    "username": PERSON,
                    "uid": PERSON_UID,
                    "groups": list(PERSON_GROUPS),
                },
                kind.time_field: STAMPED_AT,
                REQUEST_UID_FIELD: REQUEST_UID,
            }
        )
    return {
        "apiVersion": "operator.ptah.run/v1alpha1",
        "kind": kind.kind,
        "metadata": {"name": "decision-1", "namespace": NAMESPACE},
        "spec": spec,
    }


def create(kind: StampedKind, *, four_eyes: bool = False, writer: str | None = "bob") -> Scene:
    """A person creates a decision; ``four_eyes`` is the webhook's configuration (the
    chart's approvals.requireDistinctApprover), never the target's spec."""
    return Scene(
        kind.resource,
        "CREATE",
        decision(kind),
        [target(kind, writer=writer)],
        username=PERSON,
        groups=PERSON_GROUPS,
        now=NOW,
        require_distinct_approver=four_eyes,
    )


def update(kind: StampedKind) -> Scene:
    old = decision(kind)
    old["metadata"].update(uid="decision-uid", creationTimestamp=STAMPED_AT, generation=1)
    scene = create(kind)
    scene.operation, scene.old, scene.obj = "UPDATE", old, copy.deepcopy(old)
    return scene


def spec(scene: Scene) -> Obj:
    assert scene.obj is not None
    found: Obj = scene.obj["spec"]
    return found


def apply_patch(obj: Obj, patch: bytes) -> Obj:
    """RFC 6902 "add" and "remove" on object members: all the stamp endpoint writes."""
    out = copy.deepcopy(obj)
    for op in json.loads(patch):
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node = out
        for part in parents:
            node = node[part]
        if op["op"] == "add":
            node[last] = op["value"]
        else:
            assert op["op"] == "remove"
            del node[last]
    return out


KINDS: Final = list(STAMPED.values())
APPROVALS: Final = [k for k in KINDS if k.four_eyes]


# -- the mutating endpoint ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
@pytest.mark.parametrize("written", ["forged", "missing", "malformed"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_the_stamp_overwrites_whatever_the_client_wrote(
    kind: StampedKind, written: str, dry_run: bool
) -> None:
    scene = create(kind)
    scene.dry_run = dry_run
    fields = spec(scene)
    if written == "forged":
        fields.update(
            {
                kind.identity_field: FORGED_IDENTITY,
                kind.time_field: "2020-01-01T00:00:00Z",
                REQUEST_UID_FIELD: "00000000-0000-4000-8000-000000000000",
            }
        )
    elif written == "missing":
        for field in kind.fields:
            fields.pop(field)
    else:
        fields.update({kind.identity_field: "cto", kind.time_field: 7, REQUEST_UID_FIELD: []})
    outcome = decide(scene, "stamp")
    assert outcome.decision.allowed, outcome.decision.message
    assert outcome.decision.patch is not None
    body = outcome.body()["response"]
    assert body["patchType"] == "JSONPatch"
    stored = apply_patch(scene.obj or {}, outcome.decision.patch)["spec"]
    assert stored[kind.identity_field] == {
        "username": PERSON,
        "uid": PERSON_UID,
        "groups": list(PERSON_GROUPS),
    }
    assert (stored[kind.time_field], stored[REQUEST_UID_FIELD]) == (STAMPED_AT, REQUEST_UID)
    # What the stamp wrote passes the validating side and the controller's check.
    scene.obj = {**(scene.obj or {}), "spec": stored}
    assert decide(scene, "decisions").decision.allowed
    assert stamp_problem(kind, stored, STAMPED_AT) is None


def person(name: str) -> Any:
    def change(scene: Scene) -> None:
        scene.username = name

    return change


def request(**fields: Any) -> Any:
    return lambda scene: scene.extra.update(fields)


STAMP_ROWS = [
    Row("a person creates an approval", unchanged, None),
    Row("a dry run", lambda s: setattr(s, "dry_run", True), None),
    Row("an anonymous request", person(""), d.NO_USERNAME),
    Row(
        "a resource outside the contract",
        request(resource={"group": "batch", "version": "v1", "resource": "jobs"}),
        d.OUTSIDE_STAMP,
        "batch/v1/jobs",
    ),
    Row(
        "a plan of the group",
        request(
            resource={
                "group": "operator.ptah.run",
                "version": "v1alpha1",
                "resource": "ptahschemaplans",
            }
        ),
        d.OUTSIDE_STAMP,
    ),
    Row("a delete of an approval", lambda s: setattr(s, "operation", "DELETE"), d.STAMP_OPERATION),
    Row("a status write", lambda s: setattr(s, "subresource", "status"), d.STAMP_SUBRESOURCE),
    Row(
        "an unknown field beside the stamp",
        lambda s: spec(s).update(shadow=1),
        objects.UNDECODABLE,
        "unknown field request.object.spec.shadow",
    ),
    Row("a request naming another object", request(namespace="other"), objects.NOT_NAMED),
]


@pytest.mark.parametrize("row", STAMP_ROWS, ids=str)
def test_stamp_rows(row: Row) -> None:
    expect(row, create(STAMPED["PtahSchemaApproval"]), "stamp")


@pytest.mark.parametrize("kind", [PTAHSCHEMAS, PTAHMIGRATIONS], ids=lambda r: r.kind)
@pytest.mark.parametrize(
    ("operation", "changed", "forged", "expected"),
    [
        ("CREATE", True, None, PERSON),
        ("CREATE", True, "bob", PERSON),
        ("UPDATE", True, None, PERSON),
        ("UPDATE", True, "bob", PERSON),
        ("UPDATE", False, "mallory", "bob"),
        ("UPDATE", False, None, "bob"),
        ("UPDATE", False, "", "bob"),
    ],
)
def test_the_spec_writer_record_is_the_requester_of_the_last_spec_change(
    kind: Any, operation: str, changed: bool, forged: str | None, expected: str
) -> None:
    scene = writer_scene(kind, operation, changed=changed)
    assert scene.obj is not None
    notes = scene.obj["metadata"].setdefault("annotations", {})
    if forged is None:
        scene.obj["metadata"].pop("annotations")
    else:
        notes[SPEC_WRITER_ANNOTATION] = forged
    outcome = decide(scene, "stamp")
    assert outcome.decision.allowed, outcome.decision.message
    written = scene.obj
    if outcome.decision.patch is not None:
        written = apply_patch(scene.obj, outcome.decision.patch)
    assert written["metadata"]["annotations"][SPEC_WRITER_ANNOTATION] == expected
    # The stamped object passes the validating side; the unstamped one, unless it
    # already said the same, does not.
    scene.obj = written
    assert decide(scene, "decisions").decision.allowed


def test_an_update_that_leaves_the_record_alone_gets_no_patch() -> None:
    scene = writer_scene(PTAHSCHEMAS, "UPDATE", changed=False)
    outcome = decide(scene, "stamp")
    assert outcome.decision.allowed and outcome.decision.patch is None
    assert "patch" not in outcome.body()["response"]


def test_a_record_removed_on_an_update_that_leaves_the_spec_comes_back() -> None:
    scene = writer_scene(PTAHSCHEMAS, "UPDATE", changed=False)
    assert scene.old is not None and scene.obj is not None
    scene.old["metadata"]["annotations"] = {}
    scene.obj["metadata"]["annotations"] = {SPEC_WRITER_ANNOTATION: "mallory"}
    outcome = decide(scene, "stamp")
    assert outcome.decision.patch is not None
    written = apply_patch(scene.obj, outcome.decision.patch)
    assert SPEC_WRITER_ANNOTATION not in written["metadata"]["annotations"]


# -- the validating endpoint: every stamped field x {forged, missing, changed later} -----


def _field_rows(kind: StampedKind) -> list[Row]:
    identity, at = kind.identity_field, kind.time_field

    def set_identity(part: str, value: Any) -> Any:
        return lambda s: spec(s)[identity].update({part: value})

    def drop_identity(part: str) -> Any:
        return lambda s: spec(s)[identity].pop(part)

    def put(field: str, value: Any) -> Any:
        return lambda s: spec(s).update({field: value})

    def drop(field: str) -> Any:
        return lambda s: spec(s).pop(field)

    minutes_ago = (NOW - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    tomorrow = (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        Row(f"{kind.kind}: stamped by this request", unchanged, None),
        Row(
            f"{kind.kind}: forged {identity}.username",
            set_identity("username", "cto@example.com"),
            d.FORGED,
            f'{identity}.username is "cto@example.com", but the request was made with "{PERSON}"',
        ),
        Row(
            f"{kind.kind}: missing {identity}.username",
            drop_identity("username"),
            objects.UNDECODABLE,
            f"missing field request.object.spec.{identity}.username",
        ),
        Row(
            f"{kind.kind}: forged {identity}.uid",
            set_identity("uid", "someone-else"),
            d.FORGED,
            f"{identity}.uid",
        ),
        Row(
            f"{kind.kind}: missing {identity}.uid",
            drop_identity("uid"),
            d.FORGED,
            f"{identity}.uid is nothing",
        ),
        Row(
            f"{kind.kind}: forged {identity}.groups",
            set_identity("groups", ["system:masters"]),
            d.FORGED,
            f"{identity}.groups",
        ),
        Row(
            f"{kind.kind}: missing {identity}.groups",
            drop_identity("groups"),
            d.FORGED,
            f"{identity}.groups is nothing",
        ),
        Row(f"{kind.kind}: missing {identity}", drop(identity), d.UNSTAMPED, identity),
        Row(
            f"{kind.kind}: forged {at}, in the past",
            put(at, minutes_ago),
            d.NOT_NOW,
            minutes_ago,
        ),
        Row(f"{kind.kind}: forged {at}, in the future", put(at, tomorrow), d.NOT_NOW, tomorrow),
        Row(f"{kind.kind}: missing {at}", drop(at), d.UNSTAMPED, at),
        Row(
            f"{kind.kind}: forged {REQUEST_UID_FIELD}",
            put(REQUEST_UID_FIELD, "typed-by-hand"),
            d.NOT_A_REQUEST_UID,
            "typed-by-hand",
        ),
        Row(
            f"{kind.kind}: missing {REQUEST_UID_FIELD}",
            drop(REQUEST_UID_FIELD),
            d.UNSTAMPED,
            REQUEST_UID_FIELD,
        ),
        Row(
            f"{kind.kind}: created by another person than it names",
            person("mallory@example.com"),
            d.FORGED,
            '"mallory@example.com"',
        ),
    ]


STAMP_CHECK_ROWS = [row for kind in KINDS for row in _field_rows(kind)]


@pytest.mark.parametrize("row", STAMP_CHECK_ROWS, ids=str)
def test_stamp_check_rows(row: Row) -> None:
    kind = STAMPED[row.name.split(":", 1)[0]]
    expect(row, create(kind), "decisions")


def _changed_later_rows(kind: StampedKind) -> list[Row]:
    identity = kind.identity_field

    def change(mutate: Any) -> Any:
        return lambda s: mutate(spec(s))

    return [
        Row(
            f"{kind.kind}: a label added later",
            lambda s: s.obj["metadata"].update(labels={"a": "b"}),
            None,
        ),  # type: ignore[index]
        Row(
            f"{kind.kind}: {identity}.username changed later",
            change(lambda f: f[identity].update(username="cto@example.com")),
            d.CHANGED,
            identity,
        ),
        Row(
            f"{kind.kind}: {identity}.uid changed later",
            change(lambda f: f[identity].update(uid="x")),
            d.CHANGED,
            identity,
        ),
        Row(
            f"{kind.kind}: {identity}.groups changed later",
            change(lambda f: f[identity].update(groups=["system:masters"])),
            d.CHANGED,
            identity,
        ),
        Row(
            f"{kind.kind}: {kind.time_field} changed later",
            change(lambda f: f.update({kind.time_field: "2026-12-03T12:00:01Z"})),
            d.CHANGED,
            kind.time_field,
        ),
        Row(
            f"{kind.kind}: {REQUEST_UID_FIELD} changed later",
            change(lambda f: f.update({REQUEST_UID_FIELD: "00000000-0000-4000-8000-000000000000"})),
            d.CHANGED,
            REQUEST_UID_FIELD,
        ),
        Row(
            f"{kind.kind}: the stamp removed later",
            change(lambda f: [f.pop(x) for x in kind.fields]),
            d.CHANGED,
        ),
        Row(
            f"{kind.kind}: the named resource changed later",
            change(lambda f: f[kind.target_field].update(uid="another")),
            d.CHANGED,
            kind.target_field,
        ),
        Row(
            f"{kind.kind}: a status subresource",
            lambda s: setattr(s, "subresource", "status"),
            d.STAMP_SUBRESOURCE,
        ),
    ]


IMMUTABLE_ROWS = [row for kind in KINDS for row in _changed_later_rows(kind)]


@pytest.mark.parametrize("row", IMMUTABLE_ROWS, ids=str)
def test_immutable_rows(row: Row) -> None:
    kind = STAMPED[row.name.split(":", 1)[0]]
    expect(row, update(kind), "decisions")


# -- four-eyes -------------------------------------------------------------------------


def _four_eyes_rows(kind: StampedKind) -> list[Row]:
    def in_target(change: Any) -> Any:
        return lambda s: change(s.objects[0])

    def forget_writer(obj: Obj) -> None:
        obj["metadata"].pop("annotations")

    def writer_is(name: str) -> Any:
        return in_target(
            lambda obj: obj["metadata"].update(annotations={SPEC_WRITER_ANNOTATION: name})
        )

    def switch_in_spec(value: bool) -> Any:
        # What a namespace owner could write beside a new artifact before the switch
        # moved to the chart; a spec stored from then may still carry it.
        return in_target(
            lambda obj: obj["spec"]["policy"].update(approval={"requireDistinctApprover": value})
        )

    return [
        Row(f"{kind.kind}: bob changed the spec, jane approves", unchanged, None),
        Row(
            f"{kind.kind}: with four-eyes off in the webhook's configuration the writer approves",
            lambda s: (writer_is(PERSON)(s), setattr(s, "require_distinct_approver", False)),
            None,
        ),
        Row(
            f"{kind.kind}: with four-eyes off a stored spec's true does not turn it on",
            lambda s: (
                writer_is(PERSON)(s),
                switch_in_spec(True)(s),
                setattr(s, "require_distinct_approver", False),
            ),
            None,
        ),
        Row(
            f"{kind.kind}: the spec's own switch set false does not turn four-eyes off",
            lambda s: (writer_is(PERSON)(s), switch_in_spec(False)(s)),
            d.SAME_PERSON,
            "approvals.requireDistinctApprover",
        ),
        Row(
            f"{kind.kind}: jane changed the spec and approves",
            writer_is(PERSON),
            d.SAME_PERSON,
            f"{PERSON} may not approve {kind.target.kind} {NAMESPACE}/",
        ),
        Row(
            f"{kind.kind}: nobody is recorded as the writer",
            in_target(forget_writer),
            d.WRITER_UNKNOWN,
        ),
        Row(
            f"{kind.kind}: the resource does not exist",
            lambda s: s.objects.clear(),
            d.TARGET_MISSING,
            kind.target.kind,
        ),
        Row(
            f"{kind.kind}: the resource was replaced",
            in_target(lambda obj: obj["metadata"].update(uid="another-uid")),
            d.TARGET_REPLACED,
        ),
        Row(
            f"{kind.kind}: the stored resource does not decode",
            in_target(lambda obj: obj["spec"].update(shadow=1)),
            objects.STORED_UNDECODABLE,
        ),
    ]


FOUR_EYES_ROWS = [row for kind in APPROVALS for row in _four_eyes_rows(kind)]


@pytest.mark.parametrize("row", FOUR_EYES_ROWS, ids=str)
def test_four_eyes_rows(row: Row) -> None:
    kind = STAMPED[row.name.split(":", 1)[0]]
    outcome = expect(row, create(kind, four_eyes=True), "decisions")
    if row.refusal is d.SAME_PERSON:
        # Naming both: the approver, and the writer the record holds.
        assert outcome.decision.message.count(PERSON) == 2


def test_acknowledgments_and_settlements_read_nothing() -> None:
    for kind in KINDS:
        if kind.four_eyes:
            continue
        scene = create(kind, four_eyes=True, writer=PERSON)
        scene.objects.clear()
        assert decide(scene, "decisions").decision.allowed


SPEC_WRITER_ROWS = [
    Row("a person changes the spec, stamped", lambda s: stamp_writer(s, PERSON), None),
    Row("the spec changed, recorded as bob's", lambda s: stamp_writer(s, "bob"), d.WRITER_FORGED),
    Row("the spec changed, no record", lambda s: stamp_writer(s, None), d.WRITER_FORGED),
    Row(
        "the spec left alone, the record rewritten",
        lambda s: (_revert_spec(s), stamp_writer(s, "mallory")),
        d.WRITER_FORGED,
        '"bob", not "mallory"',
    ),
]


def _revert_spec(scene: Scene) -> None:
    assert scene.obj is not None and scene.old is not None
    scene.obj["spec"] = copy.deepcopy(scene.old["spec"])


@pytest.mark.parametrize("row", SPEC_WRITER_ROWS, ids=str)
@pytest.mark.parametrize("kind", [PTAHSCHEMAS, PTAHMIGRATIONS], ids=lambda r: r.kind)
def test_spec_writer_rows(row: Row, kind: Any) -> None:
    expect(row, writer_scene(kind, "UPDATE", changed=True), "decisions")


# -- the spec's own four-eyes switch is refused ---------------------------------------------


def _switch(obj: Obj | None, value: bool) -> None:
    assert obj is not None
    obj["spec"]["policy"]["approval"] = {"requireDistinctApprover": value}


def _as_create(scene: Scene) -> None:
    scene.operation, scene.old = "CREATE", None


def _finalizer_only(scene: Scene) -> None:
    # The manager's finalizer patch of a resource stored with the switch: the spec and
    # its writer record are as they were.
    assert scene.obj is not None and scene.old is not None
    scene.obj["spec"] = copy.deepcopy(scene.old["spec"])
    scene.obj["metadata"]["annotations"] = dict(scene.old["metadata"]["annotations"])
    scene.obj["metadata"]["finalizers"] = ["operator.ptah.run/active-operation"]


MOVED_ROWS = [
    Row("a spec change that does not name the switch", unchanged, None),
    Row(
        "a spec change that sets the switch false (beside a new interval)",
        lambda s: _switch(s.obj, False),
        d.MOVED,
        "remove the field from the spec",
    ),
    Row("a spec change that sets the switch true", lambda s: _switch(s.obj, True), d.MOVED),
    Row(
        "a create that sets the switch",
        lambda s: (_as_create(s), _switch(s.obj, True)),
        d.MOVED,
        "the chart's approvals.requireDistinctApprover",
    ),
    Row(
        "a spec change that keeps a stored switch",
        lambda s: (_switch(s.old, True), _switch(s.obj, True)),
        d.MOVED,
    ),
    Row("a spec change that removes a stored switch", lambda s: _switch(s.old, False), None),
    Row(
        "a finalizer patch of a resource stored with the switch",
        lambda s: (_switch(s.old, False), _finalizer_only(s)),
        None,
    ),
]


@pytest.mark.parametrize("row", MOVED_ROWS, ids=str)
@pytest.mark.parametrize("kind", [PTAHSCHEMAS, PTAHMIGRATIONS], ids=lambda r: r.kind)
def test_moved_rows(row: Row, kind: Any) -> None:
    scene = writer_scene(kind, "UPDATE", changed=True)
    stamp_writer(scene, PERSON)
    outcome = expect(row, scene, "decisions")
    if row.refusal is d.MOVED:
        assert kind.kind in outcome.decision.message


@given(
    username=st.text(min_size=1, max_size=40),
    groups=st.lists(st.text(max_size=20), max_size=4),
    forged=st.dictionaries(
        st.sampled_from(["username", "uid", "groups"]), st.text(max_size=10), max_size=3
    ),
)
def test_whatever_identity_a_client_forges_the_stored_one_is_the_requests(
    username: str, groups: list[str], forged: dict[str, Any]
) -> None:
    kind = STAMPED["PtahMigrationApproval"]
    scene = create(kind)
    scene.username, scene.groups = username, tuple(groups)
    spec(scene)[kind.identity_field] = forged
    outcome = decide(scene, "stamp")
    assert outcome.decision.patch is not None
    stored = apply_patch(scene.obj or {}, outcome.decision.patch)["spec"]
    assert stored[kind.identity_field]["username"] == username
    assert stored[kind.identity_field]["groups"] == groups


# -- explain -------------------------------------------------------------------------------


def _saved(tmp_path: Path, scene: Scene) -> tuple[Path, Path]:
    review = tmp_path / "review.json"
    review.write_text(json.dumps(scene.review(), indent=2))
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(scene.objects))
    return review, state


def test_explain_shows_the_stamp_a_create_gets(tmp_path: Path) -> None:
    scene = create(STAMPED["PtahSchemaApproval"])
    spec(scene)["approver"] = FORGED_IDENTITY
    review, state = _saved(tmp_path, scene)
    outcome, text = explain_files(review, state, endpoint="stamp")
    assert outcome.decision.allowed
    assert "endpoint: POST /mutate-stamp" in text
    assert "stamp: stamped approver jane@example.com at " in text
    patch = json.loads(text.split("patch: ", 1)[1].splitlines()[0])
    assert patch[0]["path"] == "/spec/approver" and patch[0]["value"]["username"] == PERSON


def test_explain_names_the_four_eyes_refusal(tmp_path: Path) -> None:
    scene = create(STAMPED["PtahMigrationApproval"], four_eyes=True, writer=PERSON)
    review, state = _saved(tmp_path, scene)
    # The time a saved review was stamped at is long gone: explain judges at that time.
    settings = Settings(clock=lambda: NOW, require_distinct_approver=True)
    outcome, text = explain_files(review, state, settings=settings)
    assert "endpoint: POST /validate-decisions" in text
    assert "stamp-check: the stamp is this request's: jane@example.com" in text
    assert "rule: four-eyes" in text
    assert not outcome.decision.allowed


@pytest.mark.parametrize(
    ("argv", "env", "exit_code"),
    [
        ([], {}, 0),
        (["--require-distinct-approver"], {}, 1),
        ([], {"PTAH_REQUIRE_DISTINCT_APPROVER": "true"}, 1),
        (["--no-require-distinct-approver"], {"PTAH_REQUIRE_DISTINCT_APPROVER": "true"}, 0),
    ],
    ids=["off by default", "the flag", "the chart's variable", "the flag over the variable"],
)
def test_the_cli_takes_four_eyes_from_the_webhooks_configuration(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    exit_code: int,
) -> None:
    # A review stamped now: the command judges at the real clock.
    scene = create(STAMPED["PtahSchemaApproval"], writer=PERSON)
    spec(scene)["approvedAt"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    review, state = _saved(tmp_path, scene)
    monkeypatch.delenv("PTAH_REQUIRE_DISTINCT_APPROVER", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli(["explain", str(review), "--objects", str(state), *argv]) == exit_code
    out = capsys.readouterr().out
    said = "may not approve" if exit_code else "does not require a distinct approver"
    assert f"four-eyes: {'refused: ' if exit_code else ''}" in out and said in out, out


def test_a_misspelt_four_eyes_variable_stops_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTAH_REQUIRE_DISTINCT_APPROVER", "yes")
    with pytest.raises(SystemExit, match="PTAH_REQUIRE_DISTINCT_APPROVER must be true or false"):
        cli(["docs"])


@pytest.mark.parametrize(
    ("scene", "endpoint"),
    [
        (create(STAMPED["PtahSchemaApproval"]), "decisions"),
        (update(STAMPED["PtahSchemaProofSettlement"]), "decisions"),
        (writer_scene(PTAHMIGRATIONS, "UPDATE", changed=True), "decisions"),
    ],
)
def test_explain_infers_the_decisions_endpoint(scene: Scene, endpoint: str) -> None:
    assert endpoint_of(scene.review()) == endpoint
