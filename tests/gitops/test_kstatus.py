"""The real kstatus computation agrees with what the operator's conditions mean.

Flux, cli-utils' appliers and anything built on ``sigs.k8s.io/cli-utils`` read a
resource through kstatus: ``Reconciling`` True is InProgress, ``Stalled`` True is
Failed, a spec the controller has not observed is InProgress, otherwise Current. Every
decision the phase machine can reach, for both families, is published as the operator
publishes it (``controller.stages.conditions.conditions_for``) and handed to kstatus itself
(``lab/kstatus``, built from the module by ``make kstatus``); it must say what those
conditions mean. Hand rows cover what the machine does not publish.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.publishedstatus import published_objects

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "lab" / "kstatus" / "bin" / "kstatus"


@pytest.fixture(scope="session")
def kstatus() -> Path:
    """The kstatus tool, built by `make kstatus` when missing; fails, never skips."""
    done = subprocess.run(
        ["make", "--no-print-directory", "kstatus"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not BINARY.exists():
        pytest.fail(
            f"the kstatus check needs lab/kstatus (`make kstatus`):\n{done.stdout}{done.stderr}"
        )
    return BINARY


def computed(kstatus: Path, objects: list[dict[str, Any]]) -> list[str]:
    """kstatus's status for each object, in order."""
    done = subprocess.run(
        [str(kstatus)],
        input=json.dumps(objects),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [result["status"] for result in json.loads(done.stdout)]


def meant(obj: dict[str, Any]) -> str:
    """What the operator's conditions say, in kstatus's words: Stalled is Failed,
    Reconciling is InProgress, and so is Ready False (a plan waiting for a person, a
    suspended resource: not in sync, though nothing is working on it)."""
    holds = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    if holds.get("Stalled") == "True":
        return "Failed"
    if holds.get("Reconciling") == "True" or holds.get("Ready") == "False":
        return "InProgress"
    return "Current"


def test_kstatus_reads_every_published_decision_as_its_conditions_mean(kstatus: Path) -> None:
    cases = list(published_objects())
    assert len(cases) > 20  # the machine's decisions, not an empty walk
    statuses = computed(kstatus, [obj for _, obj in cases])
    wrong = {
        label: (status, meant(obj))
        for (label, obj), status in zip(cases, statuses, strict=True)
        if status != meant(obj)
    }
    assert wrong == {}
    phases: dict[str, set[str]] = {}
    for (_, obj), status in zip(cases, statuses, strict=True):
        phases.setdefault(status, set()).add(obj["status"]["phase"])
    # The anchors a person relies on: only in sync is Current, and Blocked is Failed.
    assert phases["Current"] == {"InSync"}
    assert "Blocked" in phases["Failed"] and "Blocked" not in phases["InProgress"]


def in_sync() -> dict[str, Any]:
    return next(obj for label, obj in published_objects() if label.startswith("PtahSchema-InSync"))


def spec_unobserved(obj: dict[str, Any]) -> None:
    obj["metadata"]["generation"] = obj["status"]["observedGeneration"] + 1


def deleting(obj: dict[str, Any]) -> None:
    obj["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"


def no_status(obj: dict[str, Any]) -> None:
    del obj["status"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (None, "Current"),
        (spec_unobserved, "InProgress"),
        (deleting, "Terminating"),
        # kstatus cannot tell a resource nobody has reconciled yet from one that needs
        # no status: Current. The operator's first pass writes Reconciling True, so the
        # window is one pass; a tool that must wait longer reads Ready.
        (no_status, "Current"),
    ],
    ids=["in-sync", "spec-not-observed", "deleting", "no-status-yet"],
)
def test_kstatus_reads_what_the_machine_does_not_publish(
    kstatus: Path, change: Any, expected: str
) -> None:
    obj = copy.deepcopy(in_sync())
    if change is not None:
        change(obj)
    assert computed(kstatus, [obj]) == [expected]
