"""Where a store is: a file path or a `postgresql://` connection URL, and the
forms of it that may be shown. The URL may carry a password, so everything
that prints or stores a location goes through `display_location`; the CLI
redacts `location_secrets` from any error text a driver returns."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from docsum.sanitize import mask_url, url_credentials, url_query_secrets

StoreLocation = Path | str

_PG_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: StoreLocation) -> bool:
    """Whether `location` names a PostgreSQL store (a connection URL)."""
    return isinstance(location, str) and location.strip().lower().startswith(_PG_SCHEMES)


def display_location(location: StoreLocation) -> str:
    """`location` fit for output: a connection URL's password (and any
    credential-like parameter, such as libpq's `sslpassword`) replaced by ***,
    by the same rule as every URL docsum prints (docsum.sanitize.mask_url)."""
    text = str(location)
    return mask_url(text) if is_postgres(location) else text


def location_secrets(location: StoreLocation) -> list[str]:
    """The passwords inside a connection URL, as typed and percent-decoded
    (a driver's error may echo either), for the CLI's output redaction."""
    if not is_postgres(location):
        return []
    text = str(location).strip()
    secrets: list[str] = []
    credentials = url_credentials(text)
    if credentials and credentials[1]:
        typed = urllib.parse.urlsplit(text).netloc.rpartition("@")[0].partition(":")[2]
        secrets += [typed, credentials[1]]
    secrets += url_query_secrets(text)
    return list(dict.fromkeys(s for s in secrets if s))
