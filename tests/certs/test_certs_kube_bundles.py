"""Rotation publishing trust through the API server: KubeBundles over the API double."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from rotation_world import check_trust, make_world

from certs import CA_CERT, Converged, Force, KubeBundles, RotationError, Rotator, bundle_of
from jobclaim.apiserver import MUTATING_WEBHOOK_CONFIGURATIONS as MWC
from jobclaim.apiserver import VALIDATING_WEBHOOK_CONFIGURATIONS as VWC
from jobclaim.apiserver import Conflict
from kube.fake.inmemory import InMemoryApi, matching

MANAGED = ("ptah-operator-controller-write", "ptah-operator-manager-state")


def configuration(name: str, *bundles: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"w{i}.operator.ptah.run",
                "clientConfig": {"caBundle": base64.b64encode(b).decode()},
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
            }
            for i, b in enumerate(bundles)
        ],
    }


def api_with(ca: bytes) -> InMemoryApi:
    api = InMemoryApi()
    for name in MANAGED:
        api.create(VWC, None, configuration(name, ca, ca))
    api.create(VWC, None, configuration("someone-else", b"theirs"))
    return api


def test_reading_returns_only_managed_configurations() -> None:
    bundles = KubeBundles(api_with(b"ca"), MANAGED)
    assert bundles.read() == dict.fromkeys(MANAGED, b"ca")


def test_disagreeing_entries_read_as_empty_so_all_are_rewritten() -> None:
    assert bundle_of(configuration("x", b"a", b"b")) == b""
    assert bundle_of(configuration("x", b"a", b"a")) == b"a"
    assert bundle_of({"webhooks": [{"clientConfig": {"caBundle": "not base64!"}}]}) == b""


def test_a_write_sets_every_entry_and_nothing_else() -> None:
    api = api_with(b"old")
    KubeBundles(api, MANAGED).write(MANAGED[0], b"new")
    stored = api.get(VWC, None, MANAGED[0])
    assert bundle_of(stored) == b"new"
    assert bundle_of(api.get(VWC, None, MANAGED[1])) == b"old"
    assert bundle_of(api.get(VWC, None, "someone-else")) == b"theirs"


def test_an_unmanaged_configuration_is_never_written() -> None:
    with pytest.raises(RotationError, match="unmanaged"):
        KubeBundles(api_with(b"ca"), MANAGED).write("someone-else", b"x")


def test_a_concurrent_change_fails_the_write_with_a_sentence() -> None:
    api = api_with(b"old")
    api.fail_before_write(matching("patch_fields", VWC), Conflict("stale", status=409))
    with pytest.raises(RotationError, match="changed while its caBundle was written"):
        KubeBundles(api, MANAGED).write(MANAGED[0], b"new")
    assert bundle_of(api.get(VWC, None, MANAGED[0])) == b"old"


def test_the_bundle_is_patched_never_replaced_and_a_mutating_configuration_too() -> None:
    """The rotator's RBAC grants patch and no update: every write is a PATCH, and the
    mutating stamp configuration is rotated with the validating ones."""
    api = api_with(b"old")
    api.create(MWC, None, {**configuration("ptah-operator-stamp", b"old"), "kind": MWC.kind})
    bundles = KubeBundles(api, MANAGED, mutating=("ptah-operator-stamp",))
    assert bundles.read() == dict.fromkeys((*MANAGED, "ptah-operator-stamp"), b"old")
    for name in (*MANAGED, "ptah-operator-stamp"):
        bundles.write(name, b"new")
    assert bundles.read() == dict.fromkeys((*MANAGED, "ptah-operator-stamp"), b"new")
    writes = [c.verb for c in api.calls if c.verb in ("replace", "patch_fields")]
    assert writes == ["patch_fields"] * 3


def test_a_whole_ca_rotation_through_the_api_keeps_the_server_trusted(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    api = api_with((tmp_path / CA_CERT).read_bytes())
    bundles = KubeBundles(api, MANAGED)
    rotator = Rotator(tmp_path, bundles, clock=world.clock)
    force: Force | None = Force.CA
    for _ in range(100):
        step = rotator.advance(force)
        force = None
        if isinstance(step, Converged):
            break
        check_trust(world.server.served.certificate, bundles.read(), world.clock.now())
    else:
        raise AssertionError("the rotation did not converge")
    final = bundles.read()
    assert all(bundle == (tmp_path / CA_CERT).read_bytes() for bundle in final.values())
    assert bundle_of(api.get(VWC, None, "someone-else")) == b"theirs"
