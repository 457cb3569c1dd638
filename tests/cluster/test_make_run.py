"""``make run``'s environment on the real node: the chart installs, the examples converge.

The session's cluster gets what ``make run`` puts on its own (``lab.clusterrun.LabRun``):
PostgreSQL on the bridge, the images and example artifacts in the registry by digest,
``helm install`` of the chart, the database Secrets and the examples (the MySQL one on
MariaDB). Then the
approvals are given as ``make run --approve`` gives them (``kubectl ptah approve``),
and the databases are read with SQL: the desired schema is there, and so are the
migrations, recorded in the executor's revision table.

The images come from ``make images`` (the ``unit`` target builds them); without them
these tests fail, never skip. ``make run`` as a command, with its own cluster, is the
last teardown test (tests/cluster/test_teardown.py).
"""

from __future__ import annotations

import time

import pytest

from jobclaim import SCRATCH_CONTAINER
from jobclaim.apiserver import (
    JOBS,
    PODS,
    PTAHRESULTRECORDS,
    PTAHSCHEMAS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
)
from lab import install
from lab.clusterrun import (
    EXAMPLES,
    MANAGER_IMAGE,
    MANAGER_NAMESPACE,
    NAMESPACE,
    SCRATCH_IMAGES,
    SECRETS,
    Follow,
    LabRun,
)
from lab.progress import DONE
from lab.run import CLUSTER_ROLES

pytestmark = pytest.mark.cluster

# From the examples' creation to both InSync: about ten Jobs (Resolve, Verify,
# Observe/Read, Plan, Apply, the proof) on a node shared with the machine's other
# work; a healthy run on a quiet machine needs about a minute.
CONVERGE_DEADLINE = 900.0


def test_the_chart_installs_and_its_manager_becomes_ready(lab_run: LabRun) -> None:
    deployment = lab_run.admin.get(install.DEPLOYMENTS, MANAGER_NAMESPACE, install.RELEASE)
    assert install.deployment_ready(deployment)
    pods = lab_run.admin.list(
        PODS, MANAGER_NAMESPACE, label_selector={"app.kubernetes.io/name": install.RELEASE}
    )
    manager = lab_run.images[MANAGER_IMAGE]
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert len(running) == 1
    status = running[0]["status"]["containerStatuses"][0]
    # The kubelet ran exactly the bytes make images built, pulled by digest.
    assert running[0]["spec"]["containers"][0]["image"] == manager.ref
    assert status["imageID"].endswith(manager.digest) and status["ready"] is True
    # The webhook the API server calls is the chart's, trusted through its caBundle.
    decisions = lab_run.admin.get(
        VALIDATING_WEBHOOK_CONFIGURATIONS, None, "ptah-operator-decisions"
    )
    assert all(hook["clientConfig"].get("caBundle") for hook in decisions["webhooks"])


def _converge(run: LabRun) -> dict[str, str]:
    follow = Follow(run, approve=True, say=print)
    deadline = time.monotonic() + CONVERGE_DEADLINE
    while True:
        phases = follow.step()
        if all(phase == DONE for phase in phases.values()):
            return phases
        if time.monotonic() > deadline:
            pytest.fail(f"the examples were not InSync within {CONVERGE_DEADLINE:.0f}s: {phases}")
        # The controller and the kubelet act on their own time.
        time.sleep(0.5)


def test_every_example_reaches_in_sync_and_the_databases_hold_it(lab_run: LabRun) -> None:
    assert _converge(lab_run) == {example.name: DONE for example in EXAMPLES}

    columns = lab_run.query(
        "orders",
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
        " WHERE table_schema = 'public' ORDER BY table_name, column_name",
    )
    assert columns == [
        ("customers", "email", "text", "NO"),
        ("customers", "id", "bigint", "NO"),
        ("orders", "customer_id", "bigint", "NO"),
        ("orders", "id", "bigint", "NO"),
        ("orders", "placed_at", "timestamp with time zone", "NO"),
        ("orders", "total", "numeric", "NO"),
    ]
    indexes = lab_run.query("orders", "SELECT indexname FROM pg_indexes WHERE tablename = 'orders'")
    assert ("orders_customer_id_idx",) in indexes
    foreign = lab_run.query(
        "orders",
        "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = 'orders'::regclass",
    )
    assert len(foreign) == 1

    applied = lab_run.query(
        "billing",
        "SELECT version, version_key, description, dirty FROM ptah_lab.revisions ORDER BY version",
    )
    assert applied == [
        (1, "0001", "create_invoices", False),
        (2, "0002", "invoice_status", False),
    ]
    invoices = lab_run.query(
        "billing",
        "SELECT column_name, column_default FROM information_schema.columns"
        " WHERE table_name = 'invoices' ORDER BY column_name",
    )
    assert ("status", "'open'::text") in invoices
    assert [name for name, _ in invoices] == ["amount", "customer", "id", "status"]

    # The MySQL example, read from MariaDB: its revision table and its table.
    assert lab_run.mariadb is not None
    catalog = lab_run.mariadb.query(
        "catalog", "SELECT version, version_key, dirty FROM ptah_lab_revisions ORDER BY version"
    )
    assert catalog == [(1, "0001", 0), (2, "0002", 0)]
    products = lab_run.mariadb.query(
        "catalog",
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = 'catalog' AND table_name = 'products' ORDER BY column_name",
    )
    assert [name for (name,) in products] == ["id", "price", "sku", "stock"]

    # The MySQL schema, compared in the MariaDB the operator provided in its Pods: its
    # tables are in the target, and no dev database was ever named (no Secret for one).
    inventory = lab_run.mariadb.query(
        "inventory",
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'inventory' ORDER BY table_name, column_name",
    )
    assert inventory == [
        ("stock", "quantity"),
        ("stock", "sku"),
        ("stock", "warehouse_id"),
        ("warehouses", "code"),
        ("warehouses", "id"),
    ]
    # The namespace is the session's: other scenarios' schemas (pod loss, upgrade) name
    # dev Secrets of their own there, so only the two examples are judged.
    provided = ("orders", "inventory")
    for name in provided:
        assert lab_run.admin.get(PTAHSCHEMAS, NAMESPACE, name)["spec"]["dev"] == {"provided": {}}
    secrets = {s["metadata"]["name"] for s in lab_run.admin.list(SECRETS, NAMESPACE)}
    assert {"orders-db", "inventory-db"} <= secrets
    assert not {n for n in secrets if "dev" in n and n.startswith(provided)}, secrets


def test_the_schemas_compared_in_a_scratch_database_of_their_own_pods(lab_run: LabRun) -> None:
    # Every Observe and Plan Job of a provided dev ran the chart's scratch image beside
    # ptah, pulled by digest; no Apply Job carried one.
    jobs = lab_run.admin.list(JOBS, NAMESPACE)
    engines = {"orders": "postgresql", "inventory": "mysql"}
    seen: set[tuple[str, str]] = set()
    for job in jobs:
        labels = job["metadata"].get("labels", {})
        owner = job["metadata"]["ownerReferences"][0]
        # Only the examples: other scenarios' schemas in the session's namespace name a
        # dev Secret and so carry no sidecar.
        if owner["kind"] != "PtahSchema" or owner["name"] not in engines:
            continue
        pod = job["spec"]["template"]["spec"]
        sidecars = [c for c in pod["initContainers"] if c["name"] == SCRATCH_CONTAINER]
        operation = labels.get("operator.ptah.run/operation", "")
        if operation in ("observe", "plan"):
            (sidecar,) = sidecars
            expected = lab_run.images[SCRATCH_IMAGES[engines[owner["name"]]]].ref
            assert sidecar["image"] == expected
            seen.add((owner["name"], operation))
        else:
            assert sidecars == [], job["metadata"]["name"]
    assert {name for name, _ in seen} == set(engines)


def test_no_operation_pod_log_holds_sql_and_the_manager_reads_no_log(lab_run: LabRun) -> None:
    """The results are records the Pods wrote; their logs name a record and a digest.

    Runs after the examples converged (tests run in file order): every operation Pod
    still on the API server is read as a person with ``pods/log`` would read it."""
    role = lab_run.admin.get(CLUSTER_ROLES, None, "ptah-operator-manager")
    granted = {r for rule in role["rules"] for r in rule.get("resources", [])}
    assert "pods/log" not in granted and "ptahresultrecords" in granted
    records = lab_run.admin.list(PTAHRESULTRECORDS, NAMESPACE)
    assert records, "the operation Pods recorded their results"
    sql_lines = ("CREATE TABLE", "ALTER TABLE", "CREATE INDEX", "INSERT INTO", "DROP ")
    pods = [
        p
        for p in lab_run.admin.list(PODS, NAMESPACE)
        if any(r.get("kind") == "Job" for r in p["metadata"].get("ownerReferences", []))
    ]
    assert pods, "no operation Pod is left to read"
    for pod in pods:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        state = next((c.get("state") or {} for c in statuses if c.get("name") == "ptah"), {})
        if not (state.get("running") or state.get("terminated")):
            continue  # a reading of a later scenario still initializing: no log yet
        log = lab_run.admin.read_pod_log(
            NAMESPACE, pod["metadata"]["name"], container="ptah", limit_bytes=1 << 20
        )
        found = [line for line in log.splitlines() if any(s in line for s in sql_lines)]
        assert found == [], f"{pod['metadata']['name']} logs SQL: {found[:3]}"
        assert "PTAH_RUNNER_RESULT" not in log
        print(f"# {pod['metadata']['name']}: {log.strip().splitlines()[-1:]}")
