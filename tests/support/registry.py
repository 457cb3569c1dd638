"""The loopback OCI registry (crane's `registry serve`) as a module-scoped fixture, for the
tests that push or pull images (tests/labexecutor, tests/chart, tests/images). A plugin
registered by tests/conftest.py, so a test names the fixture and imports nothing."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

CRANE = Path(__file__).resolve().parents[2] / ".tools" / "bin" / "crane"


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    """A registry on 127.0.0.1; it fails (never skips) when crane was not built."""
    assert CRANE.exists(), "crane is missing: run `make crane`"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="ptah-lab-registry-") as disk:
        server = subprocess.Popen(
            [str(CRANE), "registry", "serve", "--address", f"127.0.0.1:{port}", "--disk", disk],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # The registry listens on its own time; poll /v2/ with a deadline.
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline, (
                    "the registry never came up"
                )
                time.sleep(0.05)
            yield f"127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert server.returncode is not None
