"""Production wiring: the one place the webhook touches the controller's API adapter.

Everything else in ``webhook`` depends only on ``jobclaim`` and the ``ApiReader``
protocol, so the rules run unchanged against the in-memory double, a state file or
the real API server; a test holds every other module to that.
"""

from __future__ import annotations

from pathlib import Path

from kube.client import KubeApi


def api_reader(kubeconfig: Path | None, *, context: str | None = None) -> KubeApi:
    """An uncached reader: from a kubeconfig when given, else the Pod's service account."""
    if kubeconfig is not None:
        return KubeApi.from_kubeconfig(kubeconfig, context=context)
    return KubeApi.in_cluster()
