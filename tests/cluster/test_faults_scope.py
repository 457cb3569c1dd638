"""A manager installed for one namespace, on the real cluster (issue 35's acceptance).

make run's chart is upgraded with ``watch.namespaces: [shop]`` (the examples'
namespace), and then:

- RBAC: the API server's authorizer is asked, for the manager's ServiceAccount, what
  ``kubectl auth can-i --as system:serviceaccount:ptah-system:<sa>`` asks. The lab
  builds no kubectl (its control plane is built from the Kubernetes sources without
  one), so the question is sent as what kubectl sends: a SubjectAccessReview through
  the API (``tests/support/access.py``). A table: each row is asked of the cluster-wide
  install first and of the scoped one after. The control rows (in ``shop``) are allowed
  by both; every other row is allowed cluster-wide, which shows the question can pass,
  and refused once scoped.
- Work: a PtahSchema in another namespace, created first, gets no status, no
  finalizer, no Event, no Job and no Lease, while its twin created after it in ``shop``
  (the control) is served: it gets a status and its first Job. One queue serves
  first come first, so a manager that saw the outsider would have served it first.

The release is put back to its cluster-wide scope afterwards (the later scenarios and
make run's tests share it). Its file name sorts it with the fault scenarios, the
scenarios that share make run's chart (``conftest.pytest_collection_modifyitems``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Final

import pytest

from jobclaim import lease_name
from jobclaim.apiserver import EVENTS, JOBS, LEASES, PTAHSCHEMAS, NotFound, Object
from jobclaim.envelope import OWNER_LABEL
from jobclaim.naming import coordination_digest
from lab.clusterrun import EXAMPLES, MANAGER_NAMESPACE, NAMESPACE, LabRun
from lab.install import DEPLOYMENTS, RELEASE
from lab.run import keyed
from tests.cluster.clusterkit import Api, poll, schema_gone
from tests.cluster.managers import chart_upgraded
from tests.support.access import Post, allowed, question, service_account

pytestmark = pytest.mark.cluster

KEY: Final = "scope-probe"
OPS: Final = "operator.ptah.run"
SHOP, OTHER, CLUSTER = "shop", "other", None
# (id, verb, group, resource, where, allowed cluster-wide, allowed scoped to shop)
ROWS: Final[list[tuple[str, str, str, str, str | None, bool, bool]]] = [
    ("control: watch Jobs in shop", "watch", "batch", "jobs", SHOP, True, True),
    ("control: create Jobs in shop", "create", "batch", "jobs", SHOP, True, True),
    ("control: patch schema status in shop", "patch", OPS, "ptahschemas/status", SHOP, True, True),
    ("watch Jobs in another namespace", "watch", "batch", "jobs", OTHER, True, False),
    ("create Jobs in another namespace", "create", "batch", "jobs", OTHER, True, False),
    ("watch Jobs across the cluster", "watch", "batch", "jobs", CLUSTER, True, False),
    ("list Pods in another namespace", "list", "", "pods", OTHER, True, False),
    ("get ConfigMaps in another namespace", "get", "", "configmaps", OTHER, True, False),
    ("list schemas across the cluster", "list", OPS, "ptahschemas", CLUSTER, True, False),
    ("patch schema status elsewhere", "patch", OPS, "ptahschemas/status", OTHER, True, False),
    ("create Events in another namespace", "create", "events.k8s.io", "events", OTHER, True, False),
]


def _answers(post: Post, user: str, groups: list[str], other: str) -> dict[str, bool]:
    where = {SHOP: NAMESPACE, OTHER: other}
    return {
        row[0]: allowed(
            post, user, groups, question(row[1], row[2], row[3], where.get(row[4] or ""))
        )
        for row in ROWS
    }


@contextlib.contextmanager
def scoped_to_shop(run: LabRun) -> Iterator[None]:
    """The release upgraded to ``watch.namespaces: [shop]``, put back after, always."""
    chart_upgraded(run, {"watch": {"namespaces": [NAMESPACE]}})
    try:
        yield
    finally:
        chart_upgraded(run, {"watch": {"namespaces": []}})


def _schema(run: LabRun, namespace: str, name: str) -> Object:
    """The schema example as make run applied it (its artifact pinned), keyed: the
    realm it names admits shop alone, and the outsider must be ignored, not refused."""
    applied = run.get(EXAMPLES[0])
    spec = keyed(copy.deepcopy({"spec": applied["spec"]}), KEY)["spec"]
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _jobs(run: LabRun, namespace: str, name: str) -> list[Object]:
    return run.admin.list(JOBS, namespace, label_selector={OWNER_LABEL["schema"]: name})


def test_a_manager_scoped_to_shop_ignores_another_namespace_and_may_not_touch_it(
    lab_run: LabRun, api: Api, namespace: str
) -> None:
    run, other = lab_run, namespace
    deployment = run.admin.get(DEPLOYMENTS, MANAGER_NAMESPACE, RELEASE)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    user, groups = service_account(MANAGER_NAMESPACE, account)

    def post(path: str, body: Object) -> Object:
        created: Object = api.create(path, body)
        return created

    wide = _answers(post, user, groups, other)
    assert wide == {row[0]: row[5] for row in ROWS}

    with scoped_to_shop(run):
        expected = {row[0]: row[6] for row in ROWS}
        last: list[dict[str, bool]] = []

        def in_force() -> dict[str, bool] | None:
            last[:] = [_answers(post, user, groups, other)]
            return last[0] if last[0] == expected else None

        # The release is Ready with the new Roles; RBAC reads them from an informer
        # cache, in force a moment after the write: a bounded poll for the whole table.
        with contextlib.suppress(pytest.fail.Exception):
            poll("the scoped grants in force", in_force, timeout=60.0)
        assert last[0] == expected

        outsider = run.admin.create(PTAHSCHEMAS, other, _schema(run, other, "scope-outsider"))
        control = "scope-control"
        run.admin.create(PTAHSCHEMAS, NAMESPACE, _schema(run, NAMESPACE, control))
        try:
            poll(
                f"{NAMESPACE}/{control} served (a status and its first Job)",
                lambda: (
                    (
                        (run.admin.get(PTAHSCHEMAS, NAMESPACE, control).get("status") or {}).get(
                            "phase"
                        )
                        and _jobs(run, NAMESPACE, control)
                    )
                    or None
                ),
                timeout=300.0,
            )
            seen = run.admin.get(PTAHSCHEMAS, other, "scope-outsider")
            assert seen["metadata"]["uid"] == outsider["metadata"]["uid"]
            assert not seen.get("status"), seen.get("status")
            assert not seen["metadata"].get("finalizers"), seen["metadata"]
            assert [e for e in run.admin.list(EVENTS, other) if "scope-outsider" in str(e)] == []
            assert _jobs(run, other, "scope-outsider") == []
            assert run.admin.list(JOBS, other) == []
            digest = coordination_digest(
                engine="PostgreSQL", namespace=other, coordination_key=KEY, realm=None
            )
            with pytest.raises(NotFound):
                run.admin.get(LEASES, MANAGER_NAMESPACE, lease_name(digest))
        finally:
            # The control goes while the manager still serves shop, which takes its
            # finalizer off; the outsider has none and goes with its namespace.
            run.admin.delete(PTAHSCHEMAS, NAMESPACE, control)
            poll(
                f"{NAMESPACE}/{control} gone",
                lambda: schema_gone(run, NAMESPACE, control),
                timeout=120.0,
            )
