"""The adapter's requests on the wire, against a local HTTP stub.

The conformance suite proves the adapter against a real API server; this file pins
what that server cannot show: the exact method, path, query, content type and body of
each verb, pod log reads (there is no kubelet behind the test control plane), and the
answers that never come (a refused connection, a read that times out).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobclaim.apiserver import (
    CONFIGMAPS,
    JOBS,
    NAMESPACES,
    PTAHSCHEMAS,
    AlreadyExists,
    Invalid,
    NotFound,
    Unavailable,
)
from kube.client import KubeApi, KubeConfigError
from tests.support.kubestub import Stub, kubeconfig


@pytest.fixture
def api(stub: Stub, tmp_path: Path) -> Iterator[KubeApi]:
    with KubeApi.from_kubeconfig(kubeconfig(tmp_path, stub.url), timeout=5.0) as client:
        yield client


MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JSON = "application/json"

Call = Callable[[KubeApi], object]
# (id, call, method, path, query, content type, body)
REQUESTS: list[tuple[str, Call, str, str, dict[str, str], str | None, Any]] = [
    # Control row: an uncached get of one namespaced object.
    (
        "get",
        lambda a: a.get(JOBS, "ns", "job-1"),
        "GET",
        "/apis/batch/v1/namespaces/ns/jobs/job-1",
        {},
        None,
        None,
    ),
    (
        "get-cluster-scoped",
        lambda a: a.get(NAMESPACES, None, "ns"),
        "GET",
        "/api/v1/namespaces/ns",
        {},
        None,
        None,
    ),
    (
        "list-selector",
        lambda a: a.list(CONFIGMAPS, "ns", label_selector={"b": "2", "a": "1"}),
        "GET",
        "/api/v1/namespaces/ns/configmaps",
        {"labelSelector": "a=1,b=2"},
        None,
        None,
    ),
    (
        "list-all-namespaces",
        lambda a: a.list(PTAHSCHEMAS, None),
        "GET",
        "/apis/operator.ptah.run/v1alpha1/ptahschemas",
        {},
        None,
        None,
    ),
    (
        "create",
        lambda a: a.create(CONFIGMAPS, "ns", {"metadata": {"name": "c"}, "data": {"k": "v"}}),
        "POST",
        "/api/v1/namespaces/ns/configmaps",
        {},
        JSON,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}},
    ),
    (
        "replace",
        lambda a: a.replace(CONFIGMAPS, "ns", {"metadata": {"name": "c", "resourceVersion": "7"}}),
        "PUT",
        "/api/v1/namespaces/ns/configmaps/c",
        {},
        JSON,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "resourceVersion": "7"},
        },
    ),
    (
        "patch-metadata-guarded",
        lambda a: a.patch_metadata(
            JOBS, "ns", "j", {"labels": {"gone": None}}, resource_version="7"
        ),
        "PATCH",
        "/apis/batch/v1/namespaces/ns/jobs/j",
        {},
        MERGE,
        {"metadata": {"labels": {"gone": None}, "resourceVersion": "7"}},
    ),
    (
        "patch-spec-unguarded",
        lambda a: a.patch_spec(JOBS, "ns", "j", {"ttlSecondsAfterFinished": 600}),
        "PATCH",
        "/apis/batch/v1/namespaces/ns/jobs/j",
        {},
        MERGE,
        {"spec": {"ttlSecondsAfterFinished": 600}},
    ),
    (
        "patch-status",
        lambda a: a.patch_status(PTAHSCHEMAS, "ns", "s", {"a": 1}, resource_version="9"),
        "PATCH",
        "/apis/operator.ptah.run/v1alpha1/namespaces/ns/ptahschemas/s/status",
        {},
        JSON_PATCH,
        [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": "9"},
            {"op": "add", "path": "/status", "value": {"a": 1}},
        ],
    ),
    (
        "delete-uid",
        lambda a: a.delete(JOBS, "ns", "j", uid="u-1"),
        "DELETE",
        "/apis/batch/v1/namespaces/ns/jobs/j",
        {},
        JSON,
        {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": "u-1"},
        },
    ),
    (
        "delete-foreground",
        lambda a: a.delete(JOBS, "ns", "j", propagation="Foreground"),
        "DELETE",
        "/apis/batch/v1/namespaces/ns/jobs/j",
        {},
        JSON,
        {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"},
    ),
    (
        "name-is-quoted",
        lambda a: a.get(CONFIGMAPS, "ns", "a/b"),
        "GET",
        "/api/v1/namespaces/ns/configmaps/a%2Fb",
        {},
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("call", "method", "path", "query", "content_type", "body"),
    [row[1:] for row in REQUESTS],
    ids=[row[0] for row in REQUESTS],
)
def test_each_verb_sends_one_exact_request(
    api: KubeApi,
    stub: Stub,
    call: Call,
    method: str,
    path: str,
    query: dict[str, str],
    content_type: str | None,
    body: Any,
) -> None:
    stub.answer(body={"metadata": {"name": "x"}, "items": []})
    call(api)
    [seen] = stub.seen
    assert (seen.method, seen.path, seen.query) == (method, path, query)
    assert seen.headers.get("content-type") == content_type
    assert seen.body == body
    assert seen.headers["authorization"] == "Bearer secret-token"


def test_the_pydantic_free_answer_is_the_wire_json(api: KubeApi, stub: Stub) -> None:
    stub.answer(body={"metadata": {"name": "j", "resourceVersion": "3"}, "spec": {"x": 1}})
    job = api.get(JOBS, "ns", "j")
    # Dicts out, camelCase as stored, with apiVersion and kind filled in.
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "resourceVersion": "3"},
        "spec": {"x": 1},
    }


def test_list_items_carry_api_version_and_kind(api: KubeApi, stub: Stub) -> None:
    stub.answer(body={"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]})
    items = api.list(CONFIGMAPS, "ns")
    assert [(i["kind"], i["apiVersion"], i["metadata"]["name"]) for i in items] == [
        ("ConfigMap", "v1", "a"),
        ("ConfigMap", "v1", "b"),
    ]


def test_a_token_replaces_the_kubeconfig_credentials(stub: Stub, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, stub.url)
    with KubeApi.from_kubeconfig(path, token="other-token") as api:
        api.get(JOBS, "ns", "j")
    assert stub.seen[0].headers["authorization"] == "Bearer other-token"


def test_a_pod_log_is_read_as_text_with_a_byte_limit(api: KubeApi, stub: Stub) -> None:
    # The limit cut the last character (é, two bytes) in half.
    stub.answer(body="line one\ncaf\xc3".encode("latin-1"), content_type="text/plain")
    text = api.read_pod_log("ns", "pod-1", container="runner", limit_bytes=13)
    [seen] = stub.seen
    assert (seen.method, seen.path) == ("GET", "/api/v1/namespaces/ns/pods/pod-1/log")
    assert seen.query == {"container": "runner", "limitBytes": "13"}
    assert "application/json" in seen.headers["accept"]
    assert text == "line one\ncaf\ufffd"


def test_a_refused_log_read_keeps_its_reason(api: KubeApi, stub: Stub) -> None:
    stub.answer(404, {"kind": "Status", "reason": "NotFound", "message": 'pods "p" not found'})
    with pytest.raises(NotFound, match='pods "p" not found'):
        api.read_pod_log("ns", "p", container="runner", limit_bytes=100)


def test_an_error_answer_is_classified(api: KubeApi, stub: Stub) -> None:
    stub.answer(409, {"kind": "Status", "reason": "AlreadyExists", "message": "exists"})
    with pytest.raises(AlreadyExists, match="exists"):
        api.create(JOBS, "ns", {"metadata": {"name": "j"}})


def test_a_watch_yields_events_and_raises_an_error_event(api: KubeApi, stub: Stub) -> None:
    lines = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "4"}}},
        {"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}},
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}},
    ]
    stub.answer(body="\n".join(json.dumps(line) for line in lines) + "\n")
    events = api.watch(CONFIGMAPS, "ns", resource_version="3", timeout_seconds=5)
    assert next(events).type == "ADDED"
    modified = next(events)
    assert (modified.type, modified.object["kind"]) == ("MODIFIED", "ConfigMap")
    with pytest.raises(Unavailable):
        next(events)
    assert stub.seen[0].query == {"watch": "true", "timeoutSeconds": "5", "resourceVersion": "3"}


@pytest.mark.parametrize("line", [b"<html>502</html>", b"[]", b"null", b'{"type": "ADD'])
def test_a_watch_line_that_is_not_an_event_ends_the_watch_as_unavailable(
    api: KubeApi, stub: Stub, line: bytes
) -> None:
    added = {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "4"}}}
    stub.answer(body=json.dumps(added).encode() + b"\n" + line + b"\n")
    events = api.watch(CONFIGMAPS, "ns", timeout_seconds=5)
    assert next(events).type == "ADDED"
    with pytest.raises(Unavailable, match="watch on configmaps sent a line that is not"):
        next(events)


def test_a_refused_watch_raises_when_it_is_opened(api: KubeApi, stub: Stub) -> None:
    stub.answer(422, {"kind": "Status", "reason": "Invalid", "message": "bad selector"})
    with pytest.raises(Invalid):
        api.watch(CONFIGMAPS, "ns")


def test_a_refused_connection_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more.
    path = kubeconfig(tmp_path, f"http://127.0.0.1:{port}")
    with KubeApi.from_kubeconfig(path, timeout=5.0) as api, pytest.raises(Unavailable):
        api.create(JOBS, "ns", {"metadata": {"name": "j"}})


def test_an_answer_that_never_comes_is_unavailable(stub: Stub, tmp_path: Path) -> None:
    stub.hang = True
    path = kubeconfig(tmp_path, stub.url)
    with KubeApi.from_kubeconfig(path, timeout=0.2) as api, pytest.raises(Unavailable):
        api.create(JOBS, "ns", {"metadata": {"name": "j"}})
    # Sent once: a create that may have reached the server is never sent again.
    assert len(stub.seen) == 1


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda a: a.replace(CONFIGMAPS, "ns", {"metadata": {"name": "c"}}), "resourceVersion"),
        (lambda a: a.get(NAMESPACES, "ns", "x"), "cluster-scoped"),
        (lambda a: a.create(JOBS, None, {"metadata": {"name": "j"}}), "namespace must be given"),
        (lambda a: a.get(JOBS, "ns", ""), "must not be empty"),
        (lambda a: a.read_pod_log("ns", "p", container="c", limit_bytes=0), "byte limit"),
    ],
    ids=[
        "replace-without-version",
        "namespace-on-cluster-scoped",
        "namespaced-without-namespace",
        "empty-name",
        "no-limit",
    ],
)
def test_a_programming_error_is_refused_before_sending(
    api: KubeApi, stub: Stub, call: Call, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        call(api)
    assert stub.seen == []


def test_a_kubeconfig_that_cannot_be_loaded_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="cannot load the kubeconfig"):
        KubeApi.from_kubeconfig(tmp_path / "missing.yaml")


def test_an_unknown_context_is_a_config_error(stub: Stub, tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="elsewhere"):
        KubeApi.from_kubeconfig(kubeconfig(tmp_path, stub.url), context="elsewhere")


def test_outside_a_pod_there_is_no_in_cluster_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(KubeConfigError, match="service account"):
        KubeApi.in_cluster()
