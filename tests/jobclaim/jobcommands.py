"""The two commands every operation Job runs (the runner under its own loader, and the
install step that puts it in place), as the golden Jobs and the builder tests expect them."""

from __future__ import annotations

# The main container's command: the stock ptah image starts the installed runner
# through the runner's own loader (docs/architecture.md, "The operation Job's layout").
RUNNER_COMMAND = [
    "/runner/lib/ld.so",
    "--library-path",
    "/runner/lib",
    "/runner/bin/python3",
    "-I",
    "-m",
    "runner",
]
INSTALL_COMMAND = ["python3", "-I", "-m", "runner.install", "/runner"]
