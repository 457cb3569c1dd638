"""A stand-in API server over loopback HTTP that records each request and answers from a
queue (the `stub` fixture, a plugin tests/conftest.py registers), and a kubeconfig
pointing at it: what the client tests (tests/kube) and the webhook's text-answer tests
send real requests to."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import yaml


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"{}"
    content_type: str = "application/json"


@dataclass
class Stub:
    """Records each request and answers with the next queued ``Answer`` (default ``{}``)."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    hang: bool = False

    def answer(self, status: int = 200, body: Any = None, content_type: str = "") -> None:
        # A stream or a text is sent as it is; anything else as JSON.
        raw = body if isinstance(body, bytes | str) else json.dumps({} if body is None else body)
        encoded = raw.encode() if isinstance(raw, str) else raw
        self.answers.append(Answer(status, encoded, content_type or "application/json"))


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            stub.seen.append(
                Seen(
                    self.command,
                    parts.path,
                    dict(parse_qsl(parts.query)),
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
            )
            if stub.hang:
                stub.release.wait()
                return
            answer = stub.answers.pop(0) if stub.answers else Answer()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test reports what matters; the stub stays quiet

    return Handler


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()
    thread.join()


def kubeconfig(tmp_path: Path, server: str, token: str = "secret-token") -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "stub", "cluster": {"server": server}}],
                "users": [{"name": "op", "user": {"token": token}}],
                "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "op"}}],
                "current-context": "stub",
            }
        )
    )
    return path
