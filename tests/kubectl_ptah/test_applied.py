"""``plan --applied``: the plan the last confirmed Apply ran, or exit 3 when none is on record.

The control rows record an Apply the way the controller does (a schema's
``status.applied``; a migration's ``lastRun`` and the approval its Job spent) and
show that plan; each other row changes one record and must end in its sentence.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from jobclaim.apiserver import (
    PTAHMIGRATIONAPPROVALS,
    PTAHMIGRATIONPLANS,
    PTAHMIGRATIONS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    ApiClient,
    Resource,
)
from kubectl_ptah import main
from tests.support.dispatchworld import NS, Rig, add_migration, add_schema, make_rig

JOB = {"name": "ptah-apply-billing-1", "uid": "job-uid-1"}


def run(api: ApiClient, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["-n", NS, *argv], connector=lambda _args: api, stdout=out)
    return code, out.getvalue()


def set_status(api: ApiClient, resource: Resource, name: str, **changes: Any) -> None:
    stored = api.get(resource, NS, name)
    status = {**(stored.get("status") or {}), **changes}
    status = {k: v for k, v in status.items() if v is not None}
    version = stored["metadata"]["resourceVersion"]
    api.patch_status(resource, NS, name, status, resource_version=version)


@pytest.fixture
def rig() -> Rig:
    """Both resources after a confirmed Apply: the plan they ran no longer pending."""
    world = make_rig()
    add_schema(world, approve=False)
    plan = world.api.get(PTAHSCHEMAS, NS, "orders")["status"]["plan"]
    set_status(world.api, PTAHSCHEMAS, "orders", applied=plan, plan=None, phase="InSync")
    add_migration(world)
    set_status(world.api, PTAHMIGRATIONAPPROVALS, "billing-approval", consumedJob=JOB)
    run_record = {"outcome": "Applied", "jobName": JOB["name"], "jobUID": JOB["uid"]}
    set_status(world.api, PTAHMIGRATIONS, "billing", lastRun=run_record, plan=None)
    return world


def test_the_schema_plan_the_last_apply_ran(rig: Rig) -> None:
    applied = rig.api.get(PTAHSCHEMAS, NS, "orders")["status"]["applied"]
    code, text = run(rig.api, "plan", "schema", "orders", "--applied")
    assert code == 0, text
    lines = text.splitlines()
    assert lines[0] == f"PtahSchema {NS}/orders: the plan the last confirmed Apply ran"
    assert lines[1] == f"  plan:         {applied['name']} (uid {applied['uid']})"
    code, sql = run(rig.api, "plan", "schema", "orders", "--applied", "-o", "sql")
    assert (code, sql) == (0, "CREATE TABLE orders (id bigint primary key);\n")


def test_the_migration_plan_the_last_run_ran(rig: Rig) -> None:
    approval = rig.api.get(PTAHMIGRATIONAPPROVALS, NS, "billing-approval")
    code, text = run(rig.api, "plan", "migration", "billing", "--applied", "-o", "json")
    assert code == 0, text
    view = json.loads(text)
    assert (view["which"], view["plan"]) == ("applied", approval["spec"]["planRef"])
    assert [m["version"] for m in view["migrations"]] == ["20260101000000", "20260102000000"]


def test_without_applied_the_pending_plan_is_shown_and_there_is_none(rig: Rig) -> None:
    # The flag is what selects the record: the pending plan is gone in both.
    assert run(rig.api, "plan", "schema", "orders")[0] == 3
    assert run(rig.api, "plan", "migration", "billing")[0] == 3


Change = Callable[[ApiClient], None]


def schema_never_applied(api: ApiClient) -> None:
    set_status(api, PTAHSCHEMAS, "orders", applied=None)


def schema_plan_deleted(api: ApiClient) -> None:
    name = api.get(PTAHSCHEMAS, NS, "orders")["status"]["applied"]["name"]
    api.delete(PTAHSCHEMAPLANS, NS, name)


def schema_plan_replaced(api: ApiClient) -> None:
    stored = api.get(PTAHSCHEMAS, NS, "orders")
    applied = {**stored["status"]["applied"], "uid": "another-uid"}
    set_status(api, PTAHSCHEMAS, "orders", applied=applied)


def migration_run_failed(api: ApiClient) -> None:
    set_status(api, PTAHMIGRATIONS, "billing", lastRun={"outcome": "Failed", **job_of()})


def migration_never_ran(api: ApiClient) -> None:
    set_status(api, PTAHMIGRATIONS, "billing", lastRun=None)


def migration_job_unwitnessed(api: ApiClient) -> None:
    # policy.apply: Always spends no approval: no record names the plan the Job ran.
    set_status(api, PTAHMIGRATIONAPPROVALS, "billing-approval", consumedJob=None)


def migration_other_job(api: ApiClient) -> None:
    # An approval that witnessed another Job of the same name is not this run's.
    witness = {**JOB, "uid": "job-uid-0"}
    set_status(api, PTAHMIGRATIONAPPROVALS, "billing-approval", consumedJob=witness)


def migration_plan_deleted(api: ApiClient) -> None:
    name = api.get(PTAHMIGRATIONAPPROVALS, NS, "billing-approval")["spec"]["planRef"]["name"]
    api.delete(PTAHMIGRATIONPLANS, NS, name)


def job_of() -> dict[str, str]:
    return {"jobName": JOB["name"], "jobUID": JOB["uid"]}


ORDERS, BILLING = f"PtahSchema {NS}/orders", f"PtahMigration {NS}/billing"
ROWS: list[tuple[Change, str, str]] = [
    (schema_never_applied, "schema", f"{ORDERS} records no confirmed Apply"),
    (
        schema_plan_deleted,
        "schema",
        f"the plan {{plan}} that the last confirmed Apply of {ORDERS} names is not stored",
    ),
    (
        schema_plan_replaced,
        "schema",
        f"the plan {{plan}} that the last confirmed Apply of {ORDERS} names is not stored "
        "(another UID)",
    ),
    (
        migration_run_failed,
        "migration",
        f"{BILLING} records no confirmed Apply: its last run ended Failed",
    ),
    (migration_never_ran, "migration", f"{BILLING} records no confirmed Apply: it records no run"),
    (
        migration_job_unwitnessed,
        "migration",
        f"no approval names the Job {JOB['name']} of the last run of {BILLING}, "
        "so the plan it ran is not on record",
    ),
    (
        migration_other_job,
        "migration",
        f"no approval names the Job {JOB['name']} of the last run of {BILLING}, "
        "so the plan it ran is not on record",
    ),
    (
        migration_plan_deleted,
        "migration",
        f"the plan {{plan}} that the approval of the last run of {BILLING} names is not stored",
    ),
]


@pytest.mark.parametrize(("change", "kind", "message"), ROWS, ids=[r[0].__name__ for r in ROWS])
def test_no_applied_plan_on_record_is_exit_3(
    rig: Rig, capsys: pytest.CaptureFixture[str], change: Change, kind: str, message: str
) -> None:
    name = "orders" if kind == "schema" else "billing"
    if kind == "schema":
        plan = rig.api.get(PTAHSCHEMAS, NS, name)["status"]["applied"]["name"]
    else:
        plan = rig.api.get(PTAHMIGRATIONAPPROVALS, NS, "billing-approval")["spec"]["planRef"]
        plan = plan["name"]
    assert run(rig.api, "plan", kind, name, "--applied")[0] == 0  # the control
    change(rig.api)
    code, text = run(rig.api, "plan", kind, name, "--applied")
    assert (code, text) == (3, "")
    assert capsys.readouterr().err == f"kubectl ptah: {message.format(plan=plan)}\n"
