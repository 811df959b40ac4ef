"""Opening a store by its location: the one place that picks the backend, so
the backends build on docsum.store.base without base knowing them."""

from __future__ import annotations

from pathlib import Path

from docsum.locations import StoreLocation, check_location, is_postgres
from docsum.store.base import DocumentStore


def open_store(location: StoreLocation, *, create: bool = True, readonly: bool = False) -> DocumentStore:
    """Open the store at `location` (a path or a postgresql:// URL); see Store.open
    for create/readonly. psycopg is imported only here, only for PostgreSQL."""
    if is_postgres(location):
        from docsum.store.postgres import PostgresStore

        check_location(location)  # a keyword=value string libpq would not take: exit 2, nothing opened
        return PostgresStore.open(str(location), create=create, readonly=readonly)
    from docsum.store.sqlite import Store

    return Store.open(Path(location), create=create, readonly=readonly)


def store_exists(location: StoreLocation) -> bool:
    """Whether a docsum store is at `location` (for PostgreSQL: its tables exist)."""
    if is_postgres(location):
        from docsum.store.postgres import PostgresStore

        check_location(location)
        return PostgresStore.exists(str(location))
    return Path(location).exists()
