"""A real OCI registry on this machine: ``crane registry serve``.

go-containerregistry's registry stores blobs on disk in the work directory and
speaks the distribution API over plain HTTP. The lab serves it on the node's
address (the bridge's), not on loopback: containerd pulls images from it there
(told by a hosts.toml to use plain HTTP), and Pods, whose loopback is their own,
reach it there too, which the operator's Jobs need to fetch schema and migration
artifacts. The bridge address exists only on this machine and its pods.
crane itself is built from its Go module by ``make crane``.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from lab.cluster.processes import Child, wait_until

__all__ = ["Registry", "free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free now; the server that binds it next fails loudly if not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class Registry:
    """The registry process and its address (``HOST:PORT``)."""

    def __init__(self, crane: Path, storage: Path, log: Path, host: str = "127.0.0.1") -> None:
        self.address = f"{host}:{free_port(host)}"
        storage.mkdir(parents=True, exist_ok=True)
        self.child = Child(
            "registry",
            [str(crane), "registry", "serve", "--address", self.address, "--disk", str(storage)],
            log,
        )

    def start(self, timeout: float) -> None:
        self.child.start()
        with httpx.Client(timeout=2.0) as http:

            def ready() -> str:
                try:
                    response = http.get(f"http://{self.address}/v2/")
                except httpx.HTTPError as exc:
                    return f"GET /v2/: {exc!r}"
                return (
                    "" if response.status_code == 200 else f"/v2/ answered {response.status_code}"
                )

            wait_until("the registry", ready, timeout=timeout, children=[self.child])

    def stop(self) -> str:
        return self.child.stop(grace=5.0)
