"""The lab's server-side apply keeps every string a string on a real API server.

A random hex suffix such as ``0971253e91`` is a string to PyYAML but a float to the
server's YAML reader; sent as a bare YAML scalar, the apply of a webhook configuration
selecting that label answered 500 and failed a CI run. Each row is a string some YAML
reader takes for something else.
"""

from __future__ import annotations

import pytest

from jobclaim.apiserver import CONFIGMAPS
from lab import run as localrun
from lab.localplane import LocalControlPlane

pytestmark = pytest.mark.controlplane

LOOKALIKES = ["0971253e91", "1e3", "0x1F", "012", "1_000", "true", "no", "null", "~", ".inf"]


def test_every_lookalike_string_survives_the_apply(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    data = {f"k{index}": value for index, value in enumerate(LOOKALIKES)}
    obj = {
        "metadata": {
            "name": "lookalikes",
            "namespace": namespace,
            "labels": {"suffix": "0971253e91"},
        },
        "data": data,
    }
    answer = localrun.apply(control_plane, CONFIGMAPS, obj, identity="admin")
    assert answer["metadata"]["labels"] == {"suffix": "0971253e91"}
    assert answer["data"] == data
