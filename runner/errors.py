"""The runner's error hierarchy, under the operator's ``PtahError``.

    PtahError
     └── RunnerError
          ├── RecordError             no result record bound to the attempt could be read
          │    ├── RecordNotFound     the Job has no record  (may still arrive, briefly)
          │    ├── ResultTooLarge     a result larger than a record may carry
          │    └── MalformedRecord    a record that is there and wrong
          │         └── ForeignRecord a good record of another operation or attempt
          ├── RecordUnwritten         the runner could not create its record
          ├── SummaryRefused          a termination summary that cannot stand in
          └── ConfigurationError      the runner's environment cannot bind a result

``may_still_arrive`` is the one question a harvest asks of a record error: whether
reading again a little later could give a different answer. Only a missing record
says that; a record that is there and wrong will stay wrong.
"""

from __future__ import annotations

from jobclaim.errors import PtahError


class RunnerError(PtahError):
    """Base of every error the runner protocol raises on purpose."""


class RecordError(RunnerError):
    """No result record bound to the operation and attempt could be read."""

    @property
    def may_still_arrive(self) -> bool:
        return False


class RecordNotFound(RecordError):
    """The Job has no result record (yet: a create the runner saw answered may reach a
    reader a moment later, so the harvest reads again for a bounded time)."""

    @property
    def may_still_arrive(self) -> bool:
        return True


class ResultTooLarge(RecordError):
    """A result encodes to more than a record may carry."""


class MalformedRecord(RecordError):
    """A record that is there and wrong: another Job's or Pod's, a digest that does not
    cover its result, or a result that does not decode."""


class ForeignRecord(MalformedRecord):
    """The record reports another operation, attempt or protocol version.

    Never read as this attempt's account: a result bound elsewhere describes work this
    claim did not authorize, and reading it would attribute that work to this claim.
    """


class RecordUnwritten(RunnerError):
    """The runner could not create its result record (refused, or the API unreachable)."""


class SummaryRefused(RunnerError):
    """A termination summary that is malformed, foreign, or offered beside a record."""


class ConfigurationError(RunnerError):
    """The runner's environment names no operation a result could be bound to."""
