"""The lab's fault points: an Apply stopped dead right after a named durable write.

Wired only when the configuration is a lab one (``PTAH_LAB_FAULT_POINTS``, refused by
``manager.config`` unless the executor image is the lab's stand-in). The resource
names the write in its ``lab.ptah.run/stop-after`` annotation (a
``controller.pieces.faultpoints.Boundary`` value); right after that write of its Apply claim
succeeds, the pass parks for good: it writes nothing more, renews nothing, and holds
its key, so the process is as good as dead from that write on. The cluster test then
SIGKILLs the container from the host and deletes the Pod (a park, not a self-kill: a
container's first process cannot SIGKILL itself, and the test must know the write
went through before it kills). The test removes the annotation before the kill, so
the replacement manager does not stop at the same place again.
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from controller import Boundary, Operation, Subject

log = logging.getLogger("manager.labfaults")

ANNOTATION: Final = "lab.ptah.run/stop-after"
# The line the cluster test waits for before it kills: synchronization only; what the
# test asserts is read from the API server and the database.
PARKED: Final = "lab fault point: parked after the {boundary} write"


class LabFaultPoints:
    """``controller.pieces.faultpoints.FaultPoints`` that park the pass at the named write."""

    def __init__(self, park: threading.Event | None = None) -> None:
        # Never set in the manager: a parked pass stays parked until the process dies.
        self._park = park or threading.Event()

    def wanted(self, boundary: Boundary, subject: Subject) -> bool:
        annotations = subject.metadata.annotations or {}
        return annotations.get(ANNOTATION) == boundary.value

    def after(self, boundary: Boundary, subject: Subject, operation: Operation) -> None:
        if not self.wanted(boundary, subject):
            return
        log.warning(
            PARKED.format(boundary=boundary.value) + " of %s/%s, claim %s; the process "
            "is to be killed",
            subject.metadata.namespace,
            subject.metadata.name,
            operation.id,
        )
        self._park.wait()
