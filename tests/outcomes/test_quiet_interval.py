"""What an InSync PtahSchema writes per quiet interval, and what each write leaves.

The benchmark (``benchmarks/bench_steady_state.py``) prints the figure; this holds the
shape: four writes, in this order, and a stop right after each one reaches the same
InSync resource on the passes that follow, with one Job for the interval. That is a
reference pinned by digest; a tag is resolved again each interval too
(``controller.pieces.freshness``), which costs its own Job and four writes more.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.runtime.reconciler import Key
from jobclaim.apiserver import JOBS, PTAHSCHEMAS
from kube.fake.faults import Request
from tests.support import scriptednode
from tests.support.dispatchworld import ARTIFACT, Rig, add_insync_schema, make_rig
from tests.support.scriptednode import Database, ScriptedNode

PINNED = f"registry.example.com/shop/orders-schema@{ARTIFACT}"

# The interval's writes: the claim with its admission snapshot (no finalizer), the
# Job born with its cleanup TTL, its UID, and the outcome patch that also publishes
# the phase, conditions and next reconciliation time.
QUIET = [
    ("patch_status", PTAHSCHEMAS.plural),
    ("create", JOBS.plural),
    ("patch_status", PTAHSCHEMAS.plural),
    ("patch_status", PTAHSCHEMAS.plural),
]


def _nth_controller_write(n: int) -> Callable[[Request], bool]:
    """A predicate true for the ``n``-th write of the kinds an interval's controller
    makes (the scripted node's Pod and Job status writes are not counted)."""
    seen = [0]

    def when(request: Request) -> bool:
        if (request.verb, request.resource.plural) not in QUIET:
            return False
        seen[0] += 1
        return seen[0] == n

    return when


def _interval(rig: Rig, node: ScriptedNode, key: Key) -> list[tuple[str, str]]:
    """Drive one interval to its end; the controller's writes (not the node's)."""
    ours: list[tuple[str, str]] = []
    for _ in range(10):
        rig.api.clear_calls()
        rig.settle(key, limit=40)
        ours += [(c.verb, c.resource.plural) for c in rig.api.calls if c.wrote]
        if rig.api.stopped:
            rig.api.restart()  # the process comes back; its next passes recover
            continue
        if node.run_jobs() == 0:
            break
    return ours


def _quiet_rig(reference: str | None = PINNED) -> tuple[Rig, ScriptedNode, Key]:
    rig = make_rig()
    key = add_insync_schema(rig, "orders", coordination_key="orders-primary", reference=reference)
    rig.settle(key)
    rig.clocks.advance(601)
    return rig, ScriptedNode(rig, Database(drift=False)), key


def _in_sync(rig: Rig, key: Key) -> None:
    stored = rig.resource(key)
    status = stored["status"]
    assert status["phase"] == "InSync" and "activeOperation" not in status
    assert not stored["metadata"].get("finalizers")
    assert status["nextReconciliationTime"] > status["observation"]["observedAt"]
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == "True" and ready["Reconciling"] == "False"


def test_a_quiet_interval_writes_four_times_and_the_next_pass_writes_nothing() -> None:
    rig, node, key = _quiet_rig()
    assert _interval(rig, node, key) == QUIET
    _in_sync(rig, key)
    assert len(node.ran) == 1
    rig.api.clear_calls()
    rig.reconcile(key)
    assert not [c for c in rig.api.calls if c.wrote]


@pytest.mark.parametrize("after", range(1, len(QUIET) + 1))
def test_a_stop_right_after_each_write_ends_in_sync_with_one_job(after: int) -> None:
    rig, node, key = _quiet_rig()
    fault = rig.api.stop_after_write(_nth_controller_write(after))
    _interval(rig, node, key)
    assert fault.fired == 1
    _in_sync(rig, key)
    assert len(node.ran) == 1
    assert len(rig.jobs()) == 1


@pytest.mark.parametrize(
    ("resolves_to", "phase"),
    [(ARTIFACT, "InSync"), ("sha256:" + "7" * 64, "Failed")],
    ids=["tag-unmoved", "tag-moved"],
)
def test_a_tag_is_resolved_again_each_interval(
    monkeypatch: pytest.MonkeyPatch, resolves_to: str, phase: str
) -> None:
    # The example's tag: a Resolve comes first. The same digest keeps every reading
    # (one Observe follows, InSync); a moved one drops them and verifies the new bytes
    # again (this rig holds no policy ConfigMap, so the Verify fails: nothing stands
    # on the new artifact unverified).
    monkeypatch.setattr(scriptednode, "ARTIFACT", resolves_to)
    rig, node, key = _quiet_rig(reference=None)
    writes = _interval(rig, node, key)
    status = rig.resource(key)["status"]
    assert status["phase"] == phase
    assert status["source"]["digest"] == resolves_to
    if phase == "InSync":
        assert writes == QUIET + QUIET
        assert node.ran == ["resolve", "observe"]
        assert status["sourceCheckedAt"]
    else:
        assert status["readingFailure"]["operation"] == "Verify"
        assert "verification" not in status and "observation" not in status
