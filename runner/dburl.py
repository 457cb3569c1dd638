"""What a database URL may ask of the client that opens it: the runner's one rule.

A database URL is a Secret a namespace owner writes, and a MySQL-family URL's query is
read by the client ptah links (go-sql-driver/mysql) as connection settings *and*, for
any name it does not know, as a session variable it sets with ``SET`` on every
connection. Some settings let the URL's writer run SQL nobody planned or approved:
several statements in one query, a file of the Pod sent to the server, statements run
on connect. So a MySQL URL may carry only the settings in ``MYSQL_ALLOWED`` (each one
at most once); every other parameter is refused with one sentence naming it, and the
ones known to be dangerous say why (``MYSQL_REFUSED``, the table in
``docs/security.md``, held to this module by ``tests/runner/test_dburl.py``).

A PostgreSQL URL's query is read by ptah's client (pgx) the same way: the names pgx
knows are connection settings, and every other name is sent to the server in the
startup message as a setting of the session (``search_path``, ``options=-c ...``), so
it changes how the plan's statements run. A PostgreSQL URL may carry only the settings
in ``POSTGRES_ALLOWED``; the known-dangerous ones say why (``POSTGRES_REFUSED``): those
that run settings on the server, those that make the client read a file of the Pod,
and those that route the connection elsewhere than the URL's host, port and database,
which are what the target identity reads. ``url_problem`` asks the engine's rule.

Only the runner can ask: the URL is in a Secret the operator never reads (the Job
mounts it into the Pod), so neither the controller before claiming nor the webhook
can see it. The runner asks before it starts ptah, for the target and the dev
database alike, and a refusal starts nothing.

Names are compared case-insensitively and without ``_``, ``-`` and ``.``, so
``multi_statements`` is ``multiStatements``: a client that reads either spelling
is refused either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "MYSQL_ALLOWED",
    "MYSQL_ANY_OTHER",
    "MYSQL_REFUSED",
    "POSTGRES_ALLOWED",
    "POSTGRES_ANY_OTHER",
    "POSTGRES_REFUSED",
    "mysql_url_problem",
    "normalized",
    "postgres_url_problem",
    "url_problem",
]


def normalized(name: str) -> str:
    """A parameter's name as this module compares it."""
    return name.lower().replace("_", "").replace("-", "").replace(".", "")


# The parameters a MySQL URL may set, as go-sql-driver/mysql names them: transport,
# timeouts and how values are decoded. None of them runs SQL or reads a file.
MYSQL_ALLOWED: Final = (
    "tls",
    "timeout",
    "readTimeout",
    "writeTimeout",
    "charset",
    "collation",
    "loc",
    "parseTime",
    "maxAllowedPacket",
    "serverPubKey",
    "checkConnLiveness",
    "allowNativePasswords",
    "rejectReadOnly",
)

# Known to be dangerous, each with why (the sentence follows "the database URL may not
# set NAME: "). Any other parameter outside MYSQL_ALLOWED is refused too, as a
# session variable.
MYSQL_REFUSED: Final[dict[str, str]] = {
    "multiStatements": "it lets one query carry several statements, so SQL could run past "
    "the plan's reading of each statement",
    "allowAllFiles": "it lets the server ask for any file of the Pod (LOAD DATA LOCAL "
    "INFILE), the mounted credentials included",
    "allowLoadLocalInfile": "it lets the server ask for a file of the Pod (LOAD DATA LOCAL INFILE)",
    "allowLocalInfile": "it lets the server ask for a file of the Pod (LOAD DATA LOCAL INFILE)",
    "localInfile": "it lets the server ask for a file of the Pod (LOAD DATA LOCAL INFILE)",
    "initSQL": "it runs SQL on every connection, which no plan shows and no person approved",
    "initCommand": "it runs SQL on every connection, which no plan shows and no person approved",
    "sessionVariables": "it sets session variables on every connection, which change how "
    "the plan's statements run",
    "interpolateParams": "it makes the client splice values into statement text, which the "
    "plan was not read as",
    "allowCleartextPasswords": "it sends the password unencrypted to any server that asks for it",
    "allowOldPasswords": "it allows the pre-4.1 password hash, which is broken",
    "allowFallbackToPlaintext": "it lets a failed TLS handshake fall back to an unencrypted "
    "connection",
    "password": "a password belongs in the URL's userinfo, where the runner redacts it",
    "user": "the user belongs in the URL's userinfo, where the target identity reads it",
}

# Why any other parameter is refused: ptah's client sends it as a session variable.
MYSQL_ANY_OTHER: Final = (
    "the MySQL client sets a parameter it does not know as a session variable on every "
    "connection, which changes how the plan's statements run"
)

# The parameters a PostgreSQL URL may set, as pgx names them: TLS without a file of
# the Pod, the connect timeout, and the name the session shows in pg_stat_activity.
POSTGRES_ALLOWED: Final = ("sslmode", "sslsni", "connect_timeout", "application_name")

_SERVER_SETTINGS = (
    "it sets server settings on every connection (-c name=value), which change how the "
    "plan's statements run"
)
_POD_FILE = "it makes the client read a file of the Pod, which is the runner's, not the URL's"
_ROUTE = (
    "it routes the connection past the URL's host, port and database, which are what the "
    "target identity reads"
)
# Known to be dangerous, each with why. Any other parameter outside POSTGRES_ALLOWED is
# refused too: pgx sends it to the server as a session setting.
POSTGRES_REFUSED: Final[dict[str, str]] = {
    "options": _SERVER_SETTINGS,
    "search_path": "it changes which schema the plan's unqualified names resolve to",
    "session_replication_role": "it turns off triggers and foreign-key checks for the "
    "session's writes",
    "default_query_exec_mode": "it can make the client splice values into statement text "
    "(the simple protocol), which the plan was not read as",
    "passfile": _POD_FILE,
    "service": "it reads connection settings from a file of the Pod, which can route the "
    "connection past the URL's host, port and database",
    "servicefile": _POD_FILE,
    "sslkey": _POD_FILE,
    "sslcert": _POD_FILE,
    "sslrootcert": _POD_FILE,
    "sslpassword": "it unlocks a key file of the Pod, which is the runner's, not the URL's",
    "host": _ROUTE,
    "hostaddr": _ROUTE,
    "port": _ROUTE,
    "dbname": _ROUTE,
    "database": _ROUTE,
    "target_session_attrs": "it chooses among several hosts, and a target is one host",
    "password": MYSQL_REFUSED["password"],
    "user": MYSQL_REFUSED["user"],
}

POSTGRES_ANY_OTHER: Final = (
    "the PostgreSQL client sends a parameter it does not know to the server as a setting "
    "of the session, which changes how the plan's statements run"
)


@dataclass(frozen=True)
class _Rule:
    """One engine's rule: what a URL of it may set, what it may not and why."""

    allowed: frozenset[str]
    refused: dict[str, tuple[str, str]]
    any_other: str

    @classmethod
    def of(cls, allowed: tuple[str, ...], refused: dict[str, str], any_other: str) -> _Rule:
        return cls(
            frozenset(normalized(name) for name in allowed),
            {normalized(name): (name, why) for name, why in refused.items()},
            any_other,
        )


_MYSQL: Final = _Rule.of(MYSQL_ALLOWED, MYSQL_REFUSED, MYSQL_ANY_OTHER)
_POSTGRES: Final = _Rule.of(POSTGRES_ALLOWED, POSTGRES_REFUSED, POSTGRES_ANY_OTHER)


def url_problem(engine: str, url: str, what: str = "the database URL") -> str | None:
    """Why a URL of ``engine`` must not be opened, as one sentence; None if it may be."""
    if engine == "MySQL":
        return mysql_url_problem(url, what)
    return postgres_url_problem(url, what)


def mysql_url_problem(url: str, what: str = "the database URL") -> str | None:
    """Why a MySQL-family URL must not be opened, as one sentence; None if it may be.

    ``what`` names the URL in the sentence (the target's or the dev database's).
    """
    if urlsplit(url).fragment or url.endswith("#"):
        # Some MySQL clients run a URL's fragment as SQL on connect.
        return f"{what} may not have a fragment (#...): some MySQL clients run it as SQL"
    return _problem(_MYSQL, url, what)


def postgres_url_problem(url: str, what: str = "the database URL") -> str | None:
    """Why a PostgreSQL URL must not be opened, as one sentence; None if it may be."""
    # pgx reads "h1,h2" as fallback hosts: a connection could reach one the target
    # identity (the first host) does not name.
    if "," in urlsplit(url).netloc.rpartition("@")[2]:
        return f"{what} must name one host, not a list of hosts to try"
    return _problem(_POSTGRES, url, what)


def _problem(rule: _Rule, url: str, what: str) -> str | None:
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        return f"{what}'s query cannot be read as name=value pairs"
    if "/" in parts.path.lstrip("/"):
        return f"{what}'s path must name one database, not a path"
    seen: set[str] = set()
    for name, _ in pairs:
        key = normalized(name)
        if key in rule.refused:
            spelled, why = rule.refused[key]
            shown = spelled if spelled == name else f"{name} ({spelled})"
            return f"{what} may not set {shown}: {why}"
        if key not in rule.allowed:
            return f"{what} may not set {name}: {rule.any_other}"
        if key in seen:
            return f"{what} sets {name} twice, and which one a client reads is not ours to guess"
        seen.add(key)
    return None
