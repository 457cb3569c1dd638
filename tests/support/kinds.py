"""The objects the conformance suite writes, and how to make the real server serve them.

Two test CRDs stand in for the operator's own (which the chart generates): one with a
status subresource, like every Ptah kind that has a status, and one without, like the
plan chunks. Against the real server they are installed once per session; the double
needs nothing installed.
"""

from __future__ import annotations

import time
from typing import Any, Final

from jobclaim.apiserver import ApiClient, ApiError, Object, Refused, Resource

GROUP: Final = "conformance.ptah.example"
WIDGETS: Final = Resource(GROUP, "v1", "widgets", "Widget", has_status=True)
GADGETS: Final = Resource(GROUP, "v1", "gadgets", "Gadget", has_status=False)
CRDS: Final = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
WEBHOOKS: Final = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
# How long a fresh CRD may take to be served. Generous: it bounds a failure, it is
# never waited out when things work.
_SERVED_WITHIN_SECONDS: Final = 60.0


def widget(name: str = "w", **fields: Any) -> Object:
    obj: Object = {"metadata": {"name": name, "labels": {"app": "conformance"}}, "spec": {"n": 1}}
    obj.update(fields)
    return obj


def config_map(name: str, labels: dict[str, str] | None = None, **fields: Any) -> Object:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": {"k": "v"}, **fields}


def job(name: str = "j", **pod: Any) -> Object:
    """The smallest Job a real API server accepts."""
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "runner", "image": "registry.example.com/runner:1"}],
        **pod,
    }
    return {"metadata": {"name": name}, "spec": {"template": {"spec": spec}}}


def crd(resource: Resource) -> Object:
    version: Object = {
        "name": resource.version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if resource.has_status:
        version["subresources"] = {"status": {}}
    return {
        "metadata": {"name": f"{resource.plural}.{resource.group}"},
        "spec": {
            "group": resource.group,
            "scope": "Namespaced",
            "names": {
                "plural": resource.plural,
                "singular": resource.kind.lower(),
                "kind": resource.kind,
            },
            "versions": [version],
        },
    }


def install(api: ApiClient, *resources: Resource) -> None:
    """Create the CRDs and return once the API server serves every verb on them."""
    pending = set()
    since = None
    for resource in resources:
        created = api.create(CRDS, None, crd(resource))
        pending.add(created["metadata"]["name"])
        since = since or created["metadata"]["resourceVersion"]
    # Established is announced by a change to the CRD, so a watch waits for it.
    for event in api.watch(CRDS, None, resource_version=since, timeout_seconds=60):
        conditions = (event.object.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            pending.discard(event.object["metadata"]["name"])
        if not pending:
            break
    assert not pending, f"CRDs never became established: {sorted(pending)}"
    for resource in resources:
        _until_listed(api, resource)


def _until_listed(api: ApiClient, resource: Resource) -> None:
    """The one poll of the suite, at session setup.

    After Established, kube-apiserver answers lists and watches of a new kind with
    429 "storage is (re)initializing" until its watch cache has filled, and nothing
    announces when that happens. Retrying the list is the only signal there is; the
    deadline bounds a failure and no test asserts on time.
    """
    deadline = time.monotonic() + _SERVED_WITHIN_SECONDS
    while True:
        try:
            api.list(resource, "default")
            return
        except ApiError as exc:
            if not isinstance(exc, Refused) or time.monotonic() > deadline:
                raise
        time.sleep(0.05)
