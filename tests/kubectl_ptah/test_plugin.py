"""``kubectl ptah`` over the API double: what a reviewer is shown, and what is created.

Admission's stamp is not here (the double runs no webhook): the real API server test
(tests/realapi/test_approvals.py) shows the stamp a person's approval gets.
"""

from __future__ import annotations

import io
import json

import pytest

from jobclaim.apiserver import PTAHSCHEMAAPPROVALS, PTAHSCHEMAPLANCHUNKS, PTAHSCHEMAS, ApiClient
from kubectl_ptah import main
from tests.controller.dispatchworld import NS, Rig, add_schema, make_rig

DESTRUCTIVE_PLAN = (
    b"CREATE TABLE orders_v2 (id bigint PRIMARY KEY, note text DEFAULT 'a;b');\n",
    b"DROP TABLE orders_legacy;\nGRANT SELECT ON orders_v2 TO reporting;\n",
)


def run(api: ApiClient, *argv: str, stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    code = main(
        ["-n", NS, *argv], connector=lambda _args: api, stdin=io.StringIO(stdin), stdout=out
    )
    return code, out.getvalue()


@pytest.fixture
def rig() -> Rig:
    world = make_rig()
    add_schema(world, approve=False, chunks=DESTRUCTIVE_PLAN)
    return world


def test_the_plan_is_shown_statement_by_statement_with_its_flags(rig: Rig) -> None:
    code, text = run(rig.api, "plan", "schema", "orders")
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == f"PtahSchema {NS}/orders"
    assert "  statements:   3 (1 destructive, 1 privilege; severity by kubectl-ptah)" in lines
    assert any(line.startswith("  fingerprint:  sha256:") for line in lines)
    assert "PostgreSQL, coordinationKey orders-primary" in text
    assert "  1  safe        CREATE TABLE orders_v2 (id bigint PRIMARY KEY, note text " in text
    assert "  2  DESTRUCTIVE DROP TABLE orders_legacy;" in lines
    assert "  3  PRIVILEGE   GRANT SELECT ON orders_v2 TO reporting;" in lines
    # Each flag says what PostgreSQL's parse tree shows, beneath its statement.
    assert lines[lines.index("  2  DESTRUCTIVE DROP TABLE orders_legacy;") + 1] == (
        "                 -- parser: drops a table"
    )
    assert "                 -- parser: grants privileges" in lines


def test_json_for_tools(rig: Rig) -> None:
    code, text = run(rig.api, "-o", "json", "plan", "schema", "orders")
    assert code == 0
    view = json.loads(text)
    assert view["destructive"] is True
    assert [(s["severity"], s["destructive"], s["privilege"]) for s in view["statements"]] == [
        ("safe", False, False),
        ("destructive", True, False),
        ("privilege", False, True),
    ]
    schema = rig.api.get(PTAHSCHEMAS, NS, "orders")
    assert view["fingerprint"] == schema["status"]["plan"]["fingerprint"]
    assert view["plan"]["uid"] == schema["status"]["plan"]["uid"]


def test_approve_creates_the_approval_of_exactly_the_plan_shown(rig: Rig) -> None:
    code, text = run(rig.api, "approve", "schema", "orders", stdin="y\n")
    assert code == 0, text
    assert "approve plan ptah-plan-" in text
    (approval,) = rig.api.list(PTAHSCHEMAAPPROVALS, NS)
    plan = rig.api.get(PTAHSCHEMAS, NS, "orders")["status"]["plan"]
    spec = approval["spec"]
    assert spec["planRef"] == {"name": plan["name"], "uid": plan["uid"]}
    assert spec["planFingerprint"] == plan["fingerprint"]
    # Nobody's name is typed: admission writes it.
    assert "approver" not in spec and "approvedAt" not in spec


def test_not_confirming_creates_nothing(rig: Rig) -> None:
    code, _ = run(rig.api, "approve", "schema", "orders", stdin="n\n")
    assert code == 1
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


def test_a_plan_that_moved_since_it_was_shown_is_not_approved(rig: Rig) -> None:
    code, _ = run(
        rig.api, "approve", "schema", "orders", "--yes", "--fingerprint", "sha256:" + "0" * 64
    )
    assert code == 1
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


def test_a_plan_replaced_while_the_person_read_it_is_not_approved(rig: Rig) -> None:
    class Replacing(io.StringIO):
        """Answers "y", and meanwhile a new plan is published."""

        def readline(self, size: int | None = -1) -> str:
            stored = rig.api.get(PTAHSCHEMAS, NS, "orders")
            status = stored["status"]
            status["plan"] = {**status["plan"], "fingerprint": "sha256:" + "9" * 64}
            rig.api.patch_status(
                PTAHSCHEMAS,
                NS,
                "orders",
                status,
                resource_version=stored["metadata"]["resourceVersion"],
            )
            return "y\n"

    out = io.StringIO()
    code = main(
        ["-n", NS, "approve", "schema", "orders"],
        connector=lambda _args: rig.api,
        stdin=Replacing(),
        stdout=out,
    )
    assert code == 1
    assert rig.api.list(PTAHSCHEMAAPPROVALS, NS) == []


def test_a_chunk_that_is_not_the_plans_is_never_shown(rig: Rig) -> None:
    (chunk, *_) = rig.api.list(PTAHSCHEMAPLANCHUNKS, NS)
    rig.api.delete(PTAHSCHEMAPLANCHUNKS, NS, chunk["metadata"]["name"])
    code, text = run(rig.api, "plan", "schema", "orders")
    assert code == 1 and text == ""
