"""What one terminal Job gave: the value ``stages.jobaccount.harvest`` reads and the
families record. A value of its own, below the pass's environment, so the ``Family``
protocol (``context.passcontext``) can name it without importing the stage that reads
it: that import was the controller's one cycle. ``history_of`` is what a History
record's reading becomes in a migration's status, asked both by the readings (which
record it) and by the migration's records (a History that may settle an unresolved
run).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobclaim.api import ManagerRecord, MigrationHistoryStatus
from runner.harvest import Judgement, NoEvidence, Outcome
from runner.summary import Account


@dataclass(frozen=True, slots=True)
class Harvest:
    """What one terminal Job gave.

    ``judgement`` is None when no Pod's account may be read (``evidence`` says why).
    ``pod_uids`` are the Job's Pods as seen now, which a schema's record keeps;
    ``may_still_write`` is True while any of them may still run. ``dispatched_by`` is
    the manager record the Job itself carries: after a rolling upgrade the manager
    reading the Job is not the one that dispatched it, and the audit must name the
    latter (as a published plan names its Plan Job's).
    """

    judgement: Judgement | None
    evidence: NoEvidence | None
    pod_uids: tuple[str, ...]
    may_still_write: bool
    dispatched_by: ManagerRecord | None = None

    @property
    def outcome(self) -> Outcome | None:
        return self.judgement.outcome if self.judgement else None

    @property
    def account(self) -> Account | None:
        return self.judgement.account if self.judgement else None

    @property
    def reason(self) -> str:
        if self.judgement is not None:
            return self.judgement.reason
        assert self.evidence is not None
        return self.evidence.reason

    def retry_after(self, now: datetime) -> float | None:
        """Seconds until the record is read again, for one still arriving."""
        judgement = self.judgement
        if judgement is None or judgement.outcome is not Outcome.WAIT:
            return None
        assert judgement.retry_at is not None
        return max(0.0, (judgement.retry_at - now).total_seconds())


def history_of(result: Any, observed_at: str) -> MigrationHistoryStatus:
    """The status record of a History record's reading. Pure."""
    section = result.migration_history
    return MigrationHistoryStatus(
        observed_at=observed_at,
        contract_version=section.contract_version,
        current_version=section.current_version,
        checkpoint_version=section.checkpoint_version,
        applied_count=section.applied_count,
        pending_count=section.pending_count,
        fingerprint=section.fingerprint,
        target_identity_digest=result.target_identity_digest,
        dirty=section.dirty,
        modified_versions=list(section.modified_versions),
        out_of_order_versions=list(section.out_of_order_versions),
        ahead=section.ahead,
    )
