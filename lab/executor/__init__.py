"""A ptah-compatible executor for the lab: real SQL on a real PostgreSQL (and MariaDB).

The real ``ptah`` cannot be built on the lab's machines, so the lab's executor image runs
this program as ``/usr/local/bin/ptah``. It speaks the CLI contract the runner drives
(``shared/reference/ptah-cli.md``) over a declared subset of what ptah covers
(``lab/README.md``), and ``ptah version`` says what it is so nobody mistakes it for ptah.
"""

IDENTITY = "ptah-compatible lab executor, PostgreSQL subset and MySQL-family subset"
VERSION = "0.1.0"
