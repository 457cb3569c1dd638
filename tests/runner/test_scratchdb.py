"""The operator-provided scratch database: when the runner relies on it, and what its
answers mean (runner.scratchdb's pure half). Each table's first row is the control."""

from __future__ import annotations

import struct

import pytest

from runner.config import DEFAULT_PORTS, RUNNER_KEYS, StartRefusal, prepare
from runner.scratchdb import (
    Answer,
    DevServer,
    mysql_frame,
    mysql_greeting,
    mysql_login,
    mysql_packet,
    mysql_reply,
    pg_answer,
    pg_startup,
    provided_problem,
)
from tests.runner.runnerenv import NOW, environment
from tests.support.runnerrig import OP_ID

PG_URL = "postgres://scratch@127.0.0.1:5432/scratch?sslmode=disable"
MYSQL_URL = "mysql://scratch@127.0.0.1:3306/scratch"
PROVIDED = {"PTAH_DEV_PROVIDED": "1", "PTAH_DEV_URL": PG_URL}


@pytest.mark.parametrize(
    ("name", "engine", "changes", "problem"),
    [
        ("control", "PostgreSQL", {}, None),
        ("MySQL family", "MySQL", {"PTAH_DEV_URL": MYSQL_URL}, None),
        (
            "no port: the engine's own",
            "MySQL",
            {"PTAH_DEV_URL": "mysql://scratch@127.0.0.1/s"},
            None,
        ),
        ("a flag that is not 1", "PostgreSQL", {"PTAH_DEV_PROVIDED": "true"}, "must be 1 or unset"),
        ("no dev URL", "PostgreSQL", {"PTAH_DEV_URL": None}, "without PTAH_DEV_URL"),
        (
            "another host",
            "PostgreSQL",
            {"PTAH_DEV_URL": "postgres://scratch@dev.internal/scratch"},
            "elsewhere than 127.0.0.1",
        ),
        (
            "localhost, which a resolver decides",
            "PostgreSQL",
            {"PTAH_DEV_URL": "postgres://scratch@localhost/scratch"},
            "elsewhere than 127.0.0.1",
        ),
        (
            "a password",
            "PostgreSQL",
            {"PTAH_DEV_URL": "postgres://scratch:pw-123456@127.0.0.1/scratch"},
            "takes no password",
        ),
        (
            "no database",
            "PostgreSQL",
            {"PTAH_DEV_URL": "postgres://scratch@127.0.0.1:5432"},
            "must name its user and database",
        ),
        (
            "an unreadable port",
            "PostgreSQL",
            {"PTAH_DEV_URL": "postgres://s@127.0.0.1:x/s"},
            "cannot be read",
        ),
    ],
)
def test_provided_problem(
    name: str, engine: str, changes: dict[str, str | None], problem: str | None
) -> None:
    env = {**PROVIDED, **changes}
    found = provided_problem({k: v for k, v in env.items() if v is not None}, engine, DEFAULT_PORTS)
    if problem is None:
        assert isinstance(found, DevServer), found
        assert (found.engine, found.host, found.user) == (engine, "127.0.0.1", "scratch")
        assert found.port == DEFAULT_PORTS[engine]
    else:
        assert isinstance(found, str) and problem in found, found


def test_no_flag_is_no_provided_database() -> None:
    assert provided_problem({"PTAH_DEV_URL": PG_URL}, "PostgreSQL", DEFAULT_PORTS) is None


def _prepared(operation: str, **changes: str | None) -> object:
    env = environment(operation)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return prepare(env, operation, OP_ID, now=NOW)


@pytest.mark.parametrize(
    ("name", "operation", "changes", "code"),
    [
        ("control observe", "observe", PROVIDED, None),
        ("control plan", "plan", PROVIDED, None),
        (
            "a flag beside a remote dev URL",
            "plan",
            {"PTAH_DEV_PROVIDED": "1"},
            "configuration_invalid",
        ),
        (
            "a flag without a dev URL",
            "observe",
            {"PTAH_DEV_PROVIDED": "1", "PTAH_DEV_URL": None},
            "configuration_invalid",
        ),
        ("a flag on resolve", "resolve", {"PTAH_DEV_PROVIDED": "1"}, "configuration_invalid"),
        (
            "a wait bound past the tuning limit",
            "observe",
            {**PROVIDED, "PTAH_DEV_READY_SECONDS": "31"},
            "configuration_invalid",
        ),
    ],
)
def test_the_flag_in_the_jobs_environment(
    name: str, operation: str, changes: dict[str, str | None], code: str | None
) -> None:
    prepared = _prepared(operation, **changes)
    if code is None:
        assert not isinstance(prepared, StartRefusal), prepared
        assert prepared.dev_server == DevServer(
            "PostgreSQL", "127.0.0.1", 5432, "scratch", "scratch"
        )
    else:
        assert isinstance(prepared, StartRefusal) and prepared.code == code, prepared


def test_a_job_without_the_flag_waits_for_nothing() -> None:
    prepared = _prepared("plan")
    assert not isinstance(prepared, StartRefusal) and prepared.dev_server is None


def test_the_flag_and_its_tuning_never_reach_ptah() -> None:
    # ptah reads every flag from a PTAH_<FLAG> twin: left in its environment these would
    # be a --dev-provided and a --dev-ready-seconds nobody put on its command line.
    assert {"PTAH_DEV_PROVIDED", "PTAH_DEV_READY_SECONDS"} <= RUNNER_KEYS


# -- PostgreSQL -------------------------------------------------------------------------


def pg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", 4 + len(body)) + body


AUTH_OK = pg(b"R", struct.pack("!i", 0))
PARAMETERS = pg(b"S", b"server_version\x0015.18\x00") + pg(b"K", b"\x00" * 8)
READY = pg(b"Z", b"I")
STARTING = pg(b"E", b"SFATAL\x00C57P03\x00Mthe database system is starting up\x00\x00")


@pytest.mark.parametrize(
    ("name", "data", "answer"),
    [
        ("control: trusted, ready for queries", AUTH_OK + PARAMETERS + READY, Answer(True)),
        ("a notice on the way", AUTH_OK + pg(b"N", b"Mhello\x00\x00") + READY, Answer(True)),
        ("nothing yet", b"", None),
        ("half a message", (AUTH_OK + PARAMETERS + READY)[:-3], None),
        ("no ReadyForQuery yet", AUTH_OK + PARAMETERS, None),
        (
            "starting up",
            STARTING,
            Answer(False, "it is starting: 57P03 the database system is starting up"),
        ),
        (
            "no such database",
            pg(b"E", b'SFATAL\x00C3D000\x00Mdatabase "scratch" does not exist\x00\x00'),
            Answer(False, 'it refused: 3D000 database "scratch" does not exist'),
        ),
        (
            "a password asked for",
            pg(b"R", struct.pack("!i", 10) + b"SCRAM-SHA-256\x00\x00"),
            Answer(False, "it asks for authentication (method 10), not trust"),
        ),
        (
            "not the protocol",
            b"HTTP/1.1 400 Bad",
            Answer(False, "it answered the startup with message b'H'"),
        ),
        (
            "a length below its own size",
            b"Z\x00\x00\x00\x01",
            Answer(False, "the server does not speak the PostgreSQL protocol"),
        ),
    ],
)
def test_pg_answer(name: str, data: bytes, answer: Answer | None) -> None:
    assert pg_answer(data) == answer


def test_pg_startup_is_protocol_3_as_the_user_to_the_database() -> None:
    message = pg_startup("scratch", "scratch")
    length, version = struct.unpack_from("!ii", message)
    assert length == len(message) and version == 3 << 16
    assert b"\0user\0scratch\0database\0scratch\0".removeprefix(b"\0") in message
    assert message.endswith(b"\0\0")


# -- MySQL family -----------------------------------------------------------------------

GREETING = b"\x0a10.11.18-MariaDB\x00" + b"\x01\x00\x00\x00" + b"abcdefgh\x00" + b"\xff\xf7"


@pytest.mark.parametrize(
    ("name", "payload", "problem"),
    [
        ("control: protocol 10", GREETING, None),
        (
            "too many connections",
            b"\xff\x10\x04Too many connections",
            "it refused the connection: 1040 Too many connections",
        ),
        ("not the protocol", b"SSH-2.0-OpenSSH", "does not speak the MySQL protocol"),
    ],
)
def test_mysql_greeting(name: str, payload: bytes, problem: str | None) -> None:
    found = mysql_greeting(payload)
    assert found == problem if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("name", "payload", "answer"),
    [
        ("control: OK", b"\x00\x00\x00\x02\x00\x00\x00", Answer(True)),
        ("an auth switch, answered with no password", b"\xfemysql_native_password\x00x", None),
        ("more auth data (fast auth)", b"\x01\x03", None),
        (
            "access denied",
            b"\xff\x15\x04#28000Access denied for user 'scratch'@'127.0.0.1'",
            Answer(False, "it refused: 1045 Access denied for user 'scratch'@'127.0.0.1'"),
        ),
        ("something else", b"\x07", Answer(False, "it answered with packet b'\\x07'")),
    ],
)
def test_mysql_reply(name: str, payload: bytes, answer: Answer | None) -> None:
    assert mysql_reply(payload) == answer


@pytest.mark.parametrize(
    ("name", "data", "packet"),
    [
        ("control: one whole packet", mysql_frame(3, b"abc") + b"rest", (3, b"abc", b"rest")),
        ("a header only", mysql_frame(3, b"abc")[:4], None),
        ("less than a header", b"\x03\x00", None),
    ],
)
def test_mysql_packet(name: str, data: bytes, packet: tuple[int, bytes, bytes] | None) -> None:
    assert mysql_packet(data) == packet


def test_mysql_login_is_sequence_1_with_an_empty_password() -> None:
    found = mysql_packet(mysql_login("scratch", "scratch"))
    assert found is not None
    sequence, payload, rest = found
    assert sequence == 1 and rest == b""
    # capabilities, max packet, character set, 23 reserved bytes, then the user
    assert payload[32:] == b"scratch\0" + b"\0" + b"scratch\0" + b"mysql_native_password\0"
