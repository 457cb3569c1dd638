"""``python -m lab.executor``: the same program as the ``ptah`` console entry point."""

from lab.executor.cli import run

if __name__ == "__main__":
    run()
