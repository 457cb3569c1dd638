"""``python -m tests.runner.recording``: the runner as the Job runs it, recording into a file.

The runner's one API call (creating its result record as its own Pod) needs an API
server and a Pod-bound token; ``runner.recorder`` is tested against the real API
server in tests/realapi and in the cluster scenarios. Here, where the runner runs as a
plain subprocess, the record goes to the file ``TEST_RECORD_FILE`` names instead, as
exactly the wire object the API server would have been sent. The environment also
gets the downward-API identity a Job's Pod has.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.errors import RecordUnwritten
from runner.run import main


class FileRecorder:
    def __init__(self, path: Path) -> None:
        self.path = path

    def create(self, record: Mapping[str, Any]) -> None:
        if self.path.name == "unwritable":
            raise RecordUnwritten("the API server refused the record: HTTP 403: denied")
        self.path.write_text(json.dumps(record))


if __name__ == "__main__":
    raise SystemExit(main(recorder=FileRecorder(Path(os.environ["TEST_RECORD_FILE"]))))
