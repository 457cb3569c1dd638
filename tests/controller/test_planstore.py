"""The plan store: chunks read back verified, projections staged immutably, repeats
safe, and a foreign object under a projection name retiring the plan."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.pieces.planstore import (
    PlanUnverified,
    ProjectionConflict,
    load_plan,
    plan_geometry_problem,
    project,
)
from jobclaim import build_projection, plan_name, projection_names, sha256_digest
from jobclaim.api import PtahSchemaPlan
from jobclaim.apiserver import (
    CONFIGMAPS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    Object,
    Refused,
    Unavailable,
)
from kube.fake.inmemory import InMemoryApi, matching
from runner import RUNNER_PROTOCOL_VERSION
from tests.support.examples import examples
from webhook.projections import projection_mismatch

NS = "shop"
SCHEMA = "orders"
DATA = [b"CREATE TABLE orders (id bigint primary key);\n", b"CREATE INDEX o ON orders (id);\n"]


def plant(api: InMemoryApi, data: list[bytes] = DATA, fingerprint: str = "c") -> PtahSchemaPlan:
    """A stored plan and its stored chunks, as the Plan claim publishes them."""
    name = plan_name("sha256:" + fingerprint * 64)
    names = projection_names(name, len(data))
    spec = {
        "schemaRef": {"name": SCHEMA, "uid": "schema-uid"},
        "fingerprint": "sha256:" + fingerprint * 64,
        "contentDigest": "sha256:" + "d" * 64,
        "coordinationDigest": "sha256:" + "e" * 64,
        "executionBindingID": "v1-" + "a" * 32,
        "controllerStateVersion": 3,
        "ptahVersion": "1.9.0",
        "executorImage": "registry.example.com/ptah@sha256:" + "1" * 64,
        "runnerProtocolVersion": RUNNER_PROTOCOL_VERSION,
        "statementCount": len(data),
        "chunks": [
            {"name": names[i], "key": "chunk", "index": i, "digest": sha256_digest(d),
             "size": len(d)}
            for i, d in enumerate(data)
        ],
    }  # fmt: skip
    stored = api.create(PTAHSCHEMAPLANS, NS, {"metadata": {"name": name}, "spec": spec})
    uid = stored["metadata"]["uid"]
    for index, chunk in enumerate(data):
        api.create(
            PTAHSCHEMAPLANCHUNKS,
            NS,
            {
                "metadata": {"name": names[index]},
                "spec": {
                    "planRef": {"name": name, "uid": uid},
                    "index": index,
                    "data": base64.b64encode(chunk).decode(),
                    "digest": sha256_digest(chunk),
                    "size": len(chunk),
                },
            },
        )
    return PtahSchemaPlan.model_validate(stored)


def test_a_stored_plan_loads_its_chunks_in_index_order() -> None:
    api = InMemoryApi()
    plan = plant(api)
    api.clear_calls()
    assert load_plan(api, NS, plan) == DATA
    # One uncached read per chunk, and nothing else.
    assert [(c.verb, c.resource.plural) for c in api.calls] == [("get", "ptahschemaplanchunks")] * 2


def _edit_spec(**changes: Any) -> Callable[[Object], None]:
    def edit(chunk: Object) -> None:
        chunk["spec"].update(changes)

    return edit


OTHER = b"DROP TABLE orders;\n"
# (id, an edit of the stored chunk 000, the sentence load_plan refuses with, or None)
TAMPERING: list[tuple[str, Callable[[Object], None] | None, str | None]] = [
    # Control row: the chunk as published loads, so each row below fails for its edit.
    ("as-published", None, None),
    ("other-bytes", _edit_spec(data=base64.b64encode(DATA[0][:-1] + b"?").decode()),
     "does not have the digest"),
    ("other-bytes-and-record", _edit_spec(data=base64.b64encode(OTHER).decode(),
     digest=sha256_digest(OTHER), size=len(OTHER)), "records another size or digest"),
    ("not-base64", _edit_spec(data="!!!not base64!!!"), "is not base64"),
    ("another-plan", _edit_spec(planRef={"name": "ptah-plan-x", "uid": "u"}),
     "belongs to another plan"),
    ("replaced-plan", _edit_spec(planRef={"name": plan_name("sha256:" + "c" * 64), "uid": "old"}),
     "belongs to another plan"),
    ("other-index", _edit_spec(index=1), "sits at index 1, not 0"),
    ("unknown-field", _edit_spec(note="hello"), "not a chunk this operator can read"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "sentence"), [r[1:] for r in TAMPERING], ids=[r[0] for r in TAMPERING]
)
def test_a_chunk_that_is_not_the_plans_is_refused(
    edit: Callable[[Object], None] | None, sentence: str | None
) -> None:
    api = InMemoryApi()
    plan = plant(api)
    name = plan.spec.chunks[0].name
    if edit is not None:
        chunk = api.get(PTAHSCHEMAPLANCHUNKS, NS, name)
        edit(chunk)
        api.replace(PTAHSCHEMAPLANCHUNKS, NS, chunk)
    if sentence is None:
        assert load_plan(api, NS, plan) == DATA
        return
    with pytest.raises(PlanUnverified, match=sentence):
        load_plan(api, NS, plan)


def test_a_missing_chunk_is_refused_and_a_failed_read_propagates() -> None:
    api = InMemoryApi()
    plan = plant(api)
    api.fail_read(matching("get", PTAHSCHEMAPLANCHUNKS), Unavailable("timeout"))
    with pytest.raises(Unavailable):
        load_plan(api, NS, plan)
    api.delete(PTAHSCHEMAPLANCHUNKS, NS, plan.spec.chunks[1].name)
    with pytest.raises(PlanUnverified, match=r"chunk .*-001 does not exist"):
        load_plan(api, NS, plan)


def test_a_plan_whose_chunks_are_not_named_after_it_is_refused() -> None:
    plan = plant(InMemoryApi())
    assert plan_geometry_problem(plan) is None
    renamed = plan.spec.chunks[0].model_copy(update={"name": "someone-elses-configmap"})
    odd = plan.model_copy(
        update={"spec": plan.spec.model_copy(update={"chunks": [renamed, plan.spec.chunks[1]]})}
    )
    with pytest.raises(PlanUnverified, match="not named by index after the plan"):
        load_plan(InMemoryApi(), NS, odd)
    with pytest.raises(PlanUnverified, match="not named by index after the plan"):
        project(InMemoryApi(), odd, SCHEMA, DATA)


def projections(api: InMemoryApi, plan: PtahSchemaPlan) -> list[Object | None]:
    return [api.peek(CONFIGMAPS, NS, c.name) for c in plan.spec.chunks]


def test_projecting_writes_immutable_configmaps_the_webhook_admits() -> None:
    api = InMemoryApi()
    plan = plant(api)
    project(api, plan, SCHEMA, load_plan(api, NS, plan))
    for chunk, stored in zip(plan.spec.chunks, projections(api, plan), strict=True):
        assert stored is not None
        assert stored["immutable"] is True
        assert stored["metadata"]["ownerReferences"][0]["uid"] == plan.metadata.uid
        # The controller-write webhook holds a submitted projection to the same
        # builder; a projection it would refuse could never be staged for real.
        assert projection_mismatch(stored, plan, chunk) is None


def test_projecting_again_reads_back_and_writes_nothing() -> None:
    api = InMemoryApi()
    plan = plant(api)
    project(api, plan, SCHEMA, DATA)
    before = projections(api, plan)
    api.clear_calls()
    project(api, plan, SCHEMA, DATA)
    assert api.writes() == []
    assert [c.verb for c in api.calls] == ["list"]
    assert projections(api, plan) == before


Fault = Callable[[InMemoryApi], object]
SECOND = matching(
    "create", CONFIGMAPS, name=projection_names(plan_name("sha256:" + "c" * 64), 2)[1]
)
# (id, a fault on the second projection's create, the error the first pass raises)
INTERRUPTED: list[tuple[str, Fault, type[Exception]]] = [
    ("process-stopped-after-the-write", lambda api: api.stop_after_write(SECOND), Unavailable),
    ("answer-lost", lambda api: api.fail_after_write(SECOND), Unavailable),
    ("refused-before-storing", lambda api: api.fail_before_write(SECOND, Refused("denied")),
     Refused),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "raised"), [r[1:] for r in INTERRUPTED], ids=[r[0] for r in INTERRUPTED]
)
def test_an_interrupted_projection_is_finished_by_the_next_pass(
    fault: Fault, raised: type[Exception]
) -> None:
    api = InMemoryApi()
    plan = plant(api)
    fault(api)
    with pytest.raises(raised):
        project(api, plan, SCHEMA, DATA)
    api.restart()
    project(api, plan, SCHEMA, DATA)
    assert all(p is not None for p in projections(api, plan))


def _foreign(**changes: Any) -> Callable[[Object], Object]:
    def change(projection: Object) -> Object:
        for key, value in changes.items():
            if key == "labels":
                projection["metadata"]["labels"] = value
            elif key == "owner_uid":
                projection["metadata"]["ownerReferences"][0]["uid"] = value
            else:
                projection[key] = value
        return projection

    return change


# (id, what stands under the first projection name before the pass, whether it conflicts)
FOREIGN: list[tuple[str, Callable[[Object], Object] | None, bool]] = [
    # Control row: nothing stands there, so the rows below conflict for what stands.
    ("free", None, False),
    ("this-projection-already", _foreign(), False),
    ("unlabelled-configmap", _foreign(labels=None), True),
    ("other-bytes", _foreign(binaryData={"chunk": base64.b64encode(OTHER).decode()}), True),
    ("owned-by-a-replaced-plan", _foreign(owner_uid="old-plan-uid"), True),
    ("mutable", _foreign(immutable=False), True),
]


@pytest.mark.parametrize(
    ("standing", "conflicts"), [r[1:] for r in FOREIGN], ids=[r[0] for r in FOREIGN]
)
def test_a_foreign_object_under_a_projection_name_is_a_conflict(
    standing: Callable[[Object], Object] | None, conflicts: bool
) -> None:
    api = InMemoryApi()
    plan = plant(api)
    first = plan.spec.chunks[0]
    if standing is not None:
        built = build_projection(
            namespace=NS,
            schema_name=SCHEMA,
            plan_name=plan.metadata.name or "",
            plan_uid=plan.metadata.uid or "",
            chunk=first,
            data=DATA[0],
        )
        api.create(CONFIGMAPS, NS, {k: v for k, v in standing(built).items() if v is not None})
    if not conflicts:
        project(api, plan, SCHEMA, DATA)
        return
    with pytest.raises(ProjectionConflict, match=f"ConfigMap {first.name} stands under"):
        project(api, plan, SCHEMA, DATA)


# (id, what the caller hands over, the schema it names, the sentence)
MISUSE: list[tuple[str, list[bytes], str, str]] = [
    ("bytes-not-the-plans", [DATA[0], OTHER], SCHEMA, "does not have the digest|holds"),
    ("too-few-chunks", [DATA[0]], SCHEMA, "lists 2 chunks, 1 were given"),
    ("another-schema", DATA, "invoices", "belongs to schema orders, not invoices"),
]


@pytest.mark.parametrize(
    ("chunks", "schema", "sentence"), [r[1:] for r in MISUSE], ids=[r[0] for r in MISUSE]
)
def test_projecting_bytes_that_are_not_the_plans_writes_nothing(
    chunks: list[bytes], schema: str, sentence: str
) -> None:
    api = InMemoryApi()
    plan = plant(api)
    api.clear_calls()
    with pytest.raises(PlanUnverified, match=sentence):
        project(api, plan, schema, chunks)
    assert api.calls == ()


# Each example builds a store; on a shared machine that can exceed the default deadline.
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=16))
def test_what_is_projected_is_exactly_what_was_loaded(data: list[bytes]) -> None:
    api = InMemoryApi()
    plan = plant(api, data)
    loaded = load_plan(api, NS, plan)
    project(api, plan, SCHEMA, loaded)
    staged = [
        base64.b64decode(p["binaryData"]["chunk"]) for p in projections(api, plan) if p is not None
    ]
    assert staged == loaded == data
