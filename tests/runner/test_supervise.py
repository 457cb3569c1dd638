"""The supervising loop in-process, with and without a pidfd, and the stderr relay."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.config import Redactor, secrets_of
from runner.decide import ChildStop
from runner.protocol import RECORD_MARKER
from runner.supervise import (
    RELAY_PREFIX,
    Limits,
    Relay,
    group_survivors,
    supervise,
)
from tests.support.examples import examples
from tests.support.runnerrig import SECRET_URL, STANDIN

QUICK = Limits(kill_grace=0.5, drain=0.5)


def relay_into(sink: list[bytes], **limits: Any) -> Relay:
    return Relay(sink.append, Redactor(secrets_of(SECRET_URL)), **limits)


def run_fake(script: dict[str, Any], *, deadline_in: float | None = None, **kw: Any) -> Any:
    sink: list[bytes] = []
    env = {"PATH": os.environ.get("PATH", ""), "STANDIN_SCRIPT": json.dumps(script)}
    deadline = None if deadline_in is None else time.monotonic() + deadline_in
    outcome = supervise(
        [sys.executable, str(STANDIN), "oci", "resolve", "registry.example/a:v1", "--format=json"],
        env=env,
        deadline=deadline,
        relay=relay_into(sink),
        **{"limits": QUICK, **kw},
    )
    return outcome, b"".join(sink)


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "polling"])
def test_a_child_that_exits_is_read_whole(use_pidfd: bool) -> None:
    outcome, relayed = run_fake({"stderr": ["one", "two"]}, use_pidfd=use_pidfd)
    assert outcome.started and outcome.stop is ChildStop.EXITED and outcome.returncode == 0
    assert outcome.output_problem is None
    assert json.loads(outcome.stdout)["reference"] == "registry.example/a:v1"
    assert relayed == RELAY_PREFIX + b"one\n" + RELAY_PREFIX + b"two\n"
    assert outcome.stderr == b"one\ntwo\n"


def test_without_a_relay_stderr_is_kept_for_the_runner_and_printed_nowhere() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "STANDIN_SCRIPT": json.dumps({"stderr": ["SQL"]})}
    argv = [sys.executable, str(STANDIN), "oci", "resolve", "registry.example/a:v1"]
    outcome = supervise([*argv, "--format=json"], env=env, deadline=None, relay=None, limits=QUICK)
    assert outcome.returncode == 0 and outcome.stderr == b"SQL\n"


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "polling"])
def test_a_child_past_its_deadline_is_terminated_then_killed(use_pidfd: bool) -> None:
    outcome, _ = run_fake({"hang": True, "ignore_term": True}, deadline_in=1.0, use_pidfd=use_pidfd)
    assert outcome.stop is ChildStop.DEADLINE
    assert outcome.returncode == -9  # SIGTERM was ignored; SIGKILL was not


def test_a_stop_request_stops_the_child() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"x")  # the wakeup a signal would have written
        outcome, _ = run_fake({"hang": True}, stop_fd=read_end, stop_requested=lambda: True)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert outcome.stop is ChildStop.TERMINATED and outcome.returncode == -15


def test_a_report_beyond_the_limit_is_not_a_report() -> None:
    outcome, _ = run_fake(
        {"stdout": "x" * 5000}, limits=Limits(kill_grace=0.5, drain=0.5, stdout_bytes=1000)
    )
    assert outcome.output_problem == "the executor's report is longer than 1000 bytes"


def test_a_child_that_cannot_start_is_reported_not_raised(tmp_path: Path) -> None:
    outcome = supervise([str(tmp_path / "absent")], env={}, deadline=None, relay=relay_into([]))
    assert not outcome.started and outcome.start_error == "no such file or directory"


def relayed(chunks: list[bytes], **limits: Any) -> bytes:
    sink: list[bytes] = []
    relay = relay_into(sink, **limits)
    for chunk in chunks:
        relay.feed(chunk)
    relay.close()
    return b"".join(sink)


@pytest.mark.parametrize(
    ("chunks", "limits", "expected"),
    [
        ([b"hello\n"], {}, b"[executor] hello\n"),
        ([b"hel", b"lo\nwor", b"ld"], {}, b"[executor] hello\n[executor] world\n"),
        ([b"crlf\r\n"], {}, b"[executor] crlf\n"),
        (
            [RECORD_MARKER.encode() + b" a/b sha256:x\n"],
            {},
            RELAY_PREFIX + RECORD_MARKER.encode() + b" a/b sha256:x\n",
        ),
        (
            [b"x" * 30 + b"\nnext\n"],
            {"line_limit": 10},
            b"[executor] " + b"x" * 10 + b" [line truncated]\n[executor] next\n",
        ),
        (
            [b"aaaa\n" * 10],
            {"total_limit": 40},
            b"[executor] aaaa\n[executor] aaaa\n"
            b"[executor] further output withheld: the relay limit was reached\n",
        ),
        (
            [SECRET_URL[:20].encode(), SECRET_URL[20:].encode() + b" done\n"],
            {},
            b"[executor] [redacted] done\n",
        ),
    ],
    ids=["line", "chunked", "crlf", "marker", "overlong", "budget", "secret split"],
)
def test_relay(chunks: list[bytes], limits: dict[str, int], expected: bytes) -> None:
    assert relayed(chunks, **limits) == expected


@settings(max_examples=examples(300))
@given(st.lists(st.binary(max_size=200), max_size=10), st.integers(8, 300))
def test_no_relayed_line_can_pass_for_the_runners_own_or_carry_the_secret(
    chunks: list[bytes], line_limit: int
) -> None:
    secret = SECRET_URL.encode()
    chunks = [c + (secret if i % 2 else b"") for i, c in enumerate(chunks)]
    out = relayed(chunks, line_limit=line_limit)
    assert secret not in out and b"s3cret-Pa55word" not in out
    assert all(line.startswith(RELAY_PREFIX) for line in out.split(b"\n")[:-1])
    assert not any(line.startswith(RECORD_MARKER.encode()) for line in out.split(b"\n"))


def test_group_survivors_reads_proc_and_skips_the_leader_and_zombies(tmp_path: Path) -> None:
    def entry(pid: int, comm: str, state: str, pgrp: int) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} 1 {pgrp} 0 0\n")

    entry(100, "ptah", "Z", 100)  # the leader, exited and unreaped
    entry(101, "a) (b", "S", 100)  # a helper whose name has parentheses
    entry(102, "dead", "Z", 100)  # a helper that exited
    entry(103, "other", "R", 7)  # another group
    (tmp_path / "self").mkdir()
    assert group_survivors(100, 100, tmp_path) == [101]
    assert group_survivors(100, 100, tmp_path / "absent") == []
