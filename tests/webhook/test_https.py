"""Over real HTTPS: uvicorn on a loopback port with a generated CA, and an httpx
client that verifies it. Routing, the answer for each way a request ends, health,
readiness and metrics, as the API server and a kubelet see them.

The listening socket is bound and listening before the server thread starts, so a
client can connect at once (the kernel queues it): no test waits for startup.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import certs
from jobclaim.apiserver import Resource, Unavailable
from tests.support.webhookscenes import SETTINGS, job_create, status_write
from webhook import Engine, StateReader
from webhook.app import create_app
from webhook.serving import local_certificates, readiness, uvicorn_server


class Switchable(StateReader):
    """The scene's objects, until ``down`` is set: then every read is Unavailable."""

    down = False

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        if self.down:
            raise Unavailable("the API server is unreachable")
        return super().get_text(resource, namespace, name)


@dataclass
class Served:
    url: str
    ca: Path
    reader: Switchable

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, verify=ssl.create_default_context(cafile=str(self.ca)), timeout=30
        )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    local = local_certificates(tmp_path)
    tls = certs.ReloadingTLS(local.cert, local.key)
    reader = Switchable(job_create("schema", "Apply").objects)
    engine = Engine(reader, SETTINGS)
    app = create_app(engine, readiness=readiness(tls, reader, namespace="ptah-system"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Accepted connections inherit TCP_NODELAY on Linux. uvicorn sets it only on sockets
    # it binds itself; without it every response waits ~40 ms for a delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn_server(app, tls, host="127.0.0.1", port=port)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    try:
        yield Served(f"https://127.0.0.1:{port}", local.ca, reader)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        engine.close()
        sock.close()
    assert not thread.is_alive()


def post(served: Served, path: str, body: bytes) -> httpx.Response:
    with served.client() as client:
        return client.post(path, content=body, headers={"content-type": "application/json"})


def test_the_exact_job_is_admitted_over_https(served: Served) -> None:
    scene = job_create("schema", "Apply")
    answer = post(served, "/validate-controller-write", scene.body())
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": scene.uid,
            "allowed": True,
            "status": {"code": 200, "message": "write matches the operator admission contract"},
        },
    }


def test_a_forged_job_is_denied_with_its_sentence(served: Served) -> None:
    scene = job_create("schema", "Apply")
    assert scene.obj is not None
    scene.obj["spec"]["template"]["spec"]["hostNetwork"] = True
    answer = post(served, "/validate-controller-write", scene.body()).json()["response"]
    assert (answer["allowed"], answer["status"]["code"]) == (False, 403)
    assert answer["status"]["message"] == (
        "the Job is outside the active operation intent: "
        "the Job's spec is not the one its claim builds"
    )


def test_a_person_writing_status_is_denied_on_the_manager_state_route(served: Served) -> None:
    answer = post(served, "/validate-manager-state", status_write("jane").body())
    assert answer.status_code == 200
    assert answer.json()["response"]["status"]["code"] == 403


def test_a_malformed_review_is_a_400_echoing_the_uid(served: Served) -> None:
    review = job_create("schema", "Apply").review()
    review["request"]["surprise"] = True
    answer = post(served, "/validate-controller-write", json.dumps(review).encode())
    assert answer.status_code == 400
    response = answer.json()["response"]
    assert (response["uid"], response["allowed"]) == (review["request"]["uid"], False)
    assert response["status"]["message"] == (
        "the review does not decode: unknown field request.surprise"
    )


def test_a_failed_read_is_a_500_and_not_ready(served: Served) -> None:
    served.reader.down = True
    answer = post(served, "/validate-controller-write", job_create("schema", "Apply").body())
    assert answer.status_code == 500
    assert answer.json()["response"]["allowed"] is False
    with served.client() as client:
        ready = client.get("/readyz")
    assert ready.status_code == 503
    assert "the api server is not readable" in ready.text


def test_health_readiness_and_routing(served: Served) -> None:
    with served.client() as client:
        assert (client.get("/healthz").status_code, client.get("/healthz").text) == (200, "ok")
        assert client.get("/readyz").status_code == 200
        assert client.get("/validate-controller-write").status_code == 405
        assert client.post("/validate", content=b"{}").status_code == 404
        assert client.get("/docs").status_code == 404


def test_metrics_count_every_decision(served: Served) -> None:
    post(served, "/validate-controller-write", job_create("schema", "Apply").body())
    post(served, "/validate-controller-write", b"not json")
    post(served, "/validate-manager-state", status_write().body())
    with served.client() as client:
        metrics = client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = metrics.text.splitlines()
    decisions = "ptah_webhook_decisions_total"
    latency = "ptah_webhook_decision_duration_seconds"
    for line in (
        f'{decisions}{{endpoint="controller-write",rule="job-create",verdict="allowed"}} 1.0',
        f'{decisions}{{endpoint="controller-write",rule="decoding",verdict="malformed"}} 1.0',
        f'{decisions}{{endpoint="manager-state",rule="manager-state",verdict="allowed"}} 1.0',
        f'{latency}_bucket{{endpoint="controller-write",le="+Inf"}} 2.0',
        f'{latency}_count{{endpoint="manager-state"}} 1.0',
    ):
        assert line in lines, line


def test_every_decision_is_one_json_log_line(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="webhook.decisions")
    scene = job_create("schema", "Apply")
    post(served, "/validate-controller-write", scene.body())
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "webhook.decisions"]
    assert len(lines) == 1
    assert lines[0]["uid"] == scene.uid and lines[0]["verdict"] == "allowed"


def test_only_a_client_trusting_the_generated_ca_gets_an_answer(served: Served) -> None:
    with (
        httpx.Client(base_url=served.url, verify=ssl.create_default_context()) as untrusting,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        untrusting.get("/healthz")


def test_there_is_no_plain_http_listener(served: Served) -> None:
    plain = served.url.replace("https://", "http://")
    with httpx.Client(base_url=plain) as client, pytest.raises(httpx.HTTPError):
        client.get("/healthz")
