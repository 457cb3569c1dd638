"""A kubeconfig file with chosen contexts and current context, for the plugin's kubeconfig
and error tests."""

from __future__ import annotations

from typing import Any

from tests.support.dispatchworld import NS


def kubeconfig(
    current: str | None = "work",
    contexts: dict[str, str | None] | None = None,
    server: str = "https://127.0.0.1:1",
) -> dict[str, Any]:
    """A kubeconfig whose contexts (name: namespace) all use one cluster and user."""
    contexts = {"work": NS, "other": None} if contexts is None else contexts
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "jane", "user": {"token": "t"}}],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": "lab", "user": "jane"}
                | ({"namespace": ns} if ns is not None else {}),
            }
            for name, ns in contexts.items()
        ],
    }
    if current is not None:
        document["current-context"] = current
    return document
