"""What a manager is configured with: who it is, what its Jobs are bound to, where its
Leases live and how long an Apply may run.

A real installation reads these from its chart values. The execution binding's
components are configuration; its epoch is not: it is installed into a resource's
``status.executionBinding`` the first time a manager sees the resource, and kept
while the components stay equal, so a manager-only upgrade (a new controller image,
the same binding) adopts the work its predecessor dispatched.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Final

from controller.pieces.podintent import AdmissionSettings
from jobclaim.api import ExecutionBindingStatus, ManagerRecord, ScratchImages
from jobclaim.errors import InvalidInput

# A minute each: the Job's deadline grace after the window, and the Lease's own grace
# after that, so the executor stops by its own clock before the Lease can lapse.
JOB_DEADLINE_GRACE_SECONDS: Final = 60
LEASE_GRACE_SECONDS: Final = 60
# The version of what this controller writes into status; part of the execution
# binding, so a manager that would read status differently installs a new epoch.
CONTROLLER_STATE_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class BindingInputs:
    """The components of the execution binding; a change to any installs a new epoch."""

    controller_state_version: int
    ptah_version: str
    executor_image: str
    runner_protocol_version: int
    # The chart's execution.scratchImages: what a provided scratch database runs, so a
    # changed one retires the plans made beside the old one like a changed executor.
    scratch_images: ScratchImages | None = None

    def matches(self, binding: ExecutionBindingStatus) -> bool:
        return (
            binding.controller_state_version == self.controller_state_version
            and binding.ptah_version == self.ptah_version
            and binding.executor_image == self.executor_image
            and binding.runner_protocol_version == self.runner_protocol_version
            and binding.scratch_images == self.scratch_images
        )

    def install(self, epoch: str) -> ExecutionBindingStatus:
        return ExecutionBindingStatus(
            epoch=epoch,
            controller_state_version=self.controller_state_version,
            ptah_version=self.ptah_version,
            executor_image=self.executor_image,
            runner_protocol_version=self.runner_protocol_version,
            scratch_images=self.scratch_images,
        )


def random_epoch() -> str:
    """``v1-`` + 32 hex of 16 random bytes: an epoch nobody else can produce."""
    return "v1-" + secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    """Everything a manager decides from besides what it reads from the API server.

    ``apply_window_seconds`` is how long after its claim an Apply may still start and
    run; the Lease a mutating claim takes outlives it by the graces above.
    """

    manager: ManagerRecord
    binding: BindingInputs
    lease_namespace: str
    identity: str = "ptah-operator"
    apply_window_seconds: int = 900
    renew_interval_seconds: float = 5.0
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)

    def __post_init__(self) -> None:
        if not self.lease_namespace:
            raise InvalidInput("the Lease namespace must not be empty")
        if not 30 <= self.apply_window_seconds <= 86_400 - 120:
            raise InvalidInput("the apply window must be between 30 seconds and a day")
        if self.renew_interval_seconds <= 0:
            raise InvalidInput("the renewal interval must be positive")

    def lease_duration(self, family: str, operation: str) -> int:
        """How long a claim's Lease lasts from its last renewal.

        A schema Apply or Plan holds the realm for its window plus a grace; a
        migration Apply adds the Job's deadline grace too, because a migration may
        leave its Lease to expire while its executor may still write, and the runner
        stops the executor at the end of the window, two graces before the lapse.
        """
        window = self.apply_window_seconds
        if family == "migration" and operation == "Apply":
            return window + JOB_DEADLINE_GRACE_SECONDS + LEASE_GRACE_SECONDS
        return window + LEASE_GRACE_SECONDS
