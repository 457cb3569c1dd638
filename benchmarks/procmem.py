"""What /proc says about a benchmarked process's memory, read one way for every
benchmark (bench_manager.py, bench_manager_realapi.py, bench_watch_scope.py print
figures side by side, so they must count the same thing).

RSS is the kernel's VmRSS: resident pages, shared libraries included, which is what a
container's memory limit is charged for most of. Linux only, like the lab.
"""

from __future__ import annotations

from pathlib import Path


def rss_mib(pid: int) -> float:
    """The process's resident set in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def children(pid: int) -> list[int]:
    """The process's children, from every one of its threads: the manager starts its
    webhook child from a thread, so it is that task's child, not the main thread's."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [int(child) for task in tasks for child in (task / "children").read_text().split()]
