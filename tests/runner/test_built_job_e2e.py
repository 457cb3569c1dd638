"""From the builder's Job to the controller's harvest, for every operation of both families.

The runner is started with the environment the builder wrote into the Job's main
container (its Secret and paths filled in the way the kubelet would), drives ptah
(the stand-in, or ``PTAH_CONTRACT_EXECUTOR``) and creates its record (into a file,
``tests.runner.recording``); the record and the summary are then read and judged by
the controller's own harvest code. So the
builder, the runner and the harvest are held to one contract, not three.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.contractrows import WORLDS, built_job_row


@pytest.mark.parametrize("name", WORLDS)
def test_any_executor_the_built_job_yields_a_record_the_harvest_accepts(
    tmp_path: Path, name: str
) -> None:
    built_job_row(tmp_path, name)
