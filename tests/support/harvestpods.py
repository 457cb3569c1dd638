"""A finished Job and the Pod the harvest reads, built from a claimed Job: what the
runner, jobclaim and webhook tests feed the harvest rules (runner.harvest)."""

from __future__ import annotations

import copy
from typing import Any

Pod = dict[str, Any]
FINISHED_AT = "2026-12-02T12:05:00Z"


def terminal(job: dict[str, Any], kind: str = "Complete") -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["status"] = {
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": FINISHED_AT}]
    }
    return job


def pod_of(job: dict[str, Any], *, uid: str = "pod-uid-1", message: str = "summary") -> Pod:
    template = copy.deepcopy(job["spec"]["template"])
    meta = job["metadata"]
    return {
        "metadata": {
            "name": meta["name"] + "-x1",
            "uid": uid,
            "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "name": "ptah",
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "message": message}},
                }
            ],
        },
    }
