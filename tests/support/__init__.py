"""What more than one test folder shares: worlds, tables and test settings.

A test module imports from here (and from its own folder's non-test helpers), never
from another folder, a ``conftest`` or a ``test_*`` module (tests/test_test_imports.py).
"""
