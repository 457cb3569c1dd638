"""docs/architecture.md names modules and tests; each one it names must exist, so the
map of obligations to enforcement and proof cannot silently point at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def test_every_file_and_test_the_architecture_names_exists() -> None:
    text = DOC.read_text()
    named = re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)(?:::([a-z0-9_]+))?`", text)
    assert len(named) > 40
    missing = []
    for path, test in named:
        source = ROOT / path
        if not source.is_file():
            missing.append(path)
        elif test and f"def {test}(" not in source.read_text():
            missing.append(f"{path}::{test}")
    assert missing == []


def test_every_durable_write_row_the_architecture_names_is_a_row() -> None:
    text = DOC.read_text()
    section = text.split("## 3.")[1].split("## 4.")[0]
    rows = (ROOT / "tests" / "outcomes" / "test_durable_writes.py").read_text()
    for line in section.splitlines()[1:]:
        cells = line.split("|")
        if len(cells) < 4 or cells[2].strip().startswith(("row", "---")):
            continue
        for name in re.findall(r"`([^`]+)`", cells[2]):
            assert f'"{name}"' in rows, name
