"""The environment a manager is started with: the chart's defaults (the table make run
uses, which tests/chart holds to the render) and what the Downward API fills in."""

from __future__ import annotations

from typing import Final

from lab.localmanager import CHART_DEFAULTS
from manager.config import INTERPRETER_VARIABLES

CHART_ENV: Final[dict[str, str]] = {
    **{k: v for k, v in CHART_DEFAULTS.items() if k not in INTERPRETER_VARIABLES},
    "POD_NAME": "ptah-operator-7d9c-abcde",
    "POD_NAMESPACE": "ptah-system",
}
