"""Run one process of an unpacked image under runc, the way the Job's kubelet would.

runc is the runtime the lab node's containerd drives (``make node-packages``); here
it is given a bundle directly: the image's root filesystem **read-only**, the
image's user and environment, no capabilities, no new privileges, and only the
mounts the Job gives its containers (an emptyDir at /tmp, the runner's volume, a
termination-log file). The network namespace is the host's, so a registry on
127.0.0.1 is reachable, as it is from the lab's Pods through their gateway; or, with
``own_network``, one of the container's own holding only loopback (runc brings it
up), as a Pod's: a scratch database there listens on its fixed port beside nothing.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.images.oci import Archive

_ids = itertools.count()


@dataclass(frozen=True)
class Mount:
    source: Path | None  # None: a fresh tmpfs
    destination: str
    read_only: bool = False

    def spec(self) -> dict[str, Any]:
        if self.source is None:
            return {
                "destination": self.destination,
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777", "size=268435456"],
            }
        return {
            "destination": self.destination,
            "type": "bind",
            "source": str(self.source),
            "options": ["rbind", "ro" if self.read_only else "rw"],
        }


def image_user(archive: Archive) -> tuple[int, int]:
    """The image's numeric ``uid:gid`` (a name would need the image's passwd)."""
    uid, _, gid = archive.user.partition(":")
    assert uid.isdigit() and gid.isdigit(), f"the image's user {archive.user!r} is not uid:gid"
    return int(uid), int(gid)


def runc() -> str:
    found = shutil.which("runc")
    assert found, "runc is missing: run `make node-packages`"
    return found


def run(
    archive: Archive,
    rootfs: Path,
    work: Path,
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    mounts: tuple[Mount, ...] = (),
    cwd: str = "/",
    timeout: float = 300,
    own_network: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """argv in a container of the unpacked image; runc removes it when argv exits."""
    name = f"ptah-images-{next(_ids)}"
    bundle, state = work / name, work / "runc-state"
    bundle.mkdir(parents=True)
    subprocess.run([runc(), "spec", "--bundle", str(bundle)], check=True, timeout=60)
    spec = json.loads((bundle / "config.json").read_text())
    uid, gid = image_user(archive)
    variables = dict(item.partition("=")[::2] for item in archive.env)
    variables.update(env or {})
    spec["root"] = {"path": str(rootfs), "readonly": True}
    spec["hostname"] = name
    spec["process"].update(
        terminal=False,
        args=argv,
        env=[f"{k}={v}" for k, v in variables.items()],
        cwd=cwd,
        user={"uid": uid, "gid": gid},
        noNewPrivileges=True,
        capabilities={kind: [] for kind in spec["process"]["capabilities"]},
    )
    spec["mounts"].extend(m.spec() for m in mounts)
    if not own_network:
        spec["linux"]["namespaces"] = [
            ns for ns in spec["linux"]["namespaces"] if ns["type"] != "network"
        ]
    (bundle / "config.json").write_text(json.dumps(spec))
    command = [runc(), "--root", str(state), "run", "--bundle", str(bundle), name]
    try:
        return subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        subprocess.run([runc(), "--root", str(state), "delete", "--force", name], check=False)
        raise


def left_running(work: Path) -> list[str]:
    """The containers of this work directory that runc still knows (none, after a run)."""
    state = work / "runc-state"
    if not state.exists():
        return []
    listed = subprocess.run(
        [runc(), "--root", str(state), "list", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return listed.stdout.split()
