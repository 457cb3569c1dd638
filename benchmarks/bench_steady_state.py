"""What an InSync PtahSchema costs: per interval, and per pass, with 1,000 of them.

1,000 PtahSchemas over 100 databases stand InSync on the in-memory API, each with the
readings a real one records (resolved, verified, observed without drift), and one
warm-up pass each, so what is measured is the steady state:

- a pass over an unchanged resource (not due): the controller's CPU per pass (the
  process's CPU time minus the time spent inside the API double), and its API calls;
- one interval: the clock passes ``spec.interval``, and each of a sample of schemas is
  driven back to InSync with a scripted node running its Observe Job; the API reads,
  writes and Jobs one resource costs per interval;
- the manager's RSS with all of it in memory (the double's store included, which on a
  cluster lives in the API server, so this overstates the manager's own figure).

Targets (issue 16): one Observe Job and at most 3 API writes per quiet interval; RSS
at most 150 MB at 1,000 resources; at most 2 ms of controller CPU per pass over an
unchanged resource. Each figure is printed beside its target with whether it meets it.
"""

from __future__ import annotations

import resource
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.runtime.reconciler import Key
from jobclaim.apiserver import JOBS
from tests.support.dispatchworld import Rig, add_insync_schema, make_rig
from tests.support.scriptednode import Database, ScriptedNode

SCHEMAS = 1000
DATABASES = 100
SAMPLE = 20
READS = frozenset({"get", "list", "read_pod_log", "watch"})


def _seed(rig: Rig, index: int) -> Key:
    return add_insync_schema(
        rig, f"orders-{index:04d}", coordination_key=f"db-{index % DATABASES:03d}"
    )


def _inside_double(rig: Rig) -> list[float]:
    spent = [0.0]
    inner = rig.api._call

    def timed(request: object, run: object) -> object:
        started = time.process_time()
        try:
            return inner(request, run)  # type: ignore[arg-type]
        finally:
            spent[0] += time.process_time() - started

    rig.api._call = timed  # type: ignore[method-assign]
    return spent


def _verdict(ok: bool) -> str:
    return "meets the target" if ok else "MISSES the target"


def main() -> None:
    rig = make_rig()
    keys = [_seed(rig, i) for i in range(SCHEMAS)]
    for key in keys:  # warm-up: conditions and nextReconciliationTime written once
        rig.settle(key)
    spent = _inside_double(rig)

    # A pass over an unchanged resource.
    rig.api.clear_calls()
    cpu0, wall0, double0 = time.process_time(), time.perf_counter(), spent[0]
    for key in keys:
        rig.reconcile(key)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    controller_ms = (cpu - (spent[0] - double0)) * 1000 / SCHEMAS
    calls = Counter(c.verb for c in rig.api.calls)
    writes = sum(n for verb, n in calls.items() if verb not in READS)
    print(f"unchanged pass: {controller_ms:.3f} ms controller CPU per pass "
          f"(target <= 2 ms: {_verdict(controller_ms <= 2.0)}); "
          f"{SCHEMAS / wall:.0f} passes/s; API calls per pass {dict(calls)} / {SCHEMAS}, "
          f"writes {writes}")  # fmt: skip

    # One interval: each sampled schema's Observe, run by a scripted node.
    node = ScriptedNode(rig, Database(drift=False))
    rig.clocks.advance(601)
    ours = []
    for key in keys[:SAMPLE]:
        for _ in range(10):
            rig.api.clear_calls()
            rig.settle(key, limit=40)
            ours += list(rig.api.calls)  # the controller's calls, not the node's
            if node.run_jobs() == 0:
                break
        status = rig.resource(key)["status"]
        assert status["phase"] == "InSync" and "activeOperation" not in status, status["phase"]
    reads = sum(1 for c in ours if c.verb in READS) / SAMPLE
    writes_per = sum(1 for c in ours if c.verb not in READS) / SAMPLE
    jobs = sum(1 for c in ours if c.verb == "create" and c.resource == JOBS) / SAMPLE
    by_verb = Counter(f"{c.verb} {c.resource.plural}" for c in ours if c.verb not in READS)
    print(f"per interval per resource: {jobs:.1f} Jobs, {reads:.1f} API reads, "
          f"{writes_per:.1f} API writes { {k: v / SAMPLE for k, v in by_verb.items()} } "
          f"(target 1 Observe Job and <= 3 writes: "
          f"{_verdict(jobs == 1 and writes_per <= 3)}); {len(node.ran)} Jobs ran")  # fmt: skip

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS with {SCHEMAS} schemas over {DATABASES} databases, API double included: "
          f"{rss_mb:.0f} MB (target <= 150 MB: {_verdict(rss_mb <= 150)})")  # fmt: skip


if __name__ == "__main__":
    main()
