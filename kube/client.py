"""The one adapter over the official ``kubernetes`` client: dicts in, dicts out.

Nothing else in the operator imports the client. Its generated models, exceptions and
urllib3 errors stop here: callers see the wire JSON (camelCase, as the API server
stores it) and the domain errors of ``jobclaim.apiserver``, so the in-memory double
can stand in for this class without a caller noticing.

Every request goes through the client's generic ``ApiClient.call_api`` with a path
built from a ``Resource``, because the typed APIs return pydantic models that would
have to be converted back (and lose unknown fields), and the custom-object APIs do
not cover built-in resources. The client still supplies what it is good at: kubeconfig
and in-cluster loading, token refresh, TLS and connection pooling.

Three choices follow from "never run SQL twice":

- A write is sent once. urllib3 may retry a request that never left (a refused
  connection), never one that may have reached the server: a retried create would
  turn our own lost write into ``AlreadyExists``, a retried delete into ``NotFound``.
- Every call has a time-out, so a hung connection ends as ``Unavailable`` (outcome
  unknown) instead of holding a worker and its Lease forever.
- ``classify`` alone maps an answer to an error, and says ``Refused`` only when the
  API server provably stored nothing; anything it cannot prove is ``Unavailable``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self, cast
from urllib.parse import quote

import orjson
import urllib3

# The client ships py.typed but leaves most functions unannotated; each call of one
# carries an ignore rather than loosening mypy for this whole module.
from kubernetes import client, config
from kubernetes.watch.watch import iter_resp_lines

from jobclaim.apiserver import (
    PODS,
    AlreadyExists,
    ApiError,
    Conflict,
    Invalid,
    NotFound,
    Object,
    Refused,
    Resource,
    Unavailable,
    WatchEvent,
    check_field_patch,
)
from jobclaim.errors import PtahError

__all__ = ["DEFAULT_TIMEOUT", "KubeApi", "KubeConfigError", "classify", "resource_path"]

DEFAULT_TIMEOUT: Final = 30.0
# A watch is held open by the server for ``timeout_seconds``; the read time-out only
# has to notice a connection that died silently, so it waits a little longer.
_WATCH_GRACE_SECONDS: Final = 15.0

# Answered before anything was stored: authentication (401), authorization (403),
# a malformed or undecodable request (400, 405, 406, 413, 415), validation (422) and
# priority-and-fairness shedding (429). Every other status is not proof of that.
_REFUSED_STATUSES: Final = frozenset({400, 401, 403, 405, 406, 413, 415, 429})
# A fail-closed admission webhook that could not be called is reported as a 500
# InternalError carrying this text (k8s.io/apiserver pkg/util/webhook ErrCallingWebhook).
# Admission runs before storage, so this 500, unlike any other, proves nothing was
# stored: the replaced managers' webhook endpoints going first must not leave every
# create in flight as an unknown outcome.
_WEBHOOK_CALL_FAILED: Final = "failed calling webhook"

# A method named ``list`` shadows the builtin inside the class body.
_Query = list[tuple[str, str]]
_Objects = list[Object]

_MERGE_PATCH: Final = "application/merge-patch+json"
# Server-side apply: the body is YAML, and JSON is YAML.
_APPLY_PATCH: Final = "application/apply-patch+yaml"
_JSON_PATCH: Final = "application/json-patch+json"


class KubeConfigError(PtahError):
    """The client configuration (a kubeconfig, or the Pod's service account) cannot be
    loaded. Raised at construction, never by a call: no request was made."""


def classify(status: int | None, reason: str, body: str | bytes | None) -> ApiError:
    """The domain error for one failed answer. Pure: status, HTTP reason, raw body.

    ``status`` is None (or 0) when no answer arrived. ``body`` is usually a
    ``metav1.Status``; its ``reason`` tells AlreadyExists from other 409s and its
    ``message`` becomes the error's sentence.
    """
    status_reason, message = _status_details(body)
    text = message or reason or "no answer from the API server"
    kind_reason = status_reason or reason
    if not status:
        return Unavailable(f"no answer from the API server: {text}", status=None, reason=reason)
    if status == 404:
        return NotFound(text, status=status, reason=kind_reason)
    if status == 409:
        if status_reason == "AlreadyExists":
            return AlreadyExists(text, status=status, reason=kind_reason)
        return Conflict(text, status=status, reason=kind_reason)
    if status == 422:
        return Invalid(text, status=status, reason=kind_reason)
    if status in _REFUSED_STATUSES:
        return Refused(text, status=status, reason=kind_reason)
    if status == 500 and _WEBHOOK_CALL_FAILED in text:
        return Refused(text, status=status, reason=kind_reason)
    return Unavailable(text, status=status, reason=kind_reason)


def _status_details(body: str | bytes | None) -> tuple[str, str]:
    """(reason, message) of a ``metav1.Status`` body; ("", raw text) for anything else."""
    if not body:
        return "", ""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "", text.strip()[:500]
    if not isinstance(parsed, dict) or parsed.get("kind") != "Status":
        return "", text.strip()[:500]
    return str(parsed.get("reason") or ""), str(parsed.get("message") or "")


def resource_path(
    resource: Resource,
    namespace: str | None,
    name: str | None = None,
    subresource: str = "",
    *,
    all_namespaces: bool = False,
) -> str:
    """The REST path of a collection, an object or an object's subresource.

    A namespaced resource without a namespace is a programming error except for a
    list or a watch across all namespaces: the cluster-wide path would otherwise turn
    a forgotten namespace into a 404 or 405 that reads like an answer.
    """
    root = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    if not resource.namespaced and namespace is not None:
        raise ValueError(f"{resource.plural} are cluster-scoped; no namespace may be given")
    if resource.namespaced and namespace is None and not all_namespaces:
        raise ValueError(f"a {resource.kind} is namespaced; its namespace must be given")
    if namespace is not None:
        root += f"/namespaces/{quote(namespace, safe='')}"
    path = f"{root}/{resource.plural}"
    if name is not None:
        if not name:
            raise ValueError(f"a {resource.kind} name must not be empty")
        path += f"/{quote(name, safe='')}"
    if subresource:
        path += f"/{subresource}"
    return path


class KubeApi:
    """``jobclaim.apiserver.ApiClient`` over a real API server.

    Build it with ``from_kubeconfig`` or ``in_cluster``; ``close`` releases the
    connection pool. Safe to share between threads: the client's pool is.
    """

    def __init__(self, configuration: Any, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wrap a loaded ``kubernetes.client.Configuration`` (prefer the constructors)."""
        if timeout <= 0:
            raise ValueError("the request time-out must be positive")
        # One attempt per request; only a connection that was never made is retried,
        # because only then can the request not have reached the server.
        configuration.retries = urllib3.Retry(
            total=None, connect=2, read=0, redirect=0, status=0, other=0
        )
        self._client = client.ApiClient(configuration)
        self._timeout = timeout

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | Path,
        *,
        context: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Self:
        """Connect as a kubeconfig's context says; ``token`` replaces its credentials."""
        configuration = client.Configuration()
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(path),
                context=context,
                client_configuration=configuration,
                # The operator never writes to a kubeconfig it was given.
                persist_config=False,
            )
        except (config.ConfigException, OSError, ValueError) as exc:
            raise KubeConfigError(f"cannot load the kubeconfig {path}: {exc}") from exc
        if token is not None:
            configuration.api_key = {"BearerToken": f"Bearer {token}"}
            configuration.refresh_api_key_hook = None
        return cls(configuration, timeout=timeout)

    @classmethod
    def in_cluster(cls, *, timeout: float = DEFAULT_TIMEOUT) -> Self:
        """Connect with the Pod's service account (its token is re-read as it rotates)."""
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError) as exc:
            raise KubeConfigError(f"cannot use the Pod's service account: {exc}") from exc
        return cls(configuration, timeout=timeout)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reads ---------------------------------------------------------------

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        return self._object(resource, self._json("GET", resource_path(resource, namespace, name)))

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        """The body of the GET ``get`` makes, undecoded: ``webhook.engine.TextReader``.

        The same request and the same errors (NotFound and the rest, by ``classify``).
        What it does not repeat is ``get``'s look at the answer, which would cost the
        parse this method exists to spare: an answer that is not JSON, or not an
        object, is handed over as it came instead of raised as ``Unavailable``, and
        the caller's decoder has to fail on it (the webhook's fails such a read, a
        500). A conforming API server never sends one, and its answer to a GET of one
        object always carries the ``apiVersion`` and ``kind`` that ``get`` would
        otherwise fill in (only list items lack them), so for every answer a real
        server gives, this decodes to exactly what ``get`` returns.
        """
        return self._request("GET", resource_path(resource, namespace, name))

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: Mapping[str, str] | None = None,
    ) -> _Objects:
        query: _Query = []
        if label_selector:
            query.append(("labelSelector", _selector(label_selector)))
        path = resource_path(resource, namespace, all_namespaces=True)
        answer = self._json("GET", path, query=query)
        return [self._object(resource, item) for item in answer.get("items") or []]

    def read_pod_log(self, namespace: str, name: str, *, container: str, limit_bytes: int) -> str:
        if limit_bytes <= 0:
            raise ValueError("a log read needs a positive byte limit")
        path = resource_path(PODS, namespace, name, "log")
        query = [("container", container), ("limitBytes", str(limit_bytes))]
        # The log is text/plain, but a refusal is a JSON Status: a client accepting only
        # text would turn every refusal into 406 Not Acceptable and lose its reason.
        raw = self._request("GET", path, query=query, accept="text/plain, application/json")
        # limitBytes may cut a multi-byte character in half; the log is evidence to
        # read, not to parse, so the cut character becomes U+FFFD.
        return raw.decode("utf-8", errors="replace")

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 60,
        label_selector: Mapping[str, str] | None = None,
    ) -> Iterator[WatchEvent]:
        """Change notifications until the server closes the watch after ``timeout_seconds``."""
        query = [("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if label_selector:
            # Filtered by the server: an unlabelled object is never sent, never decoded.
            query.append(("labelSelector", _selector(label_selector)))
        response = self._send(
            "GET",
            resource_path(resource, namespace, all_namespaces=True),
            query=query,
            timeout=(self._timeout, timeout_seconds + _WATCH_GRACE_SECONDS),
        )
        if not 200 <= response.status <= 299:
            raise classify(response.status, str(response.reason or ""), response.read())
        return self._events(resource, response)

    def _events(self, resource: Resource, response: Any) -> Iterator[WatchEvent]:
        raw = response.response
        try:
            for line in iter_resp_lines(raw):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                event = _event(resource, line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    # 410 Gone (the version is too old) lands here: the caller lists
                    # again, which it must do after any failed watch anyway.
                    raise classify(obj.get("code"), "", orjson.dumps(obj))
                if kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    yield WatchEvent(kind, self._object(resource, obj))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"the watch on {resource.plural} broke off: {exc}") from exc
        finally:
            # Closed, not returned to the pool half-read: a caller that stops early
            # would otherwise leave the rest of the stream for the next request.
            raw.close()
            raw.release_conn()

    # -- writes --------------------------------------------------------------

    def create(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        path = resource_path(resource, namespace)
        return self._object(resource, self._json("POST", path, body=body))

    def replace(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        meta = obj.get("metadata") or {}
        if not meta.get("resourceVersion"):
            # Without it the API server updates unconditionally, and the last writer
            # silently wins over a change this caller never saw.
            raise ValueError(f"a {resource.kind} replace needs metadata.resourceVersion")
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        path = resource_path(resource, namespace, str(meta.get("name") or ""))
        return self._object(resource, self._json("PUT", path, body=body))

    def patch_metadata(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        metadata: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        patch: dict[str, Any] = {"metadata": dict(metadata)}
        _guard(patch, resource_version)
        return self._merge_patch(resource, namespace, name, patch)

    def patch_spec(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        spec: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        patch: dict[str, Any] = {"spec": dict(spec)}
        _guard(patch, resource_version)
        return self._merge_patch(resource, namespace, name, patch)

    def patch_fields(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        fields: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        check_field_patch(fields, resource_version)
        patch: dict[str, Any] = dict(fields)
        _guard(patch, resource_version)
        return self._merge_patch(resource, namespace, name, patch)

    def patch_status(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        if not resource_version:
            raise ValueError("a status patch needs the resourceVersion it was decided at")
        # A JSON patch, not a merge patch: the status is replaced whole, so a field the
        # caller dropped is gone rather than merged back. Writing resourceVersion into
        # the patched object makes the API server's update refuse a stale one with 409
        # (a JSON-patch "test" op would fail as a 422, indistinguishable from Invalid).
        ops = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "add", "path": "/status", "value": dict(status)},
        ]
        path = resource_path(resource, namespace, name, "status")
        answer = self._json("PATCH", path, body=ops, content_type=_JSON_PATCH)
        return self._object(resource, answer)

    def apply(
        self,
        resource: Resource,
        namespace: str | None,
        obj: Object,
        *,
        field_manager: str,
        force: bool = False,
    ) -> Object:
        """Server-side apply ``obj`` as ``field_manager``; ``force`` takes over fields
        another manager set (the applier owns what it declares)."""
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        path = resource_path(resource, namespace, str(obj["metadata"]["name"]))
        query: _Query = [("fieldManager", field_manager)]
        if force:
            query.append(("force", "true"))
        answer = self._json("PATCH", path, query=query, body=body, content_type=_APPLY_PATCH)
        return self._object(resource, answer)

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Foreground", "Background", "Orphan"] = "Background",
    ) -> None:
        # The propagation policy is always sent: batch/v1 Jobs default to orphaning
        # their Pods, which would leave a Pod running SQL after its Job is gone.
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if uid is not None:
            # Deletes only the object this caller looked at, not a successor that was
            # created under the same name since.
            options["preconditions"] = {"uid": uid}
        self._request("DELETE", resource_path(resource, namespace, name), body=options)

    # -- transport -------------------------------------------------------------

    def _merge_patch(
        self, resource: Resource, namespace: str | None, name: str, patch: Object
    ) -> Object:
        path = resource_path(resource, namespace, name)
        return self._object(
            resource, self._json("PATCH", path, body=patch, content_type=_MERGE_PATCH)
        )

    def _object(self, resource: Resource, obj: Any) -> Object:
        if not isinstance(obj, dict):
            raise Unavailable(f"the API server answered a {resource.kind} request with no object")
        # List items of built-in kinds come without apiVersion and kind; every object
        # handed out carries both, as the double's do.
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        return cast(Object, obj)

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: _Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        raw = self._request(method, path, query=query, body=body, content_type=content_type)
        try:
            # orjson refuses NaN, Infinity and lone surrogates, which the API server's
            # encoder never writes: such an answer is Unavailable like any non-JSON one.
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise Unavailable(f"the API server answered {method} {path} with no JSON") from exc

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: _Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> bytes:
        response = self._send(
            method, path, query=query, body=body, content_type=content_type, accept=accept
        )
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"the answer to {method} {path} broke off: {exc}") from exc
        if not 200 <= response.status <= 299:
            raise classify(response.status, str(response.reason or ""), data)
        return cast(bytes, data)

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: _Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        _method, url, headers, body, _post = self._client.param_serialize(
            method,
            path,
            query_params=query or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            return self._client.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=timeout or (self._timeout, self._timeout),
            )
        except client.ApiException as exc:
            # The REST layer reports TLS failures as status 0: there was no answer.
            raise classify(exc.status, str(exc.reason or ""), exc.body) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Unavailable(f"{method} {path} got no answer: {exc}") from exc


def _event(resource: Resource, line: bytes) -> dict[str, Any]:
    """One watch line as an event object; ``Unavailable`` when it is not one.

    A line that is not a JSON object says nothing about what changed: the watch is
    over, as for a stream that broke off, and the caller lists again. Left as the
    parser's ValueError it would escape every handler that expects an API error.
    """
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise Unavailable(f"the watch on {resource.plural} sent a line that is not JSON") from exc
    if not isinstance(event, dict):
        raise Unavailable(f"the watch on {resource.plural} sent a line that is not an event")
    return event


def _guard(patch: dict[str, Any], resource_version: str | None) -> None:
    """Put a resourceVersion precondition into a merge patch.

    The patched object then carries that version, and the API server's update refuses
    it with 409 when the stored object has moved on, exactly as a replace would.
    """
    if resource_version is not None:
        meta = patch.setdefault("metadata", {})
        meta["resourceVersion"] = resource_version


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
