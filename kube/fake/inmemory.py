"""An in-memory API server for tests, with the semantics the operator's safety rests on.

The controller's guarantees ("never run SQL twice") are arguments about what the API
server stores and refuses, so a double that merged writes blindly would let every test
pass while proving nothing. This one keeps the rules the real server enforces, and
``tests/apiconformance`` runs the same table against it and a real kube-apiserver, so
it cannot drift:

- ``uid`` assigned on create; a cluster-wide ``resourceVersion`` bumped by every write
  that changes the object (a write that changes nothing stores nothing and keeps it);
  a stale ``resourceVersion`` in a replace or a patch is a 409 ``Conflict``.
- ``generation`` starts at 1 and is bumped by changes outside ``metadata`` (and outside
  ``status`` where there is a status subresource), and by the start of deletion; never
  by metadata or status writes. Kinds the real server gives no generation have none.
- ``status`` is written only through ``patch_status``, which replaces it whole and
  cannot touch anything else; a create's or replace's status is dropped.
- Finalizers: deleting an object that has some sets ``deletionTimestamp`` (once);
  the write that removes the last one deletes it; no finalizer can be added meanwhile.
- ``AlreadyExists``, ``NotFound``, a UID precondition on delete (409), DNS names,
  immutable ConfigMaps, and the identity the API server writes into a ``batch/v1`` Job
  before storing it (selector, template labels, ``serviceAccount``, ``manualSelector``).

Not simulated: garbage collection (a delete never touches dependents, whatever the
propagation policy, and never waits for them: Foreground and Orphan add no finalizer),
namespaces (objects may live in one that was never created), managedFields, admission,
RBAC, Job spec immutability, field selectors, list pagination, watch bookmarks and
410 Gone (the history is kept whole), and defaulting other than the Job identity above
(the builder writes every default itself). The rules themselves are pure functions in
``kube.fake.rules``; requests, faults and the call log are in
``kube.fake.faults``.

Faults are injected per call, selected by a predicate over the ``Request``::

    api.fail_before_write(matching("create", JOBS), Refused("denied by a webhook"))
    api.fail_after_write(matching("create", JOBS))            # stored, response lost
    api.stop_after_write(matching("patch_status", PTAHSCHEMAS,
                                  body=lambda s: "dispatchStarted" in str(s)))
    api.restart()                                              # the process is back
    api.fail_read(matching("get", LEASES), times=None)

``api.calls`` records every call in order for tests that check write order, and
``api.peek(...)`` shows what the store holds without being failed or logged.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final, Literal, TypeVar

import orjson

from jobclaim.apiserver import (
    JOBS,
    AlreadyExists,
    ApiError,
    Conflict,
    NotFound,
    Object,
    Refused,
    Resource,
    Unavailable,
    WatchEvent,
    check_field_patch,
)
from jobclaim.times import timestamp, utc_now
from kube.fake.faults import (
    Call,
    Fault,
    FaultKind,
    Predicate,
    Request,
    Verb,
    matching,
)
from kube.fake.rules import (
    SERVER_OWNED,
    admit_job,
    carry_metadata,
    check_immutable_configmap,
    check_name,
    conflict,
    default_service_account,
    generation_content,
    has_generation,
    merge_patch,
    omit_empty_metadata,
    same_resource,
)

__all__ = ["Call", "Fault", "InMemoryApi", "Request", "matching", "merge_patch"]

_Key = tuple[str, str, str, str]  # group, plural, namespace ("" if cluster-scoped), name
_Objects = list[Object]
_Events = list[WatchEvent]
_Calls = list[Call]
_T = TypeVar("_T")
_READS: Final = frozenset({"get", "list", "watch"})


class InMemoryApi:
    """``jobclaim.apiserver.ApiClient`` held in memory. Thread-safe; every call is atomic."""

    def __init__(self, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._objects: dict[_Key, Object] = {}
        self._history: list[tuple[_Key, WatchEvent]] = []
        self._faults: list[Fault] = []
        self._calls: list[Call] = []
        self._revision = 0
        self._uids = 0
        self._stopped = False

    # -- the test surface ----------------------------------------------------------

    def fail_before_write(
        self, when: Predicate, error: ApiError | None = None, *, times: int | None = 1
    ) -> Fault:
        """Matching writes raise ``error`` (default Unavailable) and store nothing."""
        return self._add("before", when, error, times)

    def fail_after_write(
        self, when: Predicate, error: ApiError | None = None, *, times: int | None = 1
    ) -> Fault:
        """Matching writes are stored, then raise ``error``: a response lost on the way."""
        return self._add("after", when, error, times)

    def stop_after_write(self, when: Predicate) -> Fault:
        """The matching write is stored, then it and every later call raise Unavailable
        until ``restart()``: a process that crashed right after the write."""
        return self._add("stop", when, None, 1)

    def fail_read(
        self, when: Predicate, error: ApiError | None = None, *, times: int | None = 1
    ) -> Fault:
        """Matching reads (get, list, watch) raise ``error``."""
        return self._add("read", when, error, times)

    def restart(self) -> None:
        """The stopped process is running again; the store, like etcd, kept everything."""
        with self._lock:
            self._stopped = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def calls(self) -> tuple[Call, ...]:
        with self._lock:
            return tuple(self._calls)

    def writes(self) -> _Calls:
        """The calls that stored something (or would have, had it changed anything)."""
        return [c for c in self.calls if c.wrote]

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    def peek(self, resource: Resource, namespace: str | None, name: str) -> Object | None:
        """What the store holds, past every fault and outside the call log: for a test
        to check what a failed call left behind without being failed itself."""
        with self._lock:
            found = self._objects.get(_key(resource, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    # -- reads -----------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        request = Request("get", resource, namespace, name)
        return self._call(request, lambda: copy.deepcopy(self._existing(request)))

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        """``get``'s answer as the JSON text the real adapter hands over.

        Offered because ``KubeApi`` offers it, so the webhook reads the double the way
        it reads the API server in production. It is the same GET on the wire, so it
        is logged, and failed by ``fail_read(matching("get", ...))``, as a ``get``.
        """
        request = Request("get", resource, namespace, name)
        # Encoded under the lock, so no copy is needed for a consistent snapshot.
        return self._call(request, lambda: orjson.dumps(self._existing(request)))

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: Mapping[str, str] | None = None,
    ) -> _Objects:
        request = Request("list", resource, namespace, None)
        wanted = dict(label_selector or {})

        def run() -> _Objects:
            _scope(resource, namespace, collection=True)
            return [
                copy.deepcopy(obj)
                for key, obj in sorted(self._objects.items())
                if _in_collection(key, resource, namespace) and _selected(obj, wanted)
            ]

        return self._call(request, run)

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 60,
        label_selector: Mapping[str, str] | None = None,
    ) -> Iterator[WatchEvent]:
        """Events in order, ending once caught up (a real watch ends at its time-out).

        Without ``resource_version`` it starts with an ADDED event per existing object,
        as a real watch does; with one, it replays every later change.
        """
        request = Request("watch", resource, namespace, None)
        wanted = dict(label_selector or {})

        def run() -> tuple[int, _Events]:
            _scope(resource, namespace, collection=True)
            if resource_version in (None, "0"):
                current = [
                    WatchEvent("ADDED", copy.deepcopy(obj))
                    for key, obj in sorted(self._objects.items())
                    if _in_collection(key, resource, namespace) and _selected(obj, wanted)
                ]
                return len(self._history), current
            since = int(resource_version or 0)
            start = next(
                (i for i, (_, e) in enumerate(self._history) if _rv(e.object) > since),
                len(self._history),
            )
            return start, []

        start, initial = self._call(request, run)
        return self._stream(resource, namespace, start, initial, wanted)

    def _stream(
        self,
        resource: Resource,
        namespace: str | None,
        start: int,
        initial: _Events,
        wanted: Mapping[str, str],
    ) -> Iterator[WatchEvent]:
        yield from initial
        index = start
        while True:
            with self._lock:
                if index >= len(self._history):
                    return
                key, event = self._history[index]
            index += 1
            if _in_collection(key, resource, namespace) and _selected(event.object, wanted):
                yield WatchEvent(event.type, copy.deepcopy(event.object))

    # -- writes ----------------------------------------------------------------------

    def create(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        meta = obj.get("metadata") or {}
        request = Request("create", resource, namespace, meta.get("name"), obj)
        return self._call(request, lambda: self._create(resource, namespace, obj))

    def _create(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        _scope(resource, namespace)
        new = copy.deepcopy(obj)
        new["apiVersion"], new["kind"] = resource.api_version, resource.kind
        meta = new.setdefault("metadata", {})
        if meta.get("namespace") not in (None, namespace):
            raise Refused(
                "the namespace of the object does not match the namespace of the request",
                status=400,
                reason="BadRequest",
            )
        if meta.get("resourceVersion"):
            # The real server answers 500 and stores nothing: an object read back and
            # sent to create again is a caller's mistake, not a second object.
            raise Unavailable(
                "resourceVersion should not be set on objects to be created",
                status=500,
                reason="InternalError",
            )
        self._uids += 1
        uid = f"00000000-0000-4000-8000-{self._uids:012x}"
        if not meta.get("name") and meta.get("generateName"):
            # As the real server: at most 58 characters of the prefix and 5 of suffix.
            meta["name"] = f"{meta['generateName'][:58]}{self._uids:05x}"[-63:]
        check_name(resource, str(meta.get("name") or ""))
        key = _key(resource, namespace, meta["name"])
        if key in self._objects:
            raise AlreadyExists(
                f'{resource.plural} "{meta["name"]}" already exists',
                status=409,
                reason="AlreadyExists",
            )
        for field in (*SERVER_OWNED, "resourceVersion", "managedFields"):
            meta.pop(field, None)
        meta.update(uid=uid, creationTimestamp=self._timestamp())
        if namespace is not None:
            meta["namespace"] = namespace
        if has_generation(resource):
            meta["generation"] = 1
        if resource.has_status:
            new.pop("status", None)
        if same_resource(resource, JOBS):
            admit_job(new)
        return self._commit(resource, key, None, new)

    def replace(self, resource: Resource, namespace: str | None, obj: Object) -> Object:
        meta = obj.get("metadata") or {}
        request = Request("replace", resource, namespace, meta.get("name"), obj)

        def run() -> Object:
            if not meta.get("resourceVersion"):
                raise ValueError(f"a {resource.kind} replace needs metadata.resourceVersion")
            current = self._existing(request)
            new = copy.deepcopy(obj)
            new["apiVersion"], new["kind"] = resource.api_version, resource.kind
            return self._update(resource, current, new)

        return self._call(request, run)

    def patch_metadata(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        metadata: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        patch: Object = {"metadata": dict(metadata)}
        return self._patch(
            "patch_metadata", resource, namespace, name, patch, resource_version=resource_version
        )

    def patch_spec(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        spec: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        patch: Object = {"spec": dict(spec)}
        return self._patch(
            "patch_spec", resource, namespace, name, patch, resource_version=resource_version
        )

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
        patch: Object = dict(fields)
        return self._patch(
            "patch_fields", resource, namespace, name, patch, resource_version=resource_version
        )

    def _patch(
        self,
        verb: Verb,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: Object,
        *,
        resource_version: str | None,
    ) -> Object:
        if verb == "patch_metadata":
            body = patch["metadata"]
        elif verb == "patch_spec":
            body = patch["spec"]
        else:
            body = dict(patch)
        request = Request(verb, resource, namespace, name, body)

        def run() -> Object:
            current = self._existing(request)
            if resource_version is not None:
                patch.setdefault("metadata", {})["resourceVersion"] = resource_version
            return self._update(resource, current, merge_patch(current, patch))

        return self._call(request, run)

    def patch_status(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any],
        *,
        resource_version: str,
    ) -> Object:
        request = Request("patch_status", resource, namespace, name, status)

        def run() -> Object:
            if not resource_version:
                raise ValueError("a status patch needs the resourceVersion it was decided at")
            if not resource.has_status:
                raise NotFound(
                    f"{resource.plural} have no status subresource", status=404, reason="NotFound"
                )
            current = self._existing(request)
            if resource_version != current["metadata"]["resourceVersion"]:
                raise conflict(resource, name)
            # Everything but the status comes from the stored object: the status
            # subresource cannot move a spec, a label or a finalizer.
            new = copy.deepcopy(current)
            new["status"] = copy.deepcopy(dict(status))
            return self._commit(resource, _key_of(resource, current), current, new)

        return self._call(request, run)

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: Literal["Foreground", "Background", "Orphan"] = "Background",
    ) -> None:
        body = {"uid": uid, "propagationPolicy": propagation}
        request = Request("delete", resource, namespace, name, body)

        def run() -> None:
            current = self._existing(request)
            meta = current["metadata"]
            if uid is not None and uid != meta["uid"]:
                raise Conflict(
                    f'operation cannot be fulfilled on {resource.plural} "{name}": the UID in '
                    f"the precondition ({uid}) does not match the UID in record ({meta['uid']})",
                    status=409,
                    reason="Conflict",
                )
            key = _key_of(resource, current)
            if not meta.get("finalizers"):
                self._remove(key, current)
                return
            if meta.get("deletionTimestamp"):
                return  # already being deleted: a second delete changes nothing
            new = copy.deepcopy(current)
            new_meta = new["metadata"]
            new_meta.update(deletionTimestamp=self._timestamp(), deletionGracePeriodSeconds=0)
            # The start of deletion changes what the object's controller must do, so
            # the real server bumps the generation of objects that have one.
            if new_meta.get("generation"):
                new_meta["generation"] += 1
            self._commit(resource, key, current, new)

        self._call(request, run)

    # -- the store ---------------------------------------------------------------------

    def _update(self, resource: Resource, current: Object, new: Object) -> Object:
        """A write through the main resource: what a replace or a patch may change."""
        carry_metadata(resource, current, new)
        if resource.has_status:
            new.pop("status", None)
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
        check_immutable_configmap(resource, current, new)
        if same_resource(resource, JOBS):
            default_service_account(new)
        meta = new["metadata"]
        changed = generation_content(resource, new) != generation_content(resource, current)
        if changed and "generation" in meta:
            meta["generation"] += 1
        return self._commit(resource, _key_of(resource, current), current, new)

    def _commit(self, resource: Resource, key: _Key, current: Object | None, new: Object) -> Object:
        omit_empty_metadata(new)
        if current is not None and new == current:
            # The real server skips a write that changes nothing: no new version, no event.
            return copy.deepcopy(current)
        meta = new["metadata"]
        if current is not None and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(key, new)
            return copy.deepcopy(new)
        self._revision += 1
        meta["resourceVersion"] = str(self._revision)
        self._objects[key] = new
        kind: Literal["ADDED", "MODIFIED"] = "ADDED" if current is None else "MODIFIED"
        self._history.append((key, WatchEvent(kind, copy.deepcopy(new))))
        return copy.deepcopy(new)

    def _remove(self, key: _Key, last: Object) -> None:
        del self._objects[key]
        self._revision += 1
        gone = copy.deepcopy(last)
        gone["metadata"]["resourceVersion"] = str(self._revision)
        self._history.append((key, WatchEvent("DELETED", gone)))

    def _existing(self, request: Request) -> Object:
        _scope(request.resource, request.namespace)
        name = request.name or ""
        found = self._objects.get(_key(request.resource, request.namespace, name))
        if found is None:
            raise NotFound(
                f'{request.resource.plural} "{name}" not found', status=404, reason="NotFound"
            )
        return found

    def _timestamp(self) -> str:
        return timestamp(self._clock())

    # -- faults and the call log ---------------------------------------------------------

    def _add(
        self, kind: FaultKind, when: Predicate, error: ApiError | None, times: int | None
    ) -> Fault:
        fault = Fault(kind, when, error, times)
        with self._lock:
            self._faults.append(fault)
        return fault

    def _call(self, request: Request, run: Callable[[], _T]) -> _T:
        with self._lock:
            is_read = request.verb in _READS
            try:
                if self._stopped:
                    raise Unavailable("the process stopped after a write; call restart()")
                fault = self._fire(request, "read" if is_read else "before")
                if fault is not None:
                    raise fault.raised()
                result = run()
            except (ApiError, ValueError) as exc:
                self._calls.append(Call.of(request, ok=False, wrote=False, error=exc))
                raise
            if not is_read:
                fault = self._fire(request, "stop") or self._fire(request, "after")
                if fault is not None:
                    self._stopped = self._stopped or fault.kind == "stop"
                    error = fault.raised()
                    self._calls.append(Call.of(request, ok=False, wrote=True, error=error))
                    raise error
            self._calls.append(Call.of(request, ok=True, wrote=not is_read))
            return result

    def _fire(self, request: Request, kind: FaultKind) -> Fault | None:
        for fault in self._faults:
            if fault.kind == kind and fault.armed and fault.when(request):
                fault.fired += 1
                return fault
        return None


def _scope(resource: Resource, namespace: str | None, *, collection: bool = False) -> None:
    """The same programming errors the adapter refuses, before any fault or lookup."""
    if not resource.namespaced and namespace is not None:
        raise ValueError(f"{resource.plural} are cluster-scoped; no namespace may be given")
    if resource.namespaced and namespace is None and not collection:
        raise ValueError(f"a {resource.kind} is namespaced; its namespace must be given")


def _key(resource: Resource, namespace: str | None, name: str) -> _Key:
    return (resource.group, resource.plural, namespace or "", name)


def _key_of(resource: Resource, obj: Object) -> _Key:
    meta = obj["metadata"]
    return _key(resource, meta.get("namespace"), meta["name"])


def _in_collection(key: _Key, resource: Resource, namespace: str | None) -> bool:
    return key[:2] == (resource.group, resource.plural) and namespace in (None, key[2])


def _selected(obj: Object, wanted: Mapping[str, str]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def _rv(obj: Object) -> int:
    return int(obj["metadata"]["resourceVersion"])
