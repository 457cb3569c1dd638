"""What a reader takes from a live Job besides its match: who dispatched it, and whether
it has finished.

Both sides need the same answers. The controller adopts a Job another manager of the
same binding created, so it rebuilds that Job with the manager record the Job itself
carries; the webhook rebuilds a submitted Job the same way. A reader that took the
record from elsewhere (its own image, say) would refuse every Job a previous replica
dispatched, and a reader that took it loosely would rebuild a Job nobody can name.
Whether a Job has finished decides when its cleanup TTL may be set and whether a Plan
Job's result may be published, on both sides; whether its Pod has stopped decides when
the controller may hand a database back and whether a harvest may still be written to.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final, Literal

from jobclaim._canonical import is_pinned_image
from jobclaim.api.common import ManagerRecord
from jobclaim.builder import INSTALL_CONTAINER, RUNNER_CONTAINER
from jobclaim.envelope import ANN_CONTROLLER_IMAGE, ANN_CONTROLLER_REVISION
from jobclaim.errors import InvalidInput
from jobclaim.match import manager_record_problem

Finished = Literal["Complete", "Failed"]
_FINISHED: Final = ("Failed", "Complete")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def manager_record_of(job: Mapping[str, Any]) -> ManagerRecord:
    """The manager record a Job carries: its controller image and revision, its runner.

    Raises ``InvalidInput`` with the sentence ``match`` would give when a value has
    more than one reading. The record binds nothing by itself: the admission snapshot's
    template digest pins every value taken here, so a rebuild from a forged record
    fails the match it is made for.
    """
    annotations: Mapping[str, Any] = _map(_map(job.get("metadata")).get("annotations"))
    problem = manager_record_problem(annotations)
    if problem:
        raise InvalidInput(problem)
    pod = _map(_map(_map(job.get("spec")).get("template")).get("spec"))
    # The runner comes from the manager's image, by the init container that installs it.
    containers = pod.get("initContainers")
    runners = [
        c
        for c in (containers if isinstance(containers, list) else [])
        if isinstance(c, dict) and c.get("name") == INSTALL_CONTAINER
    ]
    if len(runners) != 1 or not is_pinned_image(runners[0].get("image")):
        raise InvalidInput("the Job's runner image is not pinned by a lowercase SHA-256 digest")
    return _record(
        annotations[ANN_CONTROLLER_IMAGE], annotations[ANN_CONTROLLER_REVISION], runners[0]["image"]
    )


# Every Job one manager dispatches carries the same record, and building the model
# validates its pinned images again: a frozen model is a pure function of its three
# strings (all checked as text above), so one build answers every Job that carries them.
# A value the model refuses raises and is not remembered.
@functools.lru_cache(maxsize=64, typed=True)
def _record(controller_image: str, controller_revision: str, runner_image: str) -> ManagerRecord:
    return ManagerRecord(
        controller_image=controller_image,
        controller_revision=controller_revision,
        runner_image=runner_image,
    )


def finished(job: Mapping[str, Any]) -> Finished | None:
    """``Failed`` or ``Complete`` once the Job controller says so, else None.

    Only a condition whose status is exactly ``"True"`` counts: a Job still running
    may carry ``Complete`` as ``"False"``. Failed wins over Complete, so a Job that
    somehow carries both is never read as a success.
    """
    conditions = _map(job.get("status")).get("conditions")
    true = {
        c.get("type")
        for c in (conditions if isinstance(conditions, list) else [])
        if isinstance(c, dict) and c.get("status") == "True"
    }
    for kind in _FINISHED:
        if kind in true:
            return "Failed" if kind == "Failed" else "Complete"
    return None


def runner_state(pod: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """Why the runner container has not run to its end exactly once, and its message."""
    items = _map(pod.get("status")).get("containerStatuses")
    statuses = [
        _map(s)
        for s in (items if isinstance(items, list) else [])
        if _map(s).get("name") == RUNNER_CONTAINER
    ]
    if len(statuses) != 1:
        return "the Pod reports no status for its runner container", None
    status = statuses[0]
    if status.get("restartCount", 0) != 0 or _map(status.get("lastState")).get("terminated"):
        # restartPolicy is Never; a restarted runner ran the executor twice.
        return "the runner container ran more than once", None
    terminated = _map(_map(status.get("state")).get("terminated"))
    if not terminated:
        return "the runner container has not terminated", None
    message = terminated.get("message")
    return None, message if isinstance(message, str) else None


def pod_stopped(pod: Mapping[str, Any]) -> bool:
    """Whether a Pod can no longer run anything: the one answer every reader asks.

    The kubelet says the Pod ended (phase Succeeded or Failed), or its one runner
    container terminated having run exactly once. A runner that restarted does not
    count as stopped until the phase says so: restartPolicy is Never, so a restart
    means the kubelet already broke the rule that would keep a terminated runner
    terminated, and a Lease handed back on its current state could be handed back
    while it runs a third time.
    """
    phase = _map(pod.get("status")).get("phase")
    return phase in ("Succeeded", "Failed") or runner_state(pod)[0] is None
