"""Where a store is: a file path or a PostgreSQL connection string (a
`postgresql://` URL or libpq's keyword=value words), and the
forms of it that may be shown. The URL may carry a password, so everything
that prints or stores a location goes through `display_location`; the CLI
redacts `location_secrets` from any error text a driver returns."""

from __future__ import annotations

from pathlib import Path

from docsum.conninfo import check_conninfo, is_conninfo
from docsum.sanitize import connection_secrets, scrub

StoreLocation = Path | str

_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: StoreLocation) -> bool:
    """Whether `location` names a PostgreSQL store (a connection URL or a
    keyword=value connection string, docsum.conninfo)."""
    if not isinstance(location, str):
        return False
    return location.strip().lower().startswith(_PG_SCHEMES) or is_conninfo(location)


def check_location(location: StoreLocation) -> None:
    """Refuse (exit 2) a keyword=value connection string libpq would not
    take, before anything is opened or created."""
    if isinstance(location, str) and is_conninfo(location):
        check_conninfo(location)


def display_location(location: StoreLocation) -> str:
    """`location` fit for output: a connection string's password (and any
    credential-like parameter, such as libpq's `sslpassword`) replaced by ***,
    by the same rule as every message docsum prints (docsum.sanitize.scrub)."""
    text = str(location)
    return scrub(text) if is_postgres(location) else text


def location_secrets(location: StoreLocation) -> list[str]:
    """The passwords inside a connection string, as typed and decoded (a
    driver's error may echo either), for the output redaction; found also in
    a string that does not parse (docsum.sanitize.connection_secrets)."""
    return connection_secrets(str(location).strip()) if is_postgres(location) else []
