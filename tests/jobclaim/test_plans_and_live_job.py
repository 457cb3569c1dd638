"""Published plans are built once and held exactly; a live Job's manager record and its
end are read one way, for the controller and the webhook alike."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from jobclaim import (
    InvalidInput,
    SchemaPlanContent,
    build_migration_plan,
    build_plan_chunk,
    build_schema_plan,
    finished,
    manager_record_of,
    migration_plan_name,
    plan_name,
    published_plan_problem,
    sha256_digest,
)
from jobclaim.api import PtahSchema, PtahSchemaPlan
from tests.support.claimworld import (
    BINDING,
    MANAGER,
    PLAN_CONTENT,
    PLAN_SEQUENCE,
    plan_schema,
    planned_migration,
    schema_world,
)


def test_a_live_job_carries_the_manager_record_it_was_built_with() -> None:
    assert manager_record_of(schema_world("Plan").submitted) == MANAGER


def _runner(job: dict[str, Any]) -> dict[str, Any]:
    """The container that installs the runner: its image is the manager's runner image."""
    runner: dict[str, Any] = job["spec"]["template"]["spec"]["initContainers"][0]
    return runner


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        (
            lambda j: j["metadata"]["annotations"].update(
                {"operator.ptah.run/controller-image": "ptah-operator:latest"}
            ),
            "controller image is not pinned",
        ),
        (lambda j: _runner(j).update(image="ptah-runner:latest"), "runner image is not pinned"),
        (
            lambda j: j["spec"]["template"]["spec"]["initContainers"].append(dict(_runner(j))),
            "runner image is not pinned",
        ),
    ],
)
def test_an_ambiguous_manager_record_is_refused(change: Any, sentence: str) -> None:
    job = schema_world("Plan").submitted
    change(job)
    with pytest.raises(InvalidInput, match=sentence):
        manager_record_of(job)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], None),
        ([{"type": "Complete", "status": "False"}], None),
        ([{"type": "Complete", "status": "True"}], "Complete"),
        ([{"type": "Failed", "status": "True"}], "Failed"),
        ([{"type": "Complete", "status": "True"}, {"type": "Failed", "status": "True"}], "Failed"),
        ([{"type": "SuccessCriteriaMet", "status": "True"}], None),
    ],
)
def test_a_job_has_finished_only_by_a_true_terminal_condition(
    conditions: list[dict[str, str]], expected: str | None
) -> None:
    assert finished({"status": {"conditions": conditions}}) == expected


def test_a_schema_plan_is_named_by_its_fingerprint_and_matches_its_rebuild() -> None:
    built = build_schema_plan(
        plan_schema(), binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT
    )
    spec = built["spec"]
    assert built["metadata"]["name"] == plan_name(spec["fingerprint"])
    assert [c["name"] for c in spec["chunks"]] == [
        f"{built['metadata']['name']}-000",
        f"{built['metadata']['name']}-001",
    ]
    assert built == build_schema_plan(
        plan_schema(), binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT
    )
    stored = copy.deepcopy(built)
    stored["metadata"].update(uid="u", resourceVersion="1", creationTimestamp="x")
    assert published_plan_problem(stored, built) is None
    stored["spec"]["executorImage"] = "other@sha256:" + "9" * 64
    assert published_plan_problem(stored, built) == (
        "the plan's spec.executorImage is not the value its claim publishes"
    )


def test_any_bound_field_changes_the_schema_plan_fingerprint() -> None:
    base = build_schema_plan(
        plan_schema(), binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT
    )
    other_binding = BINDING.model_copy(update={"ptah_version": "1.9.1"})
    schema = plan_schema()
    assert schema.status and schema.status.active_operation
    for variant in (
        build_schema_plan(
            schema.model_copy(
                update={
                    "status": schema.status.model_copy(
                        update={
                            "active_operation": schema.status.active_operation.model_copy(
                                update={"execution_binding_id": other_binding.epoch}
                            )
                        }
                    )
                }
            ),
            binding=other_binding,
            dispatched_by=MANAGER,
            content=PLAN_CONTENT,
        ),
        build_schema_plan(
            schema,
            binding=BINDING,
            dispatched_by=MANAGER,
            content=SchemaPlanContent(**{**_fields(PLAN_CONTENT), "statement_count": 3}),
        ),
    ):
        assert variant["spec"]["fingerprint"] != base["spec"]["fingerprint"]


def _fields(content: SchemaPlanContent) -> dict[str, Any]:
    return {name: getattr(content, name) for name in content.__slots__}


def test_a_schema_plan_is_only_published_from_an_active_plan_claim() -> None:
    apply = schema_world("Apply").resource
    assert isinstance(apply, PtahSchema)
    with pytest.raises(InvalidInput, match="no active Plan operation"):
        build_schema_plan(apply, binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT)


def test_a_migration_plan_is_derived_from_the_recorded_reading() -> None:
    built = build_migration_plan(planned_migration(), migrations=PLAN_SEQUENCE)
    assert built["metadata"]["name"] == migration_plan_name(built["spec"]["fingerprint"])
    assert built["spec"]["historyFingerprint"] == sha256_digest(b"history")
    assert published_plan_problem(built, built) is None
    with pytest.raises(InvalidInput, match="holds 1 migrations, the history reading found 2"):
        build_migration_plan(planned_migration(), migrations=PLAN_SEQUENCE[:1])


def test_a_plan_chunk_is_stored_like_its_projection_and_holds_only_its_bytes() -> None:
    plan_wire = build_schema_plan(
        plan_schema(), binding=BINDING, dispatched_by=MANAGER, content=PLAN_CONTENT
    )
    plan_wire["metadata"]["uid"] = "plan-uid"
    plan = PtahSchemaPlan.model_validate(plan_wire)
    chunk = plan.spec.chunks[0]
    built = build_plan_chunk(plan, chunk, b"a")
    assert built["metadata"]["name"] == chunk.name
    assert built["metadata"]["ownerReferences"][0]["uid"] == "plan-uid"
    assert built["spec"] == {
        "planRef": {"name": plan_wire["metadata"]["name"], "uid": "plan-uid"},
        "index": 0,
        "data": "YQ==",
        "digest": sha256_digest(b"a"),
        "size": 1,
    }
    assert published_plan_problem(built, built, what="plan chunk") is None
    with pytest.raises(InvalidInput, match="does not have the digest"):
        build_plan_chunk(plan, chunk, b"b")
