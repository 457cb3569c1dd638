"""The runner's wait for an operator-provided scratch database, against real servers.

The wait begins before the server is started (its port is chosen first), so it sees
the refused connections and the starting server before the ready one; it must end
ready. Against a server that will not take the session, and a port that accepts a
connection but never speaks the protocol (a TCP check would call that ready), it must
end unready at its bound, with its one sentence; and through ``python -m runner`` that
is a refusal in the record, ptah never started.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lab.mariadb import MARIADBD, LabMariaDB
from lab.postgres import LabPostgres
from runner.scratchdb import UNREADY, DevServer, wait_until_ready
from runner.summary import parse_summary_for
from tests.support.mariadb import running_mariadb
from tests.support.runnerrig import OP_ID, recorded_result, run_runner

# Long enough for initdb or mariadb-install-db on a loaded 2-core machine: the wait ends
# when the server answers, so a fast start costs nothing of it.
START_BOUND = 150.0
# The unready rows wait this long for an answer that never comes.
SHORT_BOUND = 1.5


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose listener accepts connections (the kernel completes them
    from the backlog) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


@pytest.mark.postgres
def test_the_wait_ends_when_a_starting_postgresql_answers() -> None:
    pg = LabPostgres()
    server = DevServer("PostgreSQL", "127.0.0.1", pg.port, "postgres", "postgres")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(wait_until_ready, server, START_BOUND)
        try:
            pg.start()
            assert waiting.result(timeout=START_BOUND + 10) is None
        finally:
            pg.stop()


@pytest.mark.mariadb
def test_the_wait_ends_when_a_starting_mariadb_answers() -> None:
    if not MARIADBD.exists():
        pytest.fail(f"{MARIADBD} is missing: run `make mariadb`")
    db = LabMariaDB()
    server = DevServer("MySQL", "127.0.0.1", db.port, "root", "mysql")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(wait_until_ready, server, START_BOUND)
        try:
            db.start()
            assert waiting.result(timeout=START_BOUND + 10) is None
        finally:
            db.stop()


@pytest.mark.postgres
def test_a_postgresql_that_will_not_take_the_session_is_never_ready() -> None:
    pg = LabPostgres()
    try:
        pg.start()
        said: list[str] = []
        server = DevServer("PostgreSQL", "127.0.0.1", pg.port, "postgres", "no_such_database")
        assert wait_until_ready(server, SHORT_BOUND, say=said.append) == UNREADY
        assert len(said) == 1 and '3D000 database "no_such_database" does not exist' in said[0]
    finally:
        pg.stop()


@pytest.mark.mariadb
def test_a_mariadb_that_will_not_take_the_login_is_never_ready() -> None:
    with running_mariadb() as db:
        said: list[str] = []
        server = DevServer("MySQL", "127.0.0.1", db.port, "nobody", "mysql")
        assert wait_until_ready(server, SHORT_BOUND, say=said.append) == UNREADY
        assert len(said) == 1 and "1045 Access denied for user 'nobody'" in said[0], said


@pytest.mark.parametrize(
    ("engine", "reason"),
    [("PostgreSQL", "did not answer the startup in time"), ("MySQL", "sent no greeting in time")],
)
def test_a_port_that_accepts_and_never_speaks_is_never_ready(
    silent_port: int, engine: str, reason: str
) -> None:
    said: list[str] = []
    server = DevServer(engine, "127.0.0.1", silent_port, "scratch", "scratch")
    assert wait_until_ready(server, SHORT_BOUND, say=said.append) == UNREADY
    assert said == [f"{UNREADY} within 2 s: it {reason}"]


@pytest.mark.integration
def test_a_runner_whose_scratch_database_never_answers_refuses_and_starts_nothing(
    tmp_path: Path, silent_port: int
) -> None:
    log = tmp_path / "seen.jsonl"
    run = run_runner(
        tmp_path,
        "observe",
        {"log": str(log)},
        PTAH_DEV_PROVIDED="1",
        PTAH_DEV_URL=f"postgres://scratch@127.0.0.1:{silent_port}/scratch?sslmode=disable",
        PTAH_DEV_READY_SECONDS="1",
    )
    assert run.returncode == 0, run.stderr
    result = recorded_result(run, "observe").result
    assert result.error is not None
    assert (result.error.code, result.error.message) == ("dev_database_unready", UNREADY)
    assert result.child_exit_code == -1
    assert f"ptah-runner: {UNREADY} within 1 s: it did not answer the startup in time" in run.stderr
    assert not log.exists(), "ptah ran"
    # The termination message, which outlives an API server the record missed, says so too.
    assert parse_summary_for(run.summary, "observe", OP_ID).error_code == "dev_database_unready"
