"""The operator-provided scratch database: may the runner rely on it, and does it answer?

A PtahSchema whose ``spec.dev`` says ``provided`` gets its scratch database from the
operator: the Observe and Plan Pods carry a database container (a native sidecar of
the chart's digest-pinned scratch image) listening on 127.0.0.1 only, database and
user ``scratch``, no password. The Job says so with ``PTAH_DEV_PROVIDED=1`` beside
``PTAH_DEV_URL``. The kubelet starts the runner once the sidecar has *started*, not
once its server answers (initdb or mariadb-install-db runs first), so before ptah
starts the runner waits, with a deadline, until the server answers its own protocol:

- PostgreSQL: a protocol 3.0 startup as ``scratch`` to ``scratch`` that reaches
  ReadyForQuery (a "the database system is starting up" error is not ready yet);
- MySQL family: the server's greeting, a login as ``scratch`` with no password that
  the server accepts (OK), and a COM_PING it answers.

A TCP connect alone is not enough: a port opens before the server accepts a session.
If it never answers, the run is refused (``dev_database_unready``) with one sentence,
and ptah never runs. The flag is refused unless the dev URL is the Pod's own
loopback: a provided database is always in the Pod, so a flag beside any other URL
is a Job that does not say what it means.

The protocol functions are pure (bytes in, an answer out); ``wait_until_ready`` is the
thin I/O around them. Standard library only: the runner is copied into the stock ptah
image, which has nothing else (runner.install).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote, urlsplit

ENV_DEV_PROVIDED: Final = "PTAH_DEV_PROVIDED"
# The wait's bound when the claim's deadline is further away: initdb on a loaded
# 2-core node takes seconds, mariadb-install-db a little more.
READY_SECONDS: Final = 120.0
# One attempt's bound, and the pause between attempts (a bounded poll: the server
# says nothing when it becomes ready, so the runner asks again).
ATTEMPT_SECONDS: Final = 3.0
RETRY_SECONDS: Final = 0.5
LOOPBACK: Final = "127.0.0.1"
UNREADY: Final = "the operator-provided scratch database never became ready"
STOPPED: Final = (
    "the runner was told to stop while it waited for the operator-provided scratch "
    "database, before ptah ran"
)
_MAX_ANSWER: Final = 64 * 1024  # a greeting or a startup answer is far smaller


@dataclass(frozen=True, slots=True)
class DevServer:
    """Where the provided scratch database listens, and as whom the runner asks."""

    engine: str
    host: str
    port: int
    user: str
    database: str


@dataclass(frozen=True, slots=True)
class Answer:
    """What one attempt learned: ready, or why not (said in the log, never the record)."""

    ready: bool
    reason: str = ""


def provided_problem(
    env: Mapping[str, str], engine: str, default_ports: Mapping[str, int]
) -> str | DevServer | None:
    """The provided dev server the Job names, None when it names none, or why the flag
    is refused (a sentence). Pure."""
    flag = env.get(ENV_DEV_PROVIDED)
    if flag is None:
        return None
    if flag != "1":
        return f"{ENV_DEV_PROVIDED} must be 1 or unset"
    url = env.get("PTAH_DEV_URL", "")
    if not url:
        return f"{ENV_DEV_PROVIDED} is set without PTAH_DEV_URL, the database it provides"
    try:
        parts = urlsplit(url)
        port = parts.port or default_ports.get(engine)
        password = parts.password
    except ValueError:
        return "the provided dev database URL cannot be read"
    if parts.hostname != LOOPBACK or port is None:
        return (
            "an operator-provided dev database is in the Pod, and PTAH_DEV_URL points "
            f"elsewhere than {LOOPBACK}"
        )
    if password:
        # The contract's server takes no password; one in the URL is not that server's.
        return "an operator-provided dev database takes no password, and PTAH_DEV_URL holds one"
    user, database = unquote(parts.username or ""), unquote(parts.path.lstrip("/"))
    if not user or not database:
        return "an operator-provided dev database URL must name its user and database"
    return DevServer(engine, LOOPBACK, port, user, database)


# -- PostgreSQL: frontend/backend protocol 3.0 --------------------------------------

_PG_PROTOCOL: Final = 196608  # 3.0
_PG_STARTING: Final = frozenset({"57P03"})  # cannot_connect_now: starting up, recovering
# What a server sends in answer to a startup: authentication, parameters, the key,
# notices, an error, and ReadyForQuery.
_PG_STARTUP_KINDS: Final = frozenset({b"R", b"S", b"K", b"N", b"E", b"Z"})


def pg_startup(user: str, database: str) -> bytes:
    """The StartupMessage of a session as ``user`` to ``database``."""
    pairs = {"user": user, "database": database, "application_name": "ptah-runner"}
    body = b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in pairs.items()) + b"\0"
    return struct.pack("!ii", 8 + len(body), _PG_PROTOCOL) + body


PG_TERMINATE: Final = b"X\x00\x00\x00\x04"


def _pg_error(body: bytes) -> str:
    fields = {f[:1]: f[1:].decode("utf-8", "replace") for f in body.split(b"\0") if f}
    return f"{fields.get(b'C', '?')} {fields.get(b'M', 'no message')}"


def pg_answer(data: bytes) -> Answer | None:
    """What the server's messages so far say; None while they say nothing yet. Pure."""
    at = 0
    while len(data) - at >= 5:
        kind = data[at : at + 1]
        if kind not in _PG_STARTUP_KINDS:
            return Answer(False, f"it answered the startup with message {kind!r}")
        (length,) = struct.unpack_from("!i", data, at + 1)
        if length < 4:
            return Answer(False, "the server does not speak the PostgreSQL protocol")
        if len(data) - at - 1 < length:
            return None
        body = data[at + 5 : at + 1 + length]
        at += 1 + length
        if kind == b"Z":
            return Answer(True)
        if kind == b"E":
            error = _pg_error(body)
            starting = error.split(" ", 1)[0] in _PG_STARTING
            return Answer(False, ("it is starting: " if starting else "it refused: ") + error)
        if kind == b"R":
            (code,) = struct.unpack_from("!i", body) if len(body) >= 4 else (-1,)
            if code != 0:
                return Answer(False, f"it asks for authentication (method {code}), not trust")
    return None


# -- MySQL family: the client/server protocol ----------------------------------------

_CLIENT_LONG_PASSWORD: Final = 0x1
_CLIENT_CONNECT_WITH_DB: Final = 0x8
_CLIENT_PROTOCOL_41: Final = 0x200
_CLIENT_SECURE_CONNECTION: Final = 0x8000
_CLIENT_PLUGIN_AUTH: Final = 0x80000
_CAPABILITIES: Final = (
    _CLIENT_LONG_PASSWORD
    | _CLIENT_CONNECT_WITH_DB
    | _CLIENT_PROTOCOL_41
    | _CLIENT_SECURE_CONNECTION
    | _CLIENT_PLUGIN_AUTH
)
_UTF8MB4: Final = 45  # utf8mb4_general_ci: only the handshake's own character set
COM_PING: Final = b"\x0e"
COM_QUIT: Final = b"\x01"


def mysql_packet(data: bytes) -> tuple[int, bytes, bytes] | None:
    """The first whole packet of data: its sequence id, its payload and what follows."""
    if len(data) < 4:
        return None
    length = int.from_bytes(data[:3], "little")
    if len(data) < 4 + length:
        return None
    return data[3], data[4 : 4 + length], data[4 + length :]


def mysql_frame(sequence: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([sequence & 0xFF]) + payload


def _mysql_error(payload: bytes) -> str:
    code = int.from_bytes(payload[1:3], "little") if len(payload) >= 3 else 0
    text = payload[3:]
    if text.startswith(b"#"):
        text = text[6:]  # '#' and the five characters of the SQLSTATE
    return f"{code} {text.decode('utf-8', 'replace')}"


def mysql_greeting(payload: bytes) -> str | None:
    """Why the server's first packet is not a greeting a login can follow, or None."""
    if payload[:1] == b"\xff":
        return "it refused the connection: " + _mysql_error(payload)
    if payload[:1] != b"\x0a":
        return "the server does not speak the MySQL protocol (version 10)"
    return None


def mysql_login(user: str, database: str) -> bytes:
    """HandshakeResponse41 as ``user`` with no password, to ``database`` (sequence 1)."""
    payload = (
        struct.pack("<IIB", _CAPABILITIES, 1 << 24, _UTF8MB4)
        + b"\0" * 23
        + user.encode()
        + b"\0"
        + b"\0"  # an auth response of length 0: no password
        + database.encode()
        + b"\0"
        + b"mysql_native_password\0"
    )
    return mysql_frame(1, payload)


def mysql_reply(payload: bytes) -> Answer | None:
    """What a reply to the login or the ping says: ready (OK), not (an error), or None
    for an auth exchange the runner answers with an empty response. Pure."""
    head = payload[:1]
    if head == b"\x00":
        return Answer(True)
    if head == b"\xff":
        return Answer(False, "it refused: " + _mysql_error(payload))
    if head in (b"\xfe", b"\x01"):
        return None  # an auth switch or more auth data: an empty password answers both
    return Answer(False, f"it answered with packet {head!r}")


# -- the thin I/O --------------------------------------------------------------------


class _Exchange:
    """One connection's reads, bounded by the attempt's deadline."""

    def __init__(self, sock: socket.socket, until: float) -> None:
        self.sock, self.until, self.data = sock, until, b""

    def more(self) -> bool:
        remaining = self.until - time.monotonic()
        if remaining <= 0 or len(self.data) > _MAX_ANSWER:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(4096)
        except TimeoutError:
            return False  # the caller says what it was still waiting for
        self.data += chunk
        return bool(chunk)

    def packet(self) -> tuple[int, bytes] | None:
        while (found := mysql_packet(self.data)) is None:
            if not self.more():
                return None
        sequence, payload, self.data = found
        return sequence, payload


def _ask_postgres(server: DevServer, exchange: _Exchange) -> Answer:
    exchange.sock.sendall(pg_startup(server.user, server.database))
    while (answer := pg_answer(exchange.data)) is None:
        if not exchange.more():
            return Answer(False, "it did not answer the startup in time")
    if answer.ready:
        exchange.sock.sendall(PG_TERMINATE)
    return answer


def _ask_mysql(server: DevServer, exchange: _Exchange) -> Answer:
    greeting = exchange.packet()
    if greeting is None:
        return Answer(False, "it sent no greeting in time")
    problem = mysql_greeting(greeting[1])
    if problem is not None:
        return Answer(False, problem)
    exchange.sock.sendall(mysql_login(server.user, server.database))
    for _ in range(3):  # OK, or at most an auth switch and a fast-auth note before it
        reply = exchange.packet()
        if reply is None:
            return Answer(False, "it did not answer the login in time")
        answer = mysql_reply(reply[1])
        if answer is not None:
            break
        if reply[1][:1] == b"\xfe":
            exchange.sock.sendall(mysql_frame(reply[0] + 1, b""))
    else:
        return Answer(False, "the login did not end")
    if not answer.ready:
        return answer
    exchange.sock.sendall(mysql_frame(0, COM_PING))
    pong = exchange.packet()
    if pong is None:
        return Answer(False, "it did not answer a ping in time")
    answer = mysql_reply(pong[1]) or Answer(False, "it answered a ping with an auth packet")
    if answer.ready:
        exchange.sock.sendall(mysql_frame(0, COM_QUIT))
    return answer


def ask(server: DevServer, seconds: float) -> Answer:
    """One attempt: connect and ask the server its own protocol's question."""
    until = time.monotonic() + seconds
    try:
        with socket.create_connection((server.host, server.port), timeout=seconds) as sock:
            exchange = _Exchange(sock, until)
            if server.engine == "PostgreSQL":
                return _ask_postgres(server, exchange)
            return _ask_mysql(server, exchange)
    except OSError as error:
        return Answer(False, f"the connection failed: {error.strerror or error}")


def wait_until_ready(
    server: DevServer,
    seconds: float,
    *,
    stopped: Callable[[], bool] = lambda: False,
    say: Callable[[str], None] = lambda _sentence: None,
) -> str | None:
    """Ask until the server answers ready; None then, else the refusal's sentence.

    Measured on the monotonic clock; ``say`` gets the last reason once the wait ends
    unready (the record's sentence stays one fixed line).
    """
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        answer = ask(server, max(0.05, min(ATTEMPT_SECONDS, remaining)))
        if answer.ready:
            return None
        if stopped():
            return STOPPED
        if deadline - time.monotonic() <= RETRY_SECONDS:
            say(f"{UNREADY} within {seconds:.0f} s: {answer.reason}")
            return UNREADY
        time.sleep(RETRY_SECONDS)  # the pause of a bounded poll, not a synchronization
