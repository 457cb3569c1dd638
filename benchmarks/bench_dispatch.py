"""API calls and dispatches per second: 200 PtahSchemas over 20 databases, each taken
from its approval to a recorded Apply Job on the in-memory API.

Ten schemas share each database, so they serialize on its Lease: after each round the
benchmark settles the recorded Applies the way issue 5's proof will (it releases
their Leases, outside the measurement) and the next schema of each database goes.
Only the manager's own passes are timed and counted.

The nine-step minimum is one API call per step of the dispatch sequence: two reads
(authorize, confirm) and seven writes (lease, stage, snapshot, consume, mark,
create, record). The claim's two writes (finalizer, claim) come before the sequence
and are counted in the measured figures, not in the minimum. Passes that found the
realm busy are counted apart: they are the price of ten schemas on one database.
Events are best-effort telemetry; they are recorded in memory here and counted apart
(sent to the double they would only grow its store, whose lists scan everything).
The time spent inside the API double is measured too, since a real server's is not
ours to count.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.pieces.events import RecordingSink
from controller.runtime.reconciler import Key, Reconciler
from jobclaim import lease_holder
from jobclaim.apiserver import JOBS, PTAHSCHEMAS
from tests.support.dispatchworld import NS, Rig, add_schema, make_rig

SCHEMAS = 200
DATABASES = 20
MIN_READS, MIN_WRITES = 2, 7
BUSY = "another claim holds the database realm"


def _release(rig: Rig, key: Key) -> None:
    """What the settled account of an Apply does to its realm (issue 5), unmeasured."""
    stored = rig.api.peek(PTAHSCHEMAS, key.namespace, key.name)
    assert stored is not None
    claim = stored["status"]["activeOperation"]
    rig.env.lock.release(
        claim["coordinationDigest"],
        lease_holder(stored["metadata"]["uid"], claim["id"]),
        claim["leaseEpoch"],
    )


def _timed(rig: Rig) -> list[float]:
    """Wrap the double's call dispatcher to sum the time spent inside it."""
    spent = [0.0]
    inner = rig.api._call

    def timed(request: object, run: object) -> object:
        started = time.perf_counter()
        try:
            return inner(request, run)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - started

    rig.api._call = timed  # type: ignore[method-assign,assignment]
    return spent


def main() -> None:
    rig = make_rig()
    sink = RecordingSink()
    rig.reconciler = Reconciler(rig.env, sink)
    keys = [
        add_schema(rig, f"orders-{i:03d}", coordination_key=f"database-{i % DATABASES:02d}")
        for i in range(SCHEMAS)
    ]
    in_api = _timed(rig)
    pending = list(keys)
    counts: Counter[str] = Counter()
    passes = busy = 0
    elapsed = 0.0
    while pending:
        recorded: list[Key] = []
        for key in pending:
            for _ in range(10):
                before = len(rig.api.calls)
                started = time.perf_counter()
                stop = rig.reconcile(key)
                elapsed += time.perf_counter() - started
                passes += 1
                where = "busy" if stop.reason == BUSY else "path"
                for call in rig.api.calls[before:]:
                    counts[f"{where}-{'writes' if call.wrote else 'reads'}"] += 1
                if stop.error is not None:
                    raise SystemExit(f"{key.name}: {stop.reason}: {stop.error}")
                if stop.reason == BUSY:
                    busy += 1
                    break
                if stop.reason == "the Job's UID is recorded":
                    recorded.append(key)
                    break
        for key in recorded:
            _release(rig, key)
        pending = [k for k in pending if k not in recorded]
        if not recorded:
            raise SystemExit("no schema could dispatch in a round")
    jobs = len(rig.api.list(JOBS, NS))
    assert jobs == SCHEMAS, jobs
    per = {k: v / SCHEMAS for k, v in counts.items()}
    spent_api = in_api[0]
    print(f"schemas {SCHEMAS} over {DATABASES} databases: {jobs} Apply Jobs recorded")
    print(f"passes {passes}: {passes / SCHEMAS:.1f} per Apply, {busy} of them found the realm busy")
    print(
        f"API reads per Apply : {per.get('path-reads', 0):5.1f} on the way"
        f" + {per.get('busy-reads', 0):5.1f} while the realm was busy"
        f"  (nine-step minimum {MIN_READS})"
    )
    print(
        f"API writes per Apply: {per.get('path-writes', 0):5.1f} on the way"
        f" + {per.get('busy-writes', 0):5.1f} while the realm was busy"
        f"  (nine-step minimum {MIN_WRITES})"
    )
    print(f"Events per Apply    : {len(sink.records) / SCHEMAS:5.1f} (best effort, apart)")
    print(
        f"dispatches per second: {SCHEMAS / elapsed:,.0f} ({elapsed * 1e3 / SCHEMAS:.2f} ms each,"
        f" {spent_api / elapsed:.0%} of it inside the in-memory API double);"
        f" controller alone: {SCHEMAS / (elapsed - spent_api):,.0f}/s"
    )


if __name__ == "__main__":
    main()
