"""libpq's keyword=value connection strings (`host=db port=5432 user=me
password=pw dbname=docs`) as a store location, beside postgresql:// URLs.

psycopg hands such a string to libpq unchanged, and PostgreSQL users write
them as often as URLs; taken for a file name, one created SQLite files named
with the password. So a location whose first word is a libpq keyword followed
by `=` names a PostgreSQL store, and it is checked here, word by word, before
anything is opened or created: a string that does not parse, or names a
keyword libpq does not know, is a usage error that quotes no value (the
password is among them). A file whose name starts like that is given as
`./host=…`.
"""

from __future__ import annotations

import re

from docsum.errors import ConfigError

# libpq's connection parameters (PostgreSQL 16, "Parameter Key Words").
KEYWORDS = frozenset(
    """host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout
    client_encoding options application_name fallback_application_name keepalives keepalives_idle
    keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode requiressl
    sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni requirepeer
    ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation service
    target_session_attrs load_balance_hosts""".split()
)

_FIRST_WORD = re.compile(r"\s*([A-Za-z_]+)\s*=")
# One `keyword = value` pair: a value is one word, or quoted with \' and \\ escapes.
_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']+)?\s*")


def is_conninfo(location: str) -> bool:
    """Whether `location` is written as a keyword=value connection string
    (its first word is a libpq keyword followed by `=`)."""
    match = _FIRST_WORD.match(location)
    return match is not None and match.group(1).lower() in KEYWORDS


def check_conninfo(location: str) -> None:
    """Refuse (exit 2) a keyword=value string libpq would not take, naming
    the keyword or the position, never a value."""
    pos, seen = 0, 0
    text = location.rstrip()
    while pos < len(text):
        match = _PAIR.match(text, pos)
        if match is None:
            raise ConfigError(
                f"--store: the connection string (keyword=value form) does not parse at word {seen + 1}: "
                "each word is keyword=value, a value with spaces in single quotes"
            )
        keyword = match.group(1)
        if keyword not in KEYWORDS:
            raise ConfigError(f"--store: {keyword!r} is not a libpq connection keyword")
        if match.group(2) is None:
            after = text[match.end() :]
            if after.startswith("'"):  # the quoted value runs to the end: its quote is never closed
                raise ConfigError(
                    f"--store: the value of the connection keyword {keyword!r} opens a quote it never closes"
                )
            raise ConfigError(f"--store: the connection keyword {keyword!r} has no value")
        pos, seen = match.end(), seen + 1
