"""kube-score on the rendered chart: every finding is listed in the chart README,
with why it stays, and every listed one still occurs.

kube-score (built by `make kube-score` from its pinned Go module) scores the chart as
`helm template` renders it with each chart-testing values file in ``ci/``, for the
Kubernetes minor the chart admits. Its default checks only: the optional ones are
opinions a reviewer turns on, not the tool's baseline. A finding is a check that does not
pass on an object, per container where the check names one. Objects are named as
the chart names them, the full name replaced by ``<name>`` (``ci/knobs-values.yaml``
renames them) and the install Job's hash by ``<hash>``, so one README row covers
the same object in every render.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.support.chartrender import CHART, Helm, load_yaml

README: Final = CHART / "README.md"
CI_VALUES: Final = {
    path.name.removesuffix("-values.yaml"): path for path in CHART.glob("ci/*.yaml")
}
# The minor the chart's kubeVersion admits, which decides which API versions kube-score
# calls stable.
KUBERNETES: Final = "v1.37"
SECTION: Final = "### kube-score findings"
OK: Final = 10
KUBE_SCORE_TIMEOUT_SECONDS: Final = 60

# (check ID, "Kind <name>", container or "", ci values file)
Finding = tuple[str, str, str, str]


def normalized(name: str, fullname: str) -> str:
    """The object's name as the README writes it: the same in every render."""
    name = re.sub(r"-cert-init-[0-9a-f]{10}$", "-cert-init-<hash>", name)
    return "<name>" + name.removeprefix(fullname) if name.startswith(fullname) else name


def scored(kube_score: Path, helm: Helm, values: str, tmp_path: Path) -> set[Finding]:
    """kube-score's findings on the chart rendered with ``ci/<values>-values.yaml``."""
    rendered = helm.template([CI_VALUES[values]])
    assert rendered.returncode == 0, rendered.stderr
    manifest = tmp_path / f"{values}.yaml"
    manifest.write_text(rendered.stdout)
    done = subprocess.run(
        [str(kube_score), "score", "--kubernetes-version", KUBERNETES, "-o", "json", str(manifest)],
        capture_output=True,
        text=True,
        timeout=KUBE_SCORE_TIMEOUT_SECONDS,
        check=False,
    )
    # Exit 1 means "a critical finding", which the README may justify; anything else
    # (2: it could not read the manifest) is no score at all.
    assert done.returncode in (0, 1), done.stderr
    fullname = load_yaml(CI_VALUES[values]).get("fullnameOverride") or "ptah-operator"
    found: set[Finding] = set()
    for scored_object in json.loads(done.stdout):
        kind = scored_object["type_meta"]["kind"]
        name = normalized(scored_object["object_meta"]["name"], fullname)
        for check in scored_object["checks"]:
            if check["skipped"] or check["grade"] >= OK:
                continue
            for comment in check["comments"] or [{"path": ""}]:
                found.add((check["check"]["id"], f"{kind} {name}", comment["path"], values))
    return found


def listed_rows(text: str) -> Iterator[list[str]]:
    """The cells of each row of the README's findings table."""
    section = text.split(SECTION, 1)[1]
    section = re.split(r"\n#{1,3} ", section, maxsplit=1)[0]
    for line in section.splitlines():
        if line.startswith("| `"):
            yield [cell.strip() for cell in line.strip().strip("|").split("|")]


def listed(text: str) -> set[Finding]:
    """The findings the README lists: check, object, container, the ci/ files it occurs
    in, and the reason, each row one check on one object."""
    found: set[Finding] = set()
    for check, subject, container, files, why in listed_rows(text):
        assert why, f"the README lists {check} on {subject} with no reason"
        for values in re.findall(r"`([^`]+)`", files):
            found.add(
                (
                    check.strip("`"),
                    subject.replace("`", ""),
                    container.strip("`").replace("—", ""),
                    values,
                )
            )
    return found


def test_the_readme_lists_findings_by_ci_file_and_reason() -> None:
    rows = list(listed_rows(README.read_text()))
    # The control: the table is found, so an empty comparison below would mean something.
    assert len(rows) >= 4
    for row in rows:
        assert len(row) == 5, row
        assert set(re.findall(r"`([^`]+)`", row[3])) <= set(CI_VALUES), row


@pytest.mark.parametrize("values", sorted(CI_VALUES))
def test_every_finding_is_listed_and_every_listed_one_occurs(
    kube_score: Path, helm: Helm, values: str, tmp_path: Path
) -> None:
    found = scored(kube_score, helm, values, tmp_path)
    expected = {finding for finding in listed(README.read_text()) if finding[3] == values}
    assert sorted(found - expected) == [], "kube-score finds what the chart README does not list"
    assert sorted(expected - found) == [], "the chart README lists what kube-score no longer finds"
