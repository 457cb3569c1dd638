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

Only the runner can ask: the URL is in a Secret the operator never reads (the Job
mounts it into the Pod), so neither the controller before claiming nor the webhook
can see it. The runner asks before it starts ptah, for the target and the dev
database alike, and a refusal starts nothing.

Names are compared case-insensitively and without ``_``, ``-`` and ``.``, so
``multi_statements`` is ``multiStatements``: a client that reads either spelling
is refused either way.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qsl, urlsplit

__all__ = ["MYSQL_ALLOWED", "MYSQL_ANY_OTHER", "MYSQL_REFUSED", "mysql_url_problem", "normalized"]


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

_ALLOWED = frozenset(normalized(name) for name in MYSQL_ALLOWED)
_REFUSED = {normalized(name): (name, why) for name, why in MYSQL_REFUSED.items()}


def mysql_url_problem(url: str, what: str = "the database URL") -> str | None:
    """Why a MySQL-family URL must not be opened, as one sentence; None if it may be.

    ``what`` names the URL in the sentence (the target's or the dev database's).
    """
    try:
        parts = urlsplit(url)
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        return f"{what}'s query cannot be read as name=value pairs"
    if parts.fragment or url.endswith("#"):
        # Some MySQL clients run a URL's fragment as SQL on connect.
        return f"{what} may not have a fragment (#...): some MySQL clients run it as SQL"
    if "/" in parts.path.lstrip("/"):
        return f"{what}'s path must name one database, not a path"
    seen: set[str] = set()
    for name, _ in pairs:
        key = normalized(name)
        if key in _REFUSED:
            spelled, why = _REFUSED[key]
            shown = spelled if spelled == name else f"{name} ({spelled})"
            return f"{what} may not set {shown}: {why}"
        if key not in _ALLOWED:
            return f"{what} may not set {name}: {MYSQL_ANY_OTHER}"
        if key in seen:
            return f"{what} sets {name} twice, and which one a client reads is not ours to guess"
        seen.add(key)
    return None
