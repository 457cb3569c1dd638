"""The planning half's stage on the real API server: the manager's adapter shadowed by
the forged publications the webhook must refuse, and a stand-in node that runs a
reading's Job (its Pod records its result under its own token, then succeeds).

The planning test and the freshness test drive the controller through the same
stage; the ``node_logs`` fixture is imported by each (it needs the ``operator``
fixture of ``tests.support.realapioperator``).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from jobclaim.apiserver import (
    JOBS,
    PTAHSCHEMAPLANCHUNKS,
    PTAHSCHEMAPLANS,
    PTAHSCHEMAS,
    ApiError,
    Object,
    Resource,
)
from kube.client import KubeApi
from lab.standin import run_on_stand_in
from tests.support.realapioperator import Operator
from tests.support.scriptednode import POLICY, Database, result_for_job

OTHER_RECORD = {
    "controllerImage": "registry.example.com/other@sha256:" + "9" * 64,
    "controllerRevision": "someone-else",
    "runnerImage": "registry.example.com/other-runner@sha256:" + "9" * 64,
}


class NodeLogs(KubeApi):
    """The manager's adapter, with the publication of a plan shadowed by the attempts
    the webhook must refuse."""

    refused: list[str]
    shadow: bool

    def create(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        if self.shadow and resource == PTAHSCHEMAPLANS:
            forged = copy.deepcopy(obj)
            forged["spec"]["dispatchedBy"] = OTHER_RECORD
            self._must_refuse("a plan naming another Job's manager record", resource, forged)
        if self.shadow and resource == PTAHSCHEMAPLANCHUNKS:
            forged = copy.deepcopy(obj)
            forged["spec"]["data"] = base64.b64encode(b"DROP TABLE orders;\n").decode()
            self._must_refuse("a chunk whose bytes are not the plan's", resource, forged)
        return super().create(resource, namespace, obj)

    def _must_refuse(self, what: str, resource: Resource, forged: Object) -> None:
        try:
            super().create(resource, forged["metadata"]["namespace"], forged)
        except ApiError as error:
            self.refused.append(f"{what}: {error}")
            return
        raise AssertionError(f"the webhook admitted {what}")


@pytest.fixture
def node_logs(operator: Operator) -> Iterator[NodeLogs]:
    api = NodeLogs.from_kubeconfig(operator.plane.kubeconfig("manager"))
    api.refused, api.shadow = [], True
    with api:
        yield api


def schema_status(operator: Operator, namespace: str) -> dict[str, Any]:
    return dict(operator.admin.get(PTAHSCHEMAS, namespace, "orders").get("status") or {})


def run_on_stand_in_node(
    operator: Operator,
    namespace: str,
    claim: dict[str, Any],
    db: Database,
) -> None:
    """Run the claim's recorded Job: its Pod records its result, then succeeds."""
    job = operator.admin.get(JOBS, namespace, claim["jobName"])
    result = result_for_job(job, claim, db, policy=POLICY)
    run_on_stand_in(operator.plane, operator.admin, namespace, claim["jobName"], result)
