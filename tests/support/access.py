"""May this user do that? The API server's own authorizer asked, as ``kubectl auth can-i``.

A SubjectAccessReview is the request ``kubectl auth can-i --as <user>`` sends: the
authorizer (RBAC here) answers for the user and groups in the review, with no
impersonation and no object written. The real-API tests of the example roles and of
a scoped manager's RBAC, and the lab cluster's scope scenario, all ask this way, so
the question's shape (a subresource split off its resource, a namespace or none for
the cluster) and the reading of the answer are written once.

``post`` is whatever sends a request as someone allowed to create reviews (the
admin): the local control plane's client (``on_plane``) or the lab cluster's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

import httpx

from jobclaim.apiserver import Object
from lab import run as localrun
from lab.localplane import LocalControlPlane

__all__ = ["SUBJECT_ACCESS_REVIEWS", "Post", "allowed", "on_plane", "question", "service_account"]

SUBJECT_ACCESS_REVIEWS: Final = localrun.SUBJECT_ACCESS_REVIEWS
# (path, body) -> the created object's JSON: an admin's POST.
Post = Callable[[str, Object], Object]


def question(verb: str, group: str, resource: str, namespace: str | None) -> dict[str, Any]:
    """The resource attributes of "may I ``verb`` ``resource``": ``pods/log`` is the
    resource ``pods`` and its subresource ``log``; no namespace asks cluster-wide."""
    plural, _, subresource = resource.partition("/")
    asked: dict[str, Any] = {
        "verb": verb,
        "group": group,
        "resource": plural,
        "subresource": subresource,
    }
    if namespace is not None:
        asked["namespace"] = namespace
    return asked


def service_account(namespace: str, name: str) -> tuple[str, list[str]]:
    """The user and groups a ServiceAccount's token authenticates as: what
    ``kubectl auth can-i --as system:serviceaccount:<ns>:<name>`` asks about (the API
    server adds these groups when it impersonates a ServiceAccount)."""
    return (
        f"system:serviceaccount:{namespace}:{name}",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
    )


def allowed(post: Post, user: str, groups: list[str], asked: dict[str, Any]) -> bool:
    """The authorizer's answer for ``user`` in ``groups``; a review it could not decide
    (``allowed`` missing) is a refusal, never a grant."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": asked},
    }
    answer = post(SUBJECT_ACCESS_REVIEWS, review)
    return (answer.get("status") or {}).get("allowed") is True


def on_plane(plane: LocalControlPlane) -> Post:
    """The local control plane's admin, as a ``post``."""

    def post(path: str, body: Object) -> Object:
        with httpx.Client(verify=plane.ssl_context(), timeout=30.0) as http:
            response = http.post(
                f"{plane.server_url}{path}",
                content=json.dumps(body).encode(),
                headers={
                    "Authorization": f"Bearer {plane.token('admin')}",
                    "Content-Type": "application/json",
                },
            )
        assert response.status_code < 300, response.text[:500]
        created: Object = response.json()
        return created

    return post
