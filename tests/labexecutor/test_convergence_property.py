"""Property: any two schemas inside the declared scope converge in one plan.

From a live database at schema A, planning towards B and applying leaves a database whose
next plan is empty and whose fingerprint is the plan's ``to_fingerprint``.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.executor.catalog import fingerprint
from lab.executor.schema import Target, live_catalog
from tests.labexecutor.labkit import Lab
from tests.support.examples import examples

pytestmark = pytest.mark.postgres

TYPES = {
    "integer": "7",
    "bigint": "7",
    "text": "'x'",
    "varchar(20)": "'x'",
    "varchar(40)": "'y'",
    "numeric(8,2)": "0",
    "boolean": "true",
    "date": "current_date",
}


@st.composite
def table(draw: st.DrawFn, name: str, earlier: list[str]) -> str:
    columns = ["id integer primary key"]
    names = draw(st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3))
    for column in names:
        kind = draw(st.sampled_from(sorted(TYPES)))
        parts = [column, kind]
        if draw(st.booleans()):
            parts.append("not null")
        if draw(st.booleans()):
            parts.append(f"default {TYPES[kind]}")
        if draw(st.integers(0, 3)) == 0:
            parts.append("unique")
        columns.append(" ".join(parts))
    if earlier and draw(st.booleans()):
        target = draw(st.sampled_from(earlier))
        action = draw(st.sampled_from(["", " on delete cascade", " on delete set null"]))
        columns.append(f"ref integer references {target}(id){action}")
    if len(names) >= 2 and draw(st.integers(0, 3)) == 0:
        columns.append(f"unique ({names[0]}, {names[1]})")
    ddl = f"create table {name} ({', '.join(columns)});"
    if names and draw(st.booleans()):
        indexed = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
        unique = draw(st.sampled_from(["", "unique "]))
        partial = draw(st.sampled_from(["", f" where {indexed[0]} is not null"]))
        ddl += f" create {unique}index {name}_idx on {name} ({', '.join(indexed)}){partial};"
    return ddl


@st.composite
def schema(draw: st.DrawFn) -> str:
    chosen = draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3))
    ddl: list[str] = []
    for index, name in enumerate(sorted(chosen)):
        ddl.append(draw(table(name, sorted(chosen)[:index])))
    return "\n".join(ddl)


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(before=schema(), after=schema())
def test_generated_schemas_converge_in_one_plan(lab: Lab, before: str, after: str) -> None:
    with psycopg.connect(lab.db, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        if before:
            conn.execute(before.encode())
    path = lab.work / "plan.json"
    desired = lab.schema_file(after or "-- empty\ncreate table if_empty (id int);")
    first = lab.ptah("schema", "plan", "--schema-file", desired, "--output", str(path), "--json")
    assert first.code == 0, first
    if json.loads(first.stdout)["outcome"] == "changes":
        applied = lab.ptah("schema", "apply", "--plan", str(path), "--auto-approve", "--json")
        assert applied.code == 0, (before, after, applied.stdout)
        to = json.loads(path.read_text())["to_fingerprint"]
        assert fingerprint(live_catalog(Target(lab.db, 5), ())) == to
    again = lab.ptah("schema", "plan", "--schema-file", desired, "--output", str(path), "--json")
    assert json.loads(again.stdout) == {"contract_version": 1, "outcome": "no-changes"}, (
        before,
        after,
    )
