"""``python -m lab.cluster [--workdir DIR]``: run the lab cluster until Ctrl-C or SIGTERM.

Prints one ``ready`` line with the admin kubeconfig once the node is Ready,
then waits; Ctrl-C (SIGINT) or SIGTERM tears everything down and exits 0 when
nothing was left behind. ``python -m lab.cluster leftovers --workdir DIR``
lists what of a lab is still on this machine (exit 1 when anything is);
``clean --workdir DIR`` removes what a lab killed outright left behind.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from lab.cluster import host
from lab.cluster.cluster import ClusterError, LocalCluster
from lab.cluster.topology import Topology


class _Stop(Exception):
    """A stop signal arrived."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def _up(workdir: Path) -> int:
    # Both signals unwind through the same teardown as Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    cluster = LocalCluster(workdir, echo=lambda line: print(line, flush=True))
    try:
        cluster.start()
        print(
            f"ready in {cluster.timings['start']:.1f}s: "
            f"export KUBECONFIG={cluster.kubeconfig('admin')}",
            flush=True,
        )
        stopped = threading.Event()
        while not stopped.wait(1.0):
            cluster.check()  # a component that dies ends the run
    except _Stop as stop:
        print(f"# {stop}: tearing down", flush=True)
    finally:
        # A second signal during teardown must not abandon it halfway.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            cluster.stop()
        except ClusterError as exc:
            print(exc, file=sys.stderr, flush=True)
            return 1
    print("# stopped; nothing left behind", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.cluster")
    parser.add_argument("command", nargs="?", default="up", choices=["up", "leftovers", "clean"])
    parser.add_argument("--workdir", type=Path, help="a temporary directory when omitted")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ptah-lab-"))
    if args.command == "clean":
        problems = host.clean(workdir, Topology())
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if args.command == "leftovers":
        found = host.leftovers(workdir, Topology())
        for item in found:
            print(item)
        return 1 if found else 0
    return _up(workdir)


if __name__ == "__main__":
    sys.exit(main())
