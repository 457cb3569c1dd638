"""LocalControlPlane stops promptly and leaves nothing behind.

An operator under test always holds watches open, and a harness that lingers
or orphans its controller manager would slowly fill a developer's machine.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from lab.localplane import LocalControlPlane, ensure_binary

pytestmark = pytest.mark.controlplane


def _children(pid: int) -> list[int]:
    """Process ids whose parent is pid, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process exited while we were looking
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_stop_is_prompt_with_an_open_watch_and_leaves_no_process() -> None:
    plane = LocalControlPlane(binary=ensure_binary())
    plane.start()
    workdir = plane.workdir
    server_pid = plane.pid
    # The controller manager is the server's only child.
    helpers = _children(server_pid)
    assert len(helpers) == 1

    streaming = threading.Event()

    def watch(http: httpx.Client) -> None:
        headers = {"Authorization": f"Bearer {plane.token('admin')}"}
        try:
            with http.stream(
                "GET", f"{plane.server_url}/api/v1/configmaps?watch=1", headers=headers
            ) as response:
                streaming.set()
                for _ in response.iter_lines():
                    pass
        except httpx.HTTPError:
            pass  # the server closing the watch is the point of this test

    with httpx.Client(verify=plane.ssl_context(), timeout=None) as http:
        watcher = threading.Thread(target=watch, args=(http,), daemon=True)
        watcher.start()
        assert streaming.wait(timeout=10)

        started = time.monotonic()
        plane.stop()
        took = time.monotonic() - started
        watcher.join(timeout=10)

    assert took < 10, f"stop took {took:.1f}s"
    assert not watcher.is_alive()
    assert not _alive(server_pid)
    assert not any(_alive(pid) for pid in helpers)
    assert not workdir.exists()
