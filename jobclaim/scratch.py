"""The scratch database the operator provides: the sidecar, its volume and its URL.

A PtahSchema whose ``spec.dev`` says ``provided: {}`` names no scratch database of its
own; its Observe and Plan Pods then carry one, a container of the image the chart names
for the target's engine (``execution.scratchImages``, part of the execution binding).
The contract with the scratch images (images/, and the runner's ready-check):

- the container runs as uid 65532 with a read-only root filesystem; its data lives in
  an in-memory emptyDir, size-limited, at ``/var/lib/scratch``, initialized by the
  image's entrypoint on start, so nothing a reading leaves outlives its Pod;
- it listens on 127.0.0.1 only (5432 PostgreSQL, 3306 MariaDB), database and user
  ``scratch``, no password: nothing outside the Pod reaches it, so no Secret is needed;
- it is a native sidecar (an init container with ``restartPolicy: Always``), so the
  Job completes when ptah's container ends and the kubelet stops the database then;
- the runner container gets ``PTAH_DEV_URL`` as a plain value and
  ``PTAH_DEV_PROVIDED=1``, with which the runner waits, bounded, until the database
  answers before ptah starts.

An Apply never carries it: it runs its approved plan alone, and a database container
in its Pod would be a second process nobody's plan accounts for. The webhook's rebuild
(``jobclaim.match``) holds the sidecar to the binding's image, and the binding's image
to the chart's pin, so a Job with another scratch image, or one on an Apply, is refused.
"""

from __future__ import annotations

from typing import Any, Final

from jobclaim.api.common import Engine, ExecutionBindingStatus, ScratchImages
from jobclaim.errors import BuildRefused

SCRATCH_CONTAINER: Final = "scratch-db"
SCRATCH_VOLUME: Final = "scratch"
SCRATCH_DIR: Final = "/var/lib/scratch"
SCRATCH_USER: Final = 65532
# In memory, so the scratch data is gone with the Pod and never touches the node's disk;
# the limit keeps a runaway desired schema from taking the node's memory (tmpfs pages
# count against the Pod), and is far above what a schema's tables take empty.
SCRATCH_SIZE_LIMIT: Final = "512Mi"
ENV_DEV_URL: Final = "PTAH_DEV_URL"
ENV_DEV_PROVIDED: Final = "PTAH_DEV_PROVIDED"
# The URL each engine's scratch image answers on: loopback, its own database and user.
DEV_URLS: Final[dict[str, str]] = {
    "PostgreSQL": "postgres://scratch@127.0.0.1:5432/scratch?sslmode=disable",
    "MySQL": "mysql://scratch@127.0.0.1:3306/scratch",
}
# The runner operations that compare in a scratch database (schema drift, schema plan).
COMPARING_OPERATIONS: Final = frozenset({"observe", "plan"})
# Which chart value names each engine's image, for the sentence a missing one gives.
_CHART_KEYS: Final[dict[str, str]] = {"PostgreSQL": "postgresql", "MySQL": "mysql"}


def scratch_images_of(postgresql: str, mysql: str) -> ScratchImages | None:
    """The binding's scratch images from the chart's two values (empty: not named).

    None when the chart names neither, so a binding made without them keeps its form
    (and an installation that never uses a provided dev keeps its epoch)."""
    if not postgresql and not mysql:
        return None
    return ScratchImages(postgresql=postgresql or None, mysql=mysql or None)


def scratch_image(binding: ExecutionBindingStatus, engine: Engine) -> str:
    """The image the binding names for ``engine``, or the refusal that says which value
    the chart is missing (a provided dev with no image would be a reading that can
    never compare, failing in the Pod instead of here with a reason)."""
    images = binding.scratch_images
    image = None
    if images is not None:
        image = images.postgresql if engine == "PostgreSQL" else images.mysql
    if image is None:
        raise BuildRefused(
            f"the schema's spec.dev is provided, and the execution binding names no {engine} "
            f"scratch image (the chart's execution.scratchImages.{_CHART_KEYS[engine]})"
        )
    return image


def scratch_env(engine: Engine) -> list[dict[str, Any]]:
    """What the runner container reads: the loopback URL, plain (it holds no secret),
    and the flag that makes the runner wait for the database before ptah starts."""
    return [
        {"name": ENV_DEV_PROVIDED, "value": "1"},
        {"name": ENV_DEV_URL, "value": DEV_URLS[engine]},
    ]


def scratch_volume() -> dict[str, Any]:
    return {
        "name": SCRATCH_VOLUME,
        "emptyDir": {"medium": "Memory", "sizeLimit": SCRATCH_SIZE_LIMIT},
    }


def scratch_container(
    image: str, resources: dict[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """The sidecar, written with every field the API server would default (``defaults``
    is the builder's), so a Job read back equals its rebuild."""
    return {
        "name": SCRATCH_CONTAINER,
        # The image's own entrypoint: it initializes the empty volume and runs the
        # server in the foreground, and exits on SIGTERM when ptah's container ends.
        "image": image,
        "resources": resources,
        "restartPolicy": "Always",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": SCRATCH_USER,
            "runAsGroup": SCRATCH_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": SCRATCH_VOLUME, "mountPath": SCRATCH_DIR}],
        **defaults,
    }
