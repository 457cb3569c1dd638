"""The plain alert rules file from the chart's rendered PrometheusRule (its ``spec``).

``python -m tests.support.alertfile < rendered.yaml`` prints docs/prometheus/ptah-alerts.yaml:
its header comment, then the rule groups, as a Prometheus ``rule_files`` entry reads them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ALERT_FILE = ROOT / "docs" / "prometheus" / "ptah-alerts.yaml"
PLAIN_SELECTOR = 'job="ptah-operator"'


def header() -> str:
    lines = ALERT_FILE.read_text().splitlines(keepends=True)
    return "".join(line for line in lines if line.startswith("#"))


def rules_file(rule: dict[str, Any]) -> str:
    """The groups of a rendered PrometheusRule as a plain rules file (without header)."""
    body = yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False, width=1000)
    return str(body)


def main() -> None:
    (rule,) = [d for d in yaml.safe_load_all(sys.stdin) if d]
    sys.stdout.write(header() + rules_file(rule))


if __name__ == "__main__":
    main()
