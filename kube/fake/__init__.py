"""The in-memory API server double (``inmemory``), its pure storage rules (``rules``)
and its per-call faults (``faults``): for tests, benchmarks and the lab only.
"""
