"""python -m manager (ptah-manager): the operator's manager, configured by its environment.

It runs the controller under Lease leader election, and the admission webhook over TLS
in a child process of its own, with /healthz and /readyz on the webhook's port and Prometheus
/metrics on the metrics port, and logs JSON lines to standard output. SIGTERM or
SIGINT stops it cleanly: no new passes, the passes in flight finished, the Lease given
back, the webhook drained, exit 0.

Its configuration is the environment the chart's Deployment sets:

{variables}

Exit codes: 0 after a clean stop, 1 when it could not serve, 2 for a bad configuration.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

from manager import logs
from manager.config import Config, ConfigError, describe, load
from manager.process import Manager


def _prog(argv0: str) -> str:
    """The name a person typed: the console script's, or the module's spelling."""
    return "ptah-manager" if Path(argv0).name == "ptah-manager" else "python -m manager"


def _parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog=_prog(sys.argv[0]),
        description=(__doc__ or "").format(variables=describe()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    make: Callable[[Config], Manager] = Manager,
) -> int:
    """``make`` builds the manager from its configuration: the lab's (``lab.manager``)
    adds its fault hooks; the shipped program's is ``Manager`` itself."""
    _parser().parse_args(argv)
    try:
        config = load(os.environ if environ is None else environ)
    except ConfigError as error:
        for problem in error.problems:
            print(f"ptah-manager: {problem}", file=sys.stderr)
        return 2
    logs.configure(config.log_level)
    stopping = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return make(config).run(stopping)


if __name__ == "__main__":
    sys.exit(main())
