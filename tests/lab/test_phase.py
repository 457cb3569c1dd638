"""lab/phase.sh, which every build phase of make run and make test runs through: one
line when a phase starts and one when it ends, or one "cached" line; the tool's own
output in build/logs/<phase>.log, named with its last 40 lines when the phase fails,
and the tool's exit status kept so make still fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASE = ROOT / "lab" / "phase.sh"
NOISE = 'for i in $(seq 300); do echo "go: downloading example.com/m$i v1.0.$i"; done'


def phase(
    logs: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "PTAH_PHASE"}
    return subprocess.run(
        ["bash", str(PHASE), *args],
        env={**environment, "PHASE_LOGS": str(logs), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_phase_that_succeeds_says_two_lines_and_logs_the_rest(tmp_path: Path) -> None:
    done = phase(tmp_path, "demo", "building a demo (cold: ~1 min)", "--", "sh", "-c", NOISE)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    first, second = done.stdout.splitlines()
    assert first == f"# building a demo (cold: ~1 min) ... (log: {tmp_path}/demo.log)"
    assert second.startswith("# demo: done in ")
    assert second.endswith(" s")
    log = (tmp_path / "demo.log").read_text().splitlines()
    assert len(log) == 300
    assert log[-1] == "go: downloading example.com/m300 v1.0.300"


def test_nothing_to_do_is_one_cached_line_and_the_command_does_not_run(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    done = phase(tmp_path, "demo", "building", "--cached-if", "true", "--", "touch", str(ran))
    assert (done.returncode, done.stdout, done.stderr) == (0, "# demo: cached\n", "")
    assert not ran.exists()
    # The control: when the check fails, the command runs.
    done = phase(tmp_path, "demo", "building", "--cached-if", "false", "--", "touch", str(ran))
    assert done.returncode == 0
    assert ran.exists()


@pytest.mark.parametrize("show", [[], ["--show", "^# "]], ids=["logged", "shown"])
def test_a_failure_keeps_the_status_and_names_the_log_with_its_tail(
    tmp_path: Path, show: list[str]
) -> None:
    failing = NOISE + '; echo "compile: it is broken" >&2; exit 3'
    done = phase(tmp_path, "broken", "building", *show, "--", "sh", "-c", failing)
    assert done.returncode == 3
    assert "# broken: done" not in done.stdout
    said, *tail = done.stderr.splitlines()
    assert said.startswith("# broken: failed after ")
    assert said.endswith(f"(exit 3); the last 40 lines of {tmp_path}/broken.log:")
    assert len(tail) == 40
    assert tail[0] == "go: downloading example.com/m262 v1.0.262"
    assert tail[-1] == "compile: it is broken"


def test_show_prints_the_matching_lines_and_logs_every_line(tmp_path: Path) -> None:
    script = (
        'echo "# 21:00:00 base: cached"; echo "STEP 1/9: buildah noise"; echo "# 21:00:02 done"'
    )
    done = phase(tmp_path, "img", "images", "--show", "^# [0-9]", "--", "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:3] == ["# 21:00:00 base: cached", "# 21:00:02 done"]
    assert "buildah" not in done.stdout
    assert "STEP 1/9: buildah noise" in (tmp_path / "img.log").read_text()


def test_a_phase_inside_a_phase_only_runs_its_command(tmp_path: Path) -> None:
    # make setup's phase runs make, whose recipe is the same phase: one set of lines.
    done = phase(
        tmp_path, "inner", "building", "--", "echo", "inner output", env={"PTAH_PHASE": "outer"}
    )
    assert (done.returncode, done.stdout) == (0, "inner output\n")
    assert not (tmp_path / "inner.log").exists()


@pytest.mark.parametrize(
    "args",
    [["only-a-name"], ["demo", "building", "--"], ["../up", "building", "--", "true"]],
    ids=["no-description", "no-command", "a-path-for-a-name"],
)
def test_a_wrong_call_is_refused(tmp_path: Path, args: list[str]) -> None:
    done = phase(tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr
    assert list(tmp_path.iterdir()) == []
