"""Offline: what the webhook answers a saved review, and every check on the way.

``python -m webhook explain REVIEW.json --objects STATE.yaml`` runs the very rules the
endpoint runs, with the objects they read taken from a file instead of the API
server, and prints the rule trail and the verdict. A security reviewer can replay an
audit log entry, or try a forged Job, without a cluster; an object the file does not
hold reads as "does not exist", exactly as a NotFound would.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

from jobclaim import STAMPED
from jobclaim.api import UNRESOLVED_RUN_ANNOTATION
from jobclaim.apiserver import BY_KIND, NotFound, Object, Resource
from webhook.engine import Engine, Outcome
from webhook.rules import ENDPOINT_PATHS, Endpoint, Settings

_LIST_KINDS: Final = frozenset({"List"})
_DECISION_PLURALS: Final = frozenset(
    {"ptahschemas", "ptahmigrations", *(kind.resource.plural for kind in STAMPED.values())}
)


class StateReader:
    """An ``ApiReader`` over a fixed set of objects: uncached by construction.

    Objects are keyed by kind, namespace and name and kept as JSON bytes.
    ``get_text`` answers those bytes, as an API server's answer arrives, and ``get``
    decodes a fresh copy of them, so a rule can never change what a later read sees.
    ``get_text`` is the one read: the engine reads through it, so a subclass that
    changes what a read answers overrides ``get_text``, and one that overrode only
    ``get`` (which the engine would never call) is refused when it is defined.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "get" in vars(cls):
            raise TypeError(f"{cls.__name__} overrides get; the engine reads get_text")

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()) -> None:
        self._objects: dict[tuple[str, str, str], bytes] = {}
        for obj in objects:
            self.put(obj)

    def put(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind")
        metadata = obj.get("metadata")
        if not isinstance(kind, str) or kind not in BY_KIND or not isinstance(metadata, dict):
            raise ValueError(f"an object of kind {kind!r} with metadata is not one rules read")
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {kind} without a name cannot be read by name")
        key = (kind, metadata.get("namespace") or "", name)
        self._objects[key] = orjson.dumps(obj)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        self._objects.pop((kind, namespace, name), None)

    def get_text(self, resource: Resource, namespace: str | None, name: str) -> bytes:
        found = self._objects.get((resource.kind, namespace or "", name))
        if found is None:
            raise NotFound(f'{resource.plural} "{name}" not found', status=404)
        return found

    def get(self, resource: Resource, namespace: str | None, name: str) -> Object:
        decoded: Object = orjson.loads(self.get_text(resource, namespace, name))
        return decoded

    def list(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        label_selector: Mapping[str, str] | None = None,
    ) -> list[Object]:
        selector = dict(label_selector or {})
        found = []
        for (kind, ns, _), data in sorted(self._objects.items()):
            if kind != resource.kind or (namespace is not None and ns != namespace):
                continue
            obj: Object = orjson.loads(data)
            labels = obj.get("metadata", {}).get("labels") or {}
            if all(labels.get(k) == v for k, v in selector.items()):
                found.append(obj)
        return found


def load_objects(text: str) -> list[Object]:
    """The objects in a YAML (or JSON) stream: documents, lists of them, or ``kind: List``."""
    found: list[Object] = []

    def add(item: Any) -> None:
        if item is None:
            return
        if isinstance(item, list):
            for element in item:
                add(element)
        elif isinstance(item, dict) and item.get("kind") in _LIST_KINDS:
            add(item.get("items") or [])
        elif isinstance(item, dict):
            found.append(item)
        else:
            raise ValueError("the state file holds something that is not an object")

    for document in yaml.safe_load_all(text):
        add(document)
    return found


def endpoint_of(review: Mapping[str, Any]) -> Endpoint:
    """Which validating endpoint a saved review was (most likely) sent to.

    A write to a status subresource, or one that changes the unresolved-run
    annotation, is the manager-state endpoint's; any other write to a decision kind,
    a PtahSchema or a PtahMigration the decisions endpoint's; everything else the
    controller-write endpoint's. The mutating stamp endpoint is named with
    ``--endpoint stamp``: the same review reaches both.
    """
    request = review.get("request")
    request = request if isinstance(request, dict) else {}
    resource = request.get("resource")
    resource = resource if isinstance(resource, dict) else {}
    plural = resource.get("resource")
    if resource.get("group") != "operator.ptah.run" and request.get("subResource") != "status":
        return "controller-write"
    if request.get("subResource") == "status":
        return "manager-state"
    if plural in _DECISION_PLURALS and not _unresolved_run_changed(request):
        return "decisions"
    if plural in ("ptahschemaplans", "ptahschemaplanchunks", "ptahmigrationplans"):
        return "controller-write"
    return "manager-state"


def _unresolved_run_changed(request: Mapping[str, Any]) -> bool:
    def annotation(raw: object) -> object:
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        notes = meta.get("annotations") if isinstance(meta, dict) else None
        return notes.get(UNRESOLVED_RUN_ANNOTATION) if isinstance(notes, dict) else None

    return annotation(request.get("object")) != annotation(request.get("oldObject"))


def explain(
    review_body: bytes,
    objects: Iterable[Mapping[str, Any]],
    *,
    endpoint: Endpoint | None = None,
    settings: Settings | None = None,
) -> tuple[Outcome, str]:
    """The outcome and a printable account of it: endpoint, trail, verdict, response."""
    if endpoint is None:
        try:
            parsed = json.loads(review_body)
        except ValueError:
            parsed = {}
        endpoint = endpoint_of(parsed if isinstance(parsed, dict) else {})
    engine = Engine(StateReader(objects), settings)
    try:
        outcome = engine.decide(endpoint, review_body)
    finally:
        engine.close()
    decision = outcome.decision
    lines = [f"endpoint: POST {ENDPOINT_PATHS[endpoint]}"]
    request = outcome.request
    if request is not None:
        who = request.user_info.username or "(no username)"
        what = "/".join(p for p in (request.resource.group, request.resource.resource) if p)
        where = f"{request.namespace}/{request.name}".strip("/")
        lines.append(f"request: {request.operation} {what} {where} by {who}")
    lines.append("trail:")
    lines.extend(f"  {step}" for step in decision.trail)
    lines.append(f"rule: {decision.rule}")
    lines.append(f"verdict: {decision.verdict} (HTTP {outcome.http_status}, code {decision.code})")
    lines.append(f"reason: {decision.message}")
    if decision.patch is not None:
        lines.append("patch: " + json.dumps(json.loads(decision.patch), sort_keys=True))
    lines.append("response: " + json.dumps(outcome.body(), sort_keys=True))
    return outcome, "\n".join(lines)


def explain_files(
    review: Path,
    state: Path | None,
    *,
    endpoint: Endpoint | None = None,
    settings: Settings | None = None,
) -> tuple[Outcome, str]:
    objects = load_objects(state.read_text()) if state is not None else []
    return explain(review.read_bytes(), objects, endpoint=endpoint, settings=settings)
