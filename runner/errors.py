"""The runner's error hierarchy, under the operator's ``PtahError``.

    PtahError
     └── RunnerError
          ├── FrameError              no result frame could be read from a log
          │    ├── FrameNotFound      no header yet          (may still arrive)
          │    ├── IncompleteFrame    a frame cut off by the end of the log (may still arrive)
          │    ├── FrameTooLarge      a header declares more than a frame may hold
          │    └── MalformedFrame     a frame that is complete and wrong
          │         └── ForeignFrame  a good frame of another operation or attempt
          ├── SummaryRefused          a termination summary that cannot stand in
          └── ConfigurationError      the runner's environment cannot bind a frame

``may_still_arrive`` is the one question a harvest asks of a frame error: whether
reading the same log a little later could give a different answer. Only a log that
ends before a frame does says that; a frame that is complete and wrong will stay wrong.
"""

from __future__ import annotations

from jobclaim.errors import PtahError


class RunnerError(PtahError):
    """Base of every error the runner protocol raises on purpose."""


class FrameError(RunnerError):
    """No result frame bound to the operation could be read from the log."""

    @property
    def may_still_arrive(self) -> bool:
        return False


class FrameNotFound(FrameError):
    """The log holds no frame header at all."""

    @property
    def may_still_arrive(self) -> bool:
        return True


class IncompleteFrame(FrameError):
    """A frame header was found, and the log ended before its footer."""

    @property
    def may_still_arrive(self) -> bool:
        return True


class FrameTooLarge(FrameError):
    """A header declares a payload larger than any frame may carry."""


class MalformedFrame(FrameError):
    """A frame that is complete and wrong: bad header, digest, JSON or fields."""


class ForeignFrame(MalformedFrame):
    """The last good frame reports another operation, attempt or protocol version.

    Never read as this attempt's account: a frame bound elsewhere describes work this
    claim did not authorize, and reading it would attribute that work to this claim.
    """


class SummaryRefused(RunnerError):
    """A termination summary that is malformed, foreign or disagrees with the log."""


class ConfigurationError(RunnerError):
    """The runner's environment names no operation a frame could be bound to."""
