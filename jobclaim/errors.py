"""The operator's error hierarchy, rooted here because every package imports jobclaim.

    PtahError
     ├── InvalidInput        an input a name, digest, snapshot or Job cannot be formed from
     │    └── BuildRefused   the builder will not build a Job from this claim
     └── ApiError            a failed API call (see jobclaim.apiserver for the tree)

Messages are lower-case sentences saying what is wrong; callers prefix context.
"""

from __future__ import annotations


class PtahError(Exception):
    """Base of every error the operator raises on purpose."""


class InvalidInput(PtahError):
    """An input was refused; nothing was computed from it, and nothing was truncated."""


class BuildRefused(InvalidInput):
    """The builder refused to build the operation Job from the given claim."""
